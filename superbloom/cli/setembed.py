"""Set-embedding commands: embed-train, embed, similar, classify.

    superbloom embed-train DATA --out MODEL --objective nca --labels labels.tsv --steps 1000
    superbloom embed MODEL DATA --out vectors.parquet            # set key, split, vector
    superbloom similar MODEL Jazz Miles_Davis --k 10 [--json]     # the nearest training sets
    superbloom classify MODEL Jazz Miles_Davis --reject 0.8 [--json]
"""
from __future__ import annotations

import json
from pathlib import Path

from .._settings import replaced
from ..hashing.config import HashConfig
from ..model.config import ModelConfig
from ..setembed.config import METHODS, EmbedConfig, EmbedTrainConfig
from ..training.config import LoopConfig, OptimConfig
from . import checks
from .flags import POS_INT, number
from .flags import deprecated_alias, json_stdout, log_to_callbacks
from .flags import add_model_command, add_trainer_tail, finish_model_command
from .settings import add_config, values

DEFAULT = EmbedTrainConfig(data="d", out="o")  # the defaults embed-train's options show (its own model, loop)


def register(sub):
    for add in (_add_embed_train, _add_embed, _add_similar, _add_classify):
        add(sub)


def _add_embed_train(sub):
    p = sub.add_parser("embed-train", help="train a set embedding (one vector per set) and its index",
                       description="Train the set encoder + attention pool to give one unit vector per set: "
                                   "uniformity (alignment + uniformity of two halves of a set; no labels), nca "
                                   "(neighbourhood component analysis with a memory bank; needs --labels) or "
                                   "softmax (a label-smoothed classifier head; needs --labels). Stops at --steps, "
                                   "--epochs or --time-budget; checkpoints are resumable. Writes an index of every "
                                   "training set's vector for `similar` and `classify`.")
    add_config(p, EmbedTrainConfig, only=("data", "out", "labels"), data={"positional": True})
    add_config(p, EmbedConfig, "embed", only=("objective",))
    add_config(p.add_argument_group("hashing"), HashConfig, "hash", skip=("coherent",), base=DEFAULT.hash)
    g = p.add_argument_group("model")
    add_config(g, ModelConfig, "model", only=("d", "heads", "d_ff", "layers", "dropout", "dynamic"), base=DEFAULT.model)
    add_config(g, EmbedConfig, "embed", only=("pool_heads",))
    add_config(p.add_argument_group("objective settings"), EmbedConfig, "embed", skip=("objective", "pool_heads"))
    add_config(p.add_argument_group("optimisation"), OptimConfig, "optim", skip=("schedule",), base=DEFAULT.optim)
    g = p.add_argument_group("loop")
    add_config(g, LoopConfig, "loop", skip=("patience",), base=DEFAULT.loop,
               batch_size={"type": number(int, 2, 1 << 24)})  # two sets at least: a pair's views
    add_config(g, EmbedTrainConfig, only=("val_fraction",))
    g.add_argument("--threads", type=checks.THREADS, default=0,
                   help="torch CPU threads, 0: torch's default (default %(default)s)")
    g.add_argument("--resume", action="store_true", help="continue the run in --out (flags given now may change the "
                   "optimisation and loop, not the model, labels or split)")
    g.add_argument("--overwrite", action="store_true", help="replace the model in --out")
    add_trainer_tail(p)  # --memory-limit, --quiet, --log-to, --json
    p.set_defaults(func=cmd_embed_train)


MODEL_HELP = "set-embedding model directory (superbloom embed-train)"  # the model positional of the commands below


def _add_embed(sub):
    p = add_model_command(sub, "embed", help="write one vector per set of a prepared dataset (Parquet)",
                          description="Embed the sets of a prepared dataset with a trained set embedding and write "
                                      "a Parquet file with columns set (key), split and vector (float32 list).",
                          model_help=MODEL_HELP)
    p.add_argument("data", help="prepared dataset directory (its ids are looked up by string in the model's vocabulary)")
    p.add_argument("--out", required=True, help="Parquet file to write")
    p.add_argument("--sets", dest="split", choices=("train", "test", "all"), default="all",
                   help="which of the dataset's sets (default %(default)s)")
    deprecated_alias(p, "--split", "--sets")  # --split is prepare's split kind
    finish_model_command(p, cmd_embed, "print the summary as JSON")


def _add_similar(sub):
    p = add_model_command(sub, "similar", help="the training sets nearest to a set of ids",
                          description="Embed the given ids as one set and list the k training sets with the highest "
                                      "cosine (exact search over the model's index).", model_help=MODEL_HELP)
    p.add_argument("ids", nargs="+", help="ids of the set (as stored or URL-decoded)")
    p.add_argument("-k", "--k", type=POS_INT, default=10, help="sets to return (default %(default)s)")
    finish_model_command(p, cmd_similar, "print the answer of POST /v1/similar")


