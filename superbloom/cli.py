"""The `superbloom` command: a thin layer over the library; the only place that parses arguments.

    superbloom demo                                   # the main job on the embedded Wikispeedia links
    superbloom prepare INPUT --format edges --out DATA_DIR
    superbloom train DATA_DIR --out MODEL_DIR --time-budget 600
    superbloom eval MODEL_DIR DATA_DIR [--json]
    superbloom predict MODEL_DIR Copenhagen [--k 10]
    superbloom expand MODEL_DIR Copenhagen [--steps 10] [--strategy sample --temperature 0.7]
    superbloom serve MODEL_DIR [--host 127.0.0.1] [--port 8000]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from .batches import MaskConfig
from .decode import SCORES, DecodeConfig
from .expand import STRATEGIES
from .hashing import HashConfig
from .heads import HEADS, PROPOSALS, TREES, HeadConfig
from .model import ModelConfig
from .readers import FORMATS, InputError, ReadConfig
from .train import TrainConfig


def _default(cls, name):
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default


def _add_prepare(sub):
    p = sub.add_parser("prepare", help="split sets, build the vocabulary, write a memory-mapped dataset",
                       description="Read links, split the sets into train/test (seeded), build the vocabulary "
                                   "from the training sets and write a compact memory-mappable dataset.")
    p.add_argument("input", help="input file (.gz allowed for text formats)")
    p.add_argument("--format", choices=FORMATS, default="edges",
                   help="edges: set<TAB>id per line; lines: 'set id id ...'; jsonl: {\"set\":..,\"ids\":[..]}; "
                        "parquet: two columns (default: edges)")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--test-fraction", type=float, default=0.1, help="fraction of sets held out (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    p.add_argument("--set-column", type=int, default=0, help="edges/parquet: column of the set key (default 0)")
    p.add_argument("--id-column", type=int, default=1, help="edges/parquet: column of the id (default 1; "
                                                            "2 for head/relation/tail triples)")
    p.add_argument("--undirected", action="store_true", help="edges: also add every link reversed "
                                                             "(neighbour sets of a graph)")
    p.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of failing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_prepare)


def _add_train(sub):
    p = sub.add_parser("train", help="train a model on a prepared dataset",
                       description="Masked training of a Superbloom model. Stops at --steps, --epochs or "
                                   "--time-budget, whichever comes first; checkpoints are resumable.")
    p.add_argument("data", help="prepared dataset directory")
    p.add_argument("--out", required=True, help="model directory to write")
    g = p.add_argument_group("hashing")
    g.add_argument("--alpha", type=int, default=_default(HashConfig, "alpha"), help="ids per hash bucket")
    g.add_argument("--m", type=int, default=_default(HashConfig, "m"), help="hash functions per id")
    g.add_argument("--hash-seed", type=int, default=_default(HashConfig, "seed"))
    g.add_argument("--coherent", type=int, default=_default(HashConfig, "coherent"),
                   help="how many of the m maps are coherent: similar ids (training co-occurrence) share a "
                        "bucket (appendix C); the rest are random (default 0)")
    g = p.add_argument_group("model")
    g.add_argument("--d", type=int, default=_default(ModelConfig, "d"), help="embedding / hidden size")
    g.add_argument("--heads", type=int, default=_default(ModelConfig, "heads"), help="attention heads")
    g.add_argument("--d-ff", type=int, default=_default(ModelConfig, "d_ff"), help="feed-forward size")
    g.add_argument("--layers", type=int, default=_default(ModelConfig, "layers"), help="Transformer layers")
    g.add_argument("--dropout", type=float, default=_default(ModelConfig, "dropout"),
                   help="dropout on embeddings and residual branches")
    g.add_argument("--attn-dropout", type=float, default=_default(ModelConfig, "attn_dropout"),
                   help="dropout on attention weights")
    g.add_argument("--positions", type=int, default=0,
                   help="learned position embeddings for ordered data, up to this many elements (default 0: a set)")
    g.add_argument("--post-ln", action="store_true", help="post-LN blocks as in the paper (default: pre-LN)")
    g.add_argument("--head", choices=sorted(HEADS), default="superbloom",
                   help="output layer: superbloom (hashed softmax), full (one row per id), sampled (sampled "
                        "softmax), hierarchical (tree softmax); the last three are the paper's baselines, unhashed "
                        "with --alpha 1 --m 1 (then full and sampled tie their output rows to the input embedding)")
    g.add_argument("--per-hash-softmax", action="store_true",
                   help="superbloom head: softmax j over map j's tokens only")
    g.add_argument("--label-smoothing", type=float, default=0.0, help="superbloom and full heads")
    g.add_argument("--samples", type=int, default=_default(HeadConfig, "samples"),
                   help="sampled head: ids drawn per training step (default %(default)s)")
    g.add_argument("--proposal", choices=PROPOSALS, default=_default(HeadConfig, "proposal"),
                   help="sampled head: proposal distribution (default %(default)s)")
    g.add_argument("--tree", choices=TREES, default=_default(HeadConfig, "tree"),
                   help="hierarchical head: tree built from the training counts (default %(default)s)")
    g = p.add_argument_group("training examples (sec. 3.1)")
    g.add_argument("--segment", type=int, default=_default(MaskConfig, "n"), help="max ids per segment")
    g.add_argument("--mask-rate", type=float, default=_default(MaskConfig, "mask_rate"),
                   help="fraction of a segment's ids masked (at least one)")
    g = p.add_argument_group("optimisation")
    for name, typ, hlp in [("batch_size", int, "sets per step"), ("lr", float, "peak learning rate"),
                           ("warmup", int, "warm-up steps"), ("weight_decay", float, "AdamW weight decay"),
                           ("clip", float, "gradient norm clip"), ("steps", int, "stop after N steps"),
                           ("epochs", float, "stop after N passes"), ("time_budget", float, "stop after N seconds"),
                           ("eval_every", int, "validate every N steps"),
                           ("checkpoint_every", float, "seconds between checkpoints"),
                           ("val_fraction", float, "training sets held out for validation"),
                           ("seed", int, "training seed"), ("threads", int, "torch CPU threads (0: default)")]:
        d = _default(TrainConfig, name)
        g.add_argument("--" + name.replace("_", "-"), type=typ, default=d, help=f"{hlp} (default {d})")
    g.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    g.add_argument("--no-keep-best", dest="keep_best", action="store_false",
                   help="serve the last weights instead of those with the best validation rec@10")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def _add_decode_args(p):
    g = p.add_argument_group("decoding (Algorithm 1)")
    g.add_argument("--beam", type=int, default=None, help="beam width B per hash map (default: B = k)")
    g.add_argument("--exact", action="store_true", help="widen the beam until the top-k is certified exact")
    g.add_argument("--score", choices=sorted(SCORES), default="sum_log", help="gamma: how m scores combine")
    g.add_argument("--exhaustive", action="store_true", help="score every id (reference; slow)")


def _add_eval(sub):
    p = sub.add_parser("eval", help="the paper's protocol on the held-out sets, with baselines",
                       description="For each held-out set: a random segment of up to 32 ids, one random id held "
                                   "out, the rest is the context (excluded from the ranking). Reports rec@1/10/20, "
                                   "MRR and NDCG@10 for the model and for baselines on the same examples.")
    p.add_argument("model", help="model directory")
    p.add_argument("data", help="prepared dataset directory (the one the model was trained on)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--seed", type=int, default=0, help="example sampling seed (default 0)")
    p.add_argument("--targets-per-set", type=int, default=1, help="held-out ids per set (default 1)")
    p.add_argument("--max-sets", type=int, default=0, help="use at most N held-out sets (default: all)")
    p.add_argument("--depth", type=int, default=20, help="ids retrieved per example (default 20)")
    p.add_argument("--baselines", default="popularity,cooccurrence",
                   help="comma-separated: popularity, cooccurrence, ease; or 'none' (default popularity,cooccurrence)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=0)
    _add_decode_args(p)
    p.set_defaults(func=cmd_eval)


def _add_predict(sub):
    p = sub.add_parser("predict", help="top-k ids for a context of ids",
                       description="Predict the missing ids of a set from the given ids (as they appear in the "
                                   "data, e.g. Copenhagen, or URL-decoded).")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="+", help="context ids")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--json", action="store_true")
    _add_decode_args(p)
    p.set_defaults(func=cmd_predict)


def _add_expand(sub):
    p = sub.add_parser("expand", help="grow a set one predicted id at a time",
                       description="Set expansion: predict, add the best (or a sampled) id to the set, predict "
                                   "again; each added id joins the context of the next prediction.")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="+", help="seed ids")
    p.add_argument("--steps", type=int, default=10, help="ids to add (default 10)")
    p.add_argument("--strategy", choices=STRATEGIES, default="argmax", help="argmax, or sample from "
                   "softmax(score / temperature) over the top k (default argmax)")
    p.add_argument("--temperature", type=float, default=1.0, help="sample: temperature (default 1.0)")
    p.add_argument("--k", type=int, default=10, help="candidates ranked per step (default 10)")
    p.add_argument("--seed", type=int, default=0, help="sample: random seed (default 0)")
    p.add_argument("--json", action="store_true")
    _add_decode_args(p)
    p.set_defaults(func=cmd_expand)


def _add_serve(sub):
    from .serve import ServeConfig

    p = sub.add_parser("serve", help="HTTP API and web page for a model",
                       description="Serve a model: JSON API (docs at /docs) and a web page at /. "
                                   "The model is loaded once; concurrent requests are batched.")
    p.add_argument("model", help="model directory")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads for inference (default 1: requests are batched instead; intra-op "
                        "threads spin and stall when the cores are shared with the server itself)")
    for name, hlp in [("max_context", "ids per context / seed"), ("max_k", "largest k"),
                      ("max_steps", "largest expansion"), ("max_body_bytes", "request body size"),
                      ("max_batch", "queries per model call")]:
        d = _default(ServeConfig, name)
        p.add_argument("--" + name.replace("_", "-"), type=int, default=d, help=f"{hlp} (default {d})")
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    p.set_defaults(func=cmd_serve)


def _add_demo(sub):
    p = sub.add_parser("demo", help="the main job: prepare, train, evaluate and predict on the embedded "
                                    "Wikispeedia links", description=cmd_demo.__doc__)
    p.add_argument("--out", default="runs/demo", help="working directory (default runs/demo)")
    p.add_argument("--time-budget", type=float, default=720.0, help="training seconds (default 720)")
    p.add_argument("--input", default=None, help="links file instead of the embedded Wikispeedia links")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="superbloom", description="Superbloom: Bloom-filter hashing + "
                                     "Transformers for set completion over huge id vocabularies.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_demo, _add_prepare, _add_train, _add_eval, _add_predict, _add_expand, _add_serve):
        add(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except (InputError, FileNotFoundError, ValueError) as e:
        print(f"superbloom {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# ---------------------------------------------------------------- commands


def cmd_prepare(args):
    from .prepare import PrepareConfig, format_summary, prepare

    read = ReadConfig(args.format, args.set_column, args.id_column, args.undirected, args.skip_malformed)
    summary = prepare(PrepareConfig(args.input, args.out, read, args.test_fraction, args.seed))
    print(json.dumps(summary, indent=2) if args.json else f"prepared {args.out}\n{format_summary(summary)}")


def train_config_from_args(args) -> TrainConfig:
    model = ModelConfig(vocab_size=0, d=args.d, heads=args.heads, d_ff=args.d_ff, layers=args.layers,
                        dropout=args.dropout, attn_dropout=args.attn_dropout, positions=args.positions,
                        norm_first=not args.post_ln)
    head = HeadConfig(args.head, args.per_hash_softmax, args.label_smoothing, args.samples, args.proposal, args.tree)
    names = ["batch_size", "lr", "warmup", "weight_decay", "clip", "steps", "epochs", "time_budget",
             "eval_every", "checkpoint_every", "val_fraction", "seed", "threads", "resume", "keep_best"]
    mask = MaskConfig(n=args.segment, mask_rate=args.mask_rate)
    return TrainConfig(data=args.data, out=args.out, hash=HashConfig(args.alpha, args.m, args.hash_seed, args.coherent),
                       model=model, head=head, mask=mask, **{n: getattr(args, n) for n in names})


def cmd_train(args):
    from .train import train

    out = train(train_config_from_args(args), progress=not args.quiet)
    print(f"model written to {out}")


def _decode(args) -> DecodeConfig:
    return DecodeConfig(args.beam, args.exact, args.score, args.exhaustive)


def cmd_eval(args):
    from .dataset import Dataset
    from .evaluate import EvalConfig, evaluate, format_report
    from .predictor import load

    baselines = () if args.baselines == "none" else tuple(b for b in args.baselines.split(",") if b)
    cfg = EvalConfig(args.seed, 32, args.targets_per_set, args.depth, _decode(args), baselines,
                     args.batch_size, args.max_sets)
    result = evaluate(load(args.model, args.threads), Dataset(args.data), cfg, progress=not args.json)
    print(json.dumps(result, indent=2) if args.json else format_report(result))


def cmd_predict(args):
    from .predictor import load

    model = load(args.model)
    pred = model.predict(args.ids, args.k, _decode(args))
    if args.json:
        print(json.dumps(dataclasses.asdict(pred), indent=2))
        return
    if pred.unknown:
        print(f"unknown ids (ignored): {', '.join(pred.unknown)}")
    if not pred.context:
        raise ValueError("none of the given ids is in the model's vocabulary")
    print(f"context: {', '.join(model.vocab.display(i) for i in model.vocab.lookup(pred.context)[0])}")
    print(f"top-{args.k} ({'certified exact' if pred.exact else 'approximate'}, beam {pred.beam}):")
    for r, (i, s) in enumerate(pred.items, 1):
        print(f"  {r:>3}. {model.vocab.display(model.vocab.get(i)):<40} {s:9.3f}")


def cmd_expand(args):
    from .expand import ExpandConfig, expand
    from .predictor import load

    model = load(args.model)
    cfg = ExpandConfig(args.steps, args.strategy, args.temperature, args.k, args.seed, _decode(args))
    out = expand(model, args.ids, cfg)
    if args.json:
        print(json.dumps(dataclasses.asdict(out), indent=2))
        return
    if out.unknown:
        print(f"unknown ids (ignored): {', '.join(out.unknown)}")
    shown = lambda i: model.vocab.display(model.vocab.get(i))  # noqa: E731
    print(f"seed: {', '.join(map(shown, out.seed))}")
    print(f"added ({args.strategy}{f', temperature {args.temperature}' if args.strategy == 'sample' else ''}):")
    for r, a in enumerate(out.added, 1):
        print(f"  {r:>3}. {shown(a.id):<40} {a.score:9.3f}{'' if a.exact else '  (approximate)'}")


def cmd_serve(args):
    from .serve import ServeConfig, serve

    names = ["max_context", "max_k", "max_steps", "max_body_bytes", "max_batch"]
    cfg = ServeConfig(**{n: getattr(args, n) for n in names})
    serve(args.model, args.host, args.port, cfg, args.threads, access_log=not args.no_access_log)


# the paper's appendix E contexts (those whose ids are Wikispeedia link targets), and two more
DEMO_CONTEXTS = [["Copenhagen"], ["Miles_Davis", "Jazz"], ["Tunisia", "Tunis", "Thailand"],
                 ["Copenhagen", "Paris"], ["Copenhagen", "Aarhus"], ["Albert_Einstein", "Isaac_Newton"],
                 ["Jupiter", "Saturn"]]


def cmd_demo(args):
    """The main job on the embedded default dataset (Wikispeedia links): prepare it, train a Superbloom
    model (m = 2, alpha = 2) for --time-budget seconds, evaluate it on the held-out pages next to the
    popularity, co-occurrence and EASE baselines, and print the top-10 predictions for a few contexts."""
    from .dataset import Dataset
    from .evaluate import EvalConfig, evaluate, format_report
    from .predictor import load
    from .prepare import PrepareConfig, format_summary, prepare
    from .train import train

    from . import embedded_dataset

    t0 = time.time()
    out = Path(args.out)
    source = args.input or str(embedded_dataset())
    print(f"== 1/4 prepare {source}")
    summary = prepare(PrepareConfig(source, str(out / "data"), ReadConfig("edges")), progress=not args.quiet)
    print(format_summary(summary))
    print(f"\n== 2/4 train (time budget {args.time_budget:.0f} s)")
    cfg = TrainConfig(data=str(out / "data"), out=str(out / "model"), hash=HashConfig(alpha=2, m=2),
                      time_budget=args.time_budget)
    train(cfg, progress=not args.quiet)
    print("\n== 3/4 evaluate on the held-out pages")
    model = load(out / "model")
    # 10 held-out ids per page: ~4,000 examples, so the methods can be told apart (1 per page: ~460)
    result = evaluate(model, Dataset(out / "data"),
                      EvalConfig(targets_per_set=10, baselines=("popularity", "cooccurrence", "ease")),
                      progress=not args.quiet)
    print(format_report(result))
    (out / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n== 4/4 predictions (top-10; context ids excluded)")
    for ctx, pred in zip(DEMO_CONTEXTS, model.predict_many(DEMO_CONTEXTS, k=10)):
        shown = " + ".join(model.vocab.display(i) for i in model.vocab.lookup(ctx)[0]) or "(no known id)"
        names = ", ".join(model.vocab.display(model.vocab.get(i)) for i, _ in pred.items)
        missing = f"  [not in the vocabulary: {', '.join(pred.unknown)}]" if pred.unknown else ""
        print(f"{{{shown}}} -> {names}{missing}")
    print(f"\ndone in {time.time() - t0:.0f} s; model in {out / 'model'}, report in {out / 'eval.json'}")
