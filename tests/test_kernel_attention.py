"""Kernelized attention (superbloom/kernel_attention.py): exact against the O(T^2) formula, padding
masked exactly, permutation equivariant, multiplicities, chunked = unchunked, twice differentiable."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.model.attention import ATTENTIONS, kernel_attention, quadratic_features


def qkv(b=2, h=3, t=7, dh=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, t, dh, generator=g, dtype=dtype) for _ in range(3)]


def direct(q, k, v, w=None):
    """O(T^2) reference: weights (1 + q.k / sqrt(dh))^2 times the key weights, normalised per query."""
    a = (1 + q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5) ** 2  # (B, h, T, T)
    if w is not None:
        a = a * w[:, None, None, :]
    return (a @ v) / a.sum(-1, keepdim=True)


def test_feature_map_is_the_kernel():
    x, y = torch.randn(5, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    assert quadratic_features(x).shape == (5, 1 + 6 + 36)
    assert torch.allclose((quadratic_features(x) * quadratic_features(y)).sum(-1),
                          (1 + (x * y).sum(-1) / 6 ** 0.5) ** 2)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), t=st.integers(1, 9), dh=st.integers(1, 6),
       seed=st.integers(0, 1000), chunk=st.sampled_from([None, 1, 2, 4]))
def test_equals_the_direct_computation(b, h, t, dh, seed, chunk):
    q, k, v = qkv(b, h, t, dh, seed)
    keep = torch.rand(b, t, generator=torch.Generator().manual_seed(seed)) > 0.3
    keep[:, 0] = True
    out = kernel_attention(q, k, v, keep, chunk=chunk)
    assert out.shape == (b, h, t, dh)
    assert torch.allclose(out, direct(q, k, v, keep.double()), atol=1e-10)
    assert torch.allclose(kernel_attention(q, k, v, chunk=chunk), direct(q, k, v), atol=1e-10)


@pytest.mark.parametrize("chunk", [None, 3])
def test_padding_invariance(chunk):
    # append padded positions with random content: the real outputs must not change at all
    q, k, v = qkv(t=5)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    base = kernel_attention(q, k, v, keep, chunk=chunk)
    for seed in range(3):
        extra = qkv(t=4, seed=100 + seed)
        q2, k2, v2 = (torch.cat([a, e * 1e3], dim=2) for a, e in zip((q, k, v), extra))
        keep2 = torch.cat([keep, torch.zeros(2, 4, dtype=torch.bool)], dim=1)
        out = kernel_attention(q2, k2, v2, keep2[:, None, None, :], chunk=chunk)  # the encoder's (B,1,1,T)
        assert torch.allclose(out[:, :, :5][0], base[0], rtol=0, atol=1e-12)
        assert torch.allclose(out[1, :, :3], base[1, :, :3], rtol=0, atol=1e-12)
    # and equal to the set without its padding
    assert torch.allclose(base[1:, :, :3], kernel_attention(q[1:, :, :3], k[1:, :, :3], v[1:, :, :3]), atol=1e-12)


def test_permutation_equivariance():
    q, k, v = qkv(t=8)
    keep = torch.rand(2, 8, generator=torch.Generator().manual_seed(3)) > 0.3
    keep[:, 0] = True
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(4))
    out = kernel_attention(q, k, v, keep)
    outp = kernel_attention(q[:, :, perm], k[:, :, perm], v[:, :, perm], keep[:, perm])
    assert torch.allclose(outp, out[:, :, perm], atol=1e-12)


def test_multiplicities_count_like_copies():
    # the encoder passes log(c) as an additive float mask for an element standing for c copies
    q, k, v = qkv(b=1, t=4)
    mult = torch.tensor([[1.0, 3.0, 0.0, 2.0]])  # 0: padding
    out = kernel_attention(q, k, v, torch.log(mult)[:, None, None, :])
    idx = torch.tensor([0, 1, 1, 1, 3, 3])
    copies = kernel_attention(q[:, :, :4], k[:, :, idx], v[:, :, idx])  # queries: the 4 originals
    assert torch.allclose(out[:, :, [0, 1, 3]], copies[:, :, [0, 1, 3]], atol=1e-12)


def test_all_padded_row_is_zero_not_nan():
    q, k, v = qkv(b=2, t=3)
    keep = torch.tensor([[True, True, False], [False, False, False]])
    out = kernel_attention(q, k, v, keep)
    assert torch.isfinite(out).all() and (out[1] == 0).all()


def test_chunked_gradients_match_and_double_backward_works():
    q, k, v = (x.requires_grad_() for x in qkv(t=10))
    keep = torch.ones(2, 10, dtype=torch.bool)
    keep[1, 6:] = False
    grads = {}
    for chunk in (None, 3):
        out = kernel_attention(q, k, v, keep, chunk=chunk)
        g = torch.autograd.grad(out.pow(2).sum(), (q, k, v), create_graph=True)
        z = [torch.ones_like(x) for x in g]
        hz = torch.autograd.grad(g, (q, k, v), grad_outputs=z)  # what AdapSGD's Hutchinson step does
        grads[chunk] = [x.detach() for x in g] + list(hz)
    for a, b in zip(grads[None], grads[3]):
        assert torch.allclose(a, b, atol=1e-9)
    # no gradient reaches padded keys and values
    assert (grads[None][1][1, :, 6:] == 0).all() and (grads[None][2][1, :, 6:] == 0).all()


def test_same_signature_as_softmax_and_bad_masks():
    q, k, v = qkv(dtype=torch.float32)
    keep = torch.ones(2, 7, dtype=torch.bool)
    for fn in ATTENTIONS.values():
        assert fn(q, k, v, keep).shape == q.shape
        assert fn(q, k, v, keep[:, None, None, :]).shape == q.shape
    with pytest.raises(ValueError, match="per-key mask"):
        kernel_attention(q, k, v, torch.ones(2, 1, 7, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(B, T\) = \(2, 7\)"):
        kernel_attention(q, k, v, torch.ones(2, 6, dtype=torch.bool))


@pytest.mark.parametrize("dh,t", [(2, 9), (2, 40), (4, 7), (10, 30)])  # (2, 40): auto takes the linear form
def test_explicit_and_auto_forms_equal_the_linear_form_with_padding_and_multiplicities(dh, t):
    from superbloom.model.attention import kernel_attention_auto, kernel_attention_explicit

    q, k, v = qkv(b=3, h=2, t=t, dh=dh, seed=dh)
    keep = torch.ones(3, t, dtype=torch.bool)
    keep[1, t // 2:] = False
    keep[2] = False  # a fully padded row: 0, not NaN, in every form
    mult = torch.log(torch.tensor([1.0, 2.0, 3.0]).repeat(t)[:t]).expand(3, t).clone()  # additive log-weights
    for mask in (keep, keep[:, None, None, :], mult):
        ref = kernel_attention(q, k, v, mask)
        for fn in (kernel_attention_explicit, kernel_attention_auto):
            torch.testing.assert_close(fn(q, k, v, mask), ref, rtol=1e-9, atol=1e-10)
    assert torch.equal(kernel_attention_explicit(q, k, v, keep)[2], torch.zeros_like(q[2]))
