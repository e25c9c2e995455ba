"""evaluate() over the protocol registry and its typed result (superbloom/evaluate.py, protocols.py): the
JSON keys of each protocol as before the typed result, save/load, the head's variants with their
ranks, protocol "auto" through the registry."""
import contextlib
import json
import re

import numpy as np
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.evaluation.evaluate import EvalConfig, EvalResult, evaluate
from superbloom.heads.base import Variant
from superbloom.evaluation.protocols import REGISTRY, resolve

# today's keys, in order, of `eval --json` (read from the code before EvalResult)
SETS_KEYS = ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10", "examples", "targets_unseen", "sets_skipped",
             "certified_exact", "mean_beam", "queries_per_second", "protocol", "baselines"]
SETS_PROTOCOL = ["seed", "n", "targets_per_set", "depth", "decode", "context_excluded"]
LOO_KEYS = ["hr@1", "hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20", "mrr", "hr@10_lo", "hr@10_hi",
            "examples", "targets_unseen", "targets_in_history", "empty_contexts", "history_ids_unseen",
            "certified_exact", "mean_beam", "queries_per_second", "protocol", "baselines"]
LOO_PROTOCOL = ["protocol", "split", "n", "exclude_history", "max_sets", "seed", "depth", "cooc_last",
                "context_len_asked", "model_positions", "baselines_fitted_on", "decode"]
TEXT_KEYS = ["rec@1", "rec@1_lo", "rec@1_hi", "rec@10", "rec@10_lo", "rec@10_hi", "rec@20", "rec@20_lo", "rec@20_hi",
             "mrr", "ndcg@10", "by_kind", "by_decile", "examples", "rows", "bigram_targets", "decile_min_counts",
             "certified_exact", "mean_beam", "queries_per_second", "protocol", "baselines"]
TEXT_PROTOCOL = ["protocol", "n", "mask_rate", "max_sets", "seed", "masked_fed_as", "in_place", "context_excluded",
                 "depth", "decode"]
TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--quiet", "--threads", "1"]


def same(a: EvalResult, b: EvalResult) -> bool:
    arrays = ("ranks", "targets", "groups")
    fields = [f for f in a.__dataclass_fields__ if f not in arrays]
    return (all(getattr(a, f) == getattr(b, f) for f in fields) and list(a.ranks) == list(b.ranks)
            and all(np.array_equal(a.ranks[m], b.ranks[m]) for m in a.ranks)
            and np.array_equal(a.targets, b.targets)
            and ((a.groups is None and b.groups is None) or np.array_equal(a.groups, b.groups)))


@pytest.fixture(scope="module")
def sets_result(tiny_predictor, wiki_data):
    return evaluate(tiny_predictor, wiki_data, EvalConfig(max_sets=60, targets_per_set=2,
                                                          baselines=("popularity", "cooccurrence")), progress=False)


def test_sets_result_keeps_the_json_keys_and_has_the_ranks(sets_result):
    r = sets_result
    d = r.to_dict()
    assert list(d) == SETS_KEYS and list(d["protocol"]) == SETS_PROTOCOL
    assert list(d["baselines"]) == ["popularity", "cooccurrence"]
    assert list(d["baselines"]["popularity"]) == ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10", "seconds"]
    assert r.protocol == "sets" and r.head is None and r.variants == {}
    assert list(r.ranks) == ["model", "popularity", "cooccurrence"]
    e = d["examples"]
    assert all(v.shape == (e,) for v in r.ranks.values()) and r.targets.shape == r.groups.shape == (e,)
    assert d["rec@10"] == pytest.approx(np.mean((r.ranks["model"] > 0) & (r.ranks["model"] <= 10)))
    assert json.loads(json.dumps(d)) == d  # plain JSON values
    assert r.report().startswith("method") and "superbloom model" in r.report()


def test_ease_too_big_is_skipped_saying_why(tiny_predictor, wiki_data, monkeypatch):
    from superbloom.evaluation import baselines

    monkeypatch.setitem(baselines.BASELINES, "ease", baselines.BaselineEntry(baselines.Ease, max_ids=100,
                                                                             too_big="dense EASE"))
    r = evaluate(tiny_predictor, wiki_data, EvalConfig(max_sets=20, baselines=("ease",)), progress=False)
    assert r.baselines == {"ease": {"skipped": f"{wiki_data.n_ids:,} ids > 100 (dense EASE)"}}
    assert "ease" not in r.ranks and re.search(rf"^ease +skipped: {wiki_data.n_ids:,} ids > 100", r.report(), re.M)


