"""The sequence probe (benchmarks/sequence/history.py): each position's seen ids out of its sampled
negatives; with none of them drawn, the loss is the head's own sampled loss."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import superbloom as sb
from benchmarks.sequence import history
from superbloom.heads import head_config
from superbloom.model.batches import MaskConfig
from superbloom.model.sequence_batches import next_item_batch

from conftest import walking_sequences

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def test_a_drawn_id_is_masked_for_the_positions_that_have_seen_it():
    context = torch.tensor([[-2, 5, 7, 9], [-2, 7, -1, -1]])  # BOS, then the row's ids; -1 padding
    neg = torch.tensor([9, 7, 3])
    mask = history.seen_mask(context[[0, 0, 0, 1]], torch.tensor([0, 2, 3, 1]), neg, 10)
    assert mask.tolist() == [[False, False, False],  # at BOS: nothing seen
                             [False, True, False],  # 5, 7 seen
                             [True, True, False],  # 5, 7, 9 seen
                             [False, True, False]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist")
    data = walking_sequences(root, 80)
    cfg = sb.TrainConfig(data=str(data), out=str(root / "m"), objective="next-item",
                         head=head_config("hybrid", samples=8, term="transition"),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=12, causal=True),
                         mask=MaskConfig(n=12), loop=sb.LoopConfig(batch_size=8, steps=2, eval_every=0,
                                                                     checkpoint_every=1e9))
    sb.train(cfg, progress=False)
    return sb.load(root / "m"), sb.Dataset(data)


def test_with_nothing_seen_drawn_the_loss_is_the_heads_sampled_loss(trained, monkeypatch):
    predictor, data = trained
    model = predictor.model.train()
    batch = next_item_batch(data.train, np.arange(8), predictor.hashing, 12, np.random.default_rng(0))
    monkeypatch.setattr(history, "seen_mask", lambda c, p, neg, n: torch.zeros(len(c), len(neg), dtype=torch.bool))
    torch.manual_seed(3)
    ours = history.loss_without_history(model, batch)
    torch.manual_seed(3)
    theirs = model(batch)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    monkeypatch.undo()
    torch.manual_seed(3)
    assert history.loss_without_history(model, batch).item() <= ours.item() + 1e-6  # fewer negatives, lower loss


def test_the_block_swaps_the_training_loss_and_restores_it(trained):
    model = trained[0].model
    before = type(model).forward
    with history.history_excluded():
        assert type(model).forward is not before
    assert type(model).forward is before


def test_the_comparison_table_has_a_row_per_split_with_the_paired_difference():
    from benchmarks.sequence.history_compare import PARTS, table
    cell = {"base": 0.1, "xh": 0.12, "diff": {"diff": 0.02, "lo": 0.01, "hi": 0.03}}
    entry = {"dataset": "d", "users_valid": 1200, "users_test": 1300,
             **{f"{s}_{p}": cell for s in ("valid", "test") for p in PARTS}}
    rows = table([entry])[2:]
    assert [r.split(" | ")[1:3] for r in rows] == [["valid", "1,200"], ["test", "1,300"]]
    assert "| 0.1000 / 0.1200 | +0.0200 [+0.0100, +0.0300] |" in rows[0]


def test_the_proposal_probe_builds_the_hybrids_negatives_from_another_proposal():
    from superbloom.heads import hybrid
    from superbloom.heads.sampled import Proposal
    with history.proposal("uniform"):
        assert hybrid.Proposal("log_uniform", 50).kind == "uniform"
    with history.proposal("mixed"):  # Q the mean of uniform and log-uniform
        q = hybrid.Proposal("log_uniform", 50)
    plain = Proposal("log_uniform", 50)
    assert q.kind == "mixed" and torch.allclose(q.q, 0.5 * plain.q + 0.01) and float(q.cdf[-1]) == pytest.approx(1.0)
    assert hybrid.Proposal is Proposal and hybrid.Proposal("log_uniform", 50).kind == "log_uniform"


def test_the_pair_table_names_the_second_member_and_each_difference():
    from benchmarks.sequence.pair_ensemble import PLAIN, table
    d = {"diff": 0.01, "lo": 0.005, "hi": 0.015}
    entry = {"dataset": "beauty", "split": "valid", "first": PLAIN, "second": PLAIN + "-quniform", "users": 22363,
             "hr@10": {f"{w} {p}": 0.1 for w in ("first", "pair") for p in ("model", "network_only", "term_only")},
             "pair_minus_first": {"model": d, "network_only": d}, "pair_network_minus_its_term": d}
    row = table([entry])[2]
    assert row.startswith("| beauty | valid | `-quniform` | 22,363 | 0.1000 / 0.1000 | +0.0100 [+0.0050, +0.0150] |")


def test_the_ensemble_script_takes_lists_full_names_and_members():
    from benchmarks.sequence.pair_ensemble import PLAIN, settings, short
    seeded = PLAIN.replace("-1500s-", "-1500s-seed2-")
    assert settings("") == [PLAIN] and settings("-x2-plog_uniform+uniform/member-1,-quniform") == [
        PLAIN + "-x2-plog_uniform+uniform/member-1", PLAIN + "-quniform"]
    assert settings(seeded) == [seeded]
    assert short(PLAIN) == "(plain)" and short(PLAIN + "-quniform") == "-quniform"
    assert short(seeded + "-quniform") == "-seed2-quniform"
    assert short(",".join(settings("-x2-plog_uniform+uniform/member-0,-x2-plog_uniform+uniform/member-1"))) == \
        "-x2-plog_uniform+uniform/member-0 + -x2-plog_uniform+uniform/member-1"
