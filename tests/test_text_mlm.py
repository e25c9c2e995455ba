"""The text model (paper sec. 4): BERT masking of text rows, the text-mlm objective with every head,
the text evaluation protocol and its baselines, fill-in-the-blank (library, CLI, HTTP)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

import superbloom as sb
from superbloom.model.batches import MaskConfig
from superbloom.cli import main
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash, HashConfig
from superbloom.text import TextPrepareConfig, prepare_text
from superbloom.evaluation.text_protocol import BigramContext, frequency_deciles, neighbours, unigram_topk
from superbloom.inference.fill import Filler
from superbloom.model.text_batches import masked_rows, mask_tokens, text_batch
from superbloom.text.ngrams import UNK_ID

PEOPLE = ["miles davis", "john coltrane", "charlie parker", "bill evans", "duke ellington"]
PLACES = ["new york", "paris", "copenhagen", "los angeles"]
TEMPLATES = ["{p} played jazz in {q} .", "{p} was born in {q} .", "{p} recorded an album with {r} .",
             "the trumpet of {p} was heard in {q} ."]


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> Path:
    """A small generated corpus (60 documents of templated sentences), prepared by prepare-text."""
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("textcorpus")
    corpus = root / "corpus"
    corpus.mkdir()
    for d in range(60):
        sents = []
        for _ in range(12):
            t = TEMPLATES[rng.integers(len(TEMPLATES))]
            p, r = rng.choice(len(PEOPLE), 2, replace=False)
            sents.append(t.format(p=PEOPLE[p], q=PLACES[rng.integers(len(PLACES))], r=PEOPLE[r]).capitalize())
        (corpus / f"doc{d:02d}.txt").write_text(" ".join(sents) + "\n", encoding="utf-8")
    out = root / "data"
    prepare_text(TextPrepareConfig((str(corpus),), str(out), vocab_size=10_000, segment=32, test_fraction=0.2),
                 progress=False)
    return out


TINY = ["--d", "32", "--heads", "2", "--d-ff", "64", "--layers", "1", "--batch-size", "16", "--threads", "1",
        "--quiet", "--positions", "32"]


@pytest.fixture(scope="module")
def text_model(text_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("textmodel") / "model"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(out), "--objective", "text-mlm", "--alpha", "4", "--m", "2",
                 "--steps", "40", "--eval-every", "20", "--lr", "3e-3", "--segment", "32", *TINY]) == 0
    return out


# ---------------------------------------------------------------- masking


def test_mask_tokens_counts_never_unk_and_80_10_10():
    rng = np.random.default_rng(1)
    segs = rng.integers(1, 1000, (4000, 40))
    segs[:, 30:] = PAD_ELEM
    segs[:, :3] = UNK_ID
    elems, targets = mask_tokens(segs, 1000, MaskConfig(n=40, mask_rate=0.15, p_mask=0.8, p_random=0.1), rng, segs != UNK_ID)
    chosen = targets >= 0
    assert (chosen.sum(1) == round(0.15 * 27)).all()  # 27 maskable tokens per row
    assert not chosen[:, :3].any() and not chosen[:, 30:].any()  # never [UNK], never padding
    assert (targets[chosen] == segs[chosen]).all()
    assert (elems[~chosen] == segs[~chosen]).all()  # in place: every other token untouched
    fed = elems[chosen]
    as_mask, same = (fed == MASK_ELEM).mean(), (fed == segs[chosen]).mean()
    assert abs(as_mask - 0.8) < 0.02 and 0.08 < same < 0.13  # 10% unchanged (+ random draws of the same id)
    assert abs(1 - as_mask - same - 0.1) < 0.02  # 10% random


def test_a_row_gets_at_least_one_target_and_none_without_maskable_tokens():
    segs = np.array([[5, 6, PAD_ELEM], [UNK_ID, UNK_ID, PAD_ELEM]])
    _, targets = mask_tokens(segs, 10, MaskConfig(n=3, mask_rate=0.15), np.random.default_rng(0), segs != UNK_ID)
    assert (targets[0] >= 0).sum() == 1 and (targets[1] < 0).all()


def test_text_batch_has_positions_and_no_merging():
    rows = SetArray.from_lists([[1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9, 9]])
    hashing = BloomHash.build(12, HashConfig(alpha=3, m=2))
    b = text_batch(rows, np.array([0, 1]), hashing, MaskConfig(n=8, mask_rate=0.5, p_mask=1.0, p_random=0.0),
                   np.random.default_rng(0))
    assert b.tokens.shape == (2, 16) and (b.mult[0] == 1).all()  # 8 elements each, nothing merged
    assert torch.equal(b.positions[0], torch.arange(8).repeat_interleave(2))
    assert b.n_targets == 4 + 2  # half of each row
    elem = b.tokens.view(2, 8, 2)[:, :, 0].reshape(-1)[b.target_elem]
    assert (elem == hashing.encode(np.array([[MASK_ELEM]]))[0, 0]).all()  # every target fed as [MASK] in place


def test_element_dropout_on_text_keeps_targets_and_positions():
    rows = SetArray.from_lists([list(range(1, 41))])
    hashing = BloomHash.build(50, HashConfig(alpha=1, m=1))
    b = text_batch(rows, np.array([0]), hashing, MaskConfig(n=40, mask_rate=0.25, element_dropout=0.5),
                   np.random.default_rng(0))
    assert b.n_targets == 10 and not b.pad.view(-1)[b.target_elem].any()  # targets are never dropped
    assert 5 < int(b.pad.sum()) < 26  # about half of the 30 context tokens became padding
    assert torch.equal(b.positions[0], torch.arange(40))  # in place


def test_masked_rows_are_seeded_and_in_place(text_data):
    data = sb.Dataset(text_data)
    a = masked_rows(data.test, np.arange(10), 32, 0.15, 0)
    b = masked_rows(data.test, np.arange(10), 32, 0.15, 0)
    assert np.array_equal(a.elems, b.elems) and np.array_equal(a.targets, b.targets)
    r, c, t = a.flat()
    assert (a.elems[r, c] == MASK_ELEM).all() and len(t) == a.n_targets
    seg = np.asarray(data.test[int(a.rows[r[0]])])
    assert seg[c[0]] == t[0]  # the target sits at its own column


# ---------------------------------------------------------------- training


def test_text_mlm_defaults_are_berts(text_data, tmp_path):
    """train --objective text-mlm: BERT's masking (segment 128, 15%, 80/10/10, no element dropout) unless given."""
    from superbloom.training.resolve import resolve_train

    def mask(**given):
        return resolve_train(text_data, "x", {"loop.steps": 1, **given}, preset="none")[0].mask

    m = mask(objective="text-mlm")
    assert (m.n, m.mask_rate, m.element_dropout, m.p_mask, m.p_random) == (128, 0.15, 0.0, 0.8, 0.1)
    m = mask(objective="text-mlm", **{"mask.n": 64, "mask.mask_rate": 0.2})
    assert (m.n, m.mask_rate) == (64, 0.2)
    assert mask().n == 32 and mask().p_mask == 0.6  # the set objective keeps its defaults


