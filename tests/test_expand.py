"""Set expansion (superbloom/expand.py): argmax follows the model's top-1 step by step, sampling is
seeded and draws from softmax(score / T) over the top k, the vocabulary can run out; and the CLI."""
import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.cli import main
from superbloom.heads.ranking import Ranking
from superbloom.inference.expand import ExpandConfig, choose, expand
from superbloom.data.vocab import Vocab


class FixedScores:
    """A stand-in model: id i always scores -i (so the best free id is the smallest one)."""

    def __init__(self, n: int):
        self.vocab = Vocab([f"id{i}" for i in range(n)], np.ones(n, np.int64))
        self.calls = []

    def rank(self, contexts, k, decode):
        ctx = set(contexts[0].tolist())
        self.calls.append(sorted(ctx))
        free = [i for i in range(len(self.vocab)) if i not in ctx][:k]
        ids = torch.full((1, k), -1, dtype=torch.long)
        scores = torch.full((1, k), float("-inf"))
        ids[0, :len(free)] = torch.tensor(free, dtype=torch.long)
        scores[0, :len(free)] = -torch.tensor(free, dtype=torch.float)
        return Ranking(ids, scores, torch.ones(1, dtype=torch.bool), torch.full((1,), k))


def test_argmax_adds_the_top_prediction_of_the_growing_context(tiny_predictor):
    out = expand(tiny_predictor, ["Copenhagen", "Not_A_Page"], ExpandConfig(steps=4))
    assert out.seed == ["Copenhagen"] and out.unknown == ["Not_A_Page"] and len(out.added) == 4
    context = ["Copenhagen"]
    for a in out.added:
        top = tiny_predictor.predict(context, k=10).items[0]  # the same k (hence beam) as ExpandConfig
        assert a.id == top[0] and a.score == pytest.approx(top[1], abs=1e-5)
        context.append(a.id)
    assert len(set(context)) == len(context)  # never adds a context id or the same id twice


def test_each_added_id_joins_the_context_and_the_vocabulary_can_run_out():
    model = FixedScores(5)
    out = expand(model, ["id3"], ExpandConfig(steps=4, k=2))
    assert [a.id for a in out.added] == ["id0", "id1", "id2", "id4"]  # 4 free ids, then nothing is left
    assert [a.score for a in out.added] == [0.0, -1.0, -2.0, -4.0]
    assert model.calls[:3] == [[3], [0, 3], [0, 1, 3]]
    with pytest.raises(sb.ArgumentError, match="steps: at most 4 ids can be added") as e:  # it could never finish
        expand(model, ["id3"], ExpandConfig(steps=10, k=2))
    assert e.value.argument == "steps" and model.calls[3:] == [[0, 1, 2, 3]]  # refused before any ranking


def test_sampling_is_seeded_and_stays_in_the_top_k(tiny_predictor):
    cfg = ExpandConfig(steps=5, strategy="sample", temperature=5.0, k=8, seed=7)
    a = expand(tiny_predictor, ["Jazz"], cfg)
    assert a == expand(tiny_predictor, ["Jazz"], cfg)
    others = {tuple(x.id for x in expand(tiny_predictor, ["Jazz"], ExpandConfig(**{**cfg.__dict__, "seed": s})).added)
              for s in range(1, 6)}
    assert len(others | {tuple(x.id for x in a.added)}) > 1
    context = ["Jazz"]
    for x in a.added:
        assert x.id in [i for i, _ in tiny_predictor.predict(context, k=8).items]
        context.append(x.id)


def test_sampling_frequencies_follow_the_softmax():
    scores = np.array([0.0, -0.5, -1.0, -3.0])
    rng = np.random.default_rng(0)
    draws = np.bincount([choose(scores, "sample", 0.5, rng) for _ in range(20_000)], minlength=4) / 20_000
    p = np.exp(scores / 0.5) / np.exp(scores / 0.5).sum()
    assert np.abs(draws - p).max() < 0.015
    assert choose(scores, "sample", 1e-6, rng) == 0 == choose(scores, "argmax", 1.0, rng)


def test_bad_configs_and_seeds():
    with pytest.raises(ValueError, match="strategy"):
        ExpandConfig(strategy="beam")
    with pytest.raises(ValueError, match="temperature"):
        ExpandConfig(temperature=0.0)
    with pytest.raises(ValueError, match="steps"):
        ExpandConfig(steps=0)
    with pytest.raises(ValueError, match="none of the seed ids.*Nope"):
        expand(FixedScores(3), ["Nope"])


def test_cli_expand(tiny_model, capsys):
    assert main(["expand", str(tiny_model), "Copenhagen", "Nope", "--steps", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed"] == ["Copenhagen"] and out["unknown"] == ["Nope"] and len(out["added"]) == 3
    assert main(["expand", str(tiny_model), "No such page", "--steps", "2", "--strategy", "sample"]) == 2
    assert "none of the seed ids" in capsys.readouterr().err
    assert main(["expand", str(tiny_model), "Jazz", "--steps", "2"]) == 0
    text = capsys.readouterr().out
    assert "seed: Jazz" in text and "  2. " in text
