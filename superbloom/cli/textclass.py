"""Text classifier commands: textclass-train, textclass.

    superbloom textclass-train corpus/ --labels labels.tsv --out MODEL [--embedding dynamic|table]
        [--attention kernel-auto|kernel|softmax] [--heads 10] [--optimizer adapsgd|adamw] [--epochs 5]
    superbloom textclass-train --wikispeedia ../shared/data/wikispeedia --out MODEL   # article -> category
    superbloom textclass MODEL "the jazz trumpeter recorded an album" [--k 3] [--json]

The model and its training run are superbloom/textclass.py (the blog's heads-study network: word
embeddings, one attention layer, mean pool, linear classes; train_textclass on loop.fit in the run
skeleton of rundir.py); documents are read by text/labelled.py. This module only parses flags.
"""
from __future__ import annotations

import json

import numpy as np

from ..storage.files import load_json
from ..training.config import OptimConfig
from ..textclass.config import TextClassConfig, TextClassRunConfig, TrainTextConfig
from . import checks
from .flags import POS_INT
from .flags import add_device_arg, add_log_to_arg, add_threads_arg, deprecated_alias, json_stdout, log_to_callbacks
from .settings import add_config, values
from .._settings import replaced

TRAIN = TrainTextConfig()  # its optimizer's defaults are the blog's (adapsgd), not OptimConfig's


def register(sub):
    p = sub.add_parser("textclass-train", help="train a text classifier (words -> one attention layer -> class)",
                       description="Train the blog's small text classifier: word embeddings (dynamic: MD5 trits, "
                                   "nothing out of vocabulary, 64 x d weights; or a table over the training words), "
                                   "one attention layer with --heads heads (no extra parameters), a mean pool and a "
                                   "linear classifier, label smoothing, gradient clipping at 1. Documents are text "
                                   "files; a document's label is the first of its labels. A seeded --test-fraction "
                                   "of the documents is held out and scored after every epoch.")
    p.add_argument("corpus", nargs="*", path="corpus",
                   help="directories / tars of .txt files, or text files (one file = one document)")
    add_config(p, TextClassRunConfig, only=("labels", "wikispeedia", "out"))
    p.add_argument("--overwrite", action="store_true",
                   help="replace a model already in --out (the old one is kept until the new run has a checkpoint)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest complete checkpoint (the model, documents and "
                        "split may not change; --epochs and the optimizer settings may, and are recorded)")
    p.add_argument("--memory-limit", type=checks.MEMORY_LIMIT, default=None, metavar="SIZE",
                   help="refuse a run whose memory estimate (from the flags and the documents) exceeds SIZE "
                        "(4GB, 500MB; default: the memory available)")
    g = p.add_argument_group("model")
    add_config(g, TextClassConfig, "model")
    add_config(g, TextClassRunConfig, only=("max_words",))
    g = p.add_argument_group("training")
    add_config(g, OptimConfig, "train.optim", skip=("schedule",), base=TRAIN.optim,
               name={"help": "adapsgd: no learning rate (the blog's); adamw: --lr with --warmup"})
    add_config(g, TrainTextConfig, "train", skip=("device",))
    add_config(g, TextClassRunConfig, only=("test_fraction",))
    g.add_argument("--threads", type=checks.THREADS, default=0, help="torch CPU threads, 0: torch's default")
    add_log_to_arg(p)
    add_config(p, TrainTextConfig, "train", only=("device",))
    p.add_argument("--json", action="store_true", help="print one JSON object: the model directory and its size")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("textclass", help="classify texts with a model of textclass-train",
                       description="Classify each TEXT (or each line of --file) with a text classifier; any word "
                                   "embeds with the dynamic embedding, unknown words share one row with the table.")
    p.add_argument("model", help="model directory (superbloom textclass-train)")
    p.add_argument("texts", nargs="*", help="texts to classify, one document each")
    p.add_argument("--file", metavar="FILE", help="one document per line")
    p.add_argument("-k", "--k", type=POS_INT, default=3, help="classes shown per text (default %(default)s)")
    deprecated_alias(p, "--top", "--k")  # --k is the number of results everywhere
    p.add_argument("--json", action="store_true", help="print one JSON object: {\"predictions\": [one per text]}")
    add_threads_arg(p)
    add_device_arg(p, default=TRAIN.device)
    p.set_defaults(func=cmd_classify)


def cmd_train(args) -> int:
    from ..textclass.train import train_textclass

    cfg = replaced(TextClassRunConfig(out=args.out, wikispeedia="-"),
                   dict(values(args.parser, args, given_only=False), corpus=tuple(args.corpus)))
    with json_stdout(args.json):  # --json: the run's lines go to stderr, stdout holds the one object
        out = train_textclass(cfg, resume=args.resume, overwrite=args.overwrite,
                              callbacks=log_to_callbacks(args),
                              memory_check=lambda parts: checks.refuse_over_memory(  # before the model is built
                                  parts, args.memory_limit, "textclass-train",
                                  {"--d": cfg.model.d, "--batch-size": cfg.train.batch_size, "--max-words": cfg.max_words}))
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
        order = np.argsort(-p, kind="stable")[:args.k]
        if args.json:
            predictions.append({"text": text, "label": labels[order[0]],
                                "scores": [{"label": labels[j], "score": round(float(p[j]), 6)} for j in order]})
        else:
            print(f"{labels[order[0]]}\t" + "  ".join(f"{labels[j]} {p[j]:.3f}" for j in order) + f"\t{text[:60]}")
    if args.json:  # one object, like every other command's --json
        print(json.dumps({"predictions": predictions}, indent=2))
    return 0
