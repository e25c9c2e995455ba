"""AdapSGD: SGD without a learning rate, from running averages of the gradient, the squared gradient
and a Hutchinson estimate of the Hessian diagonal (blog posts "AdapSGD: No Learning Rates + Hessian
Trace" and "AdapSGD: Twenty Nine Days Later"; Schaul, Zhang & LeCun, "No more pesky learning
rates", ICML 2013 (vSGD); Yao et al., "ADAHESSIAN", arXiv:2006.00719 (Hutchinson every few steps)).

Per parameter element, with t = 1 / mem (vSGD's adaptive memory):

    g      = grad(loss) + weight_decay * param      L2 decay (0.1), then the whole model's
             clipped to norm max_grad_norm (= 1)     gradient clipped together
    avg_g  = (1 - t) avg_g  + t g
    avg_g2 = (1 - t) avg_g2 + t g^2
    avg_h  = (1 - t) avg_h  + t (|z * (H z)| + wd)  every `hessian_every` (= 5) steps only; z
                                                    Rademacher, H z by a second backward pass; the
                                                    L2 term's curvature wd is added exactly
    x      = avg_g^2 / (avg_h * avg_g2)             vSGD's per-element optimal rate
    rate   = x / sqrt(1 + x^2)                      the blog's bound: ~x when small, always < 1
    mem    = (1 - avg_g^2 / avg_g2) mem + 1         long memory when the gradient is noisy
    param -= rate * g

Choices where the posts leave room, and why:
- The blog's pseudo-code writes the rate as avg_g^2 / (avg_g2 + avg_h); that is at most 1 already,
  which contradicts its follow-up post (the rate "is not bounded, very large values are possible",
  hence the bound). We follow vSGD's product form, whose ideal value on a quadratic is 1/curvature
  (a diagonal Newton step) and which is unbounded where the curvature is small.
- mem starts at 2, not at the blog's 1: with mem = 1 the first update sets avg_g = g and avg_g2 =
  g^2 exactly, so avg_g^2 / avg_g2 = 1 and mem = 1 forever; the averages then never average and the
  rate never reacts to gradient noise (dense quadratic, n = 10, condition 10, eigenvalues 1-10:
  relative error 13% / 12% / 23% after 100 / 300 / 1,000 steps with mem0 = 1, 0.2% / 2.3% / 0.4%
  with mem0 = 2).
- Weight decay is L2 in the gradient, before clipping, rather than decoupled: with decoupled decay,
  p -= rate * (clip(g) + wd p), the fixed point is clip(g) = -wd p, which is not the regularised
  optimum once its gradient norm exceeds the clip (measured during development: stalled at 20%
  relative error on a diagonal quadratic whose regularised optimum has a gradient norm above 1).
  Coupled, the fixed point is exactly grad + wd p = 0.

Elements whose gradient is exactly zero (embedding rows absent from the batch) are left alone:
their averages, memory and weights do not move, like a lazy sparse optimizer, so a rare row is not
both decayed and forgotten. An element takes no step before a Hessian step has seen it (avg_h
holds -1 until then): without a curvature estimate its rate would jump to the bound, 1; its first
estimate is taken as is, later ones are averaged.

State: exactly four tensors per parameter (avg_g, avg_g2, avg_h, mem; the blog's "four state
variables of the same shape"); the step count lives in each param group,
so `state_dict()` holds only tensors and JSON-able scalars (checkpoint.py stores it as-is). The
Rademacher vectors come from a generator reseeded with (seed, step) at each Hessian step, so a
resumed run draws the same ones without storing generator state.

Known limit (measured: benchmarks/adapsgd_quadratics.py, results/adapsgd_quadratics.md): like any
diagonal method with rates near 1/curvature it is at home on axis-aligned problems (n = 10
quadratics, condition up to 100: relative error 1e-8 to 1e-15 after 1,000 steps; logistic
regression in tests/test_adapsgd.py), but on dense, randomly rotated quadratics the per-element
step overshoots along coupled directions and Hutchinson's |z * Hz| is a noisy stand-in for the
diagonal: condition 10-100 reached only 2e-3 to 2e-2, and with eigenvalues x10 it drifted back
to an error of 1.0-2.1 (clipping at 1 keeps such a drift slow, not away).

Weight decay (measured: benchmarks/adapsgd_bench.py, results/adapsgd.md). The recipe's 0.1 is the
default, as the posts prescribe, but on the Wikispeedia id model (d = 128, 2 layers, mean loss over
targets) it is far too strong: training stalled at a held-out loss of 13.40 after 400 steps
(AdamW, the project's recipe: 11.52), and in a smaller check (d = 32, 150 steps) the mean |w| of
the attention's qkv weights fell to 2.8e-5 with it, against 0.017 without. With 0.01: 12.69;
with 0: 11.80, ahead of AdamW at steps 100-200 (12.43 vs 12.80, 12.12 vs 12.14). The posts'
models had ~10K parameters; pass weight_decay=0 (or ~0.01) for ours.

Integration contract for a training loop (one loop for every optimizer):

    for batch in batches:
        with opt.forward_context():          # math SDPA on Hessian steps, else a no-op
            loss = model(batch)
        loss.backward(create_graph=opt.create_graph)
        opt.step()                           # clips, estimates H z from the graph, updates
        opt.zero_grad(set_to_none=True)

`create_graph` is True on the steps whose `step()` estimates the Hessian (steps 0, 5, 10, ...;
the training loop asks because its registry entry says so: optim.OptimizerSpec.second_order). `step()` then computes
H z = d(sum(grad * z)) / d(params) from the gradients' graph itself and detaches the gradients
(breaking the param <-> grad reference cycle that create_graph makes). It raises if the graph
is missing on such a step, naming the fix. `forward_context()` is needed because PyTorch's fused
scaled_dot_product_attention kernels (CPU flash attention included) have no double backward:
"derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented";
inside it SDPA uses the math backend (same results, more memory). The loop should not clip
gradients itself (clipping to norm 1 twice is harmless, but the optimizer's clip is the one the
recipe means). No learning-rate schedule applies: there is no `lr` in the param groups.
"""
from __future__ import annotations

