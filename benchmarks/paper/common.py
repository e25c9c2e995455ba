"""Shared helpers of the paper-reproduction scripts: datasets, one training run, evaluation next to
the baselines, confidence intervals, tables and plots.

The scripts beside this file each regenerate one table of the paper at this machine's scale
(benchmarks/PAPER.md says which command makes which file):

    t2_heads.py      Table 2   superbloom vs full / sampled / hierarchical softmax, same wall clock
    t3_layers.py     Table 3   one layer vs several, hashed and unhashed
    t6_beam.py       Table 6   beam width B vs rec@1/10/20
    t7_coherent.py   Table 7   random vs coherent hashing (appendix C)
    f3_frequency.py  Figure 3  rec@1 per label-frequency decile

Work files (prepared datasets, trained models, cached rankings) go to runs/paper/ (git-ignored);
results (CSV, JSON, markdown fragments, PNG) to benchmarks/results/paper/. A trained model is
cached under a key of its full configuration, so a script reuses the identical run another script
made (e.g. f3_frequency.py reuses t2_heads.py's models) and trains it itself otherwise.

Protocol (paper sec. 3.1, superbloom/evaluate.py): 10% of the sets held out (prepare's seeded
split); from each held-out set one random segment of <= 32 ids and up to `TARGETS_PER_SET` of its
ids held out, each its own example with the rest of the segment as context (excluded from every
ranking). Targets unseen in training count as misses for every method. Confidence intervals are
95% percentile bootstraps that resample held-out *sets* (examples of one set are not independent).
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from machine import machine_info, machine_line  # noqa: E402

import superbloom as sb  # noqa: E402
from superbloom.baselines import EASE_MAX_IDS, fit_baseline  # noqa: E402
from superbloom.batches import MaskConfig  # noqa: E402
from superbloom.batches import query_batch  # noqa: E402
from superbloom.checkpoint import latest_checkpoint  # noqa: E402
from superbloom.evaluate import EvalConfig, Examples, evaluate, make_examples  # noqa: E402
from superbloom.files import load_json  # noqa: E402
from superbloom.heads import HEADS  # noqa: E402
from superbloom.metrics import KS, target_ranks  # noqa: E402

DATA_ROOT = Path(os.environ.get("SUPERBLOOM_SHARED_DATA", REPO.parent / "shared" / "data"))
WORK = REPO / "runs" / "paper"
RESULTS = REPO / "benchmarks" / "results" / "paper"
THREADS = 2  # torch threads: this machine's cores
TARGETS_PER_SET = 5  # held-out ids per test set, each its own example
EVAL_SEED = 0
N_BOOT = 1000
BASELINES = ("popularity", "cooccurrence", "ease")


# ------------------------------------------------------------------------------------ datasets


@dataclass(frozen=True)
class Source:
    path: str  # under DATA_ROOT
    read: sb.ReadConfig
    about: str
    header: str | None = None  # a first line to drop (checked, counted), for files with a header


SOURCES = {
    "wikispeedia": Source("wikispeedia/links.tsv", sb.ReadConfig("edges"),
                          "Wikispeedia: 4,604 Wikipedia pages, the links of a page form a set"),
    "fb15k237": Source("fb15k-237/train.txt.gz", sb.ReadConfig("edges", set_column=0, id_column=2, undirected=True),
                       "FB15k-237 train triples as neighbour sets (relation ignored, both directions)"),
    "beauty": Source("bert4rec_beauty/beauty.txt", sb.ReadConfig("lines"),
                     "BERT4Rec Amazon Beauty: the items of a user form a set (order ignored)"),
    "epinions": Source("epinions/epinions_ratings.tsv.gz", sb.ReadConfig("edges"),
                       "Epinions ratings: the items a user rated form a set (296K items, long tail)",
                       header="user\titem\tcategory\trating\thelpfulness\ttime"),
}


def source_file(name: str) -> Path:
    """The raw file of dataset `name` under DATA_ROOT, or exit with what is missing and where."""
    if name not in SOURCES:
        raise SystemExit(f"unknown dataset {name!r}; choose from {sorted(SOURCES)}")
    path = DATA_ROOT / SOURCES[name].path
    if not path.exists():
        raise SystemExit(f"dataset {name!r} needs {path}, which does not exist. The paper benchmarks read the "
                         f"shared datasets from ../shared/data beside the repository (see its README.md); "
                         f"set SUPERBLOOM_SHARED_DATA to use another folder.")
    return path


def _strip_header(src: Path, dst: Path, header: str) -> dict:
    """Stream `src` (gzip or text) to `dst` without its header line, after checking the header."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as f, open(dst.with_suffix(".tmp"), "wb") as g:
        first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        if first != header:
            raise SystemExit(f"{src}: expected the header line {header!r}, found {first!r}")
        shutil.copyfileobj(f, g, 16 << 20)
    dst.with_suffix(".tmp").rename(dst)
    return {"header_lines_dropped": 1, "header": header}


