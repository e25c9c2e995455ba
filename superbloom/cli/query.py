"""Commands that use a trained model: eval, predict (one context or a file), expand, similar-ids, vectors, serve."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..evaluation.config import BASELINE_NAMES, EvalConfig
from ..inference.expand import ExpandConfig
from ..inference.parts import PARTS
from . import checks
from .flags import (NONNEG, PORT, POS_INT, add_decode_args, add_device_arg, decode_config, default_of,
    finite)
from .flags import add_quiet_arg, add_threads_arg, deprecated_alias
from .flags import add_model_command, finish_model_command
from .settings import add_config, values
from .._settings import replaced


def register(sub):
    for add in (_add_eval, _add_predict, _add_expand, _add_similar, _add_vectors, _add_serve):
        add(sub)


def _add_eval(sub):
    e = lambda name: default_of(EvalConfig, name)  # noqa: E731
    p = sub.add_parser("eval", help="the paper's protocol on the held-out sets, with baselines",
                       description="For each held-out set: a random segment of up to 32 ids, one random id held "
                                   "out, the rest is the context (excluded from the ranking). Reports rec@1/10/20, "
                                   "MRR and NDCG@10 for the model and for baselines on the same examples.")
    p.add_argument("model", help="model directory")
    p.add_argument("data", help="prepared dataset directory (the one the model was trained on)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_config(p, EvalConfig, only=("seed", "targets_per_set", "max_sets", "depth"))
    g = p.add_argument_group("sequence recommendation (datasets from prepare --split leave-one-out)")
    add_config(g, EvalConfig, only=("protocol", "split", "context_len", "exclude_history", "cooc_last"))
    deprecated_alias(p, "--split", "--holdout")  # --split is prepare's split kind
    p.add_argument("--baselines", default=",".join(e("baselines")),
                   help=f"comma-separated: {', '.join(BASELINE_NAMES)}; or 'none'; the text protocol ranks its own "
                        "(default %(default)s)")
    add_config(p, EvalConfig, only=("batch_size",))
    p.add_argument("--compare", action="append", default=[], metavar="MODEL_DIR",
                   help="another model trained on the same dataset (repeatable): evaluated on the same examples, "
                        "with the paired difference of MODEL minus it, and minus each baseline, and the bootstrap "
                        "interval of each difference")
    add_ensemble_args(p)
    p.add_argument("--threads", type=checks.THREADS, default=0, help="torch CPU threads, 0: torch's default (default 0)")
    add_device_arg(p)
    add_decode_args(p)
    add_quiet_arg(p)
    p.set_defaults(func=cmd_eval)


def _add_predict(sub):
    p = sub.add_parser("predict", help="top-k ids for a context of ids, or for every context of a file",
                       description="Predict the missing ids of a set from the given ids (as they appear in the "
                                   "data, e.g. Copenhagen, or URL-decoded). With --input, predict for every "
                                   "context of a JSONL or Parquet file into a Parquet file (--out).")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="*", help="context ids (without --input)")
    p.add_argument("-k", "--k", type=POS_INT, default=10, help="ids to return (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the shape of POST /v1/predict's answer)")
    add_filter_args(p, "a context's own ids")
    g = p.add_argument_group("bulk (a file of contexts)")
    g.add_argument("--input", metavar="FILE", help='contexts: .jsonl ({"context": [ids], "id": key}, key optional) '
                   "or .parquet (a list column, --context-column, and an optional key column, --key-column)")
    g.add_argument("--out", metavar="FILE", help="recommendations, Parquet: key, rank, id, score, exact")
    g.add_argument("--context-column", default="context", help="the list-of-ids field (default %(default)s)")
    g.add_argument("--key-column", default="id", help="the row key field, if present; else the row number "
                   "(default %(default)s)")
    g.add_argument("--batch-size", type=POS_INT, default=256, help="contexts per model call (default %(default)s)")
    deprecated_alias(p, "--output", "--out")  # --out is what every command writes
    add_ensemble_args(p)
    add_part_arg(p)
    add_device_arg(p)
    add_decode_args(p)
    add_threads_arg(p)
    add_quiet_arg(p)
    p.set_defaults(func=cmd_predict)


def add_filter_args(p, seen: str | None) -> None:
    """--allow / --deny (a file of ids, one per line), --allow-ids / --deny-ids (the ids inline, comma
    separated; with the file, their union) and --include-seen (`seen` None: none, as for expand, which
    never adds an id twice): the filters of predict, similar-ids and expand."""
    g = p.add_argument_group("filters (the same in Python: allow=, deny=, exclude_seen=; over HTTP: allow, deny, "
                             "include_seen)" if seen else "filters (the same in Python: allow=, deny=; over HTTP: "
                             "allow, deny)")
    g.add_argument("--allow", metavar="FILE", help="only return ids of this file (one id per line); exact decoding "
                   "is exact among them")
    g.add_argument("--allow-ids", metavar="ID,ID", help="only return these ids (comma separated), with --allow's")
    g.add_argument("--deny", metavar="FILE", help="never return ids of this file (one id per line)")
    g.add_argument("--deny-ids", metavar="ID,ID", help="never return these ids (comma separated), with --deny's")
    if seen:
        g.add_argument("--include-seen", action="store_true",
                       help=f"{seen} may be returned too (re-purchase; default: never)")


def filter_lists(args, model) -> dict[str, list[str]]:
    """The allow- and deny-lists of --allow/--allow-ids and --deny/--deny-ids -> {"allow": ids, "deny": ids}
    (those given), with a note on stderr for the ids not in the model's vocabulary."""
    from ..inference.bulk import read_ids

    lists = {}
    for name in ("allow", "deny"):
        path, inline = getattr(args, name), getattr(args, f"{name}_ids")
        if path is None and inline is None:
            continue
        ids = (read_ids(path) if path else []) + [x.strip() for x in (inline or "").split(",") if x.strip()]
        where = " and ".join(([f"--{name} {path}"] if path else []) + ([f"--{name}-ids"] if inline else []))
        if not ids:
            raise ValueError(f"{where}: no id given")
        unknown = model.resolve(ids, name)[1]
        if unknown:
            print(f"note: {len(unknown):,} of the {len(ids):,} ids of {where} are not in the model's "
                  f"vocabulary (ignored; first: {', '.join(unknown[:5])})", file=sys.stderr)
        lists[name] = ids
    return lists


