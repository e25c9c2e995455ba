"""Benchmark: AdapSGD on convex quadratics, where the answer is known (no learning rate anywhere).

    .venv/bin/python -m benchmarks.adapsgd_quadratics      # ~20 s on one core

f(x) = 1/2 x'Ax - b'x in float64, n = 10, full-batch gradients, weight decay 0, 1,000 steps.
Two families: axis-aligned (A diagonal, curvatures spread over the condition number) and dense
(A = Q diag(eigenvalues) Q' with a random rotation Q), for condition numbers 1, 10, 100 and the
eigenvalues scaled by 0.1, 1 and 10. Reports the relative error |x - x*| / |x*| at steps 10, 100,
300 and 1,000. A diagonal method is exact on the first family and only approximate on the second:
this shows how far. Results: benchmarks/results/adapsgd_quadratics.{json,md}.
"""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import torch

from benchmarks.machine import machine_info, write_results

from superbloom.training.adapsgd import AdapSGD

warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
CHECK = (10, 100, 300, 1000)


def errors(a: torch.Tensor, b: torch.Tensor, steps: int = 1000) -> list[float]:
    x_star = torch.linalg.solve(a, b)
    x = torch.nn.Parameter(torch.zeros_like(b))
    opt = AdapSGD([x], weight_decay=0.0)
    out = []
    for step in range(1, steps + 1):
        (0.5 * x @ a @ x - b @ x).backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step in CHECK:
            out.append(float((x.detach() - x_star).norm() / x_star.norm()))
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # no options; --help
    torch.set_num_threads(1)
    n, rows = 10, []
    for family in ("axis-aligned", "dense"):
        for cond in (1.0, 10.0, 100.0):
            for scale in (0.1, 1.0, 10.0):
                g = torch.Generator().manual_seed(0)
                eig = torch.logspace(0, torch.log10(torch.tensor(cond)).item(), n, dtype=torch.float64) * scale
                q = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]
                a = torch.diag(eig) if family == "axis-aligned" else (q * eig) @ q.T
                b = torch.randn(n, generator=g, dtype=torch.float64)
                rows.append({"family": family, "condition": cond, "eigenvalue_scale": scale,
                             "relative_error": dict(zip(map(str, CHECK), errors(a, b)))})
                print(rows[-1], flush=True)
    md = ["# AdapSGD on convex quadratics (n = 10, full batch, weight decay 0): relative error |x - x*| / |x*|", "",
          "| A | condition | eigenvalues x | " + " | ".join(f"step {c}" for c in CHECK) + " |",
          "|---|---|---|" + "---|" * len(CHECK)]
    for r in rows:
        md.append(f"| {r['family']} | {r['condition']:g} | {r['eigenvalue_scale']:g} | "
                  + " | ".join(f"{v:.1e}" for v in r["relative_error"].values()) + " |")
    md.append("")
    write_results(Path(__file__).parent / "results", "adapsgd_quadratics",
                  {"benchmark": "adapsgd_quadratics", "rows": rows, "machine": machine_info()}, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