def dataset(name: str) -> sb.Dataset:
    """Dataset `name` prepared once (seed 0, 10% of the sets held out) under runs/paper/data/."""
    src, spec = source_file(name), SOURCES[name]
    out = WORK / "data" / name
    if (out / "meta.json").exists():
        return sb.Dataset(out)
    out.mkdir(parents=True, exist_ok=True)
    conversion = None
    if spec.header is not None:  # the reader takes '#' comments only: drop the header line first
        converted = WORK / "sources" / (name + ".tsv")
        converted.parent.mkdir(parents=True, exist_ok=True)
        conversion = _strip_header(src, converted, spec.header)
        src = converted
    t0 = time.time()
    summary = sb.prepare(sb.PrepareConfig(str(src), str(out), spec.read, 0.1, 0), progress=False)
    if conversion:
        summary["conversion"] = conversion
        (out / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"prepared {name}: {summary['ids']:,} ids, {summary['train']['sets']:,} train / "
          f"{summary['test']['sets']:,} test sets ({time.time() - t0:.0f} s)")
    return sb.Dataset(out)


def examples(data: sb.Dataset, targets_per_set: int = TARGETS_PER_SET) -> Examples:
    """The evaluation examples of a dataset: the same for the model and every baseline."""
    return make_examples(data.test, 32, targets_per_set, EVAL_SEED)


def dataset_summary(name: str, data: sb.Dataset, ex: Examples) -> dict:
    m = data.meta
    return {"dataset": name, "about": SOURCES[name].about, "ids": m["ids"], "train_sets": m["train"]["sets"],
            "test_sets": m["test"]["sets"], "train_links": m["train"]["links"],
            "mean_set_size": m["train"]["mean_set_size"], "examples": int(len(ex.targets)),
            "test_sets_used": int(len(np.unique(ex.set_rows))), "targets_unseen": int((ex.targets < 0).sum()),
            "conversion": m.get("conversion")}


# ------------------------------------------------------------------------------------ one run


@dataclass(frozen=True)
class Run:
    """One training run: every field is part of the cache key. Budget in seconds of training."""
    dataset: str
    hash: sb.HashConfig
    model: sb.ModelConfig
    head: sb.HeadConfig
    budget: float
    mask: MaskConfig = field(default_factory=MaskConfig)  # the library's recipe: mask rate 0.5
    batch_size: int = 64  # the library's recipe (TrainConfig defaults)
    lr: float = 3e-3
    warmup: int = 300
    seed: int = 0

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dir(self) -> Path:
        return WORK / "models" / self.dataset / self.key()


def model_config(d: int, layers: int, heads: int = 4, d_ff: int | None = None, dropout: float = 0.1) -> sb.ModelConfig:
    return sb.ModelConfig(vocab_size=0, d=d, heads=heads, d_ff=d_ff or 4 * d, layers=layers, dropout=dropout)


def need_head(name: str) -> None:
    if name not in HEADS:
        raise SystemExit(f"this table needs the {name!r} output head, which this checkout does not have "
                         f"(heads: {sorted(HEADS)}); it arrives with the heads work (issue 3)")


