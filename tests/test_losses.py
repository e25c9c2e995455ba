"""superbloom.setembed.losses and heads.losses (label smoothing) against the direct formulas, on hand-made tensors."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.heads.losses import smoothed_cross_entropy
from superbloom.setembed.losses import PAD, MemoryBank, _positive_log_mass, alignment, nca_log_mass, nca_loss, split_views, uniformity


def unit(*rows) -> torch.Tensor:
    return F.normalize(torch.tensor(rows, dtype=torch.float64), dim=1)


# ------------------------------------------------------------------- alignment and uniformity


def test_alignment_is_mean_squared_distance_of_normalised_pairs():
    x = torch.tensor([[3.0, 0.0], [0.0, 2.0]])
    y = torch.tensor([[0.0, 5.0], [0.0, 1.0]])
    # pair 0: (1,0) vs (0,1): squared distance 2; pair 1: identical directions: 0
    assert alignment(x, y).item() == pytest.approx(1.0)
    assert alignment(x, y, alpha=1).item() == pytest.approx(math.sqrt(2) / 2)
    assert alignment(x, x).item() == pytest.approx(0.0, abs=1e-7)


def test_alignment_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        alignment(torch.zeros(2, 3), torch.zeros(3, 3))


def direct_uniformity(x: torch.Tensor, t: float) -> float:
    x = F.normalize(x, dim=1)
    terms = [math.exp(-t * float(((x[i] - x[j]) ** 2).sum())) for i in range(len(x)) for j in range(i + 1, len(x))]
    return math.log(sum(terms) / len(terms))


@pytest.mark.parametrize("t", [2.0, 3.0])
def test_uniformity_matches_direct_formula_and_pdist(t):
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert uniformity(x, t).item() == pytest.approx(direct_uniformity(x, t), rel=1e-9)
    ref = torch.exp(-t * torch.pdist(F.normalize(x, dim=1), p=2) ** 2).mean().log()  # the blog's line
    assert uniformity(x, t).item() == pytest.approx(ref.item(), rel=1e-9)


def test_uniformity_extremes():
    collapsed = torch.ones(5, 3)
    assert uniformity(collapsed).item() == pytest.approx(0.0, abs=1e-6)  # the maximum
    antipodal = unit([1, 0], [-1, 0])  # squared distance 4
    assert uniformity(antipodal, t=2).item() == pytest.approx(-8.0)
    with pytest.raises(ValueError, match="B >= 2"):
        uniformity(torch.ones(1, 3))


def test_uniformity_gradient_is_finite_for_equal_rows():
    x = torch.ones(4, 3, requires_grad=True)
    uniformity(x).backward()
    assert torch.isfinite(x.grad).all()


def test_split_views_partitions_each_set():
    sets = torch.tensor([[5, 6, 7, 8, 9], [1, 2, PAD, PAD, PAD], [PAD, 3, PAD, 4, 10], [11, PAD, PAD, PAD, PAD]])
    v = split_views(sets, torch.Generator().manual_seed(0))
    for row, left, right, ok in zip(sets.tolist(), v.left.tolist(), v.right.tolist(), v.valid.tolist()):
        real = sorted(i for i in row if i != PAD)
        lreal, rreal = [i for i in left if i != PAD], [i for i in right if i != PAD]
        assert sorted(lreal + rreal) == real  # a partition
        assert len(lreal) == len(real) // 2 and len(rreal) == len(real) - len(real) // 2
        assert left[:len(lreal)] == lreal and right[:len(rreal)] == rreal  # padding at the end
        assert ok == (len(real) >= 2)
    assert v.left.shape == (4, 2) and v.right.shape == (4, 3)


def test_split_views_shuffles():
    sets = torch.arange(8).repeat(200, 1)  # (200, 8), the same set in every row
    v = split_views(sets, torch.Generator().manual_seed(0))
    lefts = {tuple(sorted(r)) for r in v.left.tolist()}
    assert len(lefts) > 20  # 70 possible halves; a fixed split would give 1
    freq = torch.bincount(v.left.flatten(), minlength=8).float() / 200  # each id is left half the time
    assert ((freq - 0.5).abs() < 0.15).all()


# ------------------------------------------------------------------------------------- NCA


@pytest.mark.parametrize("probs", [[0.98, 0.02, 0.02, 1e-9, 1e-9, 1e-9],
                                   [0.33, 0.33, 0.33, 1e-9, 1e-9, 1e-9],
                                   [0.50, 0.25, 0.25, 1e-9, 1e-9, 1e-9]])
def test_blog_numeric_example_gives_zero_loss(probs):
    """"Learning Local Neighborhoods With NCA": three positives, three negatives; whether the mass
    sits on one positive or is spread over the three, the loss is ~ 0."""
    scores = torch.tensor([probs], dtype=torch.float64).log()  # softmax(log p) = p (renormalised)
    positive = torch.tensor([[True, True, True, False, False, False]])
    loss = -_positive_log_mass(scores, positive)
    assert loss.item() == pytest.approx(0.0, abs=1e-8)
    wrong = -_positive_log_mass(scores, ~positive)  # the same masses on the negatives: a large loss
    assert wrong.item() > 10


def direct_nca(z, labels, bank_vectors=None, bank_labels=None, index=(), temperature=1.0):
    """Per query, a loop: candidates = other batch rows + bank rows not in index."""
    z = F.normalize(z, dim=1)
    out = []
    for i in range(len(z)):
        cands = [(z[j], labels[j]) for j in range(len(z)) if j != i]
        if bank_vectors is not None:
            cands += [(bank_vectors[r], bank_labels[r]) for r in range(len(bank_vectors)) if r not in index]
        w = [math.exp(float(z[i] @ v) / temperature) for v, _ in cands]
        pos = sum(wk for wk, (_, lab) in zip(w, cands) if bool((lab & labels[i]).any()))
        out.append(math.log(pos / sum(w)) if pos > 0 else -math.inf)
    return out


def test_nca_batch_only_matches_loop():
    z = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.tensor([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]], dtype=torch.bool)
    got = nca_log_mass(z, labels, temperature=0.5)
    assert got.tolist() == pytest.approx(direct_nca(z, labels, temperature=0.5), rel=1e-9)


def test_nca_with_bank_excludes_the_batch_rows_and_counts_shared_labels():
    g = torch.Generator().manual_seed(3)
    bank_labels = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 1], [1, 0], [0, 1], [1, 0]], dtype=torch.bool)
    bank = MemoryBank.random(bank_labels, d=4, generator=g).double()
    index = torch.tensor([4, 1, 2])  # the batch holds bank rows 4, 1, 2
    z = torch.randn(3, 4, generator=g, dtype=torch.float64)
    labels = bank_labels[index]
    got = nca_log_mass(z, labels, bank, index, temperature=0.2)
    want = direct_nca(z, labels, bank.vectors, bank.labels, index.tolist(), temperature=0.2)
    assert got.tolist() == pytest.approx(want, rel=1e-9)
    # the batch's stale bank copies are excluded: moving them changes nothing
    bank.vectors[index] = F.normalize(torch.randn(3, 4, generator=g, dtype=torch.float64), dim=1)
    assert nca_log_mass(z, labels, bank, index, temperature=0.2).tolist() == pytest.approx(want, rel=1e-9)


def test_nca_gradient_flows_to_batch_not_bank():
    labels = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=torch.bool)
    bank = MemoryBank.random(labels, d=3, generator=torch.Generator().manual_seed(0))
    z = torch.randn(2, 3, requires_grad=True)
    loss = nca_loss(z, labels[:2], bank, torch.tensor([0, 1]), temperature=0.1)
    loss.backward()
    assert z.grad is not None and torch.isfinite(z.grad).all() and z.grad.abs().sum() > 0
    assert not bank.vectors.requires_grad


def test_nca_query_without_positive_is_left_out():
    z = unit([1, 0], [0, 1], [1, 1])
    labels = torch.tensor([[1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=torch.bool)  # row 2: label nobody shares
    log_mass = nca_log_mass(z, labels, temperature=1.0)
    assert log_mass[2] == -math.inf and torch.isfinite(log_mass[:2]).all()
    assert nca_loss(z, labels, temperature=1.0).item() == pytest.approx(-log_mass[:2].mean().item())
    alone = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.bool)
    zz = z.clone().requires_grad_()
    loss = nca_loss(zz, alone)
    assert loss.item() == 0.0 and loss.requires_grad


def test_nca_is_low_when_classes_are_clustered():
    labels = torch.tensor([[1, 0]] * 3 + [[0, 1]] * 3, dtype=torch.bool)
    good = unit([1, 0.01], [1, 0], [1, -0.01], [-1, 0.01], [-1, 0], [-1, -0.01])
    bad = unit([1, 0], [-1, 0], [1, 0.01], [-1, 0.01], [1, -0.01], [-1, -0.01])
    assert nca_loss(good, labels, temperature=0.1).item() < 1e-6
    assert nca_loss(bad, labels, temperature=0.1).item() > 1.0


def test_memory_bank_momentum_update():
    labels = torch.zeros(4, 1, dtype=torch.bool)
    bank = MemoryBank(torch.tensor([[1.0, 0], [0, 1], [1, 1], [3, 0]]), labels, momentum=0.75)
    assert torch.allclose(bank.vectors.norm(dim=1), torch.ones(4))  # normalised on the way in
    bank.update(torch.tensor([0, 2]), torch.tensor([[0.0, 1.0], [2.0, 2.0]]))
    assert torch.equal(bank.vectors[0], torch.tensor([1.0, 0.0]))  # deferred until flush
    bank.flush()
    want0 = F.normalize(torch.tensor([0.75, 0.25]), dim=0)  # 0.75 (1, 0) + 0.25 (0, 1), renormalised
    assert torch.allclose(bank.vectors[0], want0)
    assert torch.allclose(bank.vectors[2], F.normalize(torch.tensor([1.0, 1.0]), dim=0))  # 0.75 u + 0.25 * 2 * sqrt2 u
    assert torch.equal(bank.vectors[[1, 3]], torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # untouched
    with pytest.raises(ValueError, match="repeated"):
        bank.update(torch.tensor([1, 1]), torch.ones(2, 2))
    bank.update(torch.tensor([1]), torch.tensor([[1.0, 0.0]]))
    state = bank.state_dict()  # flushes first
    assert set(state) == {"vectors", "labels"}
    assert torch.allclose(state["vectors"][1], F.normalize(torch.tensor([0.25, 0.75]), dim=0))


def test_memory_bank_update_between_loss_and_backward():
    """An objective's forward computes the loss and updates the bank; the loop then calls backward.
    The bank the loss read must be intact at backward, and the next loss must see the update."""
    labels = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=torch.bool)
    bank = MemoryBank.random(labels, d=3, generator=torch.Generator().manual_seed(0))
    idx = torch.tensor([0, 1])
    z = torch.randn(2, 3, requires_grad=True)
    loss = nca_loss(z, labels[idx], bank, idx, temperature=0.1)
    bank.update(idx, z)
    loss.backward()  # no "modified by an inplace operation" error
    assert torch.isfinite(z.grad).all()
    before = bank.vectors.clone()
    nca_loss(z, labels[torch.tensor([2, 3])], bank, torch.tensor([2, 3]))  # flushes the queued step
    assert not torch.allclose(bank.vectors[:2], before[:2]) and torch.equal(bank.vectors[2:], before[2:])


def test_memory_bank_rejects_bad_shapes():
    with pytest.raises(ValueError, match="one N"):
        MemoryBank(torch.ones(3, 2), torch.ones(4, 1))
    with pytest.raises(ValueError, match="momentum"):
        MemoryBank(torch.ones(3, 2), torch.ones(3, 1), momentum=1.0)


# ------------------------------------------------------------------------- label smoothing


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 5), c=st.integers(2, 6), eps=st.floats(0.0, 0.5), seed=st.integers(0, 1000))
def test_smoothed_cross_entropy_matches_torch(b, c, eps, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, c, generator=g, dtype=torch.float64) * 3
    targets = torch.randint(c, (b,), generator=g)
    want = F.cross_entropy(logits, targets, label_smoothing=eps)
    assert smoothed_cross_entropy(logits, targets, eps).item() == pytest.approx(want.item(), rel=1e-9)
    soft = torch.softmax(torch.randn(b, c, generator=g, dtype=torch.float64), 1)  # probability targets
    want = F.cross_entropy(logits, soft, label_smoothing=eps)
    assert smoothed_cross_entropy(logits, soft, eps).item() == pytest.approx(want.item(), rel=1e-9)


def test_smoothed_cross_entropy_direct_formula():
    logits = torch.tensor([[2.0, 0.0, -1.0]])
    p = torch.softmax(logits, 1)[0]
    eps = 0.1
    q = torch.tensor([1 - eps + eps / 3, eps / 3, eps / 3])  # target class 0
    want = -(q * p.log()).sum()
    assert smoothed_cross_entropy(logits, torch.tensor([0]), eps).item() == pytest.approx(want.item(), rel=1e-6)
    # eps = 0 is the plain cross-entropy
    assert smoothed_cross_entropy(logits, torch.tensor([0]), 0.0).item() == pytest.approx(-p[0].log().item())
    with pytest.raises(ValueError, match="eps"):
        smoothed_cross_entropy(logits, torch.tensor([0]), 1.0)
