"""benchmarks/text/fusion_bench.py: the exhaustive network ranks equal Algorithm 1's exact ranks, and the
fusion is the network at beta -> 0 and orders the term's ids first at a large beta."""
from __future__ import annotations


import numpy as np
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.evaluation.metrics import target_ranks
from superbloom.evaluation.text_protocol import BigramContext, TextMasking, neighbours
from superbloom.heads.decode_config import DecodeConfig
from superbloom.inference.rank import rank_masked

from test_text_mlm import TINY, text_data  # noqa: F401  (the module's corpus fixture)

from benchmarks.text import fusion_bench as fb

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


@pytest.fixture(scope="module")
def fusion_setup(text_data, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("fusionmodel") / "model"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(out), "--objective", "text-mlm",
                 "--alpha", "4", "--m", "2", "--steps", "30", "--eval-every", "0", "--segment", "32", *TINY]) == 0
    data = sb.Dataset(text_data)
    p = sb.load(out, device="cpu")
    ex = TextMasking(n=32, max_sets=20, seed=0).examples(data)
    return data, p, ex


def test_exhaustive_network_ranks_equal_the_exact_decoder(fusion_setup):
    data, p, ex = fusion_setup
    _, _, targets = ex.flat()
    term = BigramContext(data.train, np.asarray(data.counts))
    net, _ = fb.fused_ranks(p.model, p.hashing, ex, term, [])
    exact = rank_masked(p.model, p.hashing, ex, fb.DEPTH, DecodeConfig(exact=True))
    assert len(targets) > 20
    np.testing.assert_array_equal(net, target_ranks(exact.ids.numpy(), targets))


def test_fusion_is_the_network_at_small_beta_and_the_term_first_at_large_beta(fusion_setup):
    data, p, ex = fusion_setup
    _, _, targets = ex.flat()
    term = BigramContext(data.train, np.asarray(data.counts))
    net, hyb = fb.fused_ranks(p.model, p.hashing, ex, term, [(1e-9, 1e-3), (1e6, 1e-3)])
    np.testing.assert_array_equal(hyb[(1e-9, 1e-3)], net)
    # at a huge beta the term decides: the target is first exactly when it is the term's unique best id
    left, right = neighbours(ex)
    n = data.n_ids
    dense = np.stack([(term.after[a].toarray().ravel() if a >= 0 else np.zeros(n))
                      + (term.before[b].toarray().ravel() if b >= 0 else np.zeros(n)) for a, b in zip(left, right)])
    best = dense.max(1)
    unique_best = (dense == best[:, None]).sum(1) == 1
    is_best = dense[np.arange(len(targets)), targets] == best
    big = hyb[(1e6, 1e-3)]
    sel = unique_best & (best > 0)
    assert sel.sum() > 5
    np.testing.assert_array_equal(big[sel] == 1, is_best[sel])
    assert np.all(big[~is_best & (best > 0)] != 1)


# ---------------------------------------------------------------- the fusion as a model (heads/bigram.py)


@pytest.fixture(scope="module")
def bigram_model(text_data, tmp_path_factory):  # noqa: F811
    """A text model with the hashed-hybrid head and the bigram term, its mix and eps chosen at validation."""
    out = tmp_path_factory.mktemp("bigrammodel") / "model"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(out), "--objective", "text-mlm",
                 "--alpha", "4", "--m", "2", "--steps", "40", "--eval-every", "20", "--segment", "32",
                 "--head", "hashed-hybrid", "--item-term", "bigram", "--neighbours", "1000", "--val-fraction", "0.2",
                 *TINY]) == 0
    return out


