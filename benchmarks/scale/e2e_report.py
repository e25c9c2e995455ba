"""The report of benchmarks/scale/e2e.py: Table 2 at the paper's vocabulary size (every head and the
baselines on the same held-out examples, 95% intervals, paired differences) and each stage's time and
memory, from the run's state, as results/scale/NAME.{json,md}."""
from __future__ import annotations

from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parents[1] / "results" / "scale"
KS = (1, 10, 20)
ORACLE = "planted-topic oracle"


def report(args, work: Path, state) -> None:
    from benchmarks.machine import machine_info, write_results
    from superbloom.evaluation.metrics import hits_at, mean_ci, paired_difference

    rows, paired = [], {}
    ranks = {}
    if (work / "ranks-superbloom.npz").exists():
        z = {n: np.load(work / f"ranks-{n}.npz") for n in ("superbloom", "full", "sampled")
             if (work / f"ranks-{n}.npz").exists()}
        groups = z["superbloom"]["set_rows"]
        for n, arr in z.items():
            assert np.array_equal(arr["targets"], z["superbloom"]["targets"]), "different examples"
            ranks[{"superbloom": "superbloom", "full": "full softmax", "sampled": "sampled softmax"}[n]] = arr["model"]
        if "popularity" in z["superbloom"].files:
            ranks["popularity"] = z["superbloom"]["popularity"]
        if (work / "ranks-oracle.npz").exists():
            o = np.load(work / "ranks-oracle.npz")
            assert np.array_equal(o["targets"], z["superbloom"]["targets"]), "the oracle ranked other examples"
            ranks[ORACLE] = o["model"]
        for name, r in ranks.items():
            row = {"method": name}
            for k in KS:
                m, lo, hi = mean_ci(hits_at(r, k), groups)
                row[f"rec@{k}"], row[f"rec@{k}_lo"], row[f"rec@{k}_hi"] = round(m, 4), round(lo, 4), round(hi, 4)
            tr, ev = state.data.get(f"train/{name}", {}), state.data.get(f"eval/{name}", {})
            row.update({k: tr.get(k) for k in ("parameters", "steps", "examples", "train_seconds", "examples_per_s")})
            row["train_peak_rss_mb"] = tr.get("peak_rss_mb")
            out = ev.get("output", {})
            row.update(eval_seconds=ev.get("seconds"), eval_peak_rss_mb=ev.get("peak_rss_mb"),
                       certified_exact=out.get("certified_exact"), mean_beam=out.get("mean_beam"),
                       queries_per_second=out.get("queries_per_second"), examples_evaluated=out.get("examples"))
            rows.append(row)
        for other in ("full softmax", "sampled softmax", "popularity", ORACLE):
            if other in ranks:
                paired[f"superbloom - {other}"] = {
                    f"rec@{k}": {kk: round(vv, 4) for kk, vv in
                                 paired_difference(hits_at(ranks["superbloom"], k), hits_at(ranks[other], k),
                                                   groups).items()} for k in KS}
    result = {"benchmark": "e2e", "synthetic": True, "settings": vars(args) | {"work": str(work)},
              "stages": state.data, "table2": rows, "paired": paired, "machine": machine_info()}
    write_results(RESULTS, args.name, result, markdown(result))