def test_text_mlm_without_positions_is_a_clear_error(text_data, tmp_path, capsys):
    args = ["train", "--preset", "none", str(text_data), "--out", str(tmp_path / "m"), "--objective", "text-mlm", "--steps", "1",
            "--d", "16", "--heads", "2", "--d-ff", "16", "--layers", "1", "--quiet"]
    assert main(args) == 2
    assert "--positions 32" in capsys.readouterr().err  # rows of <= 32 tokens (prepared with segment 32)
    assert main(args + ["--positions", "16"]) == 2
    assert "shorter than the examples (32 tokens" in capsys.readouterr().err


def test_text_mlm_on_a_set_dataset_is_a_clear_error(wiki_data, tmp_path, capsys):
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--objective", "text-mlm",
                 "--positions", "128", "--steps", "1", "--quiet"]) == 2
    assert "prepare-text" in capsys.readouterr().err


@pytest.mark.parametrize("head", [["--head", "superbloom", "--alpha", "4", "--m", "2"],
                                  ["--head", "full", "--alpha", "1", "--m", "1"],
                                  ["--head", "sampled", "--alpha", "1", "--m", "1", "--samples", "20"],
                                  ["--head", "hierarchical", "--alpha", "1", "--m", "1"],
                                  ["--head", "full", "--alpha", "4", "--m", "2"]])
def test_every_head_trains_on_text(text_data, tmp_path, head):
    out = tmp_path / "m"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(out), "--objective", "text-mlm", "--steps", "4",
                 "--eval-every", "2", *head, *TINY]) == 0
    logs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    val = [x for x in logs if "val_rec@10" in x]
    assert len(val) == 3 and all(0.0 <= x["val_rec@10"] <= 1.0 for x in val)
    assert (out / "BEST").exists()
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["train"]["objective"] == "text-mlm" and cfg["model"]["positions"] == 32


