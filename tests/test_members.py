"""`train --members K` (training/members.py): K seeds of one recipe, the same validation sets, saved as one
ensemble folder that load / predict / eval / serve read as one model (inference/ensemble.py)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.heads import head_config
from superbloom.storage.files import load_json
from superbloom.storage.loading import LoadError
from superbloom.training.members import DONE, held_out, member_config, train_members
from superbloom.training.train import split_validation


def config(data, out, head=None, steps=8) -> sb.TrainConfig:
    return sb.TrainConfig(data=str(data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                          head=head or head_config("hybrid", neighbours=20, term="cooccurrence"),
                          model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                          loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=4, seed=3))


@pytest.fixture(scope="module")
def ensemble(wiki_data, tmp_path_factory):
    cfg = config(wiki_data, tmp_path_factory.mktemp("members") / "ens")
    return cfg, train_members(cfg, 3, progress=False)


def test_members_share_the_validation_sets_and_differ_in_seed(ensemble, wiki_data):
    cfg, out = ensemble
    saved = load_json(out / "config.json")
    assert saved["kind"] == "ensemble" and saved["members"] == ["member-0", "member-1", "member-2"]
    trains = [load_json(out / m / "config.json")["train"] for m in saved["members"]]
    assert [t["loop"]["seed"] for t in trains] == [3, 4, 5] and {t["val_seed"] for t in trains} == {3}
    assert [r["seed"] for r in saved["runs"]] == [3, 4, 5] and all((out / m / DONE).is_file() for m in saved["members"])
    # the held-out sets the weight is chosen on: the first member's, which no member trained on
    _, val_rows = split_validation(wiki_data.train, cfg.val_fraction, 3)
    ex = held_out(cfg, wiki_data)
    assert len(val_rows) and set(np.unique(ex.set_rows)) <= set(range(len(val_rows)))
    assert member_config(cfg, 2).validation_seed == 3 and member_config(cfg, 2).loop.seed == 5


def test_the_folder_loads_as_one_ensemble_at_its_chosen_weight(ensemble, wiki_data):
    cfg, out = ensemble
    saved = load_json(out / "config.json")
    scores = {float(w): r for w, r in saved["mix_validation"].items()}
    assert saved["item_mix"] == max(scores, key=lambda w: (scores[w], -w))  # the best weight, ties: the smaller
    ens = sb.load(out, mmap=False)
    assert isinstance(ens, sb.Ensemble) and ens.mix == saved["item_mix"] and ens.info()["kind"] == "ensemble"
    assert ens.info()["members"] == 3 and ens.n_parameters == sum(m.n_parameters for m in ens.members)
    by_hand = sb.Ensemble.load([out / m for m in saved["members"]], mix=saved["item_mix"], mmap=False)
    ctx = np.asarray([[1, 2, 3], [10, 20, -1]], np.int64)
    assert torch.equal(ens.rank(ctx, 10).ids, by_hand.rank(ctx, 10).ids)
    # the weight recorded is what the ensemble's own choice on the held-out examples gives
    ex = held_out(cfg, wiki_data)
    again = by_hand.choose_mix(ex.contexts, ex.targets, exclude=ex.excluded)
    assert {f"{w:g}": round(r, 6) for w, r in again.items()} == saved["mix_validation"]


def test_member_zero_is_the_recipe_trained_alone(ensemble, wiki_data, tmp_path):
    cfg, out = ensemble
    alone = sb.train(dataclasses.replace(cfg, out=str(tmp_path / "alone")), progress=False)
    a, b = sb.load(alone, mmap=False), sb.load(out / "member-0", mmap=False)
    for (n, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(p, q), n


def test_resume_keeps_the_complete_members(wiki_data, tmp_path):
    cfg = config(wiki_data, tmp_path / "ens", steps=4)
    out = train_members(cfg, 2, progress=False)
    kept = (out / "member-0" / DONE).stat().st_mtime_ns
    (out / "member-1" / DONE).unlink()  # as a kill during member 1's training leaves it
    (out / "config.json").unlink()
    with pytest.raises(ValueError, match="already holds an ensemble .*--resume"):
        train_members(cfg, 2, progress=False)
    train_members(cfg, 2, progress=False, resume=True)
    assert (out / "member-0" / DONE).stat().st_mtime_ns == kept and (out / "member-1" / DONE).is_file()
    assert load_json(out / "config.json")["members"] == ["member-0", "member-1"]


def test_refusals(wiki_data, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="at least 2 members"):
        train_members(config(wiki_data, tmp_path / "a"), 1)
    with pytest.raises(ValueError, match="superbloom head does not score every id"):
        train_members(config(wiki_data, tmp_path / "b", head=sb.SuperbloomConfig()), 2)
    with pytest.raises(ValueError, match="--val-fraction"):
        train_members(dataclasses.replace(config(wiki_data, tmp_path / "c"), val_fraction=0.0), 2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="one process"):
        train_members(config(wiki_data, tmp_path / "d"), 2)
    assert not any((tmp_path / x).exists() for x in "abcd")  # refused before anything is written


def test_a_member_loader_refuses_the_folder_and_a_broken_config_is_named(ensemble, tmp_path):
    _, out = ensemble
    with pytest.raises(LoadError, match="holds an ensemble"):
        sb.Predictor.load(out)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"kind": "ensemble", "members": ["../x"], "item_mix": 1}))
    with pytest.raises(LoadError, match="config.json: field 'members'"):
        sb.load(broken)
    (broken / "config.json").write_text(json.dumps({"kind": "ensemble", "members": ["m"], "item_mix": "a"}))
    with pytest.raises(LoadError, match="field 'item_mix'"):
        sb.load(broken)


def test_the_command_line(wiki_data, tmp_path, capsys):
    """`train --members 2 --json`, then predict and eval the folder as one model (eval: the networks alone
    and the term alone beside it)."""
    from superbloom.cli import main

    out = tmp_path / "ens"
    args = ["train", str(wiki_data.path), "--out", str(out), "--members", "2", "--preset", "none", "--head", "hybrid",
            "--alpha", "1", "--m", "1", "--d", "16", "--layers", "1", "--heads", "2", "--d-ff", "32", "--steps", "4",
            "--batch-size", "32", "--quiet"]
    assert main(args + ["--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["members"] == ["member-0", "member-1"] and got["item_mix"] == load_json(out / "config.json")["item_mix"]
    assert main(args) == 2  # the folder holds it now: --resume or --overwrite
    assert "already holds an ensemble" in capsys.readouterr().err
    assert main(["predict", str(out), "Jazz", "--k", "3", "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in pred["predictions"]] == [i for i, _ in sb.load(out).predict(["Jazz"], k=3).items]
    assert main(["eval", str(out), str(wiki_data.path), "--max-sets", "30", "--baselines", "none", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["head"]["members"] == 2
    if res["head"]["item_mix"]:
        assert {"network_only", "term_only"} <= set(res)
    assert main(["train", str(wiki_data.path), "--out", str(tmp_path / "x"), "--members", "2", "--head", "superbloom",
                 "--steps", "4", "--quiet"]) == 2
    assert "does not score every id" in capsys.readouterr().err


def test_serve_answers_with_the_ensemble(ensemble):
    """`serve ENSEMBLE_DIR` loads it through the id commands' loader (inference/loader.py): the HTTP
    answer is the ensemble's."""
    from fastapi.testclient import TestClient

    from superbloom.inference.loader import load
    from superbloom.serving.app import create_app
    from superbloom.serving.config import ServeConfig

    _, out = ensemble
    model = load(out, mmap=False)
    assert isinstance(model, sb.Ensemble)
    with TestClient(create_app(model, ServeConfig())) as client:
        got = client.post("/v1/predict", json={"context": ["Jazz", "Miles_Davis"], "k": 4}).json()
        info = client.get("/v1/model").json()
    assert [p["id"] for p in got["predictions"]] == [i for i, _ in model.predict(["Jazz", "Miles_Davis"], k=4).items]
    assert got["exact"] and info["parameters"] == model.n_parameters