def markdown(result: dict) -> list[str]:
    s, st = result["settings"], result["stages"]
    md = ["# End to end at the paper's vocabulary size (SYNTHETIC data)", "",
          f"`benchmarks/scale/e2e.py`: `superbloom synth --ids {s['ids']:,} --links {s['links']:,} --zipf {s['zipf']}` "
          "(SYNTHETIC: Zipf popularity, 1000 planted topics, 1..3 per set, mean set size 87) -> `prepare --memory-limit "
          f"{s['memory_limit']}` (out of core) -> `train` x 3 heads for "
          f"{str(s.get('time_budget')) + ' s (equal wall clock)' if s.get('time_budget') else str(s['steps']) + ' steps'}"
          f" of {s['batch_size']} sets, lr {s.get('lr', 3e-3)}, "
          f"{'co-occurrence' if s.get('init') == 'cooccurrence' else 'random'} embedding start"
          f"{', superbloom with ' + str(s['coherent']) + ' coherent hash map(s)' if s.get('coherent') else ''} "
          f"(segment {s['segment']}, warm-up {s['warmup']}, {s['threads']} torch threads) -> `eval` on "
          f"{s['eval_sets']:,} held-out sets ({'exact' if s['exact'] else 'beam'} decoding) -> `serve` with 1 and 2 "
          "workers" + ("" if any(k.startswith("train/") for k in st) else " (here only synth and prepare were run)") +
          ". Every stage is a child process; seconds are its wall time and peak RSS its own maximum "
          "resident set (GNU time). All figures below are MEASURED on this run unless marked otherwise.", "",
          "## Stages", "", "| stage | seconds | peak RSS | load before / after | what |", "|---|---|---|---|---|"]

    def row(name, rec, what):
        md.append(f"| {name} | {rec['seconds']} | {rec['peak_rss_mb']:,} MB | {rec['load_before'][0]} / "
                  f"{rec['load_after'][0]} | {what} |")

    if "synth" in st:
        o = st["synth"].get("output", {})
        row("synth", st["synth"], f"{o.get('links', 0):,} links, {o.get('sets', 0):,} sets, {o.get('ids_drawn', 0):,} ids drawn")
    if "prepare" in st:
        o = st["prepare"].get("output", {})
        stages = ", ".join(f"{k} {v} s" for k, v in o.get("outofcore", {}).get("stage_seconds", {}).items())
        row("prepare (out of core)", st["prepare"], f"{o.get('links', 0):,} links after dedupe, {o.get('ids', 0):,} ids "
            f"in the vocabulary, {o.get('sets', 0):,} sets; {stages}")
    for k, v in st.items():
        if k.startswith("train/"):
            init = v.get("init") or {"init": "normal"}
            start = (f"; co-occurrence start (rank {init['rank']}) {init.get('seconds')} s before the budget"
                     if init["init"] == "cooccurrence" else "")
            row(k, v, f"{v['parameters']:,} parameters, {v['steps']} steps, {v['examples_per_s']} examples/s{start}")
    for k, v in st.items():
        if k.startswith("eval/"):
            o = v.get("output", {})
            row(k, v, f"{o.get('examples', 0):,} examples, {o.get('queries_per_second')} queries/s, certified exact "
                      f"{o.get('certified_exact')}, model load {o.get('load_seconds')} s")
    if result["table2"]:
        md += ["", "## Table 2 at this vocabulary size (same examples; equal " + ("wall clock" if s.get("time_budget") else "steps") + ")", "",
               "| method | parameters | steps | examples/s | train peak RSS | rec@1 | rec@10 | rec@20 |",
               "|---|---|---|---|---|---|---|---|"]
        for r in result["table2"]:
            cells = " | ".join(f"{r[f'rec@{k}']:.4f} [{r[f'rec@{k}_lo']:.4f}, {r[f'rec@{k}_hi']:.4f}]" for k in KS)
            p = f"{r['parameters']:,}" if r.get("parameters") else "-"
            rss = f"{r['train_peak_rss_mb']:,} MB" if r.get("train_peak_rss_mb") else "-"
            md.append(f"| {r['method']} | {p} | {r.get('steps') or '-'} | {r.get('examples_per_s') or '-'} | {rss} | {cells} |")
        if any(r["method"] == ORACLE for r in result["table2"]):
            md += ["", f"The {ORACLE} is no model: it knows the generator's planted topics and weights and ranks the "
                   "ids of the context's topics by share x weight (superbloom.data.synth.TopicOracle), on the same examples: "
                   "what a model that had learned the planted structure could reach on this data (a reference, not a "
                   "strict bound)."]
        md += ["", "Paired differences (95% CI over held-out sets):", "", "| comparison | rec@1 | rec@10 | rec@20 |",
               "|---|---|---|---|"]
        for key, v in result["paired"].items():
            md.append(f"| {key} | " + " | ".join(f"{v[f'rec@{k}']['diff']:+.4f} [{v[f'rec@{k}']['lo']:+.4f}, "
                                                 f"{v[f'rec@{k}']['hi']:+.4f}]" for k in KS) + " |")
    curves = {k: v["loss_curve"] for k, v in st.items() if k.startswith("train/") and v.get("loss_curve")}
    if curves:
        md += ["", "## Training loss (running mean, logged every 50 steps; at most 8 points shown)", "",
               "| head | loss (step, seconds) |", "|---|---|"]
        for k, c in curves.items():
            pick = [c[i] for i in sorted({round(f * (len(c) - 1) / 7) for f in range(8)})]
            md.append(f"| {k[6:]} | " + ", ".join(f"{r['loss']:.3f} ({r['step']}, {r['seconds']:.0f} s)" for r in pick)
                      + " |")
    serve = [v for k, v in st.items() if k.startswith("serve/")]
    if serve:
        md += ["", "## Serving the superbloom model (memory-mapped weights)", "",
               "| workers | exact | concurrency | requests/s | p50 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|"]
        for v in serve:
            for lvl in v["levels"]:
                md.append(f"| {v['workers']} | {lvl['exact']} | {lvl['concurrency']} | {lvl['requests_per_s']} | "
                          f"{lvl['p50_ms']} | {lvl['p99_ms']} | {lvl['errors']} |")
        md += ["", "| workers | ready after | RSS summed (loaded / after load) | PSS summed (loaded / after load) |",
               "|---|---|---|---|"]
        for v in serve:
            a, b = v["memory_loaded"], v["memory_after_load"]
            md.append(f"| {v['workers']} | {v['ready_seconds']} s | {a['rss_mb']:,} / {b['rss_mb']:,} MB | "
                      f"{a['pss_mb']:,} / {b['pss_mb']:,} MB |")
    if s.get("note"):
        md += ["", s["note"]]
    return md
