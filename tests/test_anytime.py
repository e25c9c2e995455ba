"""The anytime hybrid: the term is fitted and validated before the first training step, so the folder
serves a certified-exact model at once; BEST is never below the term alone on validation; the
patience rule stops a run whose network has stopped improving; a typed --time-budget wins; a reader
of a folder whose training runs gets a whole model."""
import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.cli import main
from superbloom.heads import head_config
from superbloom.heads.base import Validation
from superbloom.heads.config import MIXES
from superbloom.heads.parts import TERM_ALONE, mixed
from superbloom.model.device import Dist
from superbloom.storage.checkpoint import inference_checkpoint, latest_checkpoint
from superbloom.training.loop import LoopConfig, Objective, fit
from superbloom.training.optim import OptimConfig

CPU = Dist(0, 1, torch.device("cpu"))
TINY = sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1)
CONTEXTS = [["Copenhagen"], ["Miles_Davis", "Jazz"], ["Jupiter", "Saturn"], ["Albert_Einstein", "Isaac_Newton"]]


class Recorder:
    """A training callback that runs `on_record(record)` for each metrics record."""

    def __init__(self, on_record):
        self.on_record, self.records = on_record, []

    def record(self, record: dict) -> None:
        self.records.append(record)
        self.on_record(record)

    def close(self) -> None:
        pass


def hybrid_config(data, out, steps=6, eval_every=3, seed=0, **loop) -> sb.TrainConfig:
    return sb.TrainConfig(data=str(data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1), model=TINY,
                          head=head_config("hybrid", neighbours=30), val_fraction=0.05,
                          loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=eval_every, seed=seed,
                                             checkpoint_every=1e9, **loop))


def brute_force(model, contexts: list[list[str]], k: int) -> list[list[int]]:
    """The top-k of the loaded model's chosen candidate, by scoring every id: its term alone (mix
    TERM_ALONE: the term's sums, ties by the smaller id) or network log p + mix x term; the context never."""
    head = model.model.head
    ids = [model.vocab.lookup(c)[0] for c in contexts]
    ctx = torch.full((len(ids), max(map(len, ids))), -1, dtype=torch.long)
    for q, row in enumerate(ids):
        ctx[q, :len(row)] = torch.tensor(row)
    term = head.term_scores(ctx)  # (Q, N) the chosen term's sums
    n, mix = term.shape[1], float(head.mix)
    if mix == TERM_ALONE:
        scores = term.double()
    else:
        with mixed(head, 0.0):  # the network alone's log p of every id
            r = model.rank(ctx.numpy(), n, sb.DecodeConfig(exact=True), exclude=np.full((len(ids), 1), -1))
        logp = torch.full((len(ids), n), float("-inf"), dtype=torch.float64)
        logp.scatter_(1, r.ids.clamp(min=0), r.scores.double())
        scores = logp + mix * term.double()
    out = []
    for q, row in enumerate(ids):
        order = sorted((j for j in range(n) if j not in set(row)), key=lambda j: (-float(scores[q, j]), j))
        out.append(order[:k])
    return out


def test_the_term_first_model_is_servable_and_exact_before_any_training_step(wiki_data, tmp_path):
    """train validates at step 0 and writes BEST then: a load at that moment (from a training callback,
    before the first step) gets a whole model whose answers are certified exact and are the chosen
    candidate's exhaustive ranking (the term alone where the validation kept it)."""
    out = tmp_path / "m"
    seen = {}

    def on_record(record):
        if "val_rec@10" in record and "loaded" not in seen:
            assert record["step"] == 0  # no training step taken yet
            model = sb.load(out)
            seen.update(loaded=model.config["checkpoint"], mix=float(model.model.head.mix),
                        exact=sb.DecodeConfig(exact=True))
            preds = model.predict_many(CONTEXTS, k=10, decode=seen["exact"])
            seen["preds"] = [[model.vocab.get(i) for i, _ in p.items] for p in preds]
            seen["certified"] = all(p.exact for p in preds)
            seen["brute"] = brute_force(model, CONTEXTS, 10)
            seen["record"] = record

    sb.train(hybrid_config(wiki_data, out), progress=False, callbacks=[Recorder(on_record)])
    assert seen["loaded"].startswith("best-000000000")  # the step-0 checkpoint
    assert seen["certified"] and seen["preds"] == seen["brute"]
    assert seen["mix"] in MIXES + (TERM_ALONE,) and seen["record"]["val_item_mix"] == seen["mix"]
    assert seen["record"]["val_rec@10"] >= seen["record"]["val_term_rec@10"]
    step0 = [p for p in (out / "checkpoints").iterdir()]
    assert latest_checkpoint(out) is not None and step0  # and the run went on to its end
    assert json.loads((inference_checkpoint(out) / "state.json").read_text())["best"]["rec@10"] >= \
        seen["record"]["val_term_rec@10"]


