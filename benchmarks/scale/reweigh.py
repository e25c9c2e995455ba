"""Give a trained hashed-hybrid model the co-occurrence weightings and choose on validation, then evaluate.

    .venv/bin/python -m benchmarks.scale.reweigh DATA MODEL --out WORK/eval_w [--checkpoint NAME]
        [--eval-sets 1000 --seed 0 --threads 1]

The hashed hybrid's term never enters training (heads/hashed_hybrid.py), so a model trained before
the weightings existed (its stored cosine values and neighbour lists) gets them without retraining:
`fit_weightings` on the model's own training rows (the run's seed and validation fraction, as `train`
splits them), then the validation choice of `train` (the masked objective's: MIXES x WEIGHTINGS on the
held-out training sets, rec@10), then `evaluate` with exact decoding on the examples of
benchmarks.scale.time_to_quality / baselines (same --eval-sets / --seed). Writes OUT/result.json,
ranks.npz (EvalResult.save) and timing.json: the seconds of the weightings' fit and of the choice
(what a fresh run would spend on them after training), the chosen mix and weighting, and the
validation scores of every weighting's best mix.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("data", help="the prepared dataset the model was trained on")
    ap.add_argument("model", help="a trained hashed-hybrid model directory (co-occurrence term)")
    ap.add_argument("--out", required=True, help="folder for the evaluation (EvalResult) and timing.json")
    ap.add_argument("--checkpoint", help="a checkpoint of MODEL/checkpoints (default: BEST, as predict / eval / serve)")
    ap.add_argument("--eval-sets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="the evaluation examples' seed")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import superbloom as sb
    from superbloom.data.dataset import Dataset
    from superbloom.evaluation.evaluate import EvalConfig, evaluate
    from superbloom.evaluation.metrics import summarize, target_ranks
    from superbloom.evaluation.protocols import make_examples
    from superbloom.heads.beam import DecodeConfig
    from superbloom.heads.hashed_hybrid import MIXES, WEIGHTINGS
    from superbloom.inference.rank import rank_contexts
    from superbloom.storage.checkpoint import load_weights
    from superbloom.training.objectives import SELECT, VAL_TARGETS_PER_SET
    from superbloom.training.train import split_validation

    t = time.perf_counter()
    sb.set_threads(a.threads)
    p = sb.load(a.model, device="cpu", mmap=False)  # mix and weighting are written below
    if a.checkpoint:
        load_weights(p.model, Path(a.model) / "checkpoints" / a.checkpoint)
    load_s = time.perf_counter() - t
    head, train = p.model.head, p.config["train"]
    if head.cfg.name != "hashed-hybrid" or head.term_name != "cooccurrence":
        raise SystemExit(f"{a.model}: a hashed-hybrid model with the co-occurrence term is needed "
                         f"(got head {head.cfg.name}, term {getattr(head, 'term_name', None)})")
    data = Dataset(a.data)
    seed = train["loop"]["seed"]
    train_rows, val_rows = split_validation(data.train, train["val_fraction"], seed)
    t = time.perf_counter()
    head.fit_weightings(data.train.subset(train_rows))
    fit_s = time.perf_counter() - t
    val = make_examples(data.train.subset(val_rows), train["mask"]["n"], VAL_TARGETS_PER_SET, seed)
    seen = []

    def metrics(ranking):
        s = summarize(target_ranks(ranking.ids.numpy(), val.targets))
        seen.append(s[SELECT])
        return s

    t = time.perf_counter()
    chosen = head.choose(lambda: rank_contexts(p.model, p.hashing, val.contexts, 20, DecodeConfig()), metrics, SELECT).record()
    choose_s = time.perf_counter() - t
    n_mix = len(MIXES) - 1
    per_weighting = {w: max(seen[1 + i * n_mix:1 + (i + 1) * n_mix]) for i, w in enumerate(WEIGHTINGS)}
    cfg = EvalConfig(seed=a.seed, max_sets=a.eval_sets, baselines=(), decode=DecodeConfig(exact=True))
    t = time.perf_counter()
    result = evaluate(p, data, cfg, progress=False)
    eval_s = time.perf_counter() - t
    out = Path(a.out)
    result.save(out)
    timing = {"load_s": round(load_s, 2), "fit_weightings_s": round(fit_s, 1), "choose_s": round(choose_s, 1),
              "eval_s": round(eval_s, 1), "examples": int(len(result.targets)), "validation_examples": int(len(val.targets)),
              "checkpoint": a.checkpoint or p.config.get("checkpoint"), "chosen": chosen,
              f"validation_{SELECT}_by_weighting": per_weighting, "pure_validation": seen[0],
              "decode": dataclasses.asdict(cfg.decode)}
    (out / "timing.json").write_text(json.dumps(timing, indent=1, default=float))
    print(json.dumps(timing, default=float))


if __name__ == "__main__":
    main()