def check_filter_files(args) -> None:
    """--allow / --deny files exist (checked before the model loads and before any output)."""
    for flag in ("allow", "deny"):
        path = getattr(args, flag)
        if path and not Path(path).is_file():
            raise ValueError(f"--{flag} {path}: no such file")


def add_ensemble_args(p) -> None:
    g = p.add_argument_group("ensemble (several models of the same data ranked as one)")
    g.add_argument("--with", dest="ensemble", action="append", default=[], metavar="MODEL_DIR",
                   help="another model trained on the same dataset (repeatable; another seed or recipe; full or "
                        "hybrid heads): MODEL and these rank by the mean of their networks' log p, plus "
                        "--item-mix x the first hybrid's item-item term (sb.Ensemble)")
    g.add_argument("--item-mix", dest="item_mix", type=NONNEG, default=None,
                   help="with --with: the term's weight (default: the median of the hybrid models' own "
                        "validated weights; 0: the networks alone)")


def add_part_arg(p) -> None:
    p.add_argument("--part", choices=PARTS, default="whole",
                   help="what ranks: the whole model (default), its network alone (a hybrid at weight 0, an "
                        "ensemble's networks) or its item-item term alone, no network (where `train` said the "
                        "network adds nothing); `eval` reports all three")


def load_model(args):
    """MODEL (a Predictor), or with --with the models as one sb.Ensemble (--item-mix its weight), ranking by
    --part (where the command has it)."""
    from ..inference.loader import load
    from ..inference.parts import rank_by

    model = load(args.model, args.device)
    if args.ensemble:
        from ..inference.ensemble import Ensemble

        others = [load(path, args.device) for path in args.ensemble]
        model = Ensemble([model, *others], args.item_mix, [args.model, *args.ensemble])
    elif args.item_mix is not None:
        raise ValueError("--item-mix weighs an ensemble's term: give the other models with --with MODEL_DIR")
    return rank_by(model, getattr(args, "part", "whole"))  # eval has no --part: it reports every part