def test_the_model_learns_the_templates(text_model):
    logs = [json.loads(x) for x in (text_model / "metrics.jsonl").read_text().splitlines()]
    val = [x["val_rec@10"] for x in logs if "val_rec@10" in x]
    assert val[-1] > 0.3, val  # the templates make most tokens predictable from their neighbours


# ---------------------------------------------------------------- evaluation


def test_bigram_baseline_matches_a_brute_force_count():
    rows = SetArray.from_lists([[1, 2, 3], [1, 2, 4], [1, 3], [5, 2, 3], [UNK_ID, 3]])
    counts = np.bincount(rows.ids, minlength=6)
    base = BigramContext(rows, counts)
    after = np.zeros((6, 6))
    for s in ([1, 2, 3], [1, 2, 4], [1, 3], [5, 2, 3]):
        for a, b in zip(s[:-1], s[1:]):
            after[a, b] += 1
    p_after = after / np.maximum(after.sum(1, keepdims=True), 1)
    p_before = after.T / np.maximum(after.T.sum(1, keepdims=True), 1)
    assert np.allclose(base.after.toarray(), p_after) and np.allclose(base.before.toarray(), p_before)
    top = base.rank(np.array([1, -1, 2, -1]), np.array([3, 4, -1, -1]), 3)
    # left 1 -> {2: 2/3, 3: 1/3}; right 3 <- {2: 2/3, 1: 1/3}: 2 first, then 3 and 1 tie at 1/3 (count breaks it)
    assert top[0].tolist() == [2, 3, 1]
    assert top[1][0] == 2  # only 2 precedes 4
    assert top[2][0] == 3  # after 2: 3 (2/3) before 4 (1/3)
    assert top[3].tolist() == unigram_topk(counts, 3).tolist()  # no neighbour: the frequency list
    assert UNK_ID not in top


def test_bigram_baseline_keeps_the_most_likely_neighbours_per_token():
    rows = SetArray.from_lists([[1, 2], [1, 2], [1, 3], [1, 4], [1, 4], [1, 4]])
    base = BigramContext(rows, np.bincount(rows.ids, minlength=5), keep=2)
    assert np.allclose(base.after.toarray()[1], [0, 0, 2 / 6, 0, 3 / 6])  # 3 (1/6) cut: third most likely
    assert base.rank(np.array([1]), np.array([-1]), 2)[0].tolist() == [4, 2]


def test_neighbours_skip_masks_and_padding():
    from superbloom.model.text_batches import MaskedRows
    e = np.array([[4, MASK_ELEM, MASK_ELEM, 7, PAD_ELEM], [MASK_ELEM, UNK_ID, 3, 2, 1]])
    t = np.array([[-1, 5, 6, -1, -1], [8, -1, -1, -1, -1]])
    left, right = neighbours(MaskedRows(e, t, np.array([0, 1])))
    assert left.tolist() == [4, -1, -1] and right.tolist() == [-1, 7, -1]


def test_frequency_deciles_are_equal_groups_rarest_first():
    d = frequency_deciles(np.array([50, 1, 7, 3, 9, 100, 2, 8, 4, 6]))
    assert d.tolist() == [8, 0, 5, 2, 7, 9, 1, 6, 3, 4]


