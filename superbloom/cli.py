"""The `superbloom` command: a thin layer over the library; the only place that parses arguments.

    superbloom demo                                   # the main job on the embedded Wikispeedia links
    superbloom prepare INPUT --format edges --out DATA_DIR
    superbloom prepare-text CORPUS... --out DATA_DIR [--vocab-size 1000000]
    superbloom train DATA_DIR --out MODEL_DIR --time-budget 600 [--device auto|cpu|cuda]
    superbloom eval MODEL_DIR DATA_DIR [--json]
    superbloom prepare Beauty.txt --format lines --split leave-one-out --out DATA_DIR   # sequences
    superbloom eval MODEL_DIR DATA_DIR --protocol leave-one-out --split valid|test [--no-exclude-history]
    superbloom predict MODEL_DIR Copenhagen [--k 10]
    superbloom expand MODEL_DIR Copenhagen [--steps 10] [--strategy sample --temperature 0.7]
    superbloom serve MODEL_DIR [--host 127.0.0.1] [--port 8000]
    superbloom synth --ids 5300000 --links 462000000 --out links.parquet   # SYNTHETIC links, planted topics

Every numeric flag is checked when the command line is parsed (exit 2 with a one-line message
naming the flag and its allowed range); defaults are read from the config dataclasses, never
repeated here.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from . import __version__
from .batches import MaskConfig
from .decode import DecodeConfig
from .device import DEVICE_CHOICES
from .evaluate import PROTOCOLS, EvalConfig
from .expand import STRATEGIES, ExpandConfig
from .hashing import AUTO_ALPHA, UNHASHED_MAX_IDS, HashConfig
from .heads import HEADS, PROPOSALS, TREES, head_config, head_settings
from .heads.hierarchical import HierarchicalConfig
from .heads.sampled import SampledConfig
from .heads.superbloom import SuperbloomConfig
from .model import ModelConfig
from .optim import OPTIMIZERS, OptimConfig
from .prepare import SPLITS, PrepareConfig
from .ranking import SCORES
from .readers import FORMATS, InputError, ReadConfig
from .synth import SYNTH_FORMATS, SynthConfig
from .train import LoopConfig, TrainConfig


def _default(cls, name):
    """The default of field `name` of dataclass `cls` (the one place defaults live)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


# ---------------------------------------------------------------- typed flags (checked at parse time)


