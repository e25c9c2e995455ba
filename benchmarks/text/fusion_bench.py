"""Benchmark: what the text network adds to the bigram-context count (issue 33, item 4), measured.

    python -m benchmarks.text.fusion_bench --model runs/table5_s16_b16/hash40-d128 --name text_fusion_b16

A model trained by `table5_bench.py ... --val-fraction F` (its validation rows never trained on) and
the text protocol's masked test tokens (the same tokens as table5_bench: max-sets 300, seed 0). Three
rankings of all 1,000,001 ids at every masked token:

  network alone  sum_j log p_j(bucket_j(w)), Algorithm 1's score, computed for EVERY id (exhaustive, so
                 exact: it must equal table5_bench's model figures)
  term alone     the text protocol's bigram-context baseline, p(w | left) + p(w | right) (text_protocol.py)
  hybrid         network + beta * log(term + eps): a late fusion, as the set hybrid head mixes its
                 item-item term in at validation

beta and eps are chosen on VALIDATION: masked tokens of the model's validation rows (training rows it
never trained on), with the term counted from the other training rows only. The test term is the
baseline's own (every training row). Paired 95% intervals resample whole test rows.

Results: benchmarks/results/text/NAME.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
from benchmarks.machine import machine_info, write_results  # noqa: E402

import superbloom as sb  # noqa: E402
from superbloom.data.dataset import SetArray  # noqa: E402
from superbloom.evaluation.metrics import hits_at, mrr, paired_difference, summarize_ci, target_ranks  # noqa: E402
from superbloom.evaluation.text_protocol import BigramContext, TextMasking, _rows, neighbours  # noqa: E402
from superbloom.model.batches import to_batch  # noqa: E402
from superbloom.model.text_batches import masked_rows  # noqa: E402
from superbloom.training.train import split_validation  # noqa: E402

BETAS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
EPSILONS = (1e-5, 1e-4, 1e-3, 1e-2)
DEPTH = 20
PER = "hybrid, beta/eps per known neighbours"


def counts_of(rows: SetArray, n_ids: int) -> np.ndarray:
    return np.bincount(np.asarray(rows.ids, np.int64), minlength=n_ids).astype(np.float64)


@torch.no_grad()
def network_scores(model, hashing, ex, batch_rows: int = 8):
    """Yield (first target index, (Q, N) float32 scores) of every id at every masked token of `ex`, in
    ex.flat() order: sum_j log p_j(bucket_j(w)) (beam.py's sum_log, for every id)."""
    model.eval()
    buckets = model.head.buckets.long()  # (m, N)
    done = 0
    for a in range(0, len(ex.elems), batch_rows):
        e, t = ex.elems[a:a + batch_rows], ex.targets[a:a + batch_rows]
        batch = to_batch(e, t, hashing, merge=False)
        logp = model.head.log_probs(model.target_hidden(batch))  # (Q, m, nb)
        s = logp[:, 0, buckets[0]]
        for j in range(1, buckets.shape[0]):
            s += logp[:, j, buckets[j]]
        yield done, s.numpy()
        done += s.shape[0]


def ranks_of(score: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(Q, N) scores, (Q,) targets -> (Q,) 1-based ranks (ties: lower id first), 0 beyond DEPTH."""
    q = np.arange(len(targets))
    st = score[q, targets][:, None]
    ids = np.arange(score.shape[1])[None, :]
    r = 1 + (score > st).sum(1) + ((score == st) & (ids < targets[:, None])).sum(1)
    return np.where(r <= DEPTH, r, 0)


def fused_ranks(model, hashing, ex, term: BigramContext, combos) -> tuple[np.ndarray, dict]:
    """-> (network-alone ranks (M,), {combo: hybrid ranks (M,)}) over every id."""
    _, _, targets = ex.flat()
    left, right = neighbours(ex)
    net = np.zeros(len(targets), np.int64)
    hyb = {c: np.zeros(len(targets), np.int64) for c in combos}
    for a, s in network_scores(model, hashing, ex):
        q = slice(a, a + s.shape[0])
        net[q] = ranks_of(s, targets[q])
        sparse = (_rows(term.after, left[q]) + _rows(term.before, right[q])).tocsr()
        sparse.sum_duplicates()
        r = np.repeat(np.arange(s.shape[0]), np.diff(sparse.indptr))
        for beta, eps in combos:
            f = s + np.float32(beta * np.log(eps))
            f[r, sparse.indices] += (beta * (np.log(sparse.data + eps) - np.log(eps))).astype(np.float32)
            hyb[(beta, eps)][q] = ranks_of(f, targets[q])
    return net, hyb


def known_neighbours(ex) -> np.ndarray:
    """(M,) 0, 1 or 2: how many of each target's two neighbours are known tokens (the term's evidence)."""
    left, right = neighbours(ex)
    return (left >= 0).astype(int) + (right >= 0).astype(int)


def choose(ranks: dict, sel: np.ndarray):
    """The (beta, eps) with the best rec@10 (then MRR) on the examples `sel`."""
    return max(ranks, key=lambda c: (hits_at(ranks[c][sel], 10).mean(), mrr(ranks[c][sel])))


def context_buckets(ex, methods: dict, groups: np.ndarray) -> dict:
    """rec@10 of each method by how many of the target's two neighbours are known tokens (the term's
    evidence: none -> the term is the unigram list), with the paired hybrid - term and network - term."""
    known = known_neighbours(ex)
    out = {}
    for k in (0, 1, 2):
        sel = known == k
        if not sel.any():
            continue
        h = {name: hits_at(r[sel], 10) for name, r in methods.items()}
        term = "term alone (bigram baseline)"
        out[str(k)] = {"examples": int(sel.sum()), **{name: float(v.mean()) for name, v in h.items()},
                       "hybrid - term": paired_difference(h["hybrid"], h[term], groups[sel]),
                       "hybrid per context - term": paired_difference(h[PER], h[term], groups[sel]),
                       "network - term": paired_difference(h["network alone"], h[term], groups[sel])}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "runs" / "data_text"))
    ap.add_argument("--model", required=True, help="a model directory trained by table5_bench.py with --val-fraction")
    ap.add_argument("--max-sets", type=int, default=300, help="test rows (the text protocol's seeded choice)")
    ap.add_argument("--val-rows", type=int, default=0, help="validation rows used (0: all; fewer for a smoke run)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default="text_fusion")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for path, what in ((Path(args.model) / "config.json", "--model: a trained model directory"),
                       (Path(args.data) / "meta.json", "--data: a prepare-text dataset")):
        if not path.is_file():
            ap.error(f"{path} not found ({what})")
    saved = json.loads((Path(args.model) / "config.json").read_text())
    head = saved["head"].get("name")
    if head != "superbloom":  # network_scores reads the hashed softmax's bucket tables
        ap.error(f"--model {args.model}: a {head!r} head; this benchmark scores superbloom (hashed softmax) models")
    t0, load0 = time.time(), os.getloadavg()
    data = sb.Dataset(args.data)
    p = sb.load(args.model, device="cpu")
    frac, seed = saved["train"]["val_fraction"], saved["train"]["loop"]["seed"]
    if not frac:
        raise SystemExit(f"{args.model}: trained with val_fraction 0: no held-out training rows to choose the mix on "
                         "(train it with table5_bench.py --val-fraction)")
    n = int(saved["train"]["mask"]["n"])
    train_rows, val_rows = split_validation(data.train, frac, seed)
    if args.val_rows:
        val_rows = val_rows[:args.val_rows]
    n_ids = data.n_ids
    combos = [(b, e) for b in BETAS for e in EPSILONS]

    # validation: the model's held-out training rows; the term counted without them
    t = time.time()
    val_ex = masked_rows(data.train, val_rows, n, 0.15, seed=0)
    sub = data.train.subset(train_rows)
    val_term = BigramContext(sub, counts_of(sub, n_ids))
    _, _, val_targets = val_ex.flat()
    vnet, vhyb = fused_ranks(p.model, p.hashing, val_ex, val_term, combos)
    vterm = target_ranks(val_term.rank(*neighbours(val_ex), DEPTH), val_targets)
    val_table = {f"{b}/{e}": float(hits_at(r, 10).mean()) for (b, e), r in vhyb.items()}
    best = choose(vhyb, np.ones(len(val_targets), bool))
    vknown = known_neighbours(val_ex)  # a mix per amount of the term's evidence (0, 1, 2 known neighbours)
    per = {k: (choose(vhyb, vknown == k) if (vknown == k).any() else best) for k in (0, 1, 2)}
    val_s = time.time() - t
    print(json.dumps({"val_examples": len(val_targets), "network": float(hits_at(vnet, 10).mean()),
                      "term": float(hits_at(vterm, 10).mean()), "best": best,
                      "hybrid": float(hits_at(vhyb[best], 10).mean()), "seconds": round(val_s, 1)}), flush=True)

    # test: the text protocol's tokens, the baseline's own term
    t = time.time()
    ex = TextMasking(n=n, max_sets=args.max_sets, seed=0).examples(data)
    _, _, targets = ex.flat()
    groups = ex.rows[ex.flat()[0]]
    term = BigramContext(data.train, np.asarray(data.counts))
    net, hyb = fused_ranks(p.model, p.hashing, ex, term, sorted({best, *per.values()}))
    known = known_neighbours(ex)
    hyb_per = np.select([known == k for k in (0, 1, 2)], [hyb[per[k]] for k in (0, 1, 2)])
    trm = target_ranks(term.rank(*neighbours(ex), DEPTH), targets)
    test_s = time.time() - t
    methods = {"hybrid": hyb[best], PER: hyb_per, "network alone": net, "term alone (bigram baseline)": trm}
    res = {name: summarize_ci(r, groups) for name, r in methods.items()}
    by_context = context_buckets(ex, methods, groups)
    pairs = {}
    for a, b in (("hybrid", "term alone (bigram baseline)"), (PER, "term alone (bigram baseline)"),
                 ("hybrid", "network alone"),
                 ("network alone", "term alone (bigram baseline)")):
        pairs[f"{a} - {b}"] = {f"rec@{k}": paired_difference(hits_at(methods[a], k), hits_at(methods[b], k), groups)
                               for k in (1, 10, 20)}
    result = {"benchmark": "text_fusion", "machine": machine_info() | {"torch_threads": args.threads},
              "model": args.model, "model_parameters": p.n_parameters, "model_train": saved["train"],
              "validation": {"rows": int(len(val_rows)), "examples": int(len(val_targets)),
                             "network_rec@10": float(hits_at(vnet, 10).mean()),
                             "term_rec@10": float(hits_at(vterm, 10).mean()), "hybrid_rec@10_by_beta/eps": val_table,
                             "chosen": {"beta": best[0], "eps": best[1]},
                             "chosen_per_known_neighbours": {str(k): {"beta": c[0], "eps": c[1]} for k, c in per.items()},
                             "examples_per_known_neighbours": {str(k): int((vknown == k).sum()) for k in (0, 1, 2)},
                             "seconds": round(val_s, 1)},
              "test": {"rows": int(len(ex.rows)), "examples": int(len(targets)), "methods": res, "paired": pairs,
                       "by_known_neighbours": by_context, "seconds": round(test_s, 1)},
              "load_before": load0, "load_after": os.getloadavg(), "total_s": round(time.time() - t0, 1),
              "hash": saved["hash"]}
    write_results(ROOT / "benchmarks" / "results" / "text", args.name, result, report(result))
    print(json.dumps({k: round(v["rec@10"], 4) for k, v in res.items()}))


def report(r: dict) -> list[str]:
    v, t = r["validation"], r["test"]
    md = ["# The text hybrid: the network, the bigram-context term, and both (issue 33, item 4)", "",
          f"`benchmarks/text/fusion_bench.py --model {r['model']}` ({r['model_parameters'] / 1e6:.1f}M parameters, "
          f"hash alpha {r['hash']['alpha']}, m {r['hash']['m']}). Test: {t['examples']:,} masked tokens of "
          f"{t['rows']} held-out test rows (the text protocol of table5_bench.py, seed 0). Every id ranked "
          "exhaustively. Hybrid = network + beta * log(term + eps), beta and eps chosen on validation "
          f"({v['examples']:,} masked tokens of {v['rows']} training rows the model never trained on, the term "
          "counted without them): "
          f"beta {v['chosen']['beta']}, eps {v['chosen']['eps']}. The second hybrid chooses them per number of the "
          "target's known neighbours (0, 1, 2) on the same validation: " + ", ".join(
              f"{k}: beta {c['beta']}, eps {c['eps']} ({v['examples_per_known_neighbours'][k]:,} examples)"
              for k, c in v["chosen_per_known_neighbours"].items()) + ".", "",
          "| method | rec@1 | rec@10 [95% CI] | rec@20 | MRR |", "|---|---|---|---|---|"]
    for name, m in t["methods"].items():
        md.append(f"| {name} | {m['rec@1']:.1%} | {m['rec@10']:.1%} [{m['rec@10_lo']:.1%}, {m['rec@10_hi']:.1%}] "
                  f"| {m['rec@20']:.1%} | {m['mrr']:.3f} |")
    md += ["", "Paired differences (whole test rows resampled, 1,000 resamples):", "",
           "| difference | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
    for name, d in t["paired"].items():
        md.append(f"| {name} | " + " | ".join(f"{x['diff']:+.1%} [{x['lo']:+.1%}, {x['hi']:+.1%}]"
                                              for x in d.values()) + " |")
    md += ["", "rec@10 by how many of the target's two neighbours are known tokens (the term's evidence; with "
           "none the term is the unigram list):", "",
           "| known neighbours | examples | hybrid | hybrid per context | network alone | term alone "
           "| hybrid - term [95% CI] | hybrid per context - term [95% CI] | network - term [95% CI] |",
           "|---|---|---|---|---|---|---|---|---|"]
    for k, b in t["by_known_neighbours"].items():
        md.append(f"| {k} | {b['examples']:,} | {b['hybrid']:.1%} | {b[PER]:.1%} | {b['network alone']:.1%} "
                  f"| {b['term alone (bigram baseline)']:.1%} | " + " | ".join(
                      f"{b[x]['diff']:+.1%} [{b[x]['lo']:+.1%}, {b[x]['hi']:+.1%}]"
                      for x in ("hybrid - term", "hybrid per context - term", "network - term")) + " |")
    md += ["", f"Validation rec@10: network {v['network_rec@10']:.1%}, term {v['term_rec@10']:.1%}; hybrid by "
           "beta/eps: " + ", ".join(f"{k} {x:.1%}" for k, x in v["hybrid_rec@10_by_beta/eps"].items()) + ".", "",
           f"Seconds: validation {v['seconds']}, test {t['seconds']}, total {r['total_s']}; load average before "
           f"{[round(x, 2) for x in r['load_before']]}, after {[round(x, 2) for x in r['load_after']]}.", ""]
    return md


if __name__ == "__main__":
    main()