def _add_classify(sub):
    p = add_model_command(sub, "classify", help="the label of a set of ids, rejected under a confidence",
                          description="Embed the given ids as one set and predict its label: the classifier head "
                                      "(softmax models) or the similarity-weighted votes of the k nearest labelled "
                                      "training sets. A prediction with confidence under --reject is rejected.",
                          model_help=MODEL_HELP)
    p.add_argument("ids", nargs="+", help="ids of the set")
    p.add_argument("--reject", type=number(float, 0.0, 1.0, what="a confidence in [0, 1]"), default=0.0,
                   help="reject a prediction whose confidence is under this, e.g. 0.8 (default %(default)s: never)")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="head (softmax models), knn, or auto: head when the model has one (default %(default)s)")
    p.add_argument("--voters", dest="k", type=POS_INT, default=10,
                   help="knn: neighbours that vote (default %(default)s)")
    deprecated_alias(p, "--k", "--voters")  # --k is the number of results everywhere else
    finish_model_command(p, cmd_classify, "print the answer of POST /v1/classify")


# ------------------------------------------------------------------------------ commands


def cmd_embed_train(args):
    from ..storage.checkpoint import latest_checkpoint
    from ..storage.files import load_json
    from ..setembed.train import embed_train

    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    base = None  # a resumed run: its saved settings, and the flags typed now
    if args.resume and latest_checkpoint(args.out) is not None:
        from ..training.rundir import read_saved  # a broken config.json: one line naming it
        base = read_saved(Path(args.out), ("train",), lambda config: EmbedTrainConfig.from_dict(config["train"]))
    given = {p: v for p, v in values(args.parser, args, given_only=base is not None).items()}
    cfg = replaced(base or DEFAULT, {"data": args.data, "out": args.out, **given})
    checks.refuse_training_memory("embed-train", cfg.data, cfg.hash, cfg.model, cfg.loop.batch_size,
                                  cfg.embed.segment, None, args.memory_limit)
    with json_stdout(args.json):
        out = embed_train(cfg, progress=not args.quiet, resume=args.resume, overwrite=args.overwrite,
                          callbacks=log_to_callbacks(args))
    if args.json:
        print(json.dumps({"out": str(out), "parameters": load_json(Path(out) / "config.json").get("parameters")},
                         indent=2))
        return
    print(f"set embedding written to {out}")


def cmd_embed(args):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..data.dataset import Dataset, SetArray
    from ..storage.guarded import claim
    from ..setembed.embedder import load_embedder

    target = claim(args.out, "vectors")  # before any work: a new file, or a vectors file of ours
    emb = load_embedder(args.model, device=args.device)
    data = Dataset(args.data)
    # the dataset's ids -> the model's, by string (one lookup per distinct id; any dataset whose ids the model knows)
    remap = np.array([-1 if (i := emb.vocab.get(s)) is None else i for s in data.vocab.strings] + [-1], np.int64)
    keys, splits, vectors, empty = [], [], [], 0
    for split in (("train", "test") if args.split == "all" else (args.split,)):
        sets = getattr(data, split)
        mapped = remap[np.asarray(sets.ids, np.int64)]  # (links,); -1 (unseen in training) stays -1
        v = emb.embed_sets(SetArray(np.asarray(sets.offsets), mapped))
        empty += int((np.abs(v).sum(1) == 0).sum())
        keys += data.set_names(split)
        splits += [split] * len(v)
        vectors.append(v)
    v = np.concatenate(vectors) if vectors else np.zeros((0, emb.net.d), np.float32)
    table = pa.table({"set": keys, "split": splits,
                      "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), v.shape[1])})
    with target.writing() as tmp:
        pq.write_table(table, tmp)
    summary = {"out": str(args.out), "sets": len(keys), "d": int(v.shape[1]), "sets_without_known_ids": empty}
    print(json.dumps(summary, indent=2) if args.json else
          f"wrote {len(keys):,} vectors of size {v.shape[1]} to {args.out}"
          + (f" ({empty} sets have no id the model knows: zero vectors)" if empty else ""))


def cmd_similar(args):
    from ..setembed.embedder import display, load_embedder, similar_json

    emb = load_embedder(args.model, device=args.device)
    s = emb.similar(args.ids, args.k)
    if args.json:
        print(json.dumps(similar_json(s), indent=2))
        return
    if s.unknown:
        print(f"unknown ids (ignored): {', '.join(s.unknown)}")
    print(f"the {len(s.items)} training sets nearest to {{{', '.join(map(display, s.context))}}} (cosine):")
    for r, (k, x) in enumerate(s.items, 1):
        print(f"  {r:>3}. {display(k):<40} {x:7.3f}")


def cmd_classify(args):
    from ..setembed.embedder import classify_json, load_embedder

    emb = load_embedder(args.model, device=args.device)
    c = emb.classify(args.ids, args.reject, args.method, args.k)
    if args.json:
        print(json.dumps(classify_json(c), indent=2))
        return
    if c.unknown:
        print(f"unknown ids (ignored): {', '.join(c.unknown)}")
    verdict = (f"{c.label}" if c.label is not None else f"rejected (confidence {c.confidence:.3f} < {args.reject})")
    print(f"label: {verdict}  [{c.method}, confidence {c.confidence:.3f}]")
    for n, x in c.scores:
        print(f"  {n:<30} {x:.3f}")