def note_over(flag: str, value: int, n: int, what: str, then: str) -> None:
    """A note on stderr when a size flag asks for more than exists (the library clamps it to n)."""
    if value > n:
        print(f"note: {flag} {value} is more than the model's {n:,} {what}; {then}", file=sys.stderr)


def _add_expand(sub):
    p = sub.add_parser("expand", help="grow a set one predicted id at a time",
                       description="Set expansion: predict, add the best (or a sampled) id to the set, predict "
                                   "again; each added id joins the context of the next prediction.")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="+", help="seed ids")
    add_config(p, ExpandConfig, skip=("decode",))
    deprecated_alias(p, "--steps", "--add")  # --steps is train's step limit
    p.add_argument("--json", action="store_true", help="print one JSON object (the shape of POST /v1/expand's answer)")
    add_filter_args(p, None)
    add_part_arg(p)
    add_device_arg(p)
    add_decode_args(p)
    add_threads_arg(p)
    p.set_defaults(func=cmd_expand)


def _add_similar(sub):
    p = add_model_command(sub, "similar-ids", help="the ids whose item vectors are most similar to an id's (cosine)",
                          description="Item vectors are the mean of each id's m input token embeddings "
                                      "(inference/vectors.py).")
    p.add_argument("ids", nargs="+", metavar="id", help="ids of the vocabulary (each answered in turn)")
    p.add_argument("-k", "--k", type=POS_INT, default=10, help="ids to return per id (default %(default)s)")
    add_filter_args(p, "the queried id itself")
    finish_model_command(p, cmd_similar, 'print JSON: for one id a list [{"id": ..., "cosine": ...}], most similar '
                                         'first; for several, POST /v1/similar-items\' answer {"results": [...]}')


def _add_vectors(sub):
    p = add_model_command(sub, "vectors", help="export every id's item vector to .npy or .parquet",
                          description="Item vectors: the mean of each id's m input token embeddings. .npy: the "
                                      "(N, d) float32 matrix, row i = vocabulary id i; .parquet: columns id, vector.")
    p.add_argument("--out", required=True, metavar="FILE", help="output file, .npy or .parquet")
    finish_model_command(p, cmd_vectors, "print one JSON object: the file, its ids and dimensions")


def _add_serve(sub):
    from ..serving.config import ServeConfig

    p = sub.add_parser("serve", help="HTTP API and web page for a model",
                       description="Serve a model: JSON API (docs at /docs) and a web page at /. "
                                   "The model is loaded once; concurrent requests are batched.")
    p.add_argument("model", help="model directory")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=PORT, default=8000, help="port (default %(default)s)")
    p.add_argument("--threads", type=checks.THREADS, default=1,
                   help="torch CPU threads for inference (default 1: requests are batched instead; intra-op "
                        "threads spin and stall when the cores are shared with the server itself)")
    add_config(p.add_argument_group("limits"), ServeConfig)
    p.add_argument("--workers", type=checks.WORKERS, default=1,
                   help="server processes on the one port, sharing the memory-mapped weights; the kernel gives "
                        "each new connection to one of them (default %(default)s)")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True,
                   help="log every request (default %(default)s)")
    add_part_arg(p)
    p.add_argument("--embed", metavar="EMBED_DIR", default=None,
                   help="also serve a set embedding (superbloom embed-train) at /v1/similar and /v1/classify")
    add_device_arg(p)
    p.set_defaults(func=cmd_serve)


