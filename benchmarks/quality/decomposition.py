"""What the network adds (issue 33): the hybrid, its network alone and its term alone side by side,
and where the network beats the term, from the harness's saved ranks.

    python -m benchmarks.quality.decomposition                      # the summary table
    python -m benchmarks.quality.decomposition --diagnose lastfm    # + the diagnosis of one dataset
    python -m benchmarks.quality.decomposition --terms lastfm,wikispeedia   # the term alone, no training

Reads benchmarks/results/NAME.json (rows of `benchmarks.quality.harness --name NAME`, default
quality_decomposition) and writes NAME_summary.md and .json: one row per hybrid (dataset x split x
recipe x steps) with rec@10 of the hybrid, its network alone and its term alone, EASE, and the paired
95% intervals of hybrid - term alone, hybrid - EASE and network alone - EASE, co-occurrence beside them.

The diagnosis (`--diagnose DATASET`) re-draws the harness's examples (a function of the dataset and
seed only) and reads the model's saved ranks (runs/quality/models/, ranks.npy and
ranks.<variant>.npy) to split the examples by the target's training popularity (deciles of the
examples, by how many training sets hold the target) and by the context size (ids in the example's
context), and gives, per bucket, rec@10 of each part and the paired interval of network alone -
term alone and of hybrid - term alone, whole held-out sets resampled. It is printed and written to
NAME_diagnosis_DATASET.json.

`--terms A,B` trains nothing: on the harness's test examples it ranks with the hybrid's set term
alone (`ease-term`: EASE's 200 largest weights per id, decay 1, as the hybrid's term auto up to
25,000 ids; `cooc-term` beyond) beside EASE and co-occurrence, with paired intervals, into
NAME_terms.json (one entry per dataset), and gives the committed hybrid of results/quality.json
(same examples, its own run: unpaired) beside it.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.machine import load_average, machine_info, read_results, write_results
from benchmarks.paper.report import paired
from benchmarks.quality import harness
from superbloom.evaluation.metrics import hits_at

RESULTS = harness.RESULTS
CONTEXT_BUCKETS = ((1, 1), (2, 3), (4, 7), (8, 15), (16, 31))  # ids in the context, inclusive


def _ci(d: dict | None) -> str:
    return f"{d['diff']:+.4f} [{d['lo']:+.3f}, {d['hi']:+.3f}]" if d else "-"


def _above(d: dict | None) -> str:
    return "-" if not d else "yes" if d["lo"] > 0 else "no (below)" if d["hi"] < 0 else "no (tie)"


def summary_rows(rows: list[dict]) -> list[dict]:
    """One entry per hybrid model row: its rec@10, its variants' and EASE's, and the paired intervals."""
    by = {(r["dataset"], r["split"], r["method"], r.get("recipe"), r.get("steps")): r for r in rows}
    out = []
    for r in rows:
        if r["method"] != "superbloom" or "vs_network_only_rec@10" not in r:  # the hybrid's row, not its variants'
            continue
        key = (r["dataset"], r["split"], "superbloom")
        net = by.get((*key, f"{r['recipe']} network only", r["steps"]), {})
        term = by.get((*key, f"{r['recipe']} term only", r["steps"]), {})
        ease = by.get((r["dataset"], r["split"], "ease", None, None), {})
        cooc = by.get((r["dataset"], r["split"], "cooccurrence", None, None), {})
        out.append({"dataset": r["dataset"], "split": r["split"], "recipe": r["recipe"], "steps": r["steps"],
                    "examples": r["examples"], "item_term": r.get("item_term"), "item_mix": r.get("item_mix"),
                    "hybrid": r["rec@10"], "network": net.get("rec@10"), "term": term.get("rec@10"),
                    "ease": ease.get("rec@10"), "ease_skipped": ease.get("skipped"), "cooccurrence": cooc.get("rec@10"),
                    "hybrid_vs_term": r["vs_term_only_rec@10"], "hybrid_vs_ease": r.get("vs_ease_rec@10"),
                    "network_vs_ease": net.get("vs_ease_rec@10"), "network_vs_term": net.get("vs_term_only_rec@10"),
                    "hybrid_vs_cooccurrence": r.get("vs_cooccurrence_rec@10"),
                    "train_seconds": r.get("train_seconds"), "load": (r.get("load_before"), r.get("load_after"))})
    return out


def summary_table(entries: list[dict]) -> list[str]:
    cols = ["dataset", "split", "recipe (term, mix)", "steps", "examples", "hybrid rec@10", "network alone",
            "term alone", "EASE", "co-occurrence", "hybrid - term alone [95% CI]", "above 0?", "hybrid - EASE [95% CI]",
            "network alone - EASE [95% CI]", "network alone - term alone [95% CI]", "train s (load before/after)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    f = lambda v: f"{v:.4f}" if v is not None else "-"  # noqa: E731
    for e in entries:
        lines.append("| " + " | ".join([
            e["dataset"], e["split"], f"{e['recipe']} ({e['item_term']}, {e['item_mix']:g})", str(e["steps"]),
            f"{e['examples']:,}", f(e["hybrid"]), f(e["network"]), f(e["term"]),
            f(e["ease"]) if e["ease"] is not None else (e["ease_skipped"] or "-"), f(e["cooccurrence"]),
            _ci(e["hybrid_vs_term"]), _above(e["hybrid_vs_term"]), _ci(e["hybrid_vs_ease"]),
            _ci(e["network_vs_ease"]), _ci(e["network_vs_term"]),
            f"{e['train_seconds']:.0f} ({e['load'][0]:.1f}/{e['load'][1]:.1f})"]) + " |")
    return lines


def render(name: str) -> None:
    """NAME_summary.json and NAME_summary.md from NAME.json: one entry (a table row) per hybrid."""
    saved = read_results(RESULTS, name)
    entries = summary_rows(saved["rows"])
    md = ["# What the network adds: the hybrid, its network alone and its term alone", "",
          f"`python -m benchmarks.quality.decomposition --name {name}` from the rows of `{name}.json` (the "
          "harness's). Every column on the same examples (5 held-out ids per set, segments of <= 32 ids, "
          "context ids excluded, seed 0). 'network alone': the trained hybrid at mix 0; 'term alone': its "
          "item-item term with the chosen decay, no network. Intervals: paired 95% bootstrap of the "
          f"difference of rec@10, whole held-out sets resampled. Every method: `{name}.md`.", "",
          *summary_table(entries), ""]
    write_results(RESULTS, f"{name}_summary", {"protocol": saved.get("protocol"), "entries": entries}, md)


# ------------------------------------------------------------------------------------ diagnosis


def buckets(values: np.ndarray, edges: list[tuple[int, int]]) -> list[tuple[str, np.ndarray]]:
    return [(f"{lo}" if lo == hi else f"{lo}-{hi}", (values >= lo) & (values <= hi)) for lo, hi in edges]


def deciles(values: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Ten buckets of (nearly) equal size by `values` (ties kept together where the edges fall on them)."""
    order = np.argsort(values, kind="stable")
    out = []
    for d, part in enumerate(np.array_split(order, 10)):
        mask = np.zeros(len(values), bool)
        mask[part] = True
        out.append((f"D{d + 1} ({values[part].min()}-{values[part].max()})", mask))
    return out