def fit(run: Run) -> dict:
    """Train `run` unless an identical finished run is cached. -> its training record."""
    done = run.dir / "done.json"
    if done.exists():
        return load_json(done)
    data = dataset(run.dataset)
    if run.dir.exists():  # an interrupted run: start over (a time budget cannot resume fairly)
        shutil.rmtree(run.dir)
    cfg = sb.TrainConfig(data=str(data.path), out=str(run.dir), hash=run.hash, model=run.model, head=run.head,
                         mask=run.mask, batch_size=run.batch_size, lr=run.lr, warmup=run.warmup, time_budget=run.budget,
                         eval_every=0, checkpoint_every=1e9, val_fraction=0.0, seed=run.seed, threads=THREADS)
    load_before = os.getloadavg()[0]
    print(f"training {run.dataset}/{run.key()}: {run.head.name} alpha={run.hash.alpha} m={run.hash.m} "
          f"coherent={run.hash.coherent} d={run.model.d} L={run.model.layers} for {run.budget:.0f} s", flush=True)
    t0 = time.time()
    sb.train(cfg, progress=False)
    wall = time.time() - t0
    state = load_json(latest_checkpoint(run.dir) / "state.json")
    config = load_json(run.dir / "config.json")
    record = {"key": run.key(), "run": json.loads(json.dumps(asdict(run))), "parameters": config["parameters"],
              "steps": state["step"], "train_examples": state["examples"], "train_seconds": round(state["seconds"], 1),
              "examples_per_s": round(state["examples"] / max(state["seconds"], 1e-9), 1),
              "hash_build_seconds": config.get("hash_build_seconds"), "wall_seconds": round(wall, 1),
              "load_avg_before": round(load_before, 2), "load_avg_after": round(os.getloadavg()[0], 2)}
    done.write_text(json.dumps(record, indent=2) + "\n")
    return record


def score(run: Run, data: sb.Dataset, ex: Examples, decode: sb.DecodeConfig = sb.DecodeConfig(),
          tokens: bool = False) -> dict:
    """Train (or reuse) `run`, rank the examples (top-20, context excluded). -> record with `ranks`
    (E,) and, with tokens=True for hashed models, `token_hits` (E,): the fraction of the m maps
    whose most probable bucket is the target's (the paper's token rec@1, Table 7)."""
    record = fit(run)
    tag = hashlib.sha1(json.dumps([EVAL_SEED, len(ex.targets), int(ex.targets.sum()), repr(decode), tokens])
                       .encode()).hexdigest()[:10]
    cache = run.dir / f"eval-{tag}.npz"
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        out = json.loads(str(z["meta"]))
        out.update({k: z[k] for k in z.files if k != "meta"})
        return record | out
    torch.set_num_threads(THREADS)
    predictor = sb.load(run.dir)
    cfg = EvalConfig(seed=EVAL_SEED, n=32, targets_per_set=TARGETS_PER_SET, depth=20, decode=decode, baselines=())
    res = evaluate(predictor, data, cfg, progress=False, return_ranks=True)
    if not np.array_equal(res["_examples"].targets, ex.targets):
        raise RuntimeError("evaluate() drew other examples than the baselines were given; protocol mismatch")
    arrays = {"ranks": res["_ranks"]["model"].astype(np.int16)}
    if tokens:
        arrays["token_hits"] = token_hits(predictor, ex)
    meta = {"certified_exact": res["certified_exact"], "mean_beam": res["mean_beam"],
            "queries_per_second": res["queries_per_second"]}
    np.savez(cache, meta=json.dumps(meta), **arrays)
    return record | meta | arrays


@torch.no_grad()
def token_hits(predictor, ex: Examples, batch_size: int = 256) -> np.ndarray:
    """(E,) fraction of the m hash maps whose top bucket is the target's bucket (0 for unseen targets)."""
    model, hashing = predictor.model, predictor.hashing
    buckets = torch.from_numpy(hashing.buckets).long()  # (m, N)
    out = []
    for a in range(0, len(ex.targets), batch_size):
        ctx, tgt = ex.contexts[a:a + batch_size], torch.from_numpy(ex.targets[a:a + batch_size]).long()
        hidden = model.target_hidden(query_batch(ctx, hashing))  # (q, m, d)
        top = model.head.log_probs(hidden).argmax(-1)  # (q, m) most probable bucket per map
        hit = (top == buckets[:, tgt.clamp(min=0)].T).float().mean(1)
        out.append(torch.where(tgt >= 0, hit, torch.zeros_like(hit)).numpy())
    return np.concatenate(out)


def baselines(name: str, data: sb.Dataset, ex: Examples, which=BASELINES) -> dict:
    """{baseline: {ranks (E,), seconds, stored}} on the very examples `ex`; cached per dataset.
    EASE is skipped (with the reason) above superbloom's dense limit of EASE_MAX_IDS ids."""
    tag = hashlib.sha1(json.dumps([EVAL_SEED, len(ex.targets), int(ex.targets.sum())]).encode()).hexdigest()[:10]
    out = {}
    for b in which:
        cache = WORK / "baselines" / f"{name}-{b}-{tag}.npz"
        if b == "ease" and data.n_ids > EASE_MAX_IDS:
            out[b] = {"skipped": f"EASE is dense: {data.n_ids:,} ids > {EASE_MAX_IDS:,}"}
            continue
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            model = fit_baseline(b, data.train, data.n_ids)
            ranks = target_ranks(model.rank(ex.contexts, 20), ex.targets).astype(np.int16)
            stored = model.cos.nnz if b == "cooccurrence" else data.n_ids ** 2 if b == "ease" else data.n_ids
            np.savez(cache, ranks=ranks, seconds=time.time() - t0, stored=stored)
        z = np.load(cache)
        out[b] = {"ranks": z["ranks"], "seconds": round(float(z["seconds"]), 1), "stored": int(z["stored"])}
    return out