def cmd_eval(args):
    from ..data.dataset import Dataset
    from ..evaluation.evaluate import evaluate
    from ..inference.loader import load

    baselines = () if args.baselines == "none" else tuple(b for b in args.baselines.split(",") if b)
    cfg = replaced(EvalConfig(decode=decode_config(args), baselines=baselines),
                   {p: v for p, v in values(args.parser, args, given_only=False).items() if not p.startswith("decode.")})
    model, data = load_model(args), Dataset(args.data)
    note_over("--depth", args.depth, data.n_ids, "ids", "every id is retrieved")
    # a model of several parts (a hybrid, an ensemble: its head's variants) is always reported with the paired
    # difference of the whole minus each part alone (and minus each baseline), as --compare reports it
    if args.compare or model.variants():
        from ..evaluation.compare import check_comparable, compare
        for path in args.compare:  # before any evaluation
            check_comparable(path, data)
        others = {path: (lambda path=path: load(path, args.device)) for path in args.compare}
        result = compare(model, others, data, cfg, progress=not (args.json or args.quiet))
    else:
        result = evaluate(model, data, cfg, progress=not (args.json or args.quiet))
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.report())
    if not args.ensemble:  # MODEL's own evaluation: onto its card (an ensemble of --with models is no folder's)
        _record(args.model, result)


def _record(model_dir, result) -> None:
    """eval.json and the model card of MODEL updated (training/card.py); a folder we cannot write: a note."""
    from ..training.card import record_evaluation

    try:
        card = record_evaluation(model_dir, result)
    except OSError as e:
        print(f"note: the model card was not updated ({e})", file=sys.stderr)
        return
    print(f"{card}: the model card now shows this evaluation (eval.json beside it)", file=sys.stderr)


def cmd_predict(args):
    from ..inference.bulk import bulk_predict

    if bool(args.input) == bool(args.ids) or bool(args.input) != bool(args.out):
        raise ValueError("predict: give context ids, or --input FILE with --out FILE (not both)")
    if args.input and not Path(args.input).is_file():  # checked before the model loads and before any output
        raise ValueError(f"--input {args.input}: no such file")
    check_filter_files(args)
    if args.out:  # before the model loads: a user's file, a folder or a device is refused (storage/guarded.py)
        from ..inference.bulk import claim_output
        claim_output(args.out)
    model = load_model(args)
    note_over("--k", args.k, len(model.vocab), "ids", "at most those (less the context) can be returned")
    lists = filter_lists(args, model)
    if args.input:
        stats = bulk_predict(model, args.input, args.out, args.k, decode_config(args), lists.get("allow"),
                             lists.get("deny"), args.context_column, args.key_column, args.batch_size,
                             progress=not args.quiet, exclude_seen=not args.include_seen)
        print(stats.summary(), file=sys.stderr)
        return
    pred = model.predict(args.ids, args.k, decode_config(args), lists.get("allow"), lists.get("deny"),
                         exclude_seen=not args.include_seen)
    # no known id: a ValueError, like the API's 422
    if args.json:  # the shape of POST /v1/predict's answer
        print(json.dumps(model.prediction_json(pred), indent=2))
        return
    if pred.unknown:
        print(f"unknown ids (ignored): {', '.join(pred.unknown)}")
    if pred.repeated:
        print(f"repeated ids (counted once): {pred.repeated}")
    print(f"context: {', '.join(model.vocab.display(i) for i in model.vocab.lookup(pred.context)[0])}")
    print(f"top-{min(args.k, len(model.vocab))} ({'certified exact' if pred.exact else 'approximate'}, beam {pred.beam}):")
    for r, (i, s) in enumerate(pred.items, 1):
        print(f"  {r:>3}. {model.vocab.display(model.vocab.get(i)):<40} {s:9.3f}")