def _number(kind, lo=None, hi=None, lo_open=False, what=None):
    """An argparse type: `kind` (int / float) within [lo, hi] (lo excluded if lo_open), finite."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {what or _range(lo, hi, lo_open)}, got {text}")
        return v
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _range(lo, hi, lo_open):
    if hi is None:
        return f"a number {'>' if lo_open else '>='} {lo}"
    return f"a number in {'(' if lo_open else '['}{lo}, {hi}]"


POS_INT = _number(int, 1)  # >= 1
NONNEG_INT = _number(int, 0)  # >= 0
NONNEG = _number(float, 0.0)  # >= 0
POSITIVE = _number(float, 0.0, lo_open=True)  # > 0
FRACTION = _number(float, 0.0, 0.999999, what="a fraction in [0, 1)")  # [0, 1)
PORT = _number(int, 0, 65535, what="a port number in [0, 65535]")


def _add_prepare(sub):
    d = lambda name: _default(PrepareConfig, name)  # noqa: E731
    r = lambda name: _default(ReadConfig, name)  # noqa: E731
    p = sub.add_parser("prepare", help="split sets, build the vocabulary, write a memory-mapped dataset",
                       description="Read links, split the sets into train/test (seeded), build the vocabulary "
                                   "from the training sets and write a compact memory-mappable dataset.")
    p.add_argument("input", help="input file (.gz allowed for text formats)")
    p.add_argument("--format", choices=FORMATS, default=r("format"),
                   help="edges: set<TAB>id per line; lines: 'set id id ...'; jsonl: {\"set\":..,\"ids\":[..]}; "
                        "parquet: two columns (default: %(default)s)")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--test-fraction", type=FRACTION, default=d("test_fraction"),
                   help="fraction of sets held out (default %(default)s)")
    p.add_argument("--seed", type=NONNEG_INT, default=d("seed"), help="split seed (default %(default)s)")
    p.add_argument("--split", choices=SPLITS, default=d("split"),
                   help="sets: hold out whole sets (--test-fraction); leave-one-out: each set is a sequence in "
                        "the order read, repeats kept, its last id the test target, the one before the "
                        "validation target (sequences of < 3 ids: training only, counted) (default %(default)s)")
    p.add_argument("--set-column", type=NONNEG_INT, default=r("set_column"),
                   help="edges/parquet: column of the set key (default %(default)s)")
    p.add_argument("--id-column", type=NONNEG_INT, default=r("id_column"),
                   help="edges/parquet: column of the id (default %(default)s; 2 for head/relation/tail triples)")
    p.add_argument("--undirected", action="store_true", help="edges: also add every link reversed "
                                                             "(neighbour sets of a graph)")
    p.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of failing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_prepare)


def _add_prepare_text(sub):
    p = sub.add_parser("prepare-text", help="plain text -> unigram+bigram vocabulary and token-id sequences",
                       description="Read plain-text corpora (a directory of .txt files, a tar of them, one file, "
                                   "a GCIDE dictd dictionary or the tagged Brown corpus), normalise (NFKC), split "
                                   "sentences and words, hold out documents for test (seeded), choose the most "
                                   "frequent unigrams and bigrams of the training documents (paper sec. 4) and "
                                   "write the dataset: rows are segments of whole sentences, ordered.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="corpus paths (read in order)")
    p.add_argument("--out", required=True, help="output dataset directory")
    p.add_argument("--format", choices=("auto", "txt", "gcide", "brown"), default="auto",
                   help="auto (default): per input, gcide for *.dict(.dz), brown for a tar of ca01..cr09, else txt")
    p.add_argument("--vocab-size", type=int, default=1_000_000,
                   help="unigrams + bigrams kept, [UNK] on top (default 1,000,000)")
    p.add_argument("--min-bigram-count", type=int, default=2, help="rarer bigrams are never kept (default 2)")
    p.add_argument("--segment", type=int, default=128,
                   help="ids per row, whole sentences packed; 0: one row per document (default 128)")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="lower-case the text (default: on)")
    p.add_argument("--test-fraction", type=float, default=0.1, help="fraction of documents held out (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_prepare_text)


def _add_train(sub):
    p = sub.add_parser("train", help="train a model on a prepared dataset",
                       description="Masked training of a Superbloom model. Stops at --steps, --epochs or "
                                   "--time-budget, whichever comes first; checkpoints are resumable.")
    p.add_argument("data", help="prepared dataset directory")
    p.add_argument("--out", required=True, help="model directory to write")
    h = lambda name: _default(HashConfig, name)  # noqa: E731
    g = p.add_argument_group("hashing")
    g.add_argument("--alpha", type=NONNEG_INT, default=h("alpha"),
                   help="ids per hash bucket; 0: chosen from the vocabulary size (unhashed up to "
                        f"{UNHASHED_MAX_IDS:,} ids, else {AUTO_ALPHA}) (default %(default)s)")
    g.add_argument("--m", type=POS_INT, default=h("m"), help="hash functions per id (default %(default)s)")
    g.add_argument("--hash-seed", type=NONNEG_INT, default=h("seed"), help="hash maps seed (default %(default)s)")
    g.add_argument("--coherent", type=NONNEG_INT, default=h("coherent"),
                   help="how many of the m maps are coherent: similar ids (training co-occurrence) share a "
                        "bucket (appendix C); the rest are random (default %(default)s)")
    md = lambda name: _default(ModelConfig, name)  # noqa: E731
    g = p.add_argument_group("model")
    g.add_argument("--d", type=POS_INT, default=md("d"), help="embedding / hidden size (default %(default)s)")
    g.add_argument("--heads", type=POS_INT, default=md("heads"), help="attention heads (default %(default)s)")
    g.add_argument("--d-ff", type=POS_INT, default=md("d_ff"), help="feed-forward size (default %(default)s)")
    g.add_argument("--layers", type=POS_INT, default=md("layers"), help="Transformer layers (default %(default)s)")
    g.add_argument("--dropout", type=FRACTION, default=md("dropout"),
                   help="dropout on embeddings and residual branches (default %(default)s)")
    g.add_argument("--attn-dropout", type=FRACTION, default=md("attn_dropout"),
                   help="dropout on attention weights (default %(default)s)")
    g.add_argument("--positions", type=NONNEG_INT, default=md("positions"),
                   help="learned position embeddings for ordered data, up to this many elements "
                        "(default %(default)s: a set)")
    g.add_argument("--post-ln", action="store_true", help="post-LN blocks as in the paper (default: pre-LN)")
    g.add_argument("--attention", choices=["softmax", "kernel"], default=md("attention"),
                   help="softmax, or the blog's kernelized attention, linear in the set size (default %(default)s)")
    g = p.add_argument_group("output head (each setting belongs to the heads named in its help)")
    g.add_argument("--head", choices=sorted(HEADS), default=SuperbloomConfig.name,
                   help="output layer: superbloom (hashed softmax), full (one row per id), sampled (sampled "
                        "softmax), hierarchical (tree softmax); the last three are the paper's baselines, unhashed "
                        "with --alpha 1 --m 1 (then full and sampled tie their output rows to the input embedding) "
                        "(default %(default)s)")
    g.add_argument("--per-hash-softmax", action="store_const", const=True, default=None,
                   help="superbloom: softmax j over map j's tokens only")
    g.add_argument("--label-smoothing", type=FRACTION, default=None,
                   help=f"superbloom, full (default {_default(SuperbloomConfig, 'label_smoothing')})")
    g.add_argument("--samples", type=POS_INT, default=None,
                   help=f"sampled: ids drawn per training step (default {_default(SampledConfig, 'samples')})")
    g.add_argument("--proposal", choices=PROPOSALS, default=None,
                   help=f"sampled: proposal distribution (default {_default(SampledConfig, 'proposal')})")
    g.add_argument("--tree", choices=TREES, default=None, help="hierarchical: tree built from the training counts "
                                                             f"(default {_default(HierarchicalConfig, 'tree')})")
    mk = lambda name: _default(MaskConfig, name)  # noqa: E731
    g = p.add_argument_group("training examples (sec. 3.1)")
    g.add_argument("--segment", type=_number(int, 2), default=mk("n"), help="max ids per segment (default %(default)s)")
    g.add_argument("--mask-rate", type=_number(float, 0.0, 1.0, lo_open=True), default=mk("mask_rate"),
                   help="fraction of a segment's ids masked, at least one (default %(default)s)")
    g.add_argument("--element-dropout", type=FRACTION, default=mk("element_dropout"),
                   help="probability that an unmasked context id is dropped from a training example "
                        "(default %(default)s)")
    o = lambda name: _default(OptimConfig, name)  # noqa: E731
    g = p.add_argument_group("optimisation")
    g.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default=o("name"),
                   help="adamw, or adapsgd (no learning rate: --lr and --warmup are not used) (default %(default)s)")
    g.add_argument("--lr", type=POSITIVE, default=o("lr"), help="peak learning rate (default %(default)s)")
    g.add_argument("--warmup", type=NONNEG_INT, default=o("warmup"), help="warm-up steps (default %(default)s)")
    g.add_argument("--weight-decay", type=NONNEG, default=o("weight_decay"), help="weight decay (default %(default)s)")
    g.add_argument("--clip", type=NONNEG, default=o("clip"), help="gradient norm clip, 0: none (default %(default)s)")
    lp = lambda name: _default(LoopConfig, name)  # noqa: E731
    g = p.add_argument_group("loop")
    g.add_argument("--batch-size", type=POS_INT, default=lp("batch_size"),
                   help="sets per step, over all processes (default %(default)s)")
    g.add_argument("--steps", type=NONNEG_INT, default=0, help="stop after N steps (0: no limit; default 0)")
    g.add_argument("--epochs", type=NONNEG, default=0.0, help="stop after N passes over the training sets (default 0)")
    g.add_argument("--time-budget", type=NONNEG, default=0.0, help="stop after N seconds of training (default 0); "
                   "give at least one of --steps, --epochs, --time-budget")
    g.add_argument("--eval-every", "--eval-every-steps", dest="eval_every", type=NONNEG_INT, default=lp("eval_every"),
                   metavar="STEPS", help="validate every this many STEPS, 0: only at the end (default %(default)s)")
    g.add_argument("--checkpoint-every", "--checkpoint-every-seconds", dest="checkpoint_every", type=NONNEG,
                   default=lp("checkpoint_every"), metavar="SECONDS",
                   help="SECONDS between checkpoints (default %(default)s)")
    g.add_argument("--val-fraction", type=FRACTION, default=_default(TrainConfig, "val_fraction"),
                   help="training sets held out for validation, at most 2000 (default %(default)s)")
    g.add_argument("--seed", type=NONNEG_INT, default=lp("seed"), help="training seed (default %(default)s)")
    g.add_argument("--threads", type=NONNEG_INT, default=lp("threads"),
                   help="torch CPU threads, 0: torch's default (default %(default)s)")
    g.add_argument("--device", default=lp("device"), help=f"{DEVICE_CHOICES} (default %(default)s: CUDA when available)")
    g.add_argument("--ema", type=FRACTION, default=lp("ema"),
                   help="> 0: validate and keep as BEST an exponential moving average of the weights with this "
                        "decay, e.g. 0.999 (default %(default)s: none)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest complete checkpoint, with its saved settings; "
                        "flags given now may change the optimisation and loop settings (recorded), not the model")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the model in --out with a new run (the old one is kept until the new run has a "
                        "complete checkpoint)")
    g.add_argument("--no-keep-best", dest="keep_best", action="store_false",
                   help="serve the last weights instead of those with the best validation rec@10")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def _add_decode_args(p):
    d = lambda name: _default(DecodeConfig, name)  # noqa: E731
    g = p.add_argument_group("decoding (Algorithm 1)")
    g.add_argument("--beam", type=POS_INT, default=d("beam"), help="beam width B per hash map (default: B = k)")
    g.add_argument("--exact", action="store_true", help="widen the beam until the top-k is certified exact")
    g.add_argument("--score", choices=sorted(SCORES), default=d("score"),
                   help="gamma: how the m scores combine (default %(default)s)")
    g.add_argument("--exhaustive", action="store_true", help="score every id (reference; slow)")


def _add_device_arg(p, default="auto"):
    p.add_argument("--device", default=default, help=f"{DEVICE_CHOICES} (default %(default)s: CUDA when available)")


def _add_eval(sub):
    e = lambda name: _default(EvalConfig, name)  # noqa: E731
    p = sub.add_parser("eval", help="the paper's protocol on the held-out sets, with baselines",
                       description="For each held-out set: a random segment of up to 32 ids, one random id held "
                                   "out, the rest is the context (excluded from the ranking). Reports rec@1/10/20, "
                                   "MRR and NDCG@10 for the model and for baselines on the same examples.")
    p.add_argument("model", help="model directory")
    p.add_argument("data", help="prepared dataset directory (the one the model was trained on)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--seed", type=NONNEG_INT, default=e("seed"), help="example sampling seed (default %(default)s)")
    p.add_argument("--targets-per-set", type=POS_INT, default=e("targets_per_set"),
                   help="held-out ids per set (default %(default)s)")
    p.add_argument("--max-sets", type=NONNEG_INT, default=e("max_sets"),
                   help="use at most N held-out sets, 0: all (default %(default)s)")
    p.add_argument("--depth", type=POS_INT, default=e("depth"), help="ids retrieved per example (default %(default)s)")
    g = p.add_argument_group("sequence recommendation (datasets from prepare --split leave-one-out)")
    g.add_argument("--protocol", choices=PROTOCOLS, default=e("protocol"),
                   help="sets: the paper's held-out sets; leave-one-out: each user's last id (test) or the one "
                        "before (valid) ranked against all ids from the history before it; auto: the dataset's "
                        "split (default %(default)s)")
    g.add_argument("--split", choices=("valid", "test"), default=e("split"),
                   help="leave-one-out: which targets (validation picks a checkpoint; test is touched once) "
                        "(default %(default)s)")
    g.add_argument("--context-len", type=POS_INT, default=e("context_len"),
                   help="leave-one-out: the most recent history ids in the context, in order (at most the "
                        "model's --positions - 1) (default %(default)s)")
    g.add_argument("--exclude-history", dest="exclude_history", action="store_true", default=e("exclude_history"),
                   help="leave-one-out: never rank an id of the user's history (default)")
    g.add_argument("--no-exclude-history", dest="exclude_history", action="store_false",
                   help="leave-one-out: rank every id, the user's history included")
    g.add_argument("--cooc-last", type=NONNEG_INT, default=e("cooc_last"),
                   help="leave-one-out: the co-occurrence baseline scores from the last N context ids, 0: all "
                        "(default %(default)s)")
    p.add_argument("--baselines", default=",".join(e("baselines")),
                   help="comma-separated: popularity, cooccurrence, ease; or 'none' (default %(default)s)")
    p.add_argument("--batch-size", type=POS_INT, default=e("batch_size"), help="queries per model call "
                                                                             "(default %(default)s)")
    p.add_argument("--threads", type=NONNEG_INT, default=0, help="torch CPU threads, 0: torch's default (default 0)")
    _add_device_arg(p)
    _add_decode_args(p)
    p.set_defaults(func=cmd_eval)


def _add_predict(sub):
    p = sub.add_parser("predict", help="top-k ids for a context of ids",
                       description="Predict the missing ids of a set from the given ids (as they appear in the "
                                   "data, e.g. Copenhagen, or URL-decoded).")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="+", help="context ids")
    p.add_argument("--k", type=POS_INT, default=10, help="ids to return (default %(default)s)")
    p.add_argument("--json", action="store_true")
    _add_device_arg(p)
    _add_decode_args(p)
    p.set_defaults(func=cmd_predict)


def _add_expand(sub):
    x = lambda name: _default(ExpandConfig, name)  # noqa: E731
    p = sub.add_parser("expand", help="grow a set one predicted id at a time",
                       description="Set expansion: predict, add the best (or a sampled) id to the set, predict "
                                   "again; each added id joins the context of the next prediction.")
    p.add_argument("model", help="model directory")
    p.add_argument("ids", nargs="+", help="seed ids")
    p.add_argument("--steps", type=POS_INT, default=x("steps"), help="ids to add (default %(default)s)")
    p.add_argument("--strategy", choices=STRATEGIES, default=x("strategy"), help="argmax, or sample from "
                   "softmax(score / temperature) over the top k (default %(default)s)")
    p.add_argument("--temperature", type=POSITIVE, default=x("temperature"),
                   help="sample: temperature (default %(default)s)")
    p.add_argument("--k", type=POS_INT, default=x("k"), help="candidates ranked per step (default %(default)s)")
    p.add_argument("--seed", type=NONNEG_INT, default=x("seed"), help="sample: random seed (default %(default)s)")
    p.add_argument("--json", action="store_true")
    _add_device_arg(p)
    _add_decode_args(p)
    p.set_defaults(func=cmd_expand)


def _add_serve(sub):
    from .serve import ServeConfig

    p = sub.add_parser("serve", help="HTTP API and web page for a model",
                       description="Serve a model: JSON API (docs at /docs) and a web page at /. "
                                   "The model is loaded once; concurrent requests are batched.")
    p.add_argument("model", help="model directory")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=PORT, default=8000, help="port (default %(default)s)")
    p.add_argument("--threads", type=NONNEG_INT, default=1,
                   help="torch CPU threads for inference (default 1: requests are batched instead; intra-op "
                        "threads spin and stall when the cores are shared with the server itself)")
    for name, hlp in [("max_context", "ids per context / seed"), ("max_k", "largest k"),
                      ("max_steps", "largest expansion"), ("max_body_bytes", "request body size"),
                      ("max_batch", "queries per model call")]:
        p.add_argument("--" + name.replace("_", "-"), type=POS_INT, default=_default(ServeConfig, name),
                       help=f"{hlp} (default %(default)s)")
    for name, hlp in [("body_timeout", "seconds to receive a request body, then 408"),
                      ("keep_alive_timeout", "seconds an idle keep-alive connection stays open"),
                      ("head_timeout", "seconds to receive a request's line and headers")]:
        p.add_argument("--" + name.replace("_", "-"), type=_number(float, 0.0, 3600.0, lo_open=True),
                       default=_default(ServeConfig, name), help=f"{hlp} (default %(default)s)")
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    _add_device_arg(p)
    p.set_defaults(func=cmd_serve)


def _add_synth(sub):
    d = lambda name: _default(SynthConfig, name)  # noqa: E731
    p = sub.add_parser("synth", help="write a SYNTHETIC links file with planted topics (any size, bounded memory)",
                       description="Write synthetic links: ids with Zipf popularity grouped into latent topics, "
                                   "each set drawn from a few topics, so that a model can learn something. "
                                   "Seeded (the same arguments give the same bytes) and streamed in chunks; the "
                                   "file records that it is synthetic and how it was made. The generative model "
                                   "is described in superbloom/synth.py.")
    p.add_argument("--out", required=True, help="output file (edges: .gz/.bz2/.zst compress by extension)")
    p.add_argument("--ids", type=_number(int, 8), default=d("ids"), help="vocabulary size (default %(default)s)")
    p.add_argument("--links", type=POS_INT, default=d("links"), help="links (rows) written, exactly (default %(default)s)")
    p.add_argument("--topics", type=POS_INT, default=d("topics"),
                   help="latent topics, at most --ids; each id belongs to one (default %(default)s)")
    p.add_argument("--topics-per-set", type=POS_INT, default=d("topics_per_set"),
                   help="a set mixes 1..this many topics, at most --topics (default %(default)s)")
    p.add_argument("--mean-set-size", type=_number(float, 2.0), default=d("mean_set_size"),
                   help="mean ids per set, >= 2 and at most --ids / 4 (default %(default)s)")
    p.add_argument("--zipf", type=NONNEG, default=d("zipf"),
                   help="popularity exponent: id r has weight (r + topics)^-zipf; 0: uniform (default %(default)s)")
    p.add_argument("--seed", type=NONNEG_INT, default=d("seed"), help="generator seed (default %(default)s)")
    p.add_argument("--format", choices=SYNTH_FORMATS, default=d("format"),
                   help="parquet: columns set (int64), id (int32), read by `prepare --format parquet`; "
                        "edges: set<TAB>id lines after '#' comment lines (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_synth)


def _add_demo(sub):
    p = sub.add_parser("demo", help="the main job: prepare, train, evaluate and predict on the embedded "
                                    "Wikispeedia links", description=cmd_demo.__doc__)
    p.add_argument("--out", default="runs/demo", help="working directory (default %(default)s)")
    p.add_argument("--time-budget", type=POSITIVE, default=720.0, help="training seconds (default %(default)s)")
    p.add_argument("--input", default=None, help="links file instead of the embedded Wikispeedia links")
    _add_device_arg(p)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: what was wrong and where to read more (exit 2, no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _given(subparser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The destinations of the flags typed on the command line (not left at their default):
    the same subcommand parsed again with every default suppressed."""
    actions = subparser._actions  # argparse keeps no public list of a parser's actions
    saved = [a.default for a in actions]
    for a in actions:
        a.default = argparse.SUPPRESS
    try:
        given = set(vars(subparser.parse_known_args(argv)[0]))
    finally:
        for a, d in zip(actions, saved):
            a.default = d
    return given