def diagnose(name: str, dataset: str, split: str = "test", recipe: str = "hybrid", steps: int = 2000) -> dict:
    """Per target-popularity decile and per context size: rec@10 of hybrid, network, term and the
    paired differences (module docstring)."""
    data = harness.split_dataset(dataset, split)
    ex = harness.examples(data)
    run_dir = harness.WORK / "models" / f"{dataset}-{split}" / f"{recipe}-{steps}"
    ranks = {"hybrid": np.load(run_dir / "ranks.npy"), "network": np.load(run_dir / "ranks.network_only.npy"),
             "term": np.load(run_dir / "ranks.term_only.npy")}
    counts = np.bincount(data.train.ids, minlength=data.n_ids)  # training sets holding each id
    popularity = np.where(ex.targets >= 0, counts[np.maximum(ex.targets, 0)], 0)  # (E,)
    context = (ex.contexts >= 0).sum(1)  # (E,) ids in the context (unseen ids are -1)
    hits = {m: hits_at(r, 10) for m, r in ranks.items()}
    return {"dataset": dataset, "split": split, "model": str(run_dir.relative_to(harness.REPO)),
            "examples": int(len(ex.targets)), "popularity": "training sets holding the target",
            "by_target_popularity": bucket_rows(hits, deciles(popularity), ex.set_rows),
            "by_context_size": bucket_rows(hits, buckets(context, list(CONTEXT_BUCKETS)), ex.set_rows),
            "machine": machine_info()}


def bucket_rows(hits: dict, split_by: list[tuple[str, np.ndarray]], groups: np.ndarray | None) -> list[dict]:
    """Per bucket of examples: rec@10 of the hybrid, its network and its term (`hits`: (E,) 0/1 each), and
    the paired differences network - term and hybrid - term (`groups`: the bootstrap's units; None: each example)."""
    out = []
    for label, mask in split_by:
        if mask.sum() == 0:
            continue
        g = groups[mask] if groups is not None else None
        out.append({"bucket": label, "examples": int(mask.sum()),
                    **{m: round(float(h[mask].mean()), 4) for m, h in hits.items()},
                    "network_vs_term": paired(hits["network"][mask], hits["term"][mask], g),
                    "hybrid_vs_term": paired(hits["hybrid"][mask], hits["term"][mask], g),
                    "net_only_hits": int((hits["network"][mask] > hits["term"][mask]).sum()),
                    "term_only_hits": int((hits["term"][mask] > hits["network"][mask]).sum())})
    return out


