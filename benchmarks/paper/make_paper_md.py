"""Write benchmarks/PAPER.md from benchmarks/paper/PAPER.template.md and the result files, so the
numbers in PAPER.md are always the ones in benchmarks/results/paper/ (they cannot drift).

    .venv/bin/python -m benchmarks.paper.make_paper_md           # regenerate PAPER.md
    .venv/bin/python -m benchmarks.paper.make_paper_md --check   # fail if PAPER.md is stale, or if a
                                                                 # table fragment NAME.md is not what
                                                                 # NAME.markdown draws from NAME.json

Placeholders in the template:
  {{table:NAME}}                 the markdown fragment results/paper/NAME.md
  {{NAME|key|key|...}}           a value from results/paper/NAME.json, following keys; a key
                                 `[k=v,k=v]` picks the row of a list whose fields match
  {{verdict:NAME|key|...}}       for a paired difference {diff, lo, hi}: whether its 95% CI lies
                                 above 0, below 0, or contains it
  {{rtable:DIR/NAME}}            the markdown table (its rows only) of results/DIR/NAME.md, a result
                                 file of another benchmark (text/table5: the natural-language Tables 4/5)
  NAME may also be DIR/NAME in the value placeholders: results/DIR/NAME.json
  {{walltime}}                   the wall time of every script, as a table, and the total
Values print as: a paired difference "+0.012 [+0.003, +0.020]", a mean with its interval
{mean, lo, hi} "0.049 [0.037, 0.063]", a float with 3 decimals, an int
with thousands separators.
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

from .report import fragment

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "paper"
TEMPLATE = HERE / "PAPER.template.md"
OUT = HERE.parent / "PAPER.md"
SCRIPTS = [("t2_heads", "Table 2"), ("t3_layers", "Table 3"), ("t7_coherent", "Table 7"), ("t6_beam", "Table 6"),
           ("f3_frequency", "Figure 3")]


def load(name: str) -> dict:
    path = (RESULTS.parent if "/" in name else RESULTS) / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run python -m benchmarks.paper.{name} first")
    return json.loads(path.read_text())


def follow(obj, keys: list[str], where: str):
    for key in keys:
        m = re.fullmatch(r"\[(.*)\]", key)
        if m:
            want = dict(kv.split("=", 1) for kv in m.group(1).split(","))
            hits = [r for r in obj if all(str(r.get(k)) == v for k, v in want.items())]
            if len(hits) != 1:
                raise SystemExit(f"{where}: {len(hits)} rows match {key}")
            obj = hits[0]
        else:
            if key not in obj:
                raise SystemExit(f"{where}: no key {key!r} (have {list(obj)[:12]})")
            obj = obj[key]
    return obj


def render(v) -> str:
    if isinstance(v, dict) and {"diff", "lo", "hi"} <= set(v):
        return f"{v['diff']:+.3f} [{v['lo']:+.3f}, {v['hi']:+.3f}]"
    if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
        return f"{v['mean']:.3f} [{v['lo']:.3f}, {v['hi']:.3f}]"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def verdict(v: dict) -> str:
    if v["lo"] > 0:
        return "higher (95% CI above 0)"
    if v["hi"] < 0:
        return "lower (95% CI below 0)"
    return "no significant difference (95% CI contains 0)"


def walltime() -> str:
    lines = ["| script | paper item | wall time | note |", "|---|---|---|---|"]
    total = 0.0
    for name, item in SCRIPTS:
        r = load(name)
        total += r["wall_seconds"]
        note = r.get("reused_note", "")
        lines.append(f"| `benchmarks/paper/{name}.py` | {item} | {r['wall_seconds'] / 60:.1f} min | {note} |")
    lines.append(f"| **total** | | **{total / 60:.1f} min** | |")
    return "\n".join(lines)


def build() -> str:
    text = TEMPLATE.read_text()

    def sub(m: re.Match) -> str:
        body = m.group(1)
        if body == "walltime":
            return walltime()
        if body.startswith("rtable:"):
            path = RESULTS.parent / f"{body[7:]}.md"
            if not path.exists():
                raise SystemExit(f"{path} is missing")
            rows = [line for line in path.read_text().splitlines() if line.startswith("|")]
            if not rows:
                raise SystemExit(f"{path} has no markdown table")
            return "\n".join(rows)
        if body.startswith("table:"):
            name = body[6:]
            path = RESULTS / f"{name}.md"
            if not path.exists():
                raise SystemExit(f"{path} is missing: run python -m benchmarks.paper.{name} first")
            return path.read_text().rstrip("\n")
        is_verdict = body.startswith("verdict:")
        parts = (body[8:] if is_verdict else body).split("|")
        v = follow(load(parts[0]), parts[1:], body)
        return verdict(v) if is_verdict else render(v)

    return "<!-- generated by benchmarks/paper/make_paper_md.py from PAPER.template.md and results/paper/; " \
           "edit the template, not this file -->\n" + re.sub(r"\{\{(.+?)\}\}", sub, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if PAPER.md differs from what the results give")
    args = ap.parse_args()
    text = build()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            sys.exit(f"{OUT} is stale: run python -m benchmarks.paper.make_paper_md")
        for name, _ in SCRIPTS:
            if fragment(load(name), importlib.import_module(f"benchmarks.paper.{name}").markdown) != \
                    (RESULTS / f"{name}.md").read_text():
                sys.exit(f"{RESULTS / name}.md is not what benchmarks/paper/{name}.py draws from {name}.json")
        print(f"{OUT} and the table fragments match the result files")
        return
    OUT.write_text(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
