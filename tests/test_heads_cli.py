"""Every baseline head through the command line on the embedded Wikispeedia links: `train --head`
with its own flags, then `eval` and `predict` with each decoding option (--beam, --exact, --score,
--exhaustive). (The superbloom head goes through the same path in test_cli.py.)"""
import json

import pytest
import torch

from superbloom.cli import main
from superbloom.storage.files import load_json

HEADS = {
    "full": ["--alpha", "1", "--m", "1"],
    "sampled": ["--alpha", "1", "--m", "1", "--samples", "64", "--proposal", "unigram"],
    "hierarchical": ["--tree", "fano"],  # hashed input (alpha 4, m 2), tree over the ids
    "hybrid": ["--alpha", "1", "--m", "1", "--neighbours", "20", "--item-term", "cooccurrence", "--samples", "16",
               "--proposal", "uniform"],
}
DECODING = [[], ["--exact"], ["--beam", "3", "--score", "min"], ["--exhaustive", "--score", "max"]]


@pytest.fixture(autouse=True, scope="module")
def restore_threads():
    """--threads 1 (tiny models on shared cores) sets torch's global thread count; put it back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", params=sorted(HEADS))
def trained(request, wiki_data, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "model"
    code = main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--head", request.param, *HEADS[request.param],
                 "--steps", "2", "--batch-size", "32", "--d", "16", "--heads", "2", "--d-ff", "32",
                 "--layers", "1", "--eval-every", "0", "--val-fraction", "0.01", "--quiet", "--threads", "1"])
    assert code == 0
    return request.param, out, wiki_data


def test_head_flags_are_saved_with_the_model(trained):
    head, out, _ = trained
    cfg = load_json(out / "config.json")["head"]
    assert cfg == {"full": {"name": "full", "label_smoothing": 0.0},
                   "sampled": {"name": "sampled", "samples": 64, "proposal": "unigram"},
                   "hierarchical": {"name": "hierarchical", "tree": "fano"},
                   "hybrid": {"name": "hybrid", "neighbours": 20, "term": "cooccurrence", "window": 10,
                              "gap_decay": 0.8, "label_smoothing": 0.0, "samples": 16, "proposal": "uniform",
                              "mix": None}}[head]


@pytest.mark.parametrize("decoding", DECODING, ids=["default", "exact", "beam-min", "exhaustive-max"])
def test_eval_with_every_decoding_option(trained, decoding, capsys):
    _, out, data = trained
    assert main(["eval", str(out), str(data.path), "--json", "--max-sets", "30", "--baselines", "none",
                 "--threads", "1", *decoding]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["examples"] == 30 and res["certified_exact"] == 1.0  # these heads rank exactly
    assert 0 <= res["rec@1"] <= res["rec@10"] <= res["rec@20"] <= 1


@pytest.mark.parametrize("decoding", DECODING, ids=["default", "exact", "beam-min", "exhaustive-max"])
def test_predict_with_every_decoding_option(trained, decoding, capsys):
    head, out, _ = trained
    assert main(["predict", str(out), "Copenhagen", "Denmark", "--k", "5", "--json", *decoding]) == 0
    pred = json.loads(capsys.readouterr().out)
    ids = [p["id"] for p in pred["predictions"]]
    assert len(ids) == 5 and pred["exact"] and not {"Copenhagen", "Denmark"} & set(ids)
    scores = [p["score"] for p in pred["predictions"]]
    assert scores == sorted(scores, reverse=True)
    if head != "hybrid":  # log-probabilities (the hybrid adds mix x its item-item term to them)
        assert all(s <= 0 for s in scores)


def test_bad_head_flag_is_reported(wiki_data, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "hierarchical",
              "--tree", "random", "--steps", "1"])
    assert "invalid choice: 'random'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "sampled",
              "--samples", "0", "--steps", "1"])
    assert "argument --samples: expected a number >= 1, got 0" in capsys.readouterr().err
    code = main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "full",
                 "--samples", "10", "--steps", "1"])
    assert code == 2 and "--samples is not a setting of the full head" in capsys.readouterr().err
    code = main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "full",
                 "--item-term", "ease", "--steps", "1"])
    assert code == 2 and "--item-term is not a setting of the full head" in capsys.readouterr().err
    code = main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "full",
                 "--transition-window", "3", "--steps", "1"])
    assert code == 2 and "--transition-window is not a setting of the full head" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--head", "hybrid", "--alpha", "1",
              "--m", "1", "--item-term", "transition", "--gap-decay", "0", "--steps", "1"])
    assert "argument --gap-decay: expected a number in (0, 1], got 0" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()  # refused before anything was written
