"""Wikispeedia's paths with the back click `<` as an id, and read as the page it returns to, paired on
the test users whose next click is an article -> results/NAME.json (issue 33).

    python -m benchmarks.sequence.run --datasets wikispeedia-paths --head hybrid --item-term auto --samples 2048 \\
        --init cooccurrence --steps 3000 --eval-every 500 --baselines popularity,cooccurrence,ease \\
        --name sequence_wikispeedia_paths                       # and again with --datasets wikispeedia-paths-back
    python -m benchmarks.sequence.back_clicks

The two readings hold the same games, the same test users and, where the test click is not a back
click, the same target article. `wikispeedia-paths-back` (`prepare --back-id '<'`) turns every back
click into the page it returns to, so a test click that was `<` becomes a page already in the history:
a miss for every method under the history exclusion. On the other users each run's kept test ranks
(ranks.test.npz; ranked again from the kept model where an older run has none) give HR@10 of the
hybrid, its network alone and its term alone, and the paired 95% interval of resolved - as an id
(users resampled).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

import superbloom as sb
from benchmarks.machine import write_results
from benchmarks.paper.report import paired
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.metrics import hits_at
from superbloom.evaluation.protocols import resolve as resolve_protocol

from .run import RESULTS, WORK, save_ranks

SETTING = "next-item-hybrid-a1m1-d64L2-lr0.005-drop0.2-b128-3000steps-neg2048-nb200-auto-initcooccurrence"
PARTS = ("model", "network_only", "term_only")
CONFIG = EvalConfig(protocol="leave-one-out", split="test", context_len=50, baselines=())


def test_targets(name: str) -> tuple[np.ndarray, dict]:
    """The test users' target strings (None: unseen in training) and the run's ranks of them."""
    data = sb.Dataset(WORK / "data" / name)
    ex = resolve_protocol("leave-one-out", data).examples(data, CONFIG, {"model": {"positions": 50}})
    strings = np.asarray(data.vocab.strings, dtype=object)
    folder = WORK / "models" / name / SETTING
    kept = folder / "ranks.test.npz"
    if not kept.exists():  # a run from before the ranks were kept: its model ranks the same users again
        ranks = evaluate(sb.load(folder, device="cpu"), data, CONFIG, progress=False).ranks
        save_ranks(kept, ranks)
    targets = np.where(ex.targets >= 0, strings[np.maximum(ex.targets, 0)], None)
    return targets, dict(np.load(kept))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="sequence_wikispeedia_paths_back")
    a = p.parse_args()
    sb.set_threads(1)
    as_id, as_id_ranks = test_targets("wikispeedia-paths")
    back, back_ranks = test_targets("wikispeedia-paths-back")
    articles = as_id != "<"
    if len(as_id) != len(back) or not (as_id[articles] == back[articles]).all():
        raise SystemExit("the two readings' test users differ: prepare both from the same paths_unfinished.tsv")
    out = {"users": int(len(as_id)), "back_click_targets": int((~articles).sum()),
           "article_targets": int(articles.sum()), "hr@10_on_article_targets": {}}
    for part in PARTS:
        h0, h1 = hits_at(as_id_ranks[part][articles], 10), hits_at(back_ranks[part][articles], 10)
        out["hr@10_on_article_targets"][part] = {
            "as_id": round(float(h0.mean()), 4), "resolved": round(float(h1.mean()), 4),
            "resolved_minus_as_id": {k: round(v, 4) for k, v in paired(h1, h0, None).items()}}
    write_results(RESULTS, a.name, out, None)
    print(json.dumps(out["hr@10_on_article_targets"], indent=1))


if __name__ == "__main__":
    main()