import contextlib

import torch
from torch.optim import Optimizer

INIT_MEM = 2.0  # initial memory (see the docstring: 1 would freeze it)
STATE = ("avg_g", "avg_g2", "avg_h", "mem")


class AdapSGD(Optimizer):
    def __init__(self, params, weight_decay: float = 0.1, hessian_every: int = 5, max_grad_norm: float = 1.0,
                 seed: int = 0):
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if hessian_every < 1:
            raise ValueError(f"hessian_every must be >= 1, got {hessian_every}")
        if max_grad_norm is not None and max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0 (or None: no clipping), got {max_grad_norm}")
        defaults = dict(weight_decay=weight_decay, hessian_every=hessian_every, max_grad_norm=max_grad_norm,
                        seed=seed, step=0)
        super().__init__(params, defaults)

    # ------------------------------------------------------------------ the loop's contract

    @property
    def steps_done(self) -> int:
        return int(self.param_groups[0]["step"])

    @property
    def create_graph(self) -> bool:
        """True when the next `step()` estimates the Hessian: call loss.backward(create_graph=True)."""
        return self.steps_done % self.param_groups[0]["hessian_every"] == 0

    def forward_context(self):
        """Wrap the forward pass: on Hessian steps SDPA must use its twice-differentiable math backend,
        and the heads' fused softmax its autograd form (heads/full.py: differentiable_twice)."""
        if not self.create_graph:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        from ..heads.full import differentiable_twice

        stack = contextlib.ExitStack()
        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        stack.enter_context(differentiable_twice())
        return stack

    # ------------------------------------------------------------------ the update

    def _hessian_diag(self, params: list[torch.Tensor], step: int) -> list[torch.Tensor]:
        """z * (H z) for each parameter (Hutchinson: its mean over Rademacher z is diag H)."""
        grads = [p.grad for p in params]
        if not all(g.requires_grad for g in grads):
            raise RuntimeError(
                f"AdapSGD step {step} estimates the Hessian but the gradients carry no graph: call "
                "loss.backward(create_graph=optimizer.create_graph) (and run the forward pass inside "
                "optimizer.forward_context()) before optimizer.step()")
        seed = int(self.param_groups[0]["seed"])
        zs = []
        gens: dict = {}
        for p in params:
            gen = gens.get(p.device)
            if gen is None:
                gen = gens[p.device] = torch.Generator(p.device).manual_seed(seed * 1_000_003 + step)
            zs.append(torch.randint(0, 2, p.shape, generator=gen, device=p.device).to(p.dtype).mul_(2).sub_(1))
        live = [i for i, g in enumerate(grads) if g.grad_fn is not None]  # constant gradients: H z = 0
        with torch.enable_grad():
            hz = torch.autograd.grad([grads[i] for i in live], params, grad_outputs=[zs[i] for i in live],
                                     allow_unused=True)
        return [torch.zeros_like(p) if h is None else z * h for p, z, h in zip(params, zs, hz)]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not params:
            return loss
        step = self.steps_done
        hessian = self.create_graph
        hdiag = dict(zip(map(id, params), self._hessian_diag(params, step))) if hessian else {}
        for p in params:  # break the param <-> grad cycle of create_graph, free the graph
            p.grad = p.grad.detach()
        seen_by_loss = {}  # lazy updates are decided by the loss gradient alone, before decay joins it
        for group in self.param_groups:  # L2 weight decay joins the gradient before clipping
            for p in group["params"]:
                if p.grad is not None and group["weight_decay"]:
                    seen_by_loss[p] = p.grad != 0
                    p.grad.add_(p, alpha=group["weight_decay"])
        clip = self.param_groups[0]["max_grad_norm"]
        scale = 1.0
        if clip is not None:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
            scale = (clip / (norm + 1e-6)).clamp(max=1.0)  # 0-dim tensor: no host sync
        for group in self.param_groups:
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                seen = seen_by_loss.get(p)
                if not st:
                    st["avg_g"], st["avg_g2"] = torch.zeros_like(p), torch.zeros_like(p)
                    st["avg_h"] = torch.full_like(p, -1.0)  # -1: no curvature estimate yet
                    st["mem"] = torch.full_like(p, INIT_MEM)
                g = p.grad * scale  # clipped gradient of loss + wd/2 |p|^2
                if seen is None:
                    seen = g != 0  # untouched elements keep state and weight
                t = st["mem"].reciprocal()
                avg_g = torch.where(seen, torch.lerp(st["avg_g"], g, t), st["avg_g"])
                avg_g2 = torch.where(seen, torch.lerp(st["avg_g2"], g * g, t), st["avg_g2"])
                if hessian:  # the L2 term adds exactly wd to the Hessian diagonal
                    h = hdiag[id(p)].abs() + wd
                    new = torch.where(st["avg_h"] < 0, h, torch.lerp(st["avg_h"], h, t))  # first estimate: as is
                    st["avg_h"].copy_(torch.where(seen, new, st["avg_h"]))
                g_sq = avg_g * avg_g
                tiny = torch.finfo(p.dtype).tiny
                x = (g_sq / (st["avg_h"] * avg_g2).clamp(min=tiny)).clamp(max=1e4)  # 1e4: rate = 1 - 5e-9
                rate = torch.where(seen & (st["avg_h"] >= 0), x * torch.rsqrt(1 + x * x), 0)
                ratio = (g_sq / avg_g2.clamp(min=tiny)).clamp(0, 1)
                st["mem"].copy_(torch.where(seen, (1 - ratio) * st["mem"] + 1, st["mem"]))
                st["avg_g"].copy_(avg_g)
                st["avg_g2"].copy_(avg_g2)
                p.sub_(rate * g)
            group["step"] = step + 1
        return loss
