"""Seed ensembles of the network alone against EASE (issue 33: the network alone >= EASE).

    .venv/bin/python -m benchmarks.quality.ensemble --datasets wikispeedia,lastfm,fb15k237 \\
        --recipes net,net_s1,net_s2 --split val --name quality_ensemble_val

The members are the harness's trained models (benchmarks/quality/harness.py, runs/quality/models/;
train them there first: `harness --recipes net,net_s1,net_s2`), the same recipe with other seeds.
Each is a full-softmax head over the ids (no item-item term), or a hybrid head's network alone (its
log p without the term). On the harness's examples, every member's log p over all ids is
computed, and the ensemble ranks by

    mean_logp   the mean of the members' log p (a product of experts), and
    mean_p      the log of the mean of their p (a mixture),

context ids excluded, top 20. With `--mixes 10,30`, each member and the mean-log-p ensemble are also
ranked as hybrids, log p + mix x EASE's scores (EASE fitted here on the split's training sets; its
ranks are the `ease` row, the term alone), one row per weight: choose the weight on val, then run test
with it (issue 33: hybrid - term alone with six networks). `--library --mixes W` ranks with the library's
sb.Ensemble instead: its term is a hybrid member's own (EASE's largest weights per id), and each weight
gets three rows, the ensemble, its networks alone and its term alone, minus the term alone paired. Each member is also re-ranked here and must equal the harness's
ranks.npy (ranks.network_only.npy for a hybrid member: the same scores as the library's rank path;
checked, the run stops otherwise). Rows
(rec@1/10/20 with 95% set-bootstrap intervals, ensemble - EASE and ensemble - best member paired)
go to benchmarks/results/NAME.json and NAME.md.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np
import torch

from benchmarks.machine import write_results
from benchmarks.paper.report import paired
from benchmarks.paper.report import rec_metrics as metrics
from benchmarks.quality.harness import RESULTS, WORK, baseline_ranks, examples, split_dataset
import superbloom as sb
from superbloom.evaluation.baselines import Ease
from superbloom.evaluation.metrics import hits_at, target_ranks
from superbloom.storage.files import load_json
from superbloom.model.sequence_batches import ordered_query_batch


@torch.no_grad()
def member_logp(predictor, contexts: np.ndarray, batch: int = 256):
    """Yield (a, b, (b - a, N) log p) of a full-softmax model for each batch of context rows."""
    model, head = predictor.model, predictor.model.head
    model.eval()
    w = head.rows()
    for a in range(0, len(contexts), batch):
        qb = ordered_query_batch(np.asarray(contexts[a:a + batch], np.int64), predictor.hashing,
                                 model.encoder.cfg)
        yield a, a + len(qb.target_elem), head.log_probs(model.target_hidden(qb).mean(1), w)


def network_ranks(run_dir):
    """The harness's ranks of a member's network: a hybrid's network alone, else the model's own."""
    alone = run_dir / "ranks.network_only.npy"
    return alone if alone.exists() else run_dir / "ranks.npy"


def subsets(contexts: np.ndarray, keep: float, rng: np.random.Generator) -> np.ndarray:
    """Each row's context ids kept with probability `keep` (at least one), compacted left, -1 padded."""
    ctx = np.asarray(contexts, np.int64)
    drop = (rng.random(ctx.shape) >= keep) & (ctx >= 0)
    first = np.argmax(ctx >= 0, 1)
    drop[np.arange(len(ctx)), first] = False  # never an empty context
    out = np.where(drop, -1, ctx)
    order = np.argsort(out < 0, axis=1, kind="stable")
    return np.take_along_axis(out, order, 1)


def ranks_of(scores: torch.Tensor, contexts: np.ndarray, targets: np.ndarray, k: int = 20) -> np.ndarray:
    """(B, N) scores -> (B,) 1-based target ranks in the top k (0: absent), context ids excluded."""
    scores = scores.clone()
    ctx = torch.from_numpy(np.asarray(contexts, np.int64))
    rows, cols = torch.nonzero(ctx >= 0, as_tuple=True)
    scores[rows, ctx[rows, cols]] = -torch.inf
    top = torch.topk(scores, k, -1).indices.numpy()
    return target_ranks(top, targets)