def diagnosis_table(rows: list[dict], what: str) -> list[str]:
    lines = [f"| {what} | examples | hybrid | network alone | term alone | network - term [95% CI] | "
             "hybrid - term [95% CI] | only the network hits / only the term hits |", "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['bucket']} | {r['examples']:,} | {r['hybrid']:.4f} | {r['network']:.4f} | "
                     f"{r['term']:.4f} | {_ci(r['network_vs_term'])} | {_ci(r['hybrid_vs_term'])} | "
                     f"{r['net_only_hits']} / {r['term_only_hits']} |")
    return lines


TERMS = ("ease-term", "cooc-term", "ease", "cooccurrence")


def terms(dataset: str) -> dict:
    """The set term alone (no training) beside EASE and co-occurrence on the harness's test examples."""
    data = harness.split_dataset(dataset, "test")
    ex = harness.examples(data)
    base = harness.baseline_ranks(dataset, "test", data, ex, TERMS)
    ranks = {b: v["ranks"] for b, v in base.items() if "ranks" in v}
    term = "ease-term" if "ease-term" in ranks else "cooc-term"
    committed = {r["recipe"]: r["rec@10"] for r in json.loads((RESULTS / "quality.json").read_text())["rows"]
                 if r["dataset"] == dataset and r["split"] == "test" and str(r.get("recipe", "")).startswith("hybrid")
                 and r.get("steps") == 2000}
    return {"dataset": dataset, "examples": int(len(ex.targets)), "term": term,
            "rec@10": {b: round(float(hits_at(r, 10).mean()), 4) for b, r in ranks.items()},
            "skipped": {b: v["skipped"] for b, v in base.items() if "skipped" in v},
            "paired": {f"{term} - {b}": paired(hits_at(ranks[term], 10), hits_at(r, 10), ex.set_rows)
                       for b, r in ranks.items() if b != term},
            "committed_hybrid_rec@10": committed, "load_avg": load_average(),
            "machine": machine_info()}


def terms_table(entries: list[dict]) -> list[str]:
    lines = ["| dataset | examples | term alone (no training) | EASE | co-occurrence | term alone - EASE [95% CI] | "
             "term alone - co-occurrence [95% CI] | committed hybrid (quality.json) | its network alone | "
             "hybrid - term alone (unpaired) |", "|" + "---|" * 10]
    f = lambda v: f"{v:.4f}" if v is not None else "-"  # noqa: E731
    for e in entries:
        r, t = e["rec@10"], e["term"]
        hyb, net = e["committed_hybrid_rec@10"].get("hybrid"), e["committed_hybrid_rec@10"].get("hybrid network only")
        lines.append("| " + " | ".join([
            e["dataset"], f"{e['examples']:,}", f"{r[t]:.4f} ({t})", f(r.get("ease")), f(r.get("cooccurrence")),
            _ci(e["paired"].get(f"{t} - ease")), _ci(e["paired"].get(f"{t} - cooccurrence")), f(hyb), f(net),
            f"{hyb - r[t]:+.4f}" if hyb is not None else "-"]) + " |")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="quality_decomposition", help="results file stem in benchmarks/results/")
    p.add_argument("--diagnose", default="", help="a dataset of NAME.json: its diagnosis (module docstring)")
    p.add_argument("--split", default="test", choices=("val", "test"))
    p.add_argument("--recipe", default="hybrid")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--terms", default="", help="datasets (comma-separated): the term alone, no training")
    a = p.parse_args(argv)
    for dataset in [d for d in a.terms.split(",") if d]:
        saved = read_results(RESULTS, f"{a.name}_terms") or {"entries": []}
        saved = {"entries": [e for e in saved["entries"] if e["dataset"] != dataset] + [terms(dataset)]}
        write_results(RESULTS, f"{a.name}_terms", saved, terms_table(saved["entries"]))
        print("\n".join(terms_table(saved["entries"])))
    if not (RESULTS / f"{a.name}.json").exists():
        return
    render(a.name)
    if a.diagnose:
        d = diagnose(a.name, a.diagnose, a.split, a.recipe, a.steps)
        write_results(RESULTS, f"{a.name}_diagnosis_{a.diagnose}", d,
                      diagnosis_table(d["by_target_popularity"], "target popularity decile (sets)") + [""]
                      + diagnosis_table(d["by_context_size"], "context ids"))
        print("\n".join(diagnosis_table(d["by_target_popularity"], "target popularity decile (sets)")))
        print()
        print("\n".join(diagnosis_table(d["by_context_size"], "context ids")))


if __name__ == "__main__":
    main()