@pytest.fixture(scope="module")
def hybrid(tiny_hybrid):
    return tiny_hybrid  # conftest.py


def test_hybrid_result_has_each_variant_with_its_ranks(hybrid, wiki_data, tmp_path, monkeypatch):
    cfg = EvalConfig(max_sets=40, baselines=("popularity",))
    r = evaluate(hybrid, wiki_data, cfg, progress=False)
    assert list(r.to_dict()) == SETS_KEYS + ["head", "network_only", "term_only"]
    assert list(r.ranks) == ["model", "network_only", "term_only", "popularity"]
    assert list(r.variants) == ["network_only", "term_only"]
    assert not np.array_equal(r.ranks["model"], r.ranks["network_only"])
    assert r.variants["network_only"]["rec@10"] == pytest.approx(np.mean(np.isin(r.ranks["network_only"], range(1, 11))))
    assert "network only" in r.report()
    # a variant replaced (here by the head itself): its row and ranks follow what the hook gives
    head, before = hybrid.model.head, hybrid.model.head.variants
    monkeypatch.setattr(head, "variants", lambda: {**before(), "term alone": Variant(
        "term_only", "term only", "term", "the head itself", contextlib.nullcontext())})
    r2 = evaluate(hybrid, wiki_data, cfg, progress=False)
    assert list(r2.variants) == ["network_only", "term_only"] and list(r2.to_dict())[-2:] == ["network_only", "term_only"]
    assert np.array_equal(r2.ranks["term_only"], r2.ranks["model"])  # (here: the head unchanged)
    assert "term only" in r2.report()


@pytest.fixture(scope="module")
def loo(tmp_path_factory):
    d = tmp_path_factory.mktemp("loo")
    rng = np.random.default_rng(1)
    lines = [f"u{u} " + " ".join(f"i{(rng.integers(25) + 3 * j) % 25}" for j in range(rng.integers(3, 12)))
             for u in range(40)]
    (d / "seq.txt").write_text("\n".join(lines) + "\n")
    assert main(["prepare", str(d / "seq.txt"), "--format", "lines", "--split", "leave-one-out", "--out",
                 str(d / "data")]) == 0
    assert main(["train", "--preset", "none", str(d / "data"), "--out", str(d / "model"), "--steps", "2", "--positions", "16",
                 "--alpha", "2", "--m", "2", *TINY]) == 0
    return sb.Dataset(d / "data"), sb.load(d / "model")


def test_leave_one_out_keys_and_auto(loo, tmp_path):
    data, model = loo
    assert resolve("auto", data).name == "leave-one-out"
    r = evaluate(model, data, EvalConfig(baselines=("popularity", "cooccurrence")), progress=False)
    d = r.to_dict()
    assert list(d) == LOO_KEYS and list(d["protocol"]) == LOO_PROTOCOL and r.protocol == "leave-one-out"
    assert d["protocol"]["n"] == 15 and r.groups is None  # 16 positions: 15 context ids; users are the groups
    assert list(d["baselines"]["cooccurrence"])[-1] == "seconds" and "hr@10_lo" in d["baselines"]["cooccurrence"]
    assert r.entry.recall == "hr" and r.entry.unit == "users"
    with pytest.raises(ValueError, match="--protocol leave-one-out"):
        evaluate(model, data, EvalConfig(protocol="sets"), progress=False)


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    from superbloom.text.prepare import TextPrepareConfig, prepare_text

    d = tmp_path_factory.mktemp("text")
    (d / "corpus").mkdir()
    rng = np.random.default_rng(0)
    words = ["miles davis", "played", "jazz", "in", "paris", "new york", "with", "john coltrane", "the", "band"]
    for i in range(30):
        (d / "corpus" / f"doc{i}.txt").write_text(" ".join(
            " ".join(rng.choice(words, 6)) + " ." for _ in range(8)) + "\n")
    prepare_text(TextPrepareConfig((str(d / "corpus"),), str(d / "data"), vocab_size=1000, segment=16,
                                   test_fraction=0.2), progress=False)
    assert main(["train", "--preset", "none", str(d / "data"), "--out", str(d / "model"), "--objective", "text-mlm", "--steps", "2",
                 "--eval-every", "0", "--segment", "16", "--positions", "16", "--alpha", "4", "--m", "2", *TINY]) == 0
    return sb.Dataset(d / "data"), sb.load(d / "model")