def test_the_term_alone_is_chosen_and_served_when_the_network_adds_nothing(wiki_data, tmp_path, monkeypatch):
    """A network whose scores are loud noise spoils every mix > 0 and itself: only the term alone keeps
    the term's score, so the validation chooses it at step 0 and at every later validation; it is
    saved and served (predict = the term's exhaustive ranking, certified exact)."""
    from superbloom.heads.hybrid import HybridHead

    real = HybridHead.log_probs

    def noise(self, v, w=None):  # (the real scores times 0: the training graph stays)
        logp = real(self, v, w)
        return logp * 0 + 1e6 * torch.randn(logp.shape)

    monkeypatch.setattr(HybridHead, "log_probs", noise)
    out = tmp_path / "m"
    sb.train(hybrid_config(wiki_data, out, steps=2, eval_every=0), progress=False)
    model = sb.load(out)
    assert float(model.model.head.mix) == TERM_ALONE
    preds = model.predict_many(CONTEXTS, k=10, decode=sb.DecodeConfig(exact=True))
    assert all(p.exact for p in preds)
    assert [[model.vocab.get(i) for i, _ in p.items] for p in preds] == brute_force(model, CONTEXTS, 10)
    vals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "val_rec@10" in x]
    assert vals[0]["step"] == 0 and all(v["val_item_mix"] == TERM_ALONE for v in vals)
    assert all(v["val_rec@10"] == v["val_term_rec@10"] > v["val_pure_rec@10"] for v in vals)


@pytest.mark.parametrize("seed,worse", [(0, False), (1, False), (2, True), (3, True)])
def test_best_is_never_below_the_term_alone_on_validation(wiki_data, tmp_path, monkeypatch, seed, worse):
    """Over tiny runs of several seeds, and runs whose network only gets worse (gradient ascent on its
    loss), every validation's chosen score is >= the term alone's, and so is BEST's."""
    if worse:
        from superbloom.model.encoder import SetModel

        real = SetModel.forward
        monkeypatch.setattr(SetModel, "forward", lambda self, batch: -real(self, batch))
    out = tmp_path / "m"
    sb.train(hybrid_config(wiki_data, out, steps=9, eval_every=3, seed=seed), progress=False)
    vals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "val_rec@10" in x]
    assert [v["step"] for v in vals][:4] == [0, 3, 6, 9]  # step 0 first: the term, before training
    term = vals[0]["val_term_rec@10"]
    assert all(v["val_term_rec@10"] == term for v in vals)  # one term, validated alike every time
    assert all(v["val_rec@10"] >= v["val_term_rec@10"] for v in vals)
    best = json.loads((inference_checkpoint(out) / "state.json").read_text())["best"]
    assert best["rec@10"] >= term and best["rec@10"] == max(v["val_rec@10"] for v in vals)
    if worse:  # the network alone falls from its first trained validation on
        pure = [v["val_pure_rec@10"] for v in vals[1:]]
        assert pure[-1] <= pure[0]