def main(argv=None) -> int:
    parser = Parser(prog="superbloom", description="Superbloom: Bloom-filter hashing + "
                    "Transformers for set completion over huge id vocabularies.")
    parser.add_argument("--version", action="version", version=f"superbloom {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in (_add_demo, _add_prepare, _add_prepare_text, _add_train, _add_eval, _add_predict, _add_expand,
                _add_serve, _add_synth):
        add(sub)
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    args.given = _given(sub.choices[args.command], words[words.index(args.command) + 1:])
    try:
        return args.func(args) or 0
    except (InputError, ValueError, FloatingPointError, OSError) as e:  # bad input, a diverged run, a file
        print(f"superbloom {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# ---------------------------------------------------------------- commands


def cmd_prepare(args):
    from .prepare import format_summary, prepare

    read = ReadConfig(format=args.format, set_column=args.set_column, id_column=args.id_column,
                      undirected=args.undirected, skip_malformed=args.skip_malformed)
    summary = prepare(PrepareConfig(input=args.input, out=args.out, read=read, test_fraction=args.test_fraction,
                                    seed=args.seed, split=args.split))
    print(json.dumps(summary, indent=2) if args.json else f"prepared {args.out}\n{format_summary(summary)}")


def cmd_prepare_text(args):
    from .text import TextConfig, TextPrepareConfig, format_text_summary, prepare_text

    cfg = TextPrepareConfig(tuple(args.inputs), args.out, args.format, TextConfig(lowercase=args.lowercase),
                            args.vocab_size, args.min_bigram_count, segment=args.segment,
                            test_fraction=args.test_fraction, seed=args.seed)
    summary = prepare_text(cfg, progress=not (args.quiet or args.json))
    print(json.dumps(summary, indent=2) if args.json else f"prepared {args.out}\n{format_text_summary(summary)}")


def _head_config(args):
    """The --head's config from the head settings given; a setting of another head is an error."""
    given = {n: getattr(args, n) for n in ("per_hash_softmax", "label_smoothing", "samples", "proposal", "tree")
             if getattr(args, n) is not None}
    wrong = [n for n in given if n not in head_settings(args.head)]
    if wrong:
        raise ValueError(f"--{wrong[0].replace('_', '-')} is not a setting of the {args.head} head "
                         f"(its settings: {', '.join('--' + s.replace('_', '-') for s in head_settings(args.head)) or 'none'})")
    return head_config(args.head, **given)


def train_config_from_args(args, base: TrainConfig | None = None, given: set[str] = frozenset()) -> TrainConfig:
    """The TrainConfig of the command line; with `base` (a resumed run's saved config) only the flags
    in `given` (those typed on the command line) replace its settings."""
    def pick(dest, saved):
        return getattr(args, dest) if base is None or dest in given else saved

    b = base or TrainConfig(data=args.data, out=args.out, loop=LoopConfig(steps=1))  # defaults (unused if no base)
    head_flags = {"head", "per_hash_softmax", "label_smoothing", "samples", "proposal", "tree"}
    return TrainConfig(
        data=args.data, out=args.out,
        hash=HashConfig(alpha=pick("alpha", b.hash.alpha), m=pick("m", b.hash.m), seed=pick("hash_seed", b.hash.seed),
                        coherent=pick("coherent", b.hash.coherent)),
        model=ModelConfig(d=pick("d", b.model.d), heads=pick("heads", b.model.heads), d_ff=pick("d_ff", b.model.d_ff),
                          layers=pick("layers", b.model.layers), dropout=pick("dropout", b.model.dropout),
                          attn_dropout=pick("attn_dropout", b.model.attn_dropout),
                          positions=pick("positions", b.model.positions),
                          norm_first=not pick("post_ln", not b.model.norm_first), embedding=b.model.embedding,
                          attention=pick("attention", b.model.attention)),
        head=_head_config(args) if base is None or head_flags & given else b.head,
        mask=MaskConfig(n=pick("segment", b.mask.n), mask_rate=pick("mask_rate", b.mask.mask_rate),
                        p_mask=b.mask.p_mask, p_random=b.mask.p_random,
                        element_dropout=pick("element_dropout", b.mask.element_dropout)),
        optim=OptimConfig(name=pick("optimizer", b.optim.name), lr=pick("lr", b.optim.lr),
                          warmup=pick("warmup", b.optim.warmup), weight_decay=pick("weight_decay", b.optim.weight_decay),
                          clip=pick("clip", b.optim.clip)),
        loop=LoopConfig(batch_size=pick("batch_size", b.loop.batch_size), steps=pick("steps", b.loop.steps),
                        epochs=pick("epochs", b.loop.epochs), time_budget=pick("time_budget", b.loop.time_budget),
                        eval_every=pick("eval_every", b.loop.eval_every), keep_best=pick("keep_best", b.loop.keep_best),
                        checkpoint_every=pick("checkpoint_every", b.loop.checkpoint_every),
                        seed=pick("seed", b.loop.seed), threads=pick("threads", b.loop.threads),
                        device=pick("device", b.loop.device), ema=pick("ema", b.loop.ema)),
        val_fraction=pick("val_fraction", b.val_fraction))


def cmd_train(args):
    from .checkpoint import latest_checkpoint
    from .files import load_json
    from .train import train

    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    if args.resume and latest_checkpoint(args.out) is not None:  # the run's own settings + the flags given now
        saved = TrainConfig.from_saved(load_json(Path(args.out) / "config.json"), args.data, args.out)
        cfg = train_config_from_args(args, saved, args.given)
    else:
        cfg = train_config_from_args(args)
    out = train(cfg, progress=not args.quiet, resume=args.resume, overwrite=args.overwrite)
    print(f"model written to {out}")


def _decode(args) -> DecodeConfig:
    return DecodeConfig(beam=args.beam, exact=args.exact, score=args.score, exhaustive=args.exhaustive)


def cmd_eval(args):
    from .dataset import Dataset
    from .evaluate import evaluate, format_report
    from .predictor import load

    baselines = () if args.baselines == "none" else tuple(b for b in args.baselines.split(",") if b)
    cfg = EvalConfig(seed=args.seed, targets_per_set=args.targets_per_set, depth=args.depth, decode=_decode(args),
                     baselines=baselines, batch_size=args.batch_size, max_sets=args.max_sets,
                     protocol=args.protocol, split=args.split, context_len=args.context_len,
                     exclude_history=args.exclude_history, cooc_last=args.cooc_last)
    result = evaluate(load(args.model, args.threads, args.device), Dataset(args.data), cfg, progress=not args.json)
    print(json.dumps(result, indent=2) if args.json else format_report(result))


def cmd_predict(args):
    from .predictor import load

    model = load(args.model, device=args.device)
    if args.k > len(model.vocab):
        print(f"note: --k {args.k} is more than the model's {len(model.vocab):,} ids; at most "
              f"{len(model.vocab):,} (less the context) can be returned", file=sys.stderr)
    pred = model.predict(args.ids, args.k, _decode(args))  # no known id: a ValueError, like the API's 422
    if args.json:  # the shape of POST /v1/predict's answer
        print(json.dumps(model.prediction_json(pred), indent=2))
        return
    if pred.unknown:
        print(f"unknown ids (ignored): {', '.join(pred.unknown)}")
    print(f"context: {', '.join(model.vocab.display(i) for i in model.vocab.lookup(pred.context)[0])}")
    print(f"top-{args.k} ({'certified exact' if pred.exact else 'approximate'}, beam {pred.beam}):")
    for r, (i, s) in enumerate(pred.items, 1):
        print(f"  {r:>3}. {model.vocab.display(model.vocab.get(i)):<40} {s:9.3f}")


def cmd_expand(args):
    from .expand import expand
    from .predictor import load

    model = load(args.model, device=args.device)
    cfg = ExpandConfig(steps=args.steps, strategy=args.strategy, temperature=args.temperature, k=args.k,
                       seed=args.seed, decode=_decode(args))
    out = expand(model, args.ids, cfg)
    if args.json:  # the shape of POST /v1/expand's answer
        added = [dict(id=a.id, display=model.vocab.display(model.vocab.get(a.id)), score=_finite(a.score),
                      exact=a.exact) for a in out.added]
        print(json.dumps({"seed": out.seed, "unknown": out.unknown, "added": added}, indent=2))
        return
    if out.unknown:
        print(f"unknown ids (ignored): {', '.join(out.unknown)}")
    shown = lambda i: model.vocab.display(model.vocab.get(i))  # noqa: E731
    print(f"seed: {', '.join(map(shown, out.seed))}")
    print(f"added ({args.strategy}{f', temperature {args.temperature}' if args.strategy == 'sample' else ''}):")
    for r, a in enumerate(out.added, 1):
        print(f"  {r:>3}. {shown(a.id):<40} {a.score:9.3f}{'' if a.exact else '  (approximate)'}")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cmd_serve(args):
    from .serve import ServeConfig, serve

    names = ["max_context", "max_k", "max_steps", "max_body_bytes", "max_batch", "body_timeout", "keep_alive_timeout",
             "head_timeout"]
    cfg = ServeConfig(**{n: getattr(args, n) for n in names})
    serve(args.model, args.host, args.port, cfg, args.threads, access_log=not args.no_access_log, device=args.device)


def cmd_synth(args):
    from .synth import format_summary, synth

    cfg = SynthConfig(out=args.out, ids=args.ids, links=args.links, topics=args.topics,
                      topics_per_set=args.topics_per_set, mean_set_size=args.mean_set_size, zipf=args.zipf,
                      seed=args.seed, format=args.format)
    summary = synth(cfg, progress=not (args.quiet or args.json))
    print(json.dumps(summary, indent=2) if args.json else f"wrote {args.out}\n{format_summary(summary)}")


# the paper's appendix E contexts (those whose ids are Wikispeedia link targets), and two more
DEMO_CONTEXTS = [["Copenhagen"], ["Miles_Davis", "Jazz"], ["Tunisia", "Tunis", "Thailand"],
                 ["Copenhagen", "Paris"], ["Copenhagen", "Aarhus"], ["Albert_Einstein", "Isaac_Newton"],
                 ["Jupiter", "Saturn"]]


def cmd_demo(args):
    """The main job on the embedded default dataset (Wikispeedia links): prepare it, train a Superbloom
    model (m = 2, alpha = 2) for --time-budget seconds, evaluate it on the held-out pages next to the
    popularity, co-occurrence and EASE baselines, and print the top-10 predictions for a few contexts."""
    from .dataset import Dataset
    from .evaluate import evaluate, format_report
    from .predictor import load
    from .prepare import format_summary, prepare
    from .train import train

    from . import embedded_dataset

    t0 = time.time()
    out = Path(args.out)
    source = args.input or str(embedded_dataset())
    print(f"== 1/4 prepare {source}")
    summary = prepare(PrepareConfig(input=source, out=str(out / "data"), read=ReadConfig(format="edges")),
                      progress=not args.quiet)
    print(format_summary(summary))
    print(f"\n== 2/4 train (time budget {args.time_budget:.0f} s)")
    cfg = TrainConfig(data=str(out / "data"), out=str(out / "model"), hash=HashConfig(alpha=2, m=2),
                      loop=LoopConfig(time_budget=args.time_budget, device=args.device))
    train(cfg, progress=not args.quiet, overwrite=True)  # the demo's own working directory
    print("\n== 3/4 evaluate on the held-out pages")
    model = load(out / "model", device=args.device)
    # 10 held-out ids per page: ~4,000 examples, so the methods can be told apart (1 per page: ~460)
    result = evaluate(model, Dataset(out / "data"),
                      EvalConfig(targets_per_set=10, baselines=("popularity", "cooccurrence", "ease")),
                      progress=not args.quiet)
    print(format_report(result))
    (out / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n== 4/4 predictions (top-10; context ids excluded)")
    contexts = [c for c in DEMO_CONTEXTS if len(model.vocab.lookup(c)[0])]  # (another --input may lack them)
    for ctx, pred in zip(contexts, model.predict_many(contexts, k=10)):
        shown = " + ".join(model.vocab.display(i) for i in model.vocab.lookup(ctx)[0])
        names = ", ".join(model.vocab.display(model.vocab.get(i)) for i, _ in pred.items)
        missing = f"  [not in the vocabulary: {', '.join(pred.unknown)}]" if pred.unknown else ""
        print(f"{{{shown}}} -> {names}{missing}")
    print(f"\ndone in {time.time() - t0:.0f} s; model in {out / 'model'}, report in {out / 'eval.json'}")