def test_an_ensemble_folder_among_other_models_adds_its_members(ensemble, wiki_data, tmp_path):
    """`predict ENSEMBLE_DIR --with OTHER`: the folder's members join the other model's (not only its first
    member), and its chosen weight is the default."""
    _, out = ensemble
    ens = sb.load(out, mmap=False)
    other = sb.load(sb.train(config(wiki_data, tmp_path / "other", head=head_config("full")), progress=False),
                    mmap=False)
    both = sb.Ensemble([ens, other])
    assert len(both.members) == 4 and both.mix == ens.mix
    by_hand = sb.Ensemble([*ens.members, other], mix=ens.mix)
    ctx = np.asarray([[1, 2, 3], [10, 20, -1]], np.int64)
    assert torch.allclose(both.scores(ctx), by_hand.scores(ctx))


def test_the_members_build_their_item_item_term_once(wiki_data, tmp_path, monkeypatch):
    """Every member trains on the same sets: the term (EASE here) is built for the first member and
    reused by the others (heads/hybrid.py shared_terms), and equals the term a lone `train` builds."""
    from superbloom.heads import hybrid

    builds = []
    real = hybrid._build
    monkeypatch.setattr(hybrid, "_build", lambda *a: builds.append(a[0]) or real(*a))
    cfg = config(wiki_data, tmp_path / "ens", head=head_config("hybrid", neighbours=20, term="ease"), steps=4)
    out = train_members(cfg, 3, progress=False)
    assert builds == ["ease"]
    assert hybrid._SHARED is None  # dropped with the block
    terms = [sb.load(out / f"member-{i}", mmap=False).model.head for i in range(3)]
    alone = sb.train(dataclasses.replace(member_config(cfg, 2), out=str(tmp_path / "alone")), progress=False)
    assert builds == ["ease", "ease"]  # outside the block: built anew
    lone = sb.load(alone, mmap=False).model.head
    for head in terms:
        for name in ("indptr", "cols", "values"):
            assert torch.equal(getattr(head, name), getattr(lone, name))