def last_average(run_dir) -> "sb.Predictor":
    """The member with the weight average of its last step checkpoint (ema.safetensors) instead of BEST's."""
    from superbloom.storage.checkpoint import latest_checkpoint, load_extra

    predictor = sb.load(run_dir, mmap=False)
    saved = load_extra(latest_checkpoint(run_dir), "ema")
    if not saved:
        raise SystemExit(f"{run_dir}: its last checkpoint holds no weight average")
    with torch.no_grad():
        for i, p in enumerate(predictor.model.parameters()):
            p.copy_(saved[str(i)])
    return predictor


def tta_ranks(predictor, ex, keep: float, views: int, seed: int = 0) -> np.ndarray:
    """Test-time subsets: the mean log p of the full context and `views` random subsets of it (each id
    kept with probability `keep`; training shows the model about half its set) -> (E,) ranks."""
    rng = np.random.default_rng(seed)
    streams = [member_logp(predictor, ex.contexts)] + [member_logp(predictor, subsets(ex.contexts, keep, rng))
                                                       for _ in range(views)]
    ranks = np.zeros(len(ex.targets), np.int64)
    for parts in zip(*streams):
        a, b = parts[0][0], parts[0][1]
        ranks[a:b] = ranks_of(torch.stack([lp for _, _, lp in parts]).mean(0), ex.contexts[a:b], ex.targets[a:b])
    return ranks


