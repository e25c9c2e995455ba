"""Text classifier commands (issue 15): textclass-train, textclass.

    superbloom textclass-train corpus/ --labels labels.tsv --out MODEL [--embedding dynamic|table]
        [--attention kernel-auto|kernel|softmax] [--heads 10] [--optimizer adapsgd|adamw] [--epochs 5]
    superbloom textclass-train --wikispeedia ../shared/data/wikispeedia --out MODEL   # article -> category
    superbloom textclass MODEL "the jazz trumpeter recorded an album" [--top 3] [--json]

The model and its training run are superbloom/textclass.py (the blog's heads-study network: word
embeddings, one attention layer, mean pool, linear classes; train_textclass on loop.fit in the run
skeleton of rundir.py); documents are read by text/labelled.py. This module only parses flags.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..storage.files import load_json
from ..model.config import ATTENTION_NAMES
from ..training.config import OPTIMIZER_NAMES, OptimConfig
from ..textclass.config import EMBEDDINGS, TextClassConfig, TextClassRunConfig, TrainTextConfig
from . import checks
from .flags import FRACTION, NONNEG, NONNEG_INT, POS_INT, POSITIVE, default_of
from .flags import add_device_arg, add_log_to_arg, add_threads_arg, json_stdout, log_to_callbacks

MODEL, OPTIM, TRAIN = TextClassConfig(), OptimConfig(name="adapsgd"), TrainTextConfig()


def register(sub):
    p = sub.add_parser("textclass-train", help="train a text classifier (words -> one attention layer -> class)",
                       description="Train the blog's small text classifier: word embeddings (dynamic: MD5 trits, "
                                   "nothing out of vocabulary, 64 x d weights; or a table over the training words), "
                                   "one attention layer with --heads heads (no extra parameters), a mean pool and a "
                                   "linear classifier, label smoothing, gradient clipping at 1. Documents are text "
                                   "files; a document's label is the first of its labels. A seeded --test-fraction "
                                   "of the documents is held out and scored after every epoch.")
    p.add_argument("corpus", nargs="*", help="directories / tars of .txt files, or text files (one file = one document)")
    p.add_argument("--labels", metavar="FILE", default="",
                   help="two columns per line: document name (file name without .txt) and label")
    p.add_argument("--wikispeedia", metavar="DIR", default="",
                   help="instead of CORPUS and --labels: the Wikispeedia directory (plaintext_articles.tar.xz, "
                        "categories.tsv); label = the first listed top-level category, the header naming it is cut")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a model already in --out (the old one is kept until the new run has a checkpoint)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest complete checkpoint (the model, documents and "
                        "split may not change; --epochs and the optimizer settings may, and are recorded)")
    p.add_argument("--memory-limit", type=checks.MEMORY_LIMIT, default=None, metavar="SIZE",
                   help="refuse a run whose memory estimate (from the flags and the documents) exceeds SIZE "
                        "(4GB, 500MB; default: the memory available)")
    g = p.add_argument_group("model")
    g.add_argument("--embedding", choices=EMBEDDINGS, default=MODEL.embedding, help="(default %(default)s)")
    g.add_argument("--attention", choices=sorted(ATTENTION_NAMES), default=MODEL.attention,
                   help="kernel: the blog's kernelized attention (linear form); kernel-auto: the same kernel in its "
                        "cheaper form for the document length; softmax (default %(default)s)")
    g.add_argument("--heads", type=checks.HEADS, default=MODEL.heads, help="attention heads, must divide --d (default %(default)s)")
    g.add_argument("--d", type=checks.WIDTH, default=MODEL.d, help="embedding size (default %(default)s)")
    g.add_argument("--smoothing", type=FRACTION, default=MODEL.smoothing, help="label smoothing (default %(default)s)")
    g.add_argument("--dropout", type=FRACTION, default=MODEL.dropout, help="on the embeddings (default %(default)s)")
    g.add_argument("--max-words", type=checks.LENGTH, default=256, help="words read per document (default %(default)s)")
    g = p.add_argument_group("training")
    g.add_argument("--optimizer", choices=sorted(OPTIMIZER_NAMES), default=OPTIM.name,
                   help="adapsgd: no learning rate (the blog's); adamw: --lr with --warmup (default %(default)s)")
    g.add_argument("--lr", type=checks.LR, default=default_of(OptimConfig, "lr"), help="adamw (default %(default)s)")
    g.add_argument("--warmup", type=NONNEG_INT, default=default_of(OptimConfig, "warmup"),
                   help="adamw warm-up steps (default %(default)s)")
    g.add_argument("--weight-decay", type=checks.WEIGHT_DECAY, default=OPTIM.weight_decay, help="(default %(default)s)")
    g.add_argument("--clip", type=checks.CLIP, default=OPTIM.clip, help="gradient norm clip (default %(default)s)")
    g.add_argument("--epochs", type=checks.bounded(int, 1, 1_000_000), default=TRAIN.epochs, help="(default %(default)s)")
    g.add_argument("--batch-size", type=checks.BATCH, default=TRAIN.batch_size, help="(default %(default)s)")
    g.add_argument("--test-fraction", type=FRACTION, default=0.1, help="documents held out (default %(default)s)")
    g.add_argument("--seed", type=NONNEG_INT, default=0, help="split, initial weights, batches (default %(default)s)")
    g.add_argument("--threads", type=checks.THREADS, default=0, help="torch CPU threads, 0: torch's default")
    add_log_to_arg(p)
    g.add_argument("--steps", type=NONNEG_INT, default=TRAIN.steps,
                   help="stop after N steps if --epochs has not ended before, 0: no limit (default %(default)s)")
    add_device_arg(p, default=TRAIN.device)
    p.add_argument("--json", action="store_true", help="print one JSON object: the model directory and its size")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("textclass", help="classify texts with a model of textclass-train",
                       description="Classify each TEXT (or each line of --file) with a text classifier; any word "
                                   "embeds with the dynamic embedding, unknown words share one row with the table.")
    p.add_argument("model", help="model directory (superbloom textclass-train)")
    p.add_argument("texts", nargs="*", help="texts to classify, one document each")
    p.add_argument("--file", metavar="FILE", help="one document per line")
    p.add_argument("--top", type=POS_INT, default=3, help="classes shown per text (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object: {\"predictions\": [one per text]}")
    add_threads_arg(p)
    add_device_arg(p, default=TRAIN.device)
    p.set_defaults(func=cmd_classify)


def cmd_train(args) -> int:
    from ..textclass.model import train_textclass

    cfg = TextClassRunConfig(
        out=args.out, corpus=tuple(args.corpus), labels=args.labels, wikispeedia=args.wikispeedia,
        model=TextClassConfig(d=args.d, heads=args.heads, attention=args.attention, embedding=args.embedding,
                              smoothing=args.smoothing, dropout=args.dropout),
        train=TrainTextConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                              steps=args.steps, device=args.device,
                              optim=OptimConfig(name=args.optimizer, lr=args.lr, warmup=args.warmup,
                                                weight_decay=args.weight_decay, clip=args.clip)),
        max_words=args.max_words, test_fraction=args.test_fraction)
    with json_stdout(args.json):  # --json: the run's lines go to stderr, stdout holds the one object
        out = train_textclass(cfg, resume=args.resume, overwrite=args.overwrite,
                              callbacks=log_to_callbacks(args),
                              memory_check=lambda parts: checks.refuse_over_memory(  # before the model is built
                                  parts, args.memory_limit, "textclass-train",
                                  {"--d": args.d, "--batch-size": args.batch_size, "--max-words": args.max_words}))
    parameters = load_json(out / 'config.json')['parameters']
    print(json.dumps({"out": str(out), "parameters": parameters}, indent=2) if args.json
          else f"wrote {out} ({parameters:,} parameters)")
    return 0


def cmd_classify(args) -> int:
    texts = list(args.texts)
    if args.file:
        from ..storage.loading import read_text  # a binary --file: one line naming it

        texts += [line for line in read_text(args.file, "--file: one text per line").splitlines() if line.strip()]
    if not texts:
        raise ValueError("nothing to classify: give TEXT arguments or --file FILE")
    from ..textclass.classifier import Classifier

    clf = Classifier.load(args.model, args.device)
    labels = clf.labels
    probs = clf.model.predict(clf.words(texts))  # (Q, C)
    predictions = []
    for text, p in zip(texts, probs):
        order = np.argsort(-p, kind="stable")[:args.top]
        if args.json:
            predictions.append({"text": text, "label": labels[order[0]],
                                "scores": [{"label": labels[j], "score": round(float(p[j]), 6)} for j in order]})
        else:
            print(f"{labels[order[0]]}\t" + "  ".join(f"{labels[j]} {p[j]:.3f}" for j in order) + f"\t{text[:60]}")
    if args.json:  # one object, like every other command's --json
        print(json.dumps({"predictions": predictions}, indent=2))
    return 0
