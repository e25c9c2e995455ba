"""Wikispeedia pages as sets (their links; their words) with their top-level categories, prepared
with superbloom's own `prepare` so that the baselines here and the set-embedding models trained
later (`superbloom embed-train`) read the very same held-out pages.

    .venv/bin/python -m benchmarks.setembed.data            # -> runs/setembed/{links,words,labels.tsv}

Sources (../shared/data/wikispeedia, West & Leskovec 2012; never committed):
  categories.tsv          page -> "subject.Top_level.Sub..." lines; a page may have several.
                          Label = the top-level part (15 classes, imbalanced, ~11% of pages have 2).
  links.tsv               page -> linked page: the page's *link set*.
  plaintext_articles.tar.xz  the article text: the page's *word set* (lower-cased alphabetic
                          tokens of >= 2 letters, distinct). The "2007 Schools Wikipedia Selection.
                          Related subjects: ..." header names the page's categories and is removed
                          (it would leak the label), and so are the "#copyright" line and the
                          "Retrieved from ..." licence trailer.

Pages kept: those with a category, at least one out-link and at least one word (the drops are
counted in runs/setembed/pages.json). Both inputs list the same pages in the same (sorted) order,
so prepare's seeded split (test_fraction, seed) holds out the same pages in both; the script
checks that. Ids of held-out pages unseen in training are -1 in the prepared test split (prepare's
rule: the vocabulary comes from the training pages only).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

import superbloom as sb
from benchmarks.datasets import DATA_ROOT

REPO = Path(__file__).resolve().parents[2]
DATA = DATA_ROOT / "wikispeedia"  # links.tsv, categories.tsv, plaintext_articles.tar.xz (benchmarks/datasets.py)
WORK = REPO / "runs" / "setembed"
TEST_FRACTION = 0.2  # ~920 held-out pages: per-class F1 of the small classes needs more than 10%
SEED = 0

WORD = re.compile(r"[a-z]+")


def top_level_categories(path: Path) -> dict[str, list[str]]:
    """page -> its distinct top-level categories in file order."""
    out: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            page, _, cat = line.partition("\t")
            parts = cat.split(".")
            if len(parts) < 2 or parts[0] != "subject":
                raise ValueError(f"{path}:{lineno}: expected 'page<TAB>subject.Category...', got {line!r}")
            if parts[1] not in out[page]:
                out[page].append(parts[1])
    return dict(out)


def out_links(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                src, _, dst = line.partition("\t")
                out[src].append(dst)
    return dict(out)


def article_words(text: str) -> list[str]:
    """Distinct words of an article body, in order of first appearance, header and trailer removed."""
    at = text.find("Related subjects:")
    if at >= 0:
        end = text.find("\n\n", at)  # the header paragraph may wrap over two lines
        text = text[end if end >= 0 else len(text):]
    cut = text.find('Retrieved from "')
    if cut >= 0:
        text = text[:cut]
    return list(dict.fromkeys(w for w in WORD.findall(text.lower()) if len(w) >= 2))


def read_articles(path: Path) -> dict[str, list[str]]:
    out = {}
    with tarfile.open(path, "r:xz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".txt"):
                page = Path(member.name).stem
                out[page] = article_words(tar.extractfile(member).read().decode("utf-8"))
    return out


def build(work: Path = WORK, test_fraction: float = TEST_FRACTION, seed: int = SEED) -> dict:
    for name in ("categories.tsv", "links.tsv", "plaintext_articles.tar.xz"):
        if not (DATA / name).exists():
            sys.exit(f"needs {DATA / name} (the shared Wikispeedia files)")
    cats = top_level_categories(DATA / "categories.tsv")
    links = out_links(DATA / "links.tsv")
    words = read_articles(DATA / "plaintext_articles.tar.xz")
    pages = sorted(p for p in cats if links.get(p) and words.get(p))
    stats = {"pages_with_category": len(cats), "kept": len(pages),
             "dropped_no_out_links": sum(1 for p in cats if not links.get(p)),
             "dropped_no_text": sum(1 for p in cats if links.get(p) and not words.get(p)),
             "pages_with_2plus_labels": sum(1 for p in pages if len(cats[p]) > 1),
             "test_fraction": test_fraction, "seed": seed}
    work.mkdir(parents=True, exist_ok=True)
    for name, source in (("links", links), ("words", words)):
        with open(work / f"{name}.tsv", "w", encoding="utf-8") as f:
            for p in pages:
                f.writelines(f"{p}\t{x}\n" for x in source[p])
    with open(work / "labels.tsv", "w", encoding="utf-8") as f:
        f.write("# page\ttop-level category (Wikispeedia categories.tsv)\n")
        for p in pages:
            f.writelines(f"{p}\t{c}\n" for c in cats[p])
    for name in ("links", "words"):
        summary = sb.prepare(sb.PrepareConfig(str(work / f"{name}.tsv"), str(work / f"data_{name}"),
                                              test_fraction=test_fraction, seed=seed), progress=False,
                             overwrite=True)  # rebuilt from the files just written
        stats[name] = {k: summary[k] for k in ("ids", "links", "train", "test", "test_links_unseen_in_train")}
    held = [sb.Dataset(work / f"data_{n}").set_names("test") for n in ("links", "words")]
    if held[0] != held[1]:
        raise RuntimeError("links and words datasets hold out different pages; the inputs' page order differs")
    stats["held_out_pages"] = len(held[0])
    (work / "pages.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--test-fraction", type=float, default=TEST_FRACTION)
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    print(json.dumps(build(Path(a.work), a.test_fraction, a.seed), indent=2))


if __name__ == "__main__":
    main()