def ensemble(name: str, split: str, recipes: list[str], steps: int, keeps: tuple[float, ...] = (),
             views: int = 8, last: bool = False, mixes: tuple[float, ...] = ()) -> list[dict]:
    data = split_dataset(name, split)
    ex = examples(data)
    base = baseline_ranks(name, split, data, ex, ("ease",))
    dirs = [WORK / "models" / f"{name}-{split}" / f"{r}-{steps}" for r in recipes]
    for d in dirs:
        if not (d / "done.json").exists():
            raise SystemExit(f"{d}: not trained; run benchmarks.quality.harness --datasets {name} --split {split} "
                             f"--recipes {','.join(recipes)} --steps {steps} first")
    t0 = time.time()
    predictors = [sb.load(d) for d in dirs]
    E = len(ex.targets)
    member = [np.zeros(E, np.int64) for _ in dirs]
    combos = {"mean_logp": np.zeros(E, np.int64), "mean_p": np.zeros(E, np.int64)}
    # with EASE's scores (--mixes): each member and the ensemble as a hybrid, log p + mix x EASE
    ease_model = Ease(data.train, data.n_ids) if mixes else None
    fused = {(m, i): np.zeros(E, np.int64) for m in mixes for i in range(len(dirs) + 1)}  # i = len(dirs): ensemble
    streams = [member_logp(p, ex.contexts) for p in predictors]
    for parts in zip(*streams):
        a, b = parts[0][0], parts[0][1]
        ctx, tgt = ex.contexts[a:b], ex.targets[a:b]
        logps = [lp for _, _, lp in parts]
        for i, lp in enumerate(logps):
            member[i][a:b] = ranks_of(lp, ctx, tgt)
        stacked = torch.stack(logps)
        combos["mean_logp"][a:b] = ranks_of(stacked.mean(0), ctx, tgt)
        combos["mean_p"][a:b] = ranks_of(torch.logsumexp(stacked, 0), ctx, tgt)
        if ease_model is not None:
            term = torch.from_numpy(np.asarray(ease_model.scores(ctx), np.float32))
            for m in mixes:
                for i, lp in enumerate(logps + [stacked.mean(0)]):
                    fused[m, i][a:b] = ranks_of(lp + m * term, ctx, tgt)
    seconds = time.time() - t0
    for d, r in zip(dirs, member):  # the library's rank path gave these ranks: they must agree
        saved = np.load(network_ranks(d)).astype(np.int64)
        agree = float((saved == r).mean())
        if agree < 0.995:  # ties may order differently
            raise SystemExit(f"{d}: re-ranked here, {agree:.1%} of ranks equal the harness's ranks.npy")
    groups, ease = ex.set_rows, base["ease"]["ranks"]
    common = {"dataset": name, "split": split, "examples": E, "steps": steps}
    rows = [dict(common, method="ease", **metrics(ease, groups))]
    best = max(range(len(dirs)), key=lambda i: hits_at(member[i], 10).mean())
    for r, ranks in zip(recipes, member):
        rows.append(dict(common, method=r, **metrics(ranks, groups),
                         vs_ease=paired(hits_at(ranks, 10), hits_at(ease, 10), groups)))
    for c, ranks in combos.items():
        rows.append(dict(common, method=f"ensemble {c} ({len(dirs)})", members=recipes, rank_seconds=round(seconds, 1),
                         **metrics(ranks, groups), vs_ease=paired(hits_at(ranks, 10), hits_at(ease, 10), groups),
                         vs_best_member=paired(hits_at(ranks, 10), hits_at(member[best], 10), groups)))
    for m in mixes:  # the hybrids: minus EASE (the term alone) and minus the mean of the members' hybrids
        singles = [hits_at(fused[m, i], 10) for i in range(len(dirs))]
        for i, r in enumerate(recipes):
            rows.append(dict(common, method=f"{r} + EASE x {m:g}", mix=m, **metrics(fused[m, i], groups),
                             vs_ease=paired(singles[i], hits_at(ease, 10), groups)))
        rows.append(dict(common, method=f"ensemble mean_logp ({len(dirs)}) + EASE x {m:g}", mix=m, members=recipes,
                         **metrics(fused[m, len(dirs)], groups),
                         vs_ease=paired(hits_at(fused[m, len(dirs)], 10), hits_at(ease, 10), groups),
                         vs_best_member=paired(hits_at(fused[m, len(dirs)], 10), max(singles, key=np.mean), groups)))
    for r, d, best_ranks in zip(recipes, dirs, member) if last else ():  # the last average against BEST
        lp = last_average(d)
        ranks = np.zeros(E, np.int64)
        for a, b, logp in member_logp(lp, ex.contexts):
            ranks[a:b] = ranks_of(logp, ex.contexts[a:b], ex.targets[a:b])
        rows.append(dict(common, method=f"{r} last average (BEST: step {load_json(d / 'done.json')['best_step']})",
                         **metrics(ranks, groups), vs_ease=paired(hits_at(ranks, 10), hits_at(ease, 10), groups),
                         vs_best_member=paired(hits_at(ranks, 10), hits_at(best_ranks, 10), groups)))
    for keep in keeps:  # test-time subsets of the first member's context (no other model)
        ranks = tta_ranks(predictors[0], ex, keep, views)
        rows.append(dict(common, method=f"{recipes[0]} subsets keep {keep} ({views} views + full)",
                         **metrics(ranks, groups), vs_ease=paired(hits_at(ranks, 10), hits_at(ease, 10), groups),
                         vs_best_member=paired(hits_at(ranks, 10), hits_at(member[0], 10), groups)))
    return rows


def library_rows(name: str, split: str, recipes: list[str], steps: int, mixes: tuple[float, ...]) -> list[dict]:
    """The library's sb.Ensemble of the members (inference/ensemble.py: the term is the first hybrid member's
    own, EASE's largest weights per id as the hybrid keeps them) at each weight, with its variants (the
    networks alone, the term alone) on the same examples; `vs_ease` here: minus the term alone."""
    data = split_dataset(name, split)
    ex = examples(data)
    ens = sb.Ensemble.load([WORK / "models" / f"{name}-{split}" / f"{r}-{steps}" for r in recipes])
    common = {"dataset": name, "split": split, "examples": len(ex.targets), "steps": steps}
    ranks_of_ens = lambda: target_ranks(ens.rank(ex.contexts, 20).ids.numpy(), ex.targets)  # noqa: E731
    rows = []
    for m in mixes:
        ens.mix = m
        got = {"": ranks_of_ens()}
        for v, ctx in ens.variants().items():
            with ctx:
                got[f" {v}"] = ranks_of_ens()
        term = hits_at(got[" term alone"], 10)
        for v, ranks in got.items():
            rows.append(dict(common, method=f"sb.Ensemble ({len(recipes)}) x {m:g}{v}", mix=m, **metrics(ranks, ex.set_rows),
                             vs_ease=None if v == " term alone" else paired(hits_at(ranks, 10), term, ex.set_rows)))
    return rows


