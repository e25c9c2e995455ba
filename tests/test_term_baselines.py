"""The hybrid head's term alone as baselines (evaluation/term_baselines.py): the same ranking as the
head's "term alone" variant, with no network trained; `eval --baselines` runs them."""
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.cli import main
from superbloom.data.dataset import SetArray
from superbloom.evaluation.baselines import BASELINES, fit_baseline
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.term_baselines import TRANSITION_DECAY, ItemItemTerm
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.heads.hybrid import HybridConfig
from superbloom.model.encoder import ModelConfig, build_model

N = 30
MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)
TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--quiet", "--threads", "1"]
TERMS = {"transition": "transition", "ease-term": "ease", "cooc-term": "cooccurrence"}


def sequences(seed: int, n_sets: int = 40) -> SetArray:
    """Walks with repeats and a drift, so that who follows whom is not symmetric."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sets):
        start, steps = rng.integers(N), rng.integers(1, 4, rng.integers(2, 10))
        out.append((start + np.cumsum(steps)) % N)
    return SetArray.from_lists(out)


def queries(seed: int, q: int = 12, t: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Contexts (q, t) with -1 anywhere (an empty one too, a repeated id too) and excluded ids (q, t + 1)."""
    rng = np.random.default_rng(seed)
    ctx = rng.integers(0, N, (q, t))
    ctx[rng.random((q, t)) < 0.3] = -1
    ctx[0] = -1
    ctx[1, :2] = 5
    exclude = np.concatenate([ctx, rng.integers(-1, N, (q, 1))], 1)
    return ctx, exclude


def head_term_alone(sets, term, ordered, decay, ctx, exclude, k, neighbours=200):
    """The ranking of a hybrid head's "term alone" variant (nothing trained), ids (Q, k)."""
    torch.manual_seed(0)
    model = build_model(MODEL, head_config("hybrid", neighbours=neighbours, term=term), BloomHash.build(N, HashConfig(1, 1, 0)))
    head = model.head.eval()
    head.fit(sets, ordered=ordered)
    head.mix.fill_(3.0), head.decay.fill_(decay)
    hidden = torch.randn(len(ctx), 1, MODEL.d)
    with head.variants()["term alone"]:
        return head.topk(hidden, k, exclude=torch.from_numpy(exclude), context=torch.from_numpy(ctx)).ids.numpy()


@pytest.mark.parametrize("name", list(TERMS))
def test_each_registry_entry_ranks_as_the_heads_term_alone(name):
    """The registry's entry (HybridConfig's defaults, its default decay) = the head built with that
    term and that decay; every context id counts (last_context False)."""
    sets, (ctx, exclude) = sequences(0), queries(0)
    base = fit_baseline(name, sets, N)
    want = head_term_alone(sets, TERMS[name], name == "transition", base.decay, ctx, exclude, N)
    got = base.rank(ctx, exclude, N)
    assert got.shape == (len(ctx), N) and np.array_equal(got, want)
    assert (got[0, :N - 1] >= 0).all() and set(got[0].tolist()) - {-1} == set(range(N)) - set(exclude[0].tolist())
    assert not BASELINES[name].last_context
    assert base.decay == (TRANSITION_DECAY if name == "transition" else 1.0)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(list(TERMS.values())), st.sampled_from([1.0, 0.7, 0.4, 0.15]),
       st.integers(1, 12), st.integers(1, N + 3))
def test_the_term_baseline_is_the_heads_term_alone(seed, term, decay, neighbours, k):
    sets, (ctx, exclude) = sequences(seed), queries(seed + 1)
    cfg = HybridConfig(neighbours=neighbours, term=term)
    got = ItemItemTerm(sets, N, term, decay, cfg).rank(ctx, exclude, k)
    want = head_term_alone(sets, term, term == "transition", decay, ctx, exclude, k, neighbours)
    assert got.shape == (len(ctx), k) and np.array_equal(got, want)


def test_the_transition_term_ranks_what_follows_the_newest_ids_first():
    """On walks i -> i + 1 the next id after the context's newest one comes first; decay weighs the newest most."""
    walks = SetArray.from_lists([[(s + j) % N for j in range(6)] for s in range(N)])
    base = fit_baseline("transition", walks, N)
    ctx = np.array([[3, 4, 5], [10, -1, 20]])
    got = base.rank(ctx, ctx, 3)
    assert got[0, 0] == 6 and got[1, 0] == 21
    with pytest.raises(ValueError, match="decay must be in"):
        ItemItemTerm(walks, N, "transition", decay=0.0)


