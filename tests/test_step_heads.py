"""The hashed heads' training losses on the step's fast paths: the superbloom head's fused full softmax
is its log_softmax loss (value and gradients), and its sampled softmax over hashed tokens reads only
the rows of the batch's and the drawn tokens and tends to the full softmax as every token is drawn."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.heads import head_config
from superbloom.heads.rows import sparse_rows
from superbloom.model.encoder import build_model


def superbloom_model(n=300, alpha=6, m=2, **head):
    hashing = sb.BloomHash.build(n, sb.HashConfig(alpha=alpha, m=m))
    counts = np.random.default_rng(0).integers(1, 50, n)
    torch.manual_seed(0)
    model = build_model(sb.ModelConfig(d=8, heads=2, d_ff=16, layers=1), head_config("superbloom", **head), hashing,
                        counts)
    return hashing, model


def log_softmax_loss(head, hidden, targets, rows):
    """The superbloom loss as written before the fused kernel: log_softmax over every token, gathered."""
    local = head.buckets[:, targets].T.long()
    tok = local + torch.tensor(head.offsets)
    logp = F.log_softmax(hidden @ head.embedding.weight.T + head.bias, dim=-1)
    return -logp[rows[:, None], torch.arange(head.m)[None, :], tok].sum(1).mean()


@settings(max_examples=20, deadline=None)
@given(u=st.integers(1, 6), extra=st.integers(0, 6), m=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_fused_superbloom_loss_is_the_log_softmax_loss(u, extra, m, seed):
    """Targets sharing an element's row (merged [MASK]s) included: same loss, same gradients."""
    _, model = superbloom_model(m=m)
    head = model.head
    g = torch.Generator().manual_seed(seed)
    hidden0 = torch.randn(u, m, 8, generator=g)
    rows = torch.cat([torch.arange(u), torch.randint(0, u, (extra,), generator=g)])
    targets = torch.randint(0, 300, (len(rows),), generator=g)
    grads = []
    for fn in (head.loss, lambda h, t, r: log_softmax_loss(head, h, t, r)):
        model.zero_grad(set_to_none=True)
        hidden = hidden0.clone().requires_grad_()
        loss = fn(hidden, targets, rows)
        (2.0 * loss).backward()
        grads.append((loss.detach(), hidden.grad, head.embedding.weight.grad.clone(), head.bias.grad.clone()))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-5), (a, b)


def test_sampled_token_softmax_reads_only_its_rows_and_evaluates_on_the_full_softmax():
    hashing, model = superbloom_model(samples=16)
    head = model.head
    tables = sparse_rows(model)
    assert [id(t) for t in tables] == [id(head.embedding.weight), id(head.bias)]
    hidden = torch.randn(5, 2, 8, requires_grad=True)
    targets, rows = torch.tensor([3, 40, 41, 200, 7, 9]), torch.tensor([0, 1, 2, 3, 4, 4])
    model.train()
    torch.manual_seed(0)
    head.loss(hidden, targets, rows).backward()
    grad = head.embedding.weight.grad
    assert grad.is_sparse
    read = set(grad.coalesce().indices()[0].tolist())
    tok = set((head.buckets[:, targets].T.long() + torch.tensor(head.offsets)).reshape(-1).tolist())
    assert tok <= read and len(read) <= len(tok) + 16  # the targets' tokens and at most the 16 drawn
    assert min(read) >= hashing.n_special_tokens  # no special token is drawn
    model.eval()
    with torch.no_grad():
        assert torch.allclose(head.loss(hidden, targets, rows), log_softmax_loss(head, hidden, targets, rows))
    sparse_rows(model, False)


@pytest.mark.parametrize("proposal", ["uniform", "unigram"])
def test_sampled_token_softmax_tends_to_the_full_softmax(proposal):
    """Drawing many times the tokens there are, every token is drawn and the log-Q correction -> 0:
    the sampled loss is the full softmax over the hashed tokens (without the special tokens, which
    are never targets and never drawn)."""
    hashing, model = superbloom_model(samples=40_000, proposal=proposal)
    head = model.head
    hidden = torch.randn(4, 2, 8)
    targets, rows = torch.tensor([3, 40, 41, 200]), torch.arange(4)
    model.train()
    with torch.no_grad():
        torch.manual_seed(0)
        sampled = head.loss(hidden, targets, rows)
        lo = hashing.n_special_tokens
        tok = head.buckets[:, targets].T.long() + torch.tensor(head.offsets)
        logits = hidden @ head.embedding.weight[lo:].T + head.bias[lo:]
        full = -F.log_softmax(logits, -1)[rows[:, None], torch.arange(2)[None, :], tok - lo].sum(1).mean()
    assert float(sampled) == pytest.approx(float(full), rel=1e-3)


def test_token_proposal_counts_and_settings():
    from superbloom.heads.superbloom import token_counts

    hashing = sb.BloomHash.build(100, sb.HashConfig(alpha=5, m=2))
    counts = np.arange(100, dtype=np.float64)
    tc = token_counts(hashing, counts)
    assert tc.shape == (2 * hashing.n_buckets,) and tc[:hashing.n_buckets].sum() == tc[hashing.n_buckets:].sum() == counts.sum()
    with pytest.raises(ValueError, match="unigram token proposal is built from training counts"):
        token_counts(hashing, None)
    with pytest.raises(ValueError, match="label_smoothing and per_hash_softmax apply to the full softmax only"):
        head_config("superbloom", samples=8, label_smoothing=0.1)
    assert head_config("hashed-hybrid", samples=8).samples == 8  # the hashed hybrid's network trains the same way


def test_the_fused_loss_in_its_twice_differentiable_form_is_the_same_loss():
    """AdapSGD's Hessian steps differentiate the gradient: there the fused loss is autograd's own."""
    from superbloom.heads.full import differentiable_twice

    _, model = superbloom_model()
    head = model.head
    hidden = torch.randn(3, 2, 8, requires_grad=True)
    targets, rows = torch.tensor([1, 50, 99, 120]), torch.tensor([0, 1, 2, 2])
    fused = head.loss(hidden, targets, rows)
    with differentiable_twice():
        plain = head.loss(hidden, targets, rows)
    (g,) = torch.autograd.grad(plain, hidden, create_graph=True)
    assert g.requires_grad and torch.allclose(fused, plain, atol=1e-6)


def test_sampled_loss_per_element_is_the_loss_per_target():
    """Targets sharing an element: the negatives' logits once per element give the same loss."""
    from superbloom.heads.sampled import Proposal, sampled_softmax_loss

    g = torch.Generator().manual_seed(0)
    w, b, v = torch.randn(30, 4, generator=g), torch.randn(30, generator=g), torch.randn(3, 4, generator=g)
    rows, t = torch.tensor([0, 0, 1, 2, 2, 2]), torch.tensor([1, 5, 7, 9, 2, 2])
    prop = Proposal("uniform", 30)
    torch.manual_seed(0)
    neg = torch.unique(prop.sample(12))
    args = (w[t], b[t], t, w[neg], b[neg], neg, prop.log_inclusion(neg, 12))
    assert torch.allclose(sampled_softmax_loss(v, *args, rows=rows), sampled_softmax_loss(v[rows], *args), atol=1e-6)