def test_text_keys_auto_and_groups(text, tmp_path):
    data, model = text
    assert resolve("auto", data).name == "text"
    r = evaluate(model, data, EvalConfig(), progress=False)
    d = r.to_dict()
    assert list(d) == TEXT_KEYS and list(d["protocol"]) == TEXT_PROTOCOL and r.protocol == "text"
    assert list(d["baselines"]) == ["unigram", "bigram"] and list(r.ranks) == ["model", "unigram", "bigram"]
    assert len(r.groups) == d["examples"] and len(np.unique(r.groups)) == d["rows"]  # grouped by test row
    assert r.entry.unit == "test rows" and "masked tokens/s" in r.report()
    assert evaluate(model, data, EvalConfig(baselines=()), progress=False).baselines == {}


# the protocol table: every registered protocol's result, saved and loaded back (a hybrid's variants too)
ROUND_TRIP = {"sets": ("tiny_predictor", "wiki_data", dict(max_sets=60, targets_per_set=2,
                                                            baselines=("popularity", "cooccurrence"))),
              "sets, a hybrid's variants": ("hybrid", "wiki_data", dict(max_sets=40, baselines=("popularity",))),
              "leave-one-out": ("loo", None, dict(baselines=("popularity", "cooccurrence"))),
              "text": ("text", None, {})}


def test_the_round_trip_table_covers_every_registered_protocol():
    assert set(REGISTRY) <= {name.split(",")[0] for name in ROUND_TRIP}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_every_protocol_result_round_trips(name, request, tmp_path):
    model_fx, data_fx, cfg = ROUND_TRIP[name]
    model = request.getfixturevalue(model_fx)
    model, data = (model, request.getfixturevalue(data_fx)) if data_fx else (model[1], model[0])
    r = evaluate(model, data, EvalConfig(**cfg), progress=False)
    assert r.protocol == name.split(",")[0]
    r.save(tmp_path / "r")
    back = EvalResult.load(tmp_path / "r")
    assert same(back, r) and back.to_dict() == r.to_dict() and back.report() == r.report()
    assert list(back.ranks) == list(r.ranks) and back.variants == r.variants
    assert not same(back, EvalResult(**{**back.__dict__, "targets": back.targets + 1}))  # `same` can tell


def test_registry_names_and_errors(wiki_data):
    assert set(REGISTRY) == {"sets", "leave-one-out", "text"}
    assert resolve("auto", wiki_data).name == "sets"
    with pytest.raises(ValueError, match="protocol: expected one of auto, sets"):
        EvalConfig(protocol="nope")
    with pytest.raises(ValueError, match="unknown protocol"):
        resolve("nope", wiki_data)


def test_a_long_full_evaluation_names_max_sets(tiny_predictor, wiki_data, monkeypatch, caplog):
    """examples x ids above SAMPLE_HINT_SCORES, no --max-sets: one line says how to evaluate a sample."""
    from superbloom.evaluation import evaluate as ev

    monkeypatch.setattr(ev, "SAMPLE_HINT_SCORES", 10)
    with caplog.at_level("INFO", logger="superbloom.evaluation.evaluate"):
        evaluate(tiny_predictor, wiki_data, EvalConfig(targets_per_set=1, baselines=()), progress=True)
        hinted = [r.getMessage() for r in caplog.records if "--max-sets" in r.getMessage()]
        caplog.clear()
        evaluate(tiny_predictor, wiki_data, EvalConfig(max_sets=20, baselines=()), progress=True)
        assert not [r for r in caplog.records if "--max-sets" in r.getMessage()]  # a sample asked for: no hint
    assert len(hinted) == 1 and f"over all {wiki_data.n_ids:,} ids" in hinted[0]