def table(rows: list[dict]) -> list[str]:
    out = ["| dataset | split | method | rec@1 | rec@10 [95% CI] | rec@20 | - EASE, rec@10 | - reference, rec@10 |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d = r.get("vs_ease")
        m = r.get("vs_best_member")
        fmt = (lambda x: f"{x['diff']:+.4f} [{x['lo']:+.4f}, {x['hi']:+.4f}]" if x else "")
        out.append(f"| {r['dataset']} | {r['split']} | {r['method']} | {r['rec@1']:.4f} | {r['rec@10']:.4f} "
                   f"[{r['rec@10_lo']:.4f}, {r['rec@10_hi']:.4f}] | {r['rec@20']:.4f} | {fmt(d)} | {fmt(m)} |")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="wikispeedia,lastfm,fb15k237")
    p.add_argument("--recipes", default="net,net_s1,net_s2", help="the members: harness recipes, already trained")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--split", default="val", choices=("val", "test"))
    p.add_argument("--name", default="quality_ensemble_val")
    p.add_argument("--keeps", default="", help="test-time subsets of the first member's context: keep rates, "
                   "e.g. 0.5,0.75 (its last column is then minus that member, not the best)")
    p.add_argument("--last", action="store_true", help="also each member with its last weight average instead of "
                   "its BEST checkpoint (last column: minus the member at BEST)")
    p.add_argument("--members", default="quality_ensemble_members_table.md",
                   help="the harness table (in benchmarks/results/) that holds the members' training rows")
    p.add_argument("--views", type=int, default=8, help="random subsets per example (--keeps)")
    p.add_argument("--mixes", default="", help="also each member and the ensemble as a hybrid, log p + MIX x EASE's "
                   "scores, for each weight, e.g. 10,30,100 (choose it on val; the last column is then minus the best "
                   "member's hybrid at that weight)")
    p.add_argument("--library", action="store_true", help="rank with the library's sb.Ensemble at each of --mixes "
                   "instead (its term: the first hybrid member's own; rows: the ensemble, its networks alone and its "
                   "term alone; the '- EASE' column is then minus the term alone)")
    a = p.parse_args(argv)
    command = "python -m benchmarks.quality.ensemble " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    torch.set_num_threads(1)
    rows = []
    for name in a.datasets.split(","):
        keeps = tuple(float(k) for k in a.keeps.split(",") if k)
        mixes = tuple(float(m) for m in a.mixes.split(",") if m)
        if a.library:
            new = library_rows(name, a.split, a.recipes.split(","), a.steps, mixes)
        else:
            new = ensemble(name, a.split, a.recipes.split(","), a.steps, keeps, a.views, a.last, mixes)
        rows += new
        print("\n".join(table(new)), flush=True)
    md = [f"# Seed ensembles of the network alone ({a.split} split)", "", f"`{command}`", "",
          f"The members were trained by the harness (one thread, {a.steps:,} steps each; their training times and "
          f"loads: {a.members}). "
          + ("Rows of the library's sb.Ensemble: the '- EASE' column is minus its term alone (the first hybrid "
             "member's own term). " if a.library else "")
          + "Last column: the ensemble minus its best member; a `last average` row minus the member at BEST; "
          "a `subsets` row minus the member itself.", "", *table(rows)]
    write_results(RESULTS, a.name, {"command": command, "rows": rows}, md, indent=1)


if __name__ == "__main__":
    main()
