"""The parts of a hybrid at the user's end (heads/parts.py): the line training ends with, the model
card's, `eval`'s paired intervals of the hybrid minus its network alone and minus its term alone, and
`predict` / `serve --part` ranking by one part."""
import json

import pytest

import superbloom as sb
from superbloom.heads import head_config
from superbloom.heads.base import Validation
from superbloom.heads.parts import TERM_ALONE, TERM_BASELINES
from superbloom.heads.parts import parts_note as _note


def parts_note(record: dict, select: str, unmixed: bool = False):
    """The note of a validation record (as state.json keeps it: Validation.record() and its step)."""
    return _note(Validation.read(record), select, record.get("step"), unmixed)


def test_the_parts_note_gives_each_part_and_names_the_baseline_where_the_network_adds_nothing():
    best = {"rec@10": 0.30, "pure_rec@10": 0.25, "term_rec@10": 0.28, "item_mix": 30.0, "item_term": "ease",
            "step": 500}
    note = parts_note(best, "rec@10")
    assert all(x in note for x in ("step 500", "the hybrid 0.300", "ease term at weight 30", "network alone 0.250",
                                   "term alone 0.280"))
    assert "adds nothing" not in note
    level = parts_note(dict(best, **{"rec@10": 0.28}), "rec@10")  # the hybrid no better than its term alone
    assert "adds nothing over the ease term" in level and "--baselines ease-term" in level and "--part term" in level
    unmixed = parts_note(dict(best, item_mix=0.0, **{"rec@10": 0.25}), "rec@10", unmixed=True)
    assert "network alone 0.250" in unmixed and "weight fixed at 0" in unmixed and "adds nothing" in unmixed
    alone = parts_note(dict(best, item_mix=TERM_ALONE, **{"rec@10": 0.28}), "rec@10")  # kept at its term alone
    assert "ease term alone 0.280, kept as the model" in alone and "network alone 0.250" in alone
    assert "adds nothing over the ease term (yet)" in alone and "--baselines ease-term" in alone
    assert parts_note({"rec@10": 0.3, "pure_rec@10": 0.2}, "rec@10") is None  # no term alone scored there
    from superbloom.evaluation.baselines import BASELINES
    assert set(TERM_BASELINES.values()) <= set(BASELINES)  # each note names a baseline eval knows


def test_training_ends_with_the_parts_of_the_kept_checkpoint(wiki_data, tmp_path, caplog):
    """The end of a hybrid's training says what its network alone and its term alone scored at BEST, and
    the model card says it too; a head of one part says nothing of the kind."""
    import logging
    outs = {}
    for head in ("hybrid", "full"):
        outs[head] = out = tmp_path / head
        cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                             model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                             head=head_config(head, **({"neighbours": 20} if head == "hybrid" else {})),
                             loop=sb.LoopConfig(steps=8, batch_size=32, eval_every=4))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="superbloom"):
            sb.train(cfg, progress=False)
        parts = [r.getMessage() for r in caplog.records if "its term alone" in r.getMessage()]
        card = (out / "README.md").read_text()
        if head == "full":
            assert not parts and "its parts there" not in card
            continue
        best = json.loads((out / (out / "BEST").read_text().strip() / "state.json").read_text())["best"]
        assert len(parts) == 1 and f"its network alone {best['pure_rec@10']:.3f}" in parts[0]
        assert f"its term alone {best['term_rec@10']:.3f}" in parts[0] and f"step {best['step']}" in parts[0]
        assert f"network alone rec@10 {best['pure_rec@10']:.4f}, term alone rec@10 {best['term_rec@10']:.4f}" in card


@pytest.fixture(scope="module")
def outs(wiki_data, tmp_path_factory) -> dict:
    """A hybrid with a fixed item-item weight (10) and a full head, four steps each: their model folders."""
    root, outs = tmp_path_factory.mktemp("parts"), {}
    for head in ("hybrid", "full"):
        outs[head] = root / head
        cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(outs[head]), hash=sb.HashConfig(alpha=1, m=1),
                             model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                             head=head_config(head, **({"neighbours": 20, "mix": 10.0} if head == "hybrid" else {})),
                             loop=sb.LoopConfig(steps=4, batch_size=32, eval_every=0))
        sb.train(cfg, progress=False)
    return outs