def test_member_proposals_give_each_member_its_sampled_negatives(wiki_data, tmp_path, capsys):
    """`--member-proposals log_uniform,uniform`: member i draws its negatives from the i-th proposal
    (cycled), saved in its own config and in the ensemble's runs; a proposal without sampled negatives,
    or without --members, is refused before anything is written."""
    from superbloom.cli import main

    cfg = config(wiki_data, tmp_path / "ens", head=head_config("hybrid", neighbours=20, term="cooccurrence",
                                                               samples=16), steps=4)
    assert [member_config(cfg, i, ("log_uniform", "uniform")).head.proposal for i in range(3)] == \
        ["log_uniform", "uniform", "log_uniform"]
    out = train_members(cfg, 2, progress=False, proposals=("log_uniform", "uniform"))
    saved = load_json(out / "config.json")
    assert [r["proposal"] for r in saved["runs"]] == ["log_uniform", "uniform"]
    heads = [sb.load(out / m, mmap=False).model.head for m in saved["members"]]
    assert [h.cfg.proposal for h in heads] == [h.proposal.kind for h in heads] == ["log_uniform", "uniform"]
    assert "sampled negatives from the proposals log_uniform, uniform" in (out / "README.md").read_text()  # the card
    with pytest.raises(ValueError, match="full softmax"):
        train_members(config(wiki_data, tmp_path / "a"), 2, proposals=("uniform",))
    with pytest.raises(ValueError, match="3 proposals for 2 members"):
        train_members(dataclasses.replace(cfg, out=str(tmp_path / "b")), 2, proposals=("uniform",) * 3)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    args = ["train", str(wiki_data.path), "--out", str(tmp_path / "c"), "--head", "hybrid", "--samples", "16",
            "--alpha", "1", "--m", "1", "--steps", "2", "--quiet", "--member-proposals", "uniform"]
    assert main(args) == 2 and "give --members K" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:  # argparse: exit 2, the flag and the names it takes
        main(args[:-1] + ["zipf", "--members", "2"])
    assert bad.value.code == 2 and "'zipf' is not a proposal" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
    # --print-config writes the list as one string, which --config reads back
    assert main(args[:-1] + ["log_uniform,uniform", "--members", "2", "--print-config"]) == 0
    toml = capsys.readouterr().out
    assert 'member-proposals = "log_uniform,uniform"' in toml
    (tmp_path / "run.toml").write_text(toml)
    assert main(["train", str(wiki_data.path), "--config", str(tmp_path / "run.toml"), "--print-config"]) == 0
    assert capsys.readouterr().out == toml  # read back as written