def test_eval_text_protocol_with_baselines(text_model, text_data, capsys):
    assert main(["eval", str(text_model), str(text_data), "--json", "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["protocol"]["protocol"] == "text" and r["protocol"]["context_excluded"] is False
    assert r["protocol"]["n"] == 32  # the model's training segments
    assert set(r["baselines"]) == {"unigram", "bigram"}
    assert sum(x["examples"] for x in r["by_kind"].values()) == r["examples"] > 0
    assert sum(x["examples"] for x in r["by_decile"]) == r["examples"]
    for m in [r] + list(r["baselines"].values()):
        assert m["rec@1"] <= m["rec@10"] <= m["rec@20"] and m["rec@10_lo"] <= m["rec@10"] <= m["rec@10_hi"]
    # the templates: the neighbouring token tells far more than the frequency list
    assert r["baselines"]["bigram"]["rec@1"] > r["baselines"]["unigram"]["rec@1"] + 0.2
    assert main(["eval", str(text_model), str(text_data), "--threads", "1"]) == 0
    assert "bigram baseline" in capsys.readouterr().out


def test_eval_compare_text_models(text_model, text_data, tmp_path, capsys):
    """--compare on the text protocol: the same masked tokens, rows resampled; a model trained on
    other segment lengths masks other tokens, and that is an error, not a silent unpaired table."""
    assert main(["eval", str(text_model), str(text_data), "--compare", str(text_model), "--json", "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r["paired_vs_baselines"]) == {"unigram", "bigram"}
    assert all(v == {"diff": 0.0, "lo": 0.0, "hi": 0.0} for v in r["compared"][str(text_model)]["paired"].values())
    uni = r["paired_vs_baselines"]["unigram"]["rec@1"]
    assert uni["diff"] == pytest.approx(r["rec@1"] - r["baselines"]["unigram"]["rec@1"])
    other = tmp_path / "seg16"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(other), "--objective", "text-mlm", "--alpha", "4", "--m", "2",
                 "--steps", "2", "--eval-every", "0", "--segment", "16", *TINY]) == 0
    capsys.readouterr()
    assert main(["eval", str(text_model), str(text_data), "--compare", str(other), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "not the first model's" in err and "segment length" in err and str(other) in err


# ---------------------------------------------------------------- fill in the blank


def test_fill_library_ranks_every_blank(text_model):
    f = Filler.load(text_model)
    r = f.fill("Miles Davis played jazz in [MASK] . [MASK1] was born in Paris .", k=5)
    assert r.tokens[0] == "miles_davis" and r.tokens.count("[MASK]") == 2  # bigrams as in training
    assert len(r.blanks) == 2 and all(len(b.fillers) == 5 for b in r.blanks)
    assert all(b.exact in (True, False) for b in r.blanks)
    scores = [s for _, s in r.blanks[0].fillers]
    assert scores == sorted(scores, reverse=True)
    assert "[UNK]" not in [t for b in r.blanks for t, _ in b.fillers]


def test_fill_cli_json_and_text(text_model, capsys):
    assert main(["fill", str(text_model), "John Coltrane recorded an album with [MASK] .", "--k", "3", "--json",
                 "--threads", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    blank = out["results"][0]["blanks"][0]
    assert len(blank["fillers"]) == 3 and {"token", "display", "score"} <= set(blank["fillers"][0])
    assert main(["fill", str(text_model), "Zzyzx played [MASK] .", "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "[MASK]:" in text and "zzyzx" in text  # the unknown word is listed


@pytest.mark.parametrize("text, message", [("Miles Davis played jazz .", "no [MASK]"), ("   ", "empty text"),
                                           ("jazz " * 600 + "[MASK]", "too long")])
def test_fill_bad_input_is_a_clear_error(text_model, capsys, text, message):
    assert main(["fill", str(text_model), text, "--threads", "1"]) == 2
    assert message in capsys.readouterr().err


def test_fill_on_a_set_model_is_a_clear_error(tiny_model, capsys):
    assert main(["fill", str(tiny_model), "a [MASK]"]) == 2
    assert "not a text model" in capsys.readouterr().err


def test_http_fill(text_model, tiny_model):
    from superbloom.serving.app import create_app

    with TestClient(create_app(sb.load(text_model))) as client:
        r = client.post("/v1/fill", json={"text": "Charlie Parker was born in [MASK] .", "k": 4})
        assert r.status_code == 200, r.text
        assert len(r.json()["blanks"][0]["fillers"]) == 4
        assert client.get("/v1/model").json()["data"]["text"]["lowercase"] is True  # the page's text mode
        page = client.get("/").text
        assert 'id="fillcard" hidden' in page and '"/v1/fill"' in page and "m.data.text" in page
        r = client.post("/v1/fill", json={"text": "no blank here", "k": 4})
        assert r.status_code == 422 and "no [MASK]" in r.json()["message"]
        assert client.post("/v1/fill", json={"text": "x [MASK]", "k": 0}).status_code == 422
        for k in (True, "5", 5.0):  # as strict as every other route (issue 32): no coercion
            r = client.post("/v1/fill", json={"text": "x [MASK]", "k": k})
            assert r.status_code == 422 and r.json()["message"].startswith("k:"), (k, r.text)
        assert client.post("/v1/fill", json={"text": "x " * 20_000 + "[MASK]"}).status_code == 422
    with TestClient(create_app(sb.load(tiny_model))) as client:
        assert client.post("/v1/fill", json={"text": "a [MASK]"}).status_code in (404, 405)  # not a text model


