"""Labelled documents for text classification: Wikispeedia article words -> top-level category
(the task of benchmarks/heads_study.py: the blog's heads study on a real text task).

    docs = load_wikispeedia("../shared/data/wikispeedia", max_words=256)
    docs.words[docs.doc_ids(0)]  -> the first <= 256 words of the first article
    train, val, test = split_rows(len(docs), (0.8, 0.1, 0.1), seed=0)

A document is the sequence of its first `max_words` words (lower-cased, NFKC; punctuation and
symbol tokens dropped: text/tokenize.py's BERT-style words), stored once as ints into one
vocabulary of every distinct word (`words`): documents are ragged (offsets (N+1,), ids (W,)).

Labels (West & Leskovec 2012's categories.tsv, lines "page<TAB>subject.Top.Sub..."): the label of
a page is its *first listed* top-level category (the component after "subject"). A page may list
several top-level categories (about 11%); the rule keeps the first and counts the others
(`stats["multi_label"]`, `stats["multi_label_examples"]`). Pages without a category or without
text are dropped and counted.

Label leak: every Wikispeedia article starts with "#copyright", the title and "2007 Schools
Wikipedia Selection. Related subjects: <its categories>", and ends with a licence trailer
("Retrieved from ..."). The header names the label, so it is cut (everything up to the end of that
paragraph), and so is the trailer; `stats["headers_cut"]` counts the articles that had one.
The texts are read with text/corpora.py (streaming the tar, strict UTF-8) and tokenised chunk by
chunk with Arrow kernels (no Python object per word until the final vocabulary).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.readers import InputError
from ..text.corpora import read_documents
from ..text.tokenize import TextConfig, is_word, split_words

HEADER = r"(?s)^.*?Related subjects:.*?\n[^\S\n]*\n"  # up to the blank line closing the header paragraph
TRAILER = r'(?s)Retrieved from ".*$'


@dataclass
class LabelledDocs:
    """N documents as ragged word ids, with one label each."""
    names: list[str]  # (N,) document names (Wikispeedia: the URL-encoded page name)
    words: np.ndarray  # (V,) object array of word strings: the vocabulary of every document
    offsets: np.ndarray  # (N + 1,) int64: document i is ids[offsets[i]:offsets[i + 1]]
    ids: np.ndarray  # (W,) int64 word ids
    labels: np.ndarray  # (N,) int64 class ids
    label_names: list[str]  # class id -> name
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.names)
        if len(self.offsets) != n + 1 or len(self.labels) != n:
            raise ValueError(f"{n} names need {n + 1} offsets and {n} labels; got {len(self.offsets)}, "
                             f"{len(self.labels)}")
        if (np.diff(self.offsets) < 1).any():
            raise ValueError("every document needs at least one word")

    def __len__(self) -> int:
        return len(self.names)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def doc_ids(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]

    def padded(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """rows (B,) -> (ids (B, T) int64 with 0 at padding, pad (B, T) bool), T = the longest row."""
        rows = np.asarray(rows, np.int64)
        start, length = self.offsets[rows], self.lengths[rows]
        t = int(length.max())
        col = np.arange(t)
        pad = col[None, :] >= length[:, None]  # (B, T)
        ids = self.ids[np.where(pad, 0, start[:, None] + col[None, :])]
        return np.where(pad, 0, ids), pad

    @classmethod
    def from_lists(cls, docs: list[list[str]], labels: list[str], names: list[str] | None = None,
                   label_names: list[str] | None = None) -> "LabelledDocs":
        """Hand-made documents (lists of words) with string labels (tests, small inputs)."""
        if len(docs) != len(labels):
            raise ValueError(f"{len(docs)} documents but {len(labels)} labels")
        vocab = {w: None for d in docs for w in d}
        index = {w: i for i, w in enumerate(vocab)}
        label_names = label_names or list(dict.fromkeys(labels))
        lab = {s: i for i, s in enumerate(label_names)}
        ids = np.array([index[w] for d in docs for w in d], np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
        return cls(names or [str(i) for i in range(len(docs))], np.array(list(vocab), object), offsets, ids,
                   np.array([lab[s] for s in labels], np.int64), label_names)


def top_level_categories(path: str | Path) -> dict[str, list[str]]:
    """categories.tsv -> page -> its distinct top-level categories in file order."""
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            page, _, cat = line.partition("\t")
            parts = cat.split(".")
            if not page or len(parts) < 2 or parts[0] != "subject" or not parts[1]:
                raise InputError(f"{path}:{lineno}: expected 'page<TAB>subject.Category[.Sub...]', got {line[:200]!r}")
            cats = out.setdefault(page, [])
            if parts[1] not in cats:
                cats.append(parts[1])
    if not out:
        raise InputError(f"{path}: no 'page<TAB>subject.Category' lines found")
    return out


def strip_wikispeedia(texts: pa.Array) -> tuple[pa.Array, int]:
    """Cut the "... Related subjects: <categories>" header and the "Retrieved from" trailer.
    -> (texts, number of texts that had the header)."""
    had = int(pc.sum(pc.match_substring(texts, "Related subjects:")).as_py() or 0)
    texts = pc.replace_substring_regex(texts, HEADER, "", max_replacements=1)
    return pc.replace_substring_regex(texts, TRAILER, "", max_replacements=1), had


def first_words(texts: pa.Array, max_words: int, cfg: TextConfig = TextConfig()) -> tuple[pa.Array, np.ndarray]:
    """Documents -> (their first <= max_words words, flat, (D,) int64 words per document)."""
    w = split_words(texts, cfg)
    doc = np.repeat(w.sentence_doc, w.sentence_lengths)  # (T,) document of every token
    keep = is_word(w.tokens)
    doc = doc[keep]
    first = np.searchsorted(doc, np.arange(len(texts)))  # tokens stay in document order
    rank = np.arange(len(doc)) - first[doc]
    short = rank < max_words
    tokens = w.tokens.filter(pa.array(keep)).filter(pa.array(short))
    return tokens, np.bincount(doc[short], minlength=len(texts)).astype(np.int64)


def label_table(path: str | Path) -> dict[str, list[str]]:
    """A two-column labels file (document name, label; setembed/labels.py's format) -> name -> its
    labels in file order."""
    from ..data.labels import read_label_pairs

    out: dict[str, list[str]] = {}
    for key, label in read_label_pairs(path):
        labels = out.setdefault(key, [])
        if label not in labels:
            labels.append(label)
    return out


def read_labelled(paths, labels: dict[str, list[str]], max_words: int = 256, wikispeedia: bool = False,
                  limit: int = 0) -> LabelledDocs:
    """Text files (text/corpora.py's "txt" inputs: directories, tars, files) + name -> labels ->
    LabelledDocs, in input order. A document's name is its file name without ".txt" (matched as
    written, else URL-decoded); its label is the first of its labels. wikispeedia: cut the
    label-naming header and the trailer first. limit > 0: stop after about that many documents."""
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    decoded = {unquote(k): v for k, v in labels.items() if "%" in k}
    names, chunks, counts, headers = [], [], [], 0
    for chunk_names, texts in read_documents(list(paths), "txt", chunk_bytes=1 << 20 if limit else 8 << 20):
        if wikispeedia:
            texts, had = strip_wikispeedia(texts)
            headers += had
        tokens, n = first_words(texts, max_words)
        names += [Path(p).name[:-4] if p.endswith(".txt") else Path(p).name for p in chunk_names]
        chunks.append(tokens)
        counts.append(n)
        if limit and len(names) >= limit:
            break
    cats = [labels.get(p) or labels.get(unquote(p)) or decoded.get(p) or [] for p in names]
    n_words = np.concatenate(counts)
    enc = pc.dictionary_encode(pa.chunked_array(chunks, pa.large_string())).combine_chunks()
    ids = enc.indices.to_numpy().astype(np.int64)
    words = np.array(enc.dictionary.to_pylist(), object)
    keep = np.array([bool(c) for c in cats]) & (n_words > 0)
    if not keep.any():
        raise InputError(f"none of the {len(names)} documents (e.g. {', '.join(names[:3])}) has both a label "
                         "and a word; document names are file names without .txt")
    ids = ids[np.repeat(keep, n_words)]
    kept = [p for p, k in zip(names, keep) if k]
    first = [c[0] for c, k in zip(cats, keep) if k]
    freq = Counter(first)
    label_names = sorted(freq, key=lambda s: (-freq[s], s))
    lab = {s: i for i, s in enumerate(label_names)}
    multi = [p for p, c, k in zip(names, cats, keep) if k and len(c) > 1]
    stats = {"documents": len(names), "kept": len(kept), "max_words": max_words,
             "dropped_no_label": sum(1 for c in cats if not c),
             "dropped_no_words": int(sum(1 for c, n in zip(cats, n_words) if c and n == 0)),
             "label_rule": "first listed label", "multi_label": len(multi), "multi_label_examples": multi[:5],
             "class_counts": {s: freq[s] for s in label_names}, "words": int(len(ids)), "vocabulary": len(words)}
    if wikispeedia:
        stats["headers_cut"] = headers
    return LabelledDocs(kept, words, np.concatenate([[0], np.cumsum(n_words[keep])]).astype(np.int64), ids,
                        np.array([lab[s] for s in first], np.int64), label_names, stats)


def load_wikispeedia(directory: str | Path, max_words: int = 256, limit: int = 0) -> LabelledDocs:
    """plaintext_articles.tar.xz + categories.tsv -> LabelledDocs (rules in the module docstring)."""
    directory = Path(directory)
    return read_labelled([directory / "plaintext_articles.tar.xz"], top_level_categories(directory / "categories.tsv"),
                         max_words, wikispeedia=True, limit=limit)


def split_rows(n: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded split of rows 0..n-1 into (train, val, test), each sorted."""
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be three numbers >= 0 summing to 1, got {fractions}")
    perm = np.random.default_rng([seed, 15]).permutation(n)
    a = int(round(fractions[0] * n))
    b = a + int(round(fractions[1] * n))
    return np.sort(perm[:a]), np.sort(perm[a:b]), np.sort(perm[b:])