# ------------------------------------------------------------------------------------ statistics


def cluster_ci(values: np.ndarray, groups: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap CI of the mean of per-example `values`, resampling whole groups
    (held-out sets), so correlated examples of one set move together."""
    _, g = np.unique(groups, return_inverse=True)
    sums = np.bincount(g, weights=values.astype(np.float64))  # (G,)
    counts = np.bincount(g).astype(np.float64)
    pick = np.random.default_rng(seed).integers(0, len(sums), (n_boot, len(sums)))  # (n_boot, G)
    means = sums[pick].sum(1) / counts[pick].sum(1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)


def hits(ranks: np.ndarray, k: int) -> np.ndarray:
    return ((ranks > 0) & (ranks <= k)).astype(np.float64)


def metrics(ranks: np.ndarray, groups: np.ndarray) -> dict:
    """rec@1/10/20 with set-bootstrap CIs, and MRR (truncated at 20)."""
    out = {}
    for k in KS:
        h = hits(ranks, k)
        lo, hi = cluster_ci(h, groups)
        out.update({f"rec@{k}": round(float(h.mean()), 4), f"rec@{k}_lo": round(lo, 4), f"rec@{k}_hi": round(hi, 4)})
    out["mrr"] = round(float(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0).mean()), 4)
    return out


def paired_diff(ranks_a: np.ndarray, ranks_b: np.ndarray, groups: np.ndarray, k: int = 1) -> dict:
    """rec@k(a) - rec@k(b) on the same examples, with a set-bootstrap CI of the difference."""
    d = hits(ranks_a, k) - hits(ranks_b, k)
    lo, hi = cluster_ci(d, groups)
    return {"diff": round(float(d.mean()), 4), "lo": round(lo, 4), "hi": round(hi, 4)}


# ------------------------------------------------------------------------------------ rows and tables


def model_row(method: str, run: Run, rec: dict, groups: np.ndarray, **extra) -> dict:
    r = run
    return {"dataset": r.dataset, "method": method, "head": r.head.name, "alpha": r.hash.alpha, "m": r.hash.m,
            "coherent": r.hash.coherent, "d": r.model.d, "layers": r.model.layers, "parameters": rec["parameters"],
            "budget_s": r.budget, "train_seconds": rec["train_seconds"], "steps": rec["steps"],
            "examples_per_s": rec["examples_per_s"], **metrics(rec["ranks"], groups),
            "load_avg": rec["load_avg_after"], "key": rec["key"], **extra}


def baseline_rows(name: str, base: dict, groups: np.ndarray) -> list[dict]:
    rows = []
    for b, v in base.items():
        row = {"dataset": name, "method": b, "head": "-", "parameters": v.get("stored"), "budget_s": None,
               "train_seconds": v.get("seconds"), "steps": None, "examples_per_s": None}
        if "skipped" in v:
            row["note"] = v["skipped"]
        else:
            row.update(metrics(v["ranks"], groups))
        rows.append(row)
    return rows


def fmt(v, col: str = "") -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    if col in ("train_seconds", "budget_s", "examples_per_s") and isinstance(v, (int, float)):
        return f"{v:,.0f}"
    if col == "parameters" and isinstance(v, (int, np.integer)):
        return f"{v / 1e6:.2f}M" if v >= 1e5 else f"{v:,}"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"
    return str(v)


def rec_cell(row: dict, k: int) -> str:
    if f"rec@{k}" not in row:
        return row.get("note", "-") if k == 1 else "-"
    return f"{row[f'rec@{k}']:.3f} [{row[f'rec@{k}_lo']:.3f}, {row[f'rec@{k}_hi']:.3f}]"


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> list[str]:
    """columns: (header, key); key 'rec@K' renders value [CI]."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [rec_cell(r, int(key[4:])) if key.startswith("rec@") and "_" not in key else fmt(r.get(key), key)
                 for _, key in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


STANDARD_COLUMNS = [("dataset", "dataset"), ("method", "method"), ("parameters", "parameters"),
                    ("train s", "train_seconds"), ("steps", "steps"), ("examples/s", "examples_per_s"),
                    ("rec@1 [95% CI]", "rec@1"), ("rec@10 [95% CI]", "rec@10"), ("rec@20 [95% CI]", "rec@20")]


def result_path(filename: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS / filename


def write_results(name: str, result: dict, rows: list[dict], markdown: list[str]) -> None:
    """RESULTS/name.json (everything), name.csv (the rows), name.md (a fragment for PAPER.md)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {**result, "rows": rows, "code": code_version(), "machine": machine_info()}
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=_json) + "\n")
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(RESULTS / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    (RESULTS / f"{name}.md").write_text("\n".join(markdown + ["", machine_line(result["machine"]), ""]))
    print("\n".join(markdown))


def code_version() -> str:
    """The commit checked out when the results were written ('+dirty' if tracked files had changes
    then). Trained models are reused from runs/paper/ across commits when their configuration is the
    same, so a result can combine runs made at earlier commits."""
    import subprocess

    def git(*a):
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _json(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))


def protocol() -> dict:
    return {"held_out_sets": "10% (prepare, seed 0)", "segment": 32, "targets_per_set": TARGETS_PER_SET,
            "eval_seed": EVAL_SEED, "context_excluded": True, "depth": 20,
            "ci": f"95% percentile bootstrap over held-out sets ({N_BOOT} resamples)",
            "unseen_targets": "count as misses for every method", "torch_threads": THREADS}


class Timer:
    """Wall time of a whole script, written into its results."""

    def __init__(self):
        self.t0 = time.time()

    @property
    def seconds(self) -> float:
        return round(time.time() - self.t0, 1)


@contextmanager
def panels(path: Path, n: int, width: float = 5.5):
    """A row of `n` matplotlib axes (headless), saved as a PNG at `path` when the block ends."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width * n, 4), squeeze=False)
    yield axes[0]
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bars(path: Path, groups: list[tuple[str, list[dict]]], k: int = 1, title: str = "") -> None:
    """One panel per group (e.g. dataset): rec@k of each row with its CI as an error bar."""
    with panels(path, len(groups)) as axes:
        for ax, (name, rows) in zip(axes, groups):
            rows = [r for r in rows if f"rec@{k}" in r]
            y = [r[f"rec@{k}"] for r in rows]
            err = [[r[f"rec@{k}"] - r[f"rec@{k}_lo"] for r in rows], [r[f"rec@{k}_hi"] - r[f"rec@{k}"] for r in rows]]
            ax.bar(range(len(rows)), y, yerr=err, capsize=3, color=["C0" if r["head"] != "-" else "0.6" for r in rows])
            ax.set_xticks(range(len(rows)), [r["method"] for r in rows], rotation=35, ha="right", fontsize=8)
            ax.set_title(name)
            ax.set_ylabel(f"rec@{k} (95% CI)")
        axes[0].figure.suptitle(title)


# ------------------------------------------------------------------------------------ model sizes


def count_params(data: sb.Dataset, hash_cfg: sb.HashConfig, model: sb.ModelConfig, head: sb.HeadConfig) -> int:
    """Parameters (embeddings included) of the model a run would build, without training it."""
    from superbloom.hashing import BloomHash
    from superbloom.model import build_model, count_parameters

    hashing = BloomHash.build(data.n_ids, sb.HashConfig(hash_cfg.alpha, hash_cfg.m, hash_cfg.seed))  # sizes only
    mcfg = sb.ModelConfig(**{**asdict(model), "vocab_size": hashing.vocab_size, "m": hash_cfg.m})
    return count_parameters(build_model(mcfg, head, hashing, data.counts))


def matched_width(data: sb.Dataset, target: int, hash_cfg: sb.HashConfig, layers: int, head: sb.HeadConfig,
                  widths=(4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384)) -> tuple[sb.ModelConfig, int]:
    """The model width d (4 heads, d_ff = 4d) whose parameter count is closest to `target`."""
    best = None
    for d in widths:
        cfg = model_config(d, layers, heads=4 if d % 4 == 0 else 2)
        p = count_params(data, hash_cfg, cfg, head)
        if best is None or abs(p - target) < abs(best[1] - target):
            best = (cfg, p)
        if p > target:
            break
    return best
