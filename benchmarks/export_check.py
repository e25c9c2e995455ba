"""The exported network against PyTorch on tiny models of the embedded Wikispeedia links: the scores'
largest difference and the decoded top-10 lists (inference/export.py; the library decodes both).

    .venv/bin/python -m benchmarks.export_check            # -> benchmarks/results/export_check.{json,md}
    .venv/bin/python -m benchmarks.export_check --report   # export_check.md again from its JSON

Two heads, trained for a few steps (what is checked is the export, not the model): the superbloom head
(alpha 8, m 2: its per-map log-probabilities, decoded by Algorithm 1 with its certificate) and the
hybrid head (unhashed: its network's log p of every id; the item-item term stays in the library).
Contexts: 512 held-out segments of the test sets (the evaluation's examples), in batches of 64.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import superbloom as sb
from benchmarks.machine import read_results, write_results
from superbloom.evaluation.protocols import make_examples
from superbloom.heads.decode_config import DecodeConfig
from superbloom.inference.export import Network, check_export, network_input

RESULTS = Path(__file__).resolve().parent / "results"
HEADS = {"superbloom (alpha 8, m 2)": dict(preset="none", head="superbloom", alpha=8, m=2),
         "hybrid (unhashed)": dict(preset="small")}


def check(name: str, settings: dict, data: Path, work: Path) -> dict:
    model = sb.fit(str(data), data_out=str(work / "data"), out=str(work / name.split()[0]), steps=30, d=32, heads=2,
                   d_ff=64, layers=2, batch_size=32, progress=False, **settings)
    ex = make_examples(sb.Dataset(work / "data").test, 32, 1, 0)
    ctx = ex.contexts[:512]
    path = model.export(work / f"{name.split()[0]}.ts")
    net, ref = torch.jit.load(str(path)), Network(model.model)
    diffs, same, t_ts, t_pt = [], 0, 0.0, 0.0
    for a in range(0, len(ctx), 64):
        inputs = network_input(model, ctx[a:a + 64])
        with torch.no_grad():
            t0 = time.perf_counter()
            got = net(*inputs)
            t_ts += time.perf_counter() - t0
            t0 = time.perf_counter()
            want = ref(*inputs)
            t_pt += time.perf_counter() - t0
        diffs.append(float((got - want).abs()[torch.isfinite(want)].max()))
        if got.dim() == 3:  # per-map log-probabilities: Algorithm 1 on each
            from superbloom.heads.beam import decode_topk
            head = model.model.head
            top = lambda s: decode_topk(s, head.buckets, head.inverse, 10, torch.from_numpy(ctx[a:a + 64]),  # noqa: E731
                                        DecodeConfig(exact=True)).ids
        else:
            def top(s):
                s = s.clone()
                rows = ctx[a:a + 64]
                r, c = np.nonzero(rows >= 0)
                s[torch.from_numpy(r), torch.from_numpy(rows[r, c])] = float("-inf")
                return s.topk(10).indices
        same += int((top(got) == top(want)).all(1).sum())
    return {"head": name, "contexts": len(ctx), "scores": list(got.shape[1:]), "max_abs_diff": max(diffs),
            "identical_top10": same, "check_export": check_export(model, path, ctx[:64]),
            "torchscript_ms_per_batch": round(1000 * t_ts / len(diffs), 2),
            "pytorch_ms_per_batch": round(1000 * t_pt / len(diffs), 2), "bytes": path.stat().st_size}


def why() -> str:
    """Why TorchScript and not ONNX: the paragraph of inference/export.py's docstring that says it (one source)."""
    from superbloom.inference import export

    para = next(p for p in export.__doc__.split("\n\n") if p.startswith("Why TorchScript"))
    return "**" + " ".join(para.split()).replace(": ", ":** ", 1)


def table(rows: list[dict]) -> list[str]:
    md = ["# The exported network (TorchScript) against PyTorch", "", " ".join(__doc__.split("\n\n")[2].split()), "",
          why(), "",
          "| head | scores per query | contexts | max abs diff | identical top-10 lists | TorchScript ms / 64 | PyTorch ms / 64 | file bytes |",
          "|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['head']} | {' x '.join(map(str, r['scores']))} | {r['contexts']} | {r['max_abs_diff']:.2e} | "
           f"{r['identical_top10']} / {r['contexts']} | {r['torchscript_ms_per_batch']} | {r['pytorch_ms_per_batch']} | "
           f"{r['bytes']:,} |" for r in rows]
    return md


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="only rewrite export_check.md from its JSON (no run)")
    if ap.parse_args(argv).report:
        done = read_results(RESULTS, "export_check")
        write_results(RESULTS, "export_check", done, table(done["rows"]), rewrite=True)
        return
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings in HEADS.items():
            rows.append(check(name, settings, sb.embedded_dataset(), Path(tmp) / name.split()[0]))
    md = table(rows)
    write_results(RESULTS, "export_check", {"rows": rows}, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