@pytest.fixture(scope="module")
def loo(tmp_path_factory):
    """A tiny hybrid (transition term, 2 steps of next-item: the term built from every training prefix,
    as the baseline's) on a leave-one-out dataset of drifting walks."""
    d = tmp_path_factory.mktemp("term_loo")
    rng = np.random.default_rng(1)
    lines = [f"u{u} " + " ".join(f"i{(s + 2 * j + rng.integers(2)) % 25}" for j in range(rng.integers(4, 12)))
             for u, s in enumerate(rng.integers(0, 25, 60))]
    (d / "seq.txt").write_text("\n".join(lines) + "\n")
    assert main(["prepare", str(d / "seq.txt"), "--format", "lines", "--split", "leave-one-out", "--out",
                 str(d / "data")]) == 0
    assert main(["train", str(d / "data"), "--out", str(d / "model"), "--steps", "2", "--positions", "16",
                 "--segment", "16", "--objective", "next-item", "--head", "hybrid", "--item-term", "transition", "--alpha", "1", "--m", "1",
                 *TINY]) == 0
    return d


def test_eval_transition_equals_the_trained_hybrids_term_alone(loo):
    """Through evaluate (query batches, the protocol's contexts and exclusions): the baseline's ranks
    are the term-alone variant's, at the baseline's decay."""
    data, pred = sb.Dataset(loo / "data"), sb.load(loo / "model")
    base = evaluate(pred, data, EvalConfig(baselines=("transition",)), progress=False)
    chosen = base.baselines["transition"]["chosen"]["decay"]  # on the validation targets
    pred.model.head.mix.fill_(3.0), pred.model.head.decay.fill_(chosen)  # as if the head's validation chose it
    r = evaluate(pred, data, EvalConfig(), progress=False)
    assert np.array_equal(r.ranks["term_only"], base.ranks["transition"])
    assert (base.ranks["transition"] > 0).mean() > 0.3  # it finds targets, not only ties


def test_the_transition_baseline_chooses_its_decay_on_the_validation_targets(loo, capsys):
    """Leave-one-out: each decay of DECAYS ranked on the validation targets, the best by NDCG@10 kept
    (what the hybrid head does for its own term), recorded and named in the report; the test ranking
    is the fixed-decay term's at that decay. The sets protocol has no validation targets: the default."""
    from superbloom.evaluation.protocols import LeaveOneOut
    from superbloom.evaluation.metrics import sequence_summary, target_ranks
    from superbloom.heads.config import DECAYS

    data, pred = sb.Dataset(loo / "data"), sb.load(loo / "model")
    r = evaluate(pred, data, EvalConfig(baselines=("transition",)), progress=False)
    chosen = r.baselines["transition"]["chosen"]
    val = LeaveOneOut("valid", 15).examples(data)
    term = ItemItemTerm(data.train, data.n_ids, "transition")
    ndcg = {}
    for decay in DECAYS:
        term.decay = decay
        ndcg[decay] = sequence_summary(target_ranks(term.rank(val.contexts, val.excluded, 20), val.targets))["ndcg@10"]
    assert chosen["tried"] == {d: round(v, 4) for d, v in ndcg.items()}
    assert chosen["decay"] == max(ndcg, key=ndcg.get) and "validation targets by ndcg@10" in chosen["how"]
    term.decay = chosen["decay"]
    test = LeaveOneOut("test", 15).examples(data)
    assert np.array_equal(target_ranks(term.rank(test.contexts, test.excluded, 20), test.targets),
                          r.ranks["transition"])
    assert main(["eval", str(loo / "model"), str(loo / "data"), "--baselines", "transition", "--threads", "1"]) == 0
    assert f"transition (decay {chosen['decay']:g})" in capsys.readouterr().out


def test_cli_eval_runs_the_term_baselines_on_both_protocols(loo, tmp_path, capsys):
    assert main(["eval", str(loo / "model"), str(loo / "data"), "--baselines", "transition", "--json",
                 "--threads", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"]["protocol"] == "leave-one-out" and 0 <= out["baselines"]["transition"]["hr@10"] <= 1
    rng = np.random.default_rng(2)
    (tmp_path / "sets.txt").write_text("\n".join(f"s{r} " + " ".join(f"i{x}" for x in rng.choice(25, rng.integers(3, 9), replace=False))
                                                 for r in range(120)) + "\n")
    assert main(["prepare", str(tmp_path / "sets.txt"), "--format", "lines", "--out", str(tmp_path / "data")]) == 0
    assert main(["train", str(tmp_path / "data"), "--out", str(tmp_path / "model"), "--steps", "2", *TINY]) == 0
    capsys.readouterr()  # prepare's and train's output
    assert main(["eval", str(tmp_path / "model"), str(tmp_path / "data"), "--baselines", "ease-term,cooc-term",
                 "--json", "--threads", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["baselines"]) == ["ease-term", "cooc-term"] and all(0 <= m["rec@10"] <= 1 for m in out["baselines"].values())


def test_eval_help_lists_the_registry(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps lines at hyphens
    assert all(name in text for name in BASELINES)