class Scores(torch.nn.Module):
    """A model for the loop alone: forward(batch) is a loss, validation plays back `scores`."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, batch):
        return (self.w - 1.0).pow(2).sum()


def played(scores: list[dict]) -> Objective:
    model, it = Scores(), iter(scores)
    return Objective(model=model, n_examples=64, epoch=lambda e: [np.arange(8)] * 8, batch=lambda r, rng: None,
                     validate=lambda: Validation.read(next(it)), select="rec@10")


def test_patience_stops_a_run_whose_network_stopped_improving(tmp_path):
    """LoopConfig.patience: 2 validations in a row that improve neither the score nor the network
    alone's end the run (well before its cap of steps); a network alone that keeps improving under a
    score that does not (a term carrying the hybrid) keeps it going."""
    flat = [{"rec@10": 0.5, "pure_rec@10": 0.1}] + [{"rec@10": 0.5 - i / 100, "pure_rec@10": 0.1} for i in range(1, 50)]
    loop = LoopConfig(batch_size=8, steps=200, eval_every=4, patience=2, checkpoint_every=1e9)
    state = fit(played(flat), loop, OptimConfig(lr=0.1, warmup=0), tmp_path / "a", CPU, progress=False,
                validate_first=True)
    assert state.step == 8 and state.stale == 2  # step 0, then 4 and 8 without a gain
    assert state.best["step"] == 0  # BEST stays the step-0 model
    rising = [{"rec@10": 0.5, "pure_rec@10": 0.1 + i / 100} for i in range(60)]
    state = fit(played(rising), loop, OptimConfig(lr=0.1, warmup=0), tmp_path / "b", CPU, progress=False,
                validate_first=True)
    assert state.step == 200 and state.stale == 0  # the network alone improved at every validation
    with pytest.raises(ValueError, match="patience 2 counts validations"):
        LoopConfig(steps=10, eval_every=0, patience=2)


def test_a_typed_time_budget_wins_over_the_presets_stop_rule(wiki_data, tmp_path, capsys):
    """No bound typed: the preset trains until the network stops improving (patience), within its cap;
    --time-budget (or --steps) typed: that bound alone, no patience of the preset's."""
    common = [str(wiki_data.path), "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "32",
              "--threads", "1", "--quiet", "--neighbours", "20"]
    assert main(["train", *common, "--out", str(tmp_path / "t"), "--time-budget", "2"]) == 0
    loop = json.loads((tmp_path / "t" / "config.json").read_text())["train"]["loop"]
    assert loop["time_budget"] == 2 and loop["steps"] == 0 and loop["patience"] == 0
    assert "stop:" not in capsys.readouterr().out
    assert main(["train", *common, "--out", str(tmp_path / "p"), "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert "patience = 3" in printed and "steps = 8000" in printed


def test_a_reader_of_a_running_training_gets_a_whole_model(wiki_data, tmp_path, monkeypatch):
    """A load whose checkpoint is replaced and removed while it reads (a training writing a new BEST
    beside it) reads the folder again and gets the new BEST whole, never a half-read one."""
    from superbloom.storage import checkpoint as ckpt_module
    from superbloom.storage import mapped

    out = tmp_path / "m"
    sb.train(hybrid_config(wiki_data, out, steps=3, eval_every=0), progress=False)
    first = inference_checkpoint(out)
    trained = sb.load(out).model
    real_map, raced = mapped.map_weights, []

    def racing(model, ckpt):  # a new BEST lands, and the one being read goes, between the pointer and the read
        if not raced:
            raced.append(ckpt)
            ckpt_module.save_checkpoint(out, 4, trained, None, {"step": 4}, keep=1, kind="best", pointer="BEST")
            assert not ckpt.exists()
        return real_map(model, ckpt)

    monkeypatch.setattr(mapped, "map_weights", racing)
    model = sb.load(out)
    assert raced == [first] and model.config["checkpoint"].startswith("best-000000004")


def test_a_staged_run_serves_the_old_model_until_its_term_is_written(wiki_data, tmp_path, monkeypatch):
    """--overwrite over a model: the old model serves while the new run fits its term (staged beside it);
    from the new run's step-0 checkpoint on (its term alone, written before the step-0 validation), the
    folder serves the new run."""
    from superbloom.training import loop as loop_module

    real, before = loop_module.save_checkpoint, []

    def saving(path, step, *a, **k):  # what the folder serves just before the new run's first checkpoint
        if not before:
            before.append(json.loads((out / "config.json").read_text())["train"]["loop"]["seed"])
        return real(path, step, *a, **k)

    out = tmp_path / "m"
    sb.train(hybrid_config(wiki_data, out, steps=2, eval_every=0, seed=5), progress=False)
    old = json.loads((out / "config.json").read_text())["train"]["loop"]["seed"]
    loads = []

    def on_record(record):
        loads.append((record["step"], json.loads((out / "config.json").read_text())["train"]["loop"]["seed"],
                      sb.load(out).config["checkpoint"]))

    monkeypatch.setattr(loop_module, "save_checkpoint", saving)
    sb.train(hybrid_config(wiki_data, out, steps=2, eval_every=0, seed=6), progress=False, overwrite=True,
             callbacks=[Recorder(on_record)])
    assert before == [old]  # the term fitted, the new run staged: the old model serves
    assert loads[0][:2] == (0, 6)  # the step-0 validation's record: the new run's term already serves
    assert loads[-1][1] == 6


def hashed_config(data, out, steps=6, **loop) -> sb.TrainConfig:
    """The millions recipe in small: hashed hybrid, coherent maps, the co-occurrence start."""
    return sb.TrainConfig(data=str(data.path), out=str(out), hash=sb.HashConfig(alpha=8, m=2, coherent=1), model=TINY,
                          head=head_config("hashed-hybrid", neighbours=20), val_fraction=0.05, init="cooccurrence",
                          loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=3, seed=0, checkpoint_every=1e9,
                                             **loop))


def test_the_term_is_served_before_the_networks_hash_maps_and_start(wiki_small, tmp_path):
    """A hashed hybrid with coherent maps and a start: the step-0 model (the term) is written before
    either is built (config.json says the setup is pending, the maps are random ones); before the first
    step the coherent maps replace them and the start is applied, so the finished folder holds the maps
    a direct build gives and config.json records both."""
    from superbloom.hashing.bloom import BloomHash
    from superbloom.training.train import PENDING

    out, seen = tmp_path / "m", {}
    coherent = BloomHash.build(wiki_small.n_ids, sb.HashConfig(alpha=8, m=2, coherent=1), wiki_small.train)

    def on_record(record):
        if record.get("step") == 0 and "val_rec@10" in record and not seen:
            seen["config"] = json.loads((out / "config.json").read_text())
            seen["buckets"] = BloomHash.load(out / "hashing.safetensors").buckets.copy()
            seen["preds"] = sb.load(out).predict_many(CONTEXTS[:1], k=5)

    sb.train(hashed_config(wiki_small, out), progress=False, callbacks=[Recorder(on_record)])
    assert PENDING in seen["config"] and "init" not in seen["config"]
    assert not np.array_equal(seen["buckets"], coherent.buckets)  # served under the quick random maps
    config = json.loads((out / "config.json").read_text())
    assert PENDING not in config and config["init"]["init"] == "cooccurrence" and "coherent_build" in config
    assert np.array_equal(BloomHash.load(out / "hashing.safetensors").buckets, coherent.buckets)
    assert json.loads((latest_checkpoint(out) / "state.json").read_text())["step"] == 6


def test_a_run_stopped_at_its_term_resumes_to_the_uninterrupted_run(wiki_small, tmp_path):
    """Stopped right after the step-0 checkpoint (the network's setup still pending), then resumed: the
    resume builds the maps and the start and trains to the same weights as one uninterrupted run."""
    from superbloom.storage.checkpoint import load_weights
    from superbloom.training.train import PENDING

    sb.train(hashed_config(wiki_small, tmp_path / "a"), progress=False)
    sb.train(hashed_config(wiki_small, tmp_path / "b", steps=0, time_budget=0.001), progress=False)
    assert PENDING in json.loads((tmp_path / "b" / "config.json").read_text())
    sb.train(hashed_config(wiki_small, tmp_path / "b"), progress=False, resume=True)
    assert PENDING not in json.loads((tmp_path / "b" / "config.json").read_text())
    a, b = sb.load(tmp_path / "a").model, sb.load(tmp_path / "b").model
    for m, path in ((a, tmp_path / "a"), (b, tmp_path / "b")):
        load_weights(m, latest_checkpoint(path))
    sa, sb_ = a.state_dict(), b.state_dict()
    assert sa.keys() == sb_.keys() and all(torch.equal(sa[k], sb_[k]) for k in sa)
