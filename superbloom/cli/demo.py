"""The demo command: the main job on the embedded Wikispeedia links."""
from __future__ import annotations

import time

from . import checks
from .flags import add_device_arg
from ..storage.guarded import one_writer


def register(sub):
    _add_demo(sub)


def _add_demo(sub):
    p = sub.add_parser("demo", help="the main job: prepare, train, evaluate and predict on the embedded "
                                    "Wikispeedia links", description=cmd_demo.__doc__)
    p.add_argument("--out", default="runs/demo", help="working directory (default %(default)s)")
    p.add_argument("--time-budget", type=checks.SECONDS, default=720.0, help="training seconds (default %(default)s)")
    p.add_argument("--input", default=None, help="links file instead of the embedded Wikispeedia links")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the dataset and model of an earlier demo in --out (without it, a demo folder "
                        "that holds them is refused and nothing is deleted)")
    add_device_arg(p)
    p.add_argument("--threads", type=checks.THREADS, default=0,
                   help="torch CPU threads, 0: torch's default (default 0; 1 is faster when other jobs share the cores)")
    p.add_argument("--pure", action="store_true",
                   help="train the library's default head (the pure model) instead of the hybrid head")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--quick", action="store_true",
                   help=f"a first prediction in about a minute ({QUICK_MEASURED}): a smaller network "
                        f"({QUICK_MODEL['layers']} layer, d={QUICK_MODEL['d']}) trained for {QUICK_BUDGET:g} s unless "
                        "--time-budget is given, evaluated beside the popularity and co-occurrence baselines only")
    p.set_defaults(func=cmd_demo)


# --quick: the demo's recipe (the hybrid head, unhashed) on a smaller network for a short budget, and its wall time
QUICK_BUDGET = 15.0
QUICK_MODEL = {"d": 64, "heads": 2, "d_ff": 256, "layers": 1}  # ModelConfig's fields (torch is imported later)
QUICK_BASELINES = ("popularity", "cooccurrence")
QUICK_MEASURED = "43 s wall on a 2-core CPU shared with other jobs, load 10.7"  # docs/quickstart.md


# the paper's appendix E contexts (those whose ids are Wikispeedia link targets), and two more
DEMO_CONTEXTS = [["Copenhagen"], ["Miles_Davis", "Jazz"], ["Tunisia", "Tunis", "Thailand"],
                 ["Copenhagen", "Paris"], ["Copenhagen", "Aarhus"], ["Albert_Einstein", "Isaac_Newton"],
                 ["Jupiter", "Saturn"]]


@one_writer  # its folder locked for the whole demo (its dataset and model each locked as written)
def cmd_demo(args):
    """The main job on the embedded default dataset (Wikispeedia links): prepare it, train a Superbloom
    model with the library's default recipe (for 4,093 ids: unhashed, co-occurrence start, element
    dropout, weight averaging) and the hybrid head (the network plus a
    sparse item-item term mixed in on the validation sets; --pure: the default head) for --time-budget
    seconds, evaluate it on the held-out pages next to the popularity, co-occurrence and EASE baselines
    (the hybrid's network alone beside it), print the top-10 predictions for a few contexts and how to
    serve the model; its model card is MODEL/README.md. --quick: a first prediction in about a minute
    (a smaller network for a short budget, evaluated beside popularity and co-occurrence only)."""
    from ..data.embedded import embedded_dataset
    from ..data.dataset import Dataset
    from ..evaluation.evaluate import EvalConfig, evaluate
    from ..hashing.bloom import UNHASHED_MAX_IDS, HashConfig
    from ..heads import head_config
    from ..inference.loader import load
    from ..data.prepare import PrepareConfig, format_summary, prepare
    from ..data.readers import ReadConfig
    from ..model.encoder import ModelConfig
    from ..training.card import record_evaluation
    from ..training.train import LoopConfig, TrainConfig, train

    from ..storage.guarded import OutputError, claim

    t0 = time.time()
    target = claim(args.out, "demo")  # before any work: new, empty or a demo folder of ours
    earlier = [name for name in ("data", "model") if (target.path / name).exists()]
    if earlier and not args.overwrite:
        raise OutputError(f"--out {args.out} holds an earlier demo's {' and '.join(earlier)}; pass --overwrite to "
                          "replace them, or give another folder (nothing was changed)")
    out = target.mark_in_place()
    quick = args.quick
    budget = QUICK_BUDGET if quick and "time_budget" not in getattr(args, "given", ()) else args.time_budget
    source = args.input or str(embedded_dataset())
    print(f"== 1/4 prepare {source}")
    summary = prepare(PrepareConfig(input=source, out=str(out / "data"), read=ReadConfig(format="edges")),
                      progress=not args.quiet, overwrite=args.overwrite)
    print(format_summary(summary))
    print(f"\n== 2/4 train (time budget {budget:.0f} s{', --quick: a smaller network' if quick else ''})")
    hybrid = not args.pure and summary["ids"] <= UNHASHED_MAX_IDS  # the hybrid head needs the unhashed model
    cfg = TrainConfig(data=str(out / "data"), out=str(out / "model"),
                      loop=LoopConfig(time_budget=budget, device=args.device),
                      **({"model": ModelConfig(**QUICK_MODEL)} if quick else {}),
                      **({"head": head_config("hybrid"), "hash": HashConfig(alpha=1, m=1)} if hybrid else {}))
    print("head: " + ("hybrid = the network's full softmax + a sparse item-item term (EASE's largest weights), "
                      "mixed in with a weight chosen on the validation sets; the report shows the network alone "
                      "beside it" if hybrid else "superbloom (the library default)"))
    train(cfg, progress=not args.quiet, overwrite=args.overwrite)
    print("\n== 3/4 evaluate on the held-out pages")
    model = load(out / "model", device=args.device)
    # 10 held-out ids per page: ~4,000 examples, so the methods can be told apart (1 per page: ~460)
    result = evaluate(model, Dataset(out / "data"),
                      EvalConfig(targets_per_set=10,
                                 baselines=QUICK_BASELINES if quick else ("popularity", "cooccurrence", "ease")),
                      progress=not args.quiet)
    print(result.report())
    record_evaluation(out / "model", result)  # eval.json, with intervals, and the model card
    print("\n== 4/4 predictions (top-10; context ids excluded)")
    contexts = [c for c in DEMO_CONTEXTS if len(model.vocab.lookup(c)[0])]  # (another --input may lack them)
    for ctx, pred in zip(contexts, model.predict_many(contexts, k=10)):
        shown = " + ".join(model.vocab.display(i) for i in model.vocab.lookup(ctx)[0])
        names = ", ".join(model.vocab.display(model.vocab.get(i)) for i, _ in pred.items)
        missing = f"  [not in the vocabulary: {', '.join(pred.unknown)}]" if pred.unknown else ""
        print(f"{{{shown}}} -> {names}{missing}")
    print(f"\ndone in {time.time() - t0:.0f} s; model in {out / 'model'} (its card: README.md), report in "
          f"{out / 'model' / 'eval.json'}")
    print(f"serve it (HTTP API and a web page): superbloom serve {out / 'model'}\n"
          f"in Python: import superbloom as sb; model = sb.load(\"{out / 'model'}\"); model.predict([\"Jazz\"], k=10)")