def test_eval_gives_a_hybrid_the_paired_differences_from_its_parts(wiki_data, outs, capsys):
    """`eval` of a model of several parts prints (and --json gives) the paired 95% interval of the
    hybrid minus its network alone and minus its term alone, as --compare does; a one-part model's
    report has no such section unless --compare asks for it."""
    from superbloom.cli import main
    args = [str(wiki_data.path), "--max-sets", "40", "--baselines", "cooccurrence", "--threads", "1", "--quiet"]
    assert main(["eval", str(outs["hybrid"]), *args]) == 0
    text = capsys.readouterr().out
    assert " x 10, decay 1)" in text and "paired differences, this model minus each" in text
    assert all(f"vs {x}" in text for x in ("network only", "term only", "cooccurrence baseline"))
    assert "compared models" not in text  # no other model was given
    assert main(["eval", str(outs["hybrid"]), *args, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["paired_vs_baselines"]) == {"network_only", "term_only", "cooccurrence"}
    for part in ("network_only", "term_only"):
        p = res["paired_vs_baselines"][part]["rec@10"]
        assert p["lo"] <= p["diff"] <= p["hi"] and abs(p["diff"] - (res["rec@10"] - res[part]["rec@10"])) < 1e-9
    assert main(["eval", str(outs["full"]), *args]) == 0
    assert "paired differences" not in capsys.readouterr().out


def test_predict_and_serve_rank_by_one_part(outs, capsys):
    """`load(..., part=)` / `predict --part` / `serve --part` rank by the hybrid's network alone or term
    alone, as eval's variants do, for as long as the model lives; a one-part model refuses a part it
    lacks, naming the parts it has; a mistyped part is a usage error."""
    import gc

    from fastapi.testclient import TestClient

    from superbloom.cli import main
    from superbloom.inference.loader import load
    from superbloom.serving.app import create_app
    from superbloom.serving.config import ServeConfig

    context = ["Jazz", "Miles_Davis", "Piano"]
    whole = load(outs["hybrid"])
    want = {"whole": whole.predict(context, k=8).items}
    for part, variant in (("network", "network alone"), ("term", "term alone")):
        with whole.variants()[variant]:
            want[part] = whole.predict(context, k=8).items
    assert want["whole"] != want["network"] and want["whole"] != want["term"]  # the parts rank differently here
    for part in ("whole", "network", "term"):
        model = load(outs["hybrid"], part=part)
        gc.collect()  # the part holds for the model's life, not only until a context is collected
        assert model.part == part and model.predict(context, k=8).items == want[part]
    assert load(outs["hybrid"]).predict(context, k=8).items == want["whole"]  # a new load: whole again
    assert sb.load(outs["hybrid"], part="term").predict(context, k=8).items == want["term"]

    with pytest.raises(ValueError, match="--part term: this model has no term alone \\(it ranks by whole\\)"):
        load(outs["full"], part="term")

    assert main(["predict", str(outs["hybrid"]), *context, "--k", "8", "--part", "term", "--json", "--threads", "1"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in got["predictions"]] == [i for i, _ in want["term"]]
    assert main(["expand", str(outs["hybrid"]), *context, "--add", "1", "--part", "term", "--json", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["added"][0]["id"] == want["term"][0][0]  # the term's first choice
    assert main(["predict", str(outs["full"]), *context, "--part", "network", "--threads", "1"]) == 2
    assert "this model has no network alone" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["predict", str(outs["hybrid"]), *context, "--part", "terms"])
    assert e.value.code == 2 and "invalid choice: 'terms'" in capsys.readouterr().err

    with TestClient(create_app(load(outs["hybrid"], part="term"), ServeConfig())) as client:
        served = client.post("/v1/predict", json={"context": context, "k": 8}).json()
        info = client.get("/v1/model").json()
    assert [p["id"] for p in served["predictions"]] == [i for i, _ in want["term"]] and info["part"] == "term"


def test_a_hybrid_at_weight_0_ranks_by_its_network_as_a_whole_and_its_term_as_a_part(outs, capsys):
    """At weight 0 (chosen by the validation, or fixed) a hybrid is its network alone: `--part network`
    ranks as the whole model does, `--part term` by its term; `-k` is `--k`."""
    from superbloom.cli import main
    from superbloom.heads.parts import mixed
    from superbloom.inference.loader import load

    context = ["Jazz", "Miles_Davis", "Piano"]
    whole = load(outs["hybrid"])
    with mixed(whole.model.head, 0.0):
        assert list(whole.variants()) == ["term alone"]
        want = whole.predict(context, k=8).items
        with whole.variants()["term alone"]:
            term = whole.predict(context, k=8).items
        net = load(outs["hybrid"])
        net.model.head.mix.fill_(0.0)
        from superbloom.inference.parts import rank_by
        assert rank_by(net, "network").part == "network" and net.predict(context, k=8).items == want
        t = load(outs["hybrid"])
        t.model.head.mix.fill_(0.0)
        assert rank_by(t, "term").predict(context, k=8).items == term != want
    assert main(["predict", str(outs["hybrid"]), *context, "-k", "3", "--json", "--threads", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["predictions"]) == 3