def cmd_expand(args):
    from ..inference.expand import expand
    from ..inference.loader import load

    check_filter_files(args)
    model = load(args.model, device=args.device, part=args.part)
    note_over("--k", args.k, len(model.vocab), "ids", "at most those (less the set) are ranked per step")
    cfg = replaced(ExpandConfig(decode=decode_config(args)),
                   {p: v for p, v in values(args.parser, args, given_only=False).items() if not p.startswith("decode.")})
    out = expand(model, args.ids, cfg, **filter_lists(args, model))
    if args.json:  # the shape of POST /v1/expand's answer
        added = [dict(id=a.id, display=model.vocab.display(model.vocab.get(a.id)), score=finite(a.score),
                      exact=a.exact) for a in out.added]
        print(json.dumps({"seed": out.seed, "unknown": out.unknown, "repeated": out.repeated, "added": added},
                         indent=2))
        return
    if out.unknown:
        print(f"unknown ids (ignored): {', '.join(out.unknown)}")
    if out.repeated:
        print(f"repeated ids (counted once): {out.repeated}")
    shown = lambda i: model.vocab.display(model.vocab.get(i))  # noqa: E731
    print(f"seed: {', '.join(map(shown, out.seed))}")
    print(f"added ({args.strategy}{f', temperature {args.temperature}' if args.strategy == 'sample' else ''}):")
    for r, a in enumerate(out.added, 1):
        print(f"  {r:>3}. {shown(a.id):<40} {a.score:9.3f}{'' if a.exact else '  (approximate)'}")


def cmd_similar(args):
    from ..inference.loader import load

    check_filter_files(args)
    model = load(args.model, device=args.device)
    note_over("--k", args.k, len(model.vocab) - 1, "other ids", "at most those can be returned")
    lists = filter_lists(args, model)
    got = model.similar_items(args.ids, args.k, exclude_seen=not args.include_seen, **lists)  # an unknown id: exit 2
    shown = lambda i: model.vocab.display(i)  # noqa: E731
    if args.json:
        rows = [[{"id": i, "cosine": float(c)} for i, c in got.items(q)] for q in range(len(got))]
        if len(args.ids) == 1:
            print(json.dumps(rows[0], indent=2))
            return
        print(json.dumps({"results": [{"id": x, "display": shown(model.vocab.get(x)), "similar": [
            dict(r, display=shown(model.vocab.get(r["id"]))) for r in row]} for x, row in zip(args.ids, rows)]},
            indent=2))
        return
    for q, x in enumerate(args.ids):
        if len(args.ids) > 1:
            print(f"{shown(model.vocab.get(x))}:")
        for r, (i, c) in enumerate(got.items(q), 1):
            print(f"  {r:>3}. {shown(model.vocab.get(i)):<40} {c:7.3f}")


def cmd_vectors(args):
    from ..inference.loader import load
    from ..inference.vectors import claim_vectors, save_vectors

    target = claim_vectors(args.out)  # before the model loads: a user's file, a folder or a device is refused
    model = load(args.model, device=args.device)
    vecs = model.item_vectors()
    path = save_vectors(target, vecs, model.vocab.strings)
    if args.json:
        print(json.dumps({"out": str(path), "ids": int(vecs.shape[0]), "d": int(vecs.shape[1])}, indent=2))
        return
    print(f"{path}: {vecs.shape[0]:,} item vectors of {vecs.shape[1]} dims", file=sys.stderr)


def cmd_serve(args):
    from ..serving.launch import ServeConfig, serve

    cfg = replaced(ServeConfig(), values(args.parser, args, given_only=False))
    serve(args.model, args.host, args.port, cfg, args.threads, access_log=args.access_log, device=args.device,
          embed=args.embed, workers=args.workers, log_level=args.log_level, part=args.part)
