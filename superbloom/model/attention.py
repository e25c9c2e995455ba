"""Kernelized (linear) attention with a quadratic feature map: cost linear in the set size.

The blog's heads study ("It is Important to Use Your Heads") uses "a kernelized attention layer
with a quadratic kernel as the feature map" (its reference: the post "Linear Attention: Different
Kernels and Feature Representations"; Katharopoulos et al., "Transformers are RNNs", ICML 2020).
Softmax attention weighs key j for query i by exp(q_i.k_j / sqrt(dh)); here the weight is the
polynomial kernel

    kappa(q, k) = (1 + q.k / sqrt(dh))^2 = phi(q) . phi(k),   phi(x) = [1, sqrt(2) x', vec(x' x'^T)]

with x' = x / dh^(1/4), so phi has F = 1 + dh + dh^2 features. kappa >= 0, so the weights are a
proper (unnormalised) distribution, like softmax's. (The post that defines the blog's feature map
is not among the seeds; "quadratic kernel" is read in its usual sense, the degree-2 polynomial
kernel with offset 1. The offset keeps the weights from all vanishing when q is orthogonal to
every key.) Then

    out_i = sum_j w_j kappa(q_i, k_j) v_j / sum_j w_j kappa(q_i, k_j)
          = phi(q_i) S / phi(q_i) z,   S = sum_j w_j phi(k_j) v_j^T  (F, dh),  z = sum_j w_j phi(k_j)  (F,)

costs O(T F dh) instead of O(T^2 dh): cheaper than softmax once T exceeds about F (1,057 for
dh = 32), and its memory is linear in T. (Sharing S across queries is what makes it linear.)
phi is never built as one tensor: S and z come out of one matmul per block of phi (constant,
linear, quadratic) against [w v | w], and the read side likewise, which saves the memory passes of
concatenating and masking (B, h, T, F) tensors (the layer is memory-bound on CPU).

Padding is masked exactly: w_j = 0 for a padded key zeroes its features (the constant feature
too), so it adds nothing to S or z and real outputs do not depend on padded content at all
(tested as for softmax attention in tests/test_kernel_attention.py). The encoder's element
multiplicities (model.py passes log(c) as an additive float mask) become w_j = c: a key standing
for c identical ones counts c times, exactly as c copies would. Rows whose keys are all padded
get 0 / 0, returned as 0 (softmax attention returns NaN there; such rows are padding themselves).

`kernel_attention(q, k, v, keep)` takes q, k, v (B, h, T, dh) and keep as the encoder builds it,
(B, 1, 1, T) or (B, T), bool (True = real) or float (additive log-weights), and returns
(B, h, T, dh): a drop-in for F.scaled_dot_product_attention(q, k, v, attn_mask=keep). Attention
dropout does not apply (there is no weight matrix to drop from).

Memory: the quadratic blocks k' x k' and q' x q' are (B, h, T, dh^2) tensors, so with chunk=None
a layer holds a few of them for autograd (T = 4,096, B = 32, h = 4, dh = 32: 2.1 GB each). With
chunk=C the keys and queries are processed C at a time under activation checkpointing: the
features are recomputed in the backward pass and never exist for more than C positions at once
(same result, about one extra forward of compute).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def quadratic_features(x: torch.Tensor) -> torch.Tensor:
    """(..., dh) -> (..., 1 + dh + dh^2): phi(q) . phi(k) = (1 + q.k / sqrt(dh))^2."""
    dh = x.shape[-1]
    x = x * dh ** -0.25
    return torch.cat([torch.ones_like(x[..., :1]), 2 ** 0.5 * x, _outer(x)], dim=-1)


def key_weights(keep: torch.Tensor | None, b: int, t: int, dtype: torch.dtype) -> torch.Tensor | None:
    """keep (B, T) or (B, 1, 1, T), bool or additive float -> (B, 1, T, 1) weights w_j >= 0."""
    if keep is None:
        return None
    if keep.dim() == 4:
        if keep.shape[1:3] != (1, 1):
            raise ValueError(f"kernel attention takes a per-key mask (B, 1, 1, T); got {tuple(keep.shape)} "
                             "(a per-query mask cannot be factored through the kernel features)")
        keep = keep[:, 0, 0, :]
    if keep.shape != (b, t):
        raise ValueError(f"keep must be (B, T) = ({b}, {t}) or (B, 1, 1, T); got {tuple(keep.shape)}")
    w = keep.to(dtype) if keep.dtype == torch.bool else torch.exp(keep.to(dtype))  # exp(-inf) = 0
    return w[:, None, :, None]


def _outer(x: torch.Tensor) -> torch.Tensor:
    """(..., dh) -> (..., dh^2): the quadratic block of phi."""
    return (x[..., :, None] * x[..., None, :]).flatten(-2)


def _sums(k: torch.Tensor, v: torch.Tensor, w: torch.Tensor | None):
    """The keys' side, phi(k)^T [w v | w] by blocks of phi: constant (B, h, dh+1), linear
    (B, h, dh, dh+1), quadratic (B, h, dh^2, dh+1). The last column is the normaliser z."""
    k = k * k.shape[-1] ** -0.25
    vw = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # (B, h, T, dh+1)
    if w is not None:
        vw = vw * w
    return vw.sum(-2), k.transpose(-2, -1) @ vw, _outer(k).transpose(-2, -1) @ vw


def _read(q: torch.Tensor, s0: torch.Tensor, s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
    """phi(q) [S | z] = 1 s0 + 2 q' s1 + (q' x q') s2  (the sqrt(2) of phi's linear block squared)."""
    q = q * q.shape[-1] ** -0.25
    nd = s0[..., None, :] + 2 * (q @ s1) + _outer(q) @ s2  # (B, h, T, dh+1)
    num, den = nd[..., :-1], nd[..., -1:]
    return num / torch.where(den > 0, den, 1)  # all keys padded: 0 / 0 -> 0


def kernel_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None,
                     chunk: int | None = None) -> torch.Tensor:
    """q, k, v (B, h, T, dh), keep (B, T) | (B, 1, 1, T) -> (B, h, T, dh); see the module docstring."""
    b, _, t, _ = k.shape
    w = key_weights(keep, b, t, k.dtype)
    if chunk is None or t <= chunk:
        return _read(q, *_sums(k, v, w))
    sums = None
    for i in range(0, t, chunk):
        wi = None if w is None else w[:, :, i:i + chunk]
        part = checkpoint(_sums, k[:, :, i:i + chunk], v[:, :, i:i + chunk], wi, use_reentrant=False)
        sums = part if sums is None else [a + b for a, b in zip(sums, part)]
    return torch.cat([checkpoint(_read, q[:, :, i:i + chunk], *sums, use_reentrant=False)
                      for i in range(0, q.shape[2], chunk)], dim=2)


def kernel_attention_explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                              keep: torch.Tensor | None = None) -> torch.Tensor:
    """The same kernel attention in its O(T^2 dh) form: the (B, h, T, T) weights
    w_j (1 + q_i.k_j / sqrt(dh))^2 built explicitly, then normalised per query. Cheaper than the
    linear form while T is below about F = 1 + dh + dh^2 (one head of d = 100: F = 10,101, so at
    T = 256 about 40x fewer flops); equal to it up to rounding (tests/test_kernel_attention.py)."""
    b, _, t, dh = k.shape
    w = key_weights(keep, b, t, k.dtype)  # (B, 1, T, 1)
    s = (1 + q @ k.transpose(-2, -1) * dh ** -0.5) ** 2  # (B, h, T, T)
    if w is not None:
        s = s * w.transpose(-2, -1)  # (B, 1, 1, T): padded keys weigh 0
    den = s.sum(-1, keepdim=True)  # (B, h, T, 1)
    return (s @ v) / torch.where(den > 0, den, 1)  # all keys padded: 0 / 0 -> 0


def kernel_attention_auto(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          keep: torch.Tensor | None = None) -> torch.Tensor:
    """Kernel attention in whichever form costs fewer multiply-adds for this T and dh: explicit
    (about 2 T^2 dh) or linear (about 2 T F (dh + 1)). The heads study (benchmarks/heads_study.py)
    needs it: one head of d = 100 in the linear form took 11 s per training step at T = 256."""
    t, dh = k.shape[-2], k.shape[-1]
    if t * dh < (1 + dh + dh * dh) * (dh + 1):
        return kernel_attention_explicit(q, k, v, keep)
    return kernel_attention(q, k, v, keep)


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None,
                      dropout_p: float = 0.0) -> torch.Tensor:
    """The encoder's attention (model.py) with the same signature, for side-by-side use."""
    if keep is not None and keep.dim() == 2:
        keep = keep[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p)


# kernel-auto: the same kernel as "kernel", computed in its cheaper form for the set size at hand
ATTENTIONS = {"softmax": softmax_attention, "kernel": kernel_attention, "kernel-auto": kernel_attention_auto}