def test_bigram_hybrid_ranks_exactly_by_network_plus_log_term(bigram_model, text_data):  # noqa: F811
    """topk (Algorithm 1 on the untouched ids, the touched ones scored exactly) returns the best ids of
    sum_j log p_j + mix log(1 + (p(w | left) + p(w | right)) / eps) over every id, the term counted from
    the training rows the model trained on."""
    from superbloom.training.train import split_validation

    data = sb.Dataset(text_data)
    p = sb.load(bigram_model, device="cpu")
    head = p.model.head
    cfg = p.config["train"]
    train_rows, _ = split_validation(data.train, cfg["val_fraction"], cfg["loop"]["seed"])
    term = BigramContext(data.train.subset(train_rows), np.asarray(data.counts))
    ex = TextMasking(n=32, max_sets=20, seed=0).examples(data)
    left, right = neighbours(ex)
    n = data.n_ids
    dense = np.stack([(term.after[a].toarray().ravel() if a >= 0 else np.zeros(n))
                      + (term.before[b].toarray().ravel() if b >= 0 else np.zeros(n)) for a, b in zip(left, right)])
    net = np.concatenate([s for _, s in fb.network_scores(p.model, p.hashing, ex)]).astype(np.float64)
    k = 10
    for mix, eps in [(3.0, 1e-3), (30.0, 1e-5)]:
        head.mix.fill_(mix)
        head.decay.fill_(eps)
        r = rank_masked(p.model, p.hashing, ex, k, DecodeConfig(exact=True))
        full = net + mix * np.log1p(dense / eps)  # (M, N) every id's fused score
        ids = r.ids.numpy()
        assert r.exact.all() and (ids >= 0).all()
        got = np.take_along_axis(full, ids, 1)
        np.testing.assert_allclose(r.scores.numpy(), got, rtol=1e-4, atol=1e-3)
        kth = got[:, -1]
        rest = full.copy()
        np.put_along_axis(rest, ids, -np.inf, 1)
        assert (rest.max(1) <= kth + 1e-3).all()  # nothing left out scores above the k-th returned


def test_bigram_hybrid_validation_chooses_and_eval_reports_its_parts(bigram_model, text_data, tmp_path):  # noqa: F811
    import json

    p = sb.load(bigram_model, device="cpu")
    built = p.config["head_built"]
    assert built["term"] == "bigram" and built["item_item_values"] > 0
    val = [json.loads(line) for line in (bigram_model / "metrics.jsonl").read_text().splitlines() if "val" in line]
    assert val and all("item_mix" in json.dumps(v) for v in val)
    head = p.model.head
    head.mix.fill_(3.0)
    head.decay.fill_(1e-3)
    desc = head.describe()
    assert desc["item_term"] == "bigram" and desc["item_eps"] == pytest.approx(1e-3)
    res = sb.evaluate(p, sb.Dataset(text_data), sb.EvalConfig(max_sets=20, baselines=("bigram",)), progress=False)
    assert set(res.variants) == {"network_only", "term_only"}
    text = res.report()
    assert "hybrid (bigram x 3, eps 0.001)" in text and "term only" in text and "network only" in text
    # the term alone ranks the targets as the bigram baseline does (it breaks ties by the network, the
    # baseline by frequency): their rec@10 differ by ties only
    assert abs(res.variants["term_only"]["rec@10"] - res.baselines["bigram"]["rec@10"]) < 0.05
    # the network only row is the head at mix 0 (the superbloom head's own ranking)
    head.mix.fill_(0.0)
    res0 = sb.evaluate(p, sb.Dataset(text_data), sb.EvalConfig(max_sets=20), progress=False)
    np.testing.assert_array_equal(res0.ranks["model"], res.ranks["network_only"])
    # at mix 0 the head is the network: its term alone beside it, the same ranking as at mix 3
    assert set(res0.variants) == {"term_only"} and "hybrid (bigram x 0, eps 0.001)" in res0.report()
    np.testing.assert_array_equal(res0.ranks["term_only"], res.ranks["term_only"])


def test_bigram_head_script_refuses_a_missing_model_in_one_line(tmp_path, capsys):
    from benchmarks.text import bigram_head as bh

    with pytest.raises(SystemExit) as e:
        bh.main(["--model", str(tmp_path / "nothing"), "--name", "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "no config.json there" in err[-1]
