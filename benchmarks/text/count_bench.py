"""Benchmark: why text/tokenize.py splits words with Arrow kernels and text/ngrams.py counts with np.unique.

    /work/tools/benchlock .venv/bin/python benchmarks/text/count_bench.py [--articles 1500]

On the same documents (the Brown corpus and the first --articles Wikispeedia articles, read by
text/corpora.py), one process, measured one after the other:

  words -> ints   (a) Arrow: NFKC + lower + BERT-style word split (tokenize.split_words, sentences
                  included) + `dictionary_encode`;  (b) Python: `unicodedata.normalize` + `lower` +
                  `re.findall` per document + a dict lookup per word;  (c) Hugging Face `tokenizers`
                  (Rust): NFKC + Lowercase normalizers + BertPreTokenizer per document + a dict per
                  word (skipped when the package is not installed; it is not a dependency)
  bigram counts   of the adjacent int pairs: np.unique on int64 keys (sort), Arrow `value_counts`
                  (hash), `collections.Counter` of tuples (on a slice, extrapolated linearly)

Results: benchmarks/results/text/count.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a file too: `python benchmarks/text/NAME.py`
from benchmarks.datasets import DATA_ROOT, DATASETS  # noqa: E402
from benchmarks.machine import machine_info, write_results  # noqa: E402

from superbloom.text.corpora import read_documents  # noqa: E402
from superbloom.text.ngrams import pair_keys  # noqa: E402
from superbloom.text.tokenize import TextConfig, split_words  # noqa: E402

PY_WORD = re.compile(r"[^\W_]+|[^\w\s]|_")  # the same split: runs of letters/digits, else one character


def arrow_ints(chunks):
    t = time.perf_counter()
    codes, n = [], 0
    for texts in chunks:
        w = split_words(texts, TextConfig())
        enc = pc.dictionary_encode(w.tokens)
        codes.append(enc.indices.to_numpy())
        n += len(w.tokens)
    return time.perf_counter() - t, n


def python_ints(docs):
    t = time.perf_counter()
    ids: dict[str, int] = {}
    out = []
    for d in docs:
        toks = PY_WORD.findall(unicodedata.normalize("NFKC", d).lower())
        out.append(np.fromiter((ids.setdefault(x, len(ids)) for x in toks), np.int64, len(toks)))
    return time.perf_counter() - t, sum(len(o) for o in out)


def hf_ints(docs):
    try:
        from tokenizers import normalizers, pre_tokenizers
    except ImportError:
        return None, None
    norm = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    pre = pre_tokenizers.BertPreTokenizer()
    t = time.perf_counter()
    ids: dict[str, int] = {}
    out = []
    for d in docs:
        toks = pre.pre_tokenize_str(norm.normalize_str(d))
        out.append(np.fromiter((ids.setdefault(x, len(ids)) for x, _ in toks), np.int64, len(toks)))
    return time.perf_counter() - t, sum(len(o) for o in out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA_ROOT))
    ap.add_argument("--articles", type=int, default=1500, help="Wikispeedia articles added to Brown")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "text"))
    args = ap.parse_args()
    data = Path(args.data)
    load_before = os.getloadavg()
    chunks, docs = [], []
    for path, limit in ((data / DATASETS["brown"].path, None),
                        (data / DATASETS["wikispeedia-articles"].path, args.articles)):
        n = 0
        for names, texts in read_documents([path], "auto", chunk_bytes=4 << 20):
            if limit is not None and n >= limit:
                break
            texts = texts.slice(0, None if limit is None else limit - n)
            chunks.append(texts)
            docs += texts.to_pylist()
            n += len(texts)
    n_bytes = sum(len(d.encode()) for d in docs)
    rows = []
    for name, fn, arg in (("Arrow kernels (tokenize.split_words) + dictionary_encode", arrow_ints, chunks),
                          ("Python re.findall + dict per word", python_ints, docs),
                          ("HF tokenizers BertPreTokenizer (Rust) + dict per word", hf_ints, docs)):
        secs, n = fn(arg)
        rows.append({"method": name, "seconds": None if secs is None else round(secs, 2), "words": n,
                     "words_per_s": None if secs is None else round(n / secs)})
        print(rows[-1], flush=True)

    # bigram counting on the words of the Arrow pipeline, as ints
    words = np.concatenate([pc.dictionary_encode(split_words(c, TextConfig()).tokens).indices.to_numpy()
                            .astype(np.int64) + 1_000_000 * i for i, c in enumerate(chunks)])
    keys = pair_keys(words[:-1], words[1:])
    count_rows = []
    t = time.perf_counter()
    u, c = np.unique(keys, return_counts=True)
    count_rows.append({"method": "np.unique (sort) on int64 keys", "seconds": round(time.perf_counter() - t, 3)})
    t = time.perf_counter()
    vc = pc.value_counts(pa.array(keys))
    count_rows.append({"method": "Arrow value_counts (hash)", "seconds": round(time.perf_counter() - t, 3)})
    assert len(vc) == len(u)
    m = min(len(keys), 1_000_000)
    t = time.perf_counter()
    Counter(zip(words[:m].tolist(), words[1:m + 1].tolist()))
    count_rows.append({"method": f"collections.Counter of tuples ({m:,} pairs, extrapolated)",
                       "seconds": round((time.perf_counter() - t) * len(keys) / m, 3)})
    for r in count_rows:
        print(r, flush=True)
    result = {"machine": machine_info(), "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "documents": len(docs),
              "bytes": n_bytes, "pairs": int(len(keys)), "distinct_pairs": int(len(u)),
              "words_to_ints": rows, "bigram_counting": count_rows}
    md = ["# Text: words -> ints, and bigram counting", "",
          f"{len(docs):,} documents (Brown corpus + the first {args.articles:,} Wikispeedia articles), "
          f"{n_bytes / 1e6:.1f} MB of text, one process, one after the other.", "",
          "| words -> ints | seconds | words | words/s |", "|---|---|---|---|"]
    md += [f"| {r['method']} | {r['seconds'] if r['seconds'] is not None else 'not installed'} | "
           f"{r['words'] or 0:,} | {r['words_per_s'] or 0:,} |" for r in rows]
    md += ["", "The Arrow row includes NFKC, the paragraph and sentence split and the word split of "
               "tokenize.py; the others only normalise and split words (word counts differ slightly: the Python "
               "regex's `\\w` and the BERT pre-tokenizer's punctuation classes are not exactly tokenize.py's).", "",
           f"| counting {len(keys):,} adjacent pairs ({len(u):,} distinct) | seconds |", "|---|---|"]
    md += [f"| {r['method']} | {r['seconds']} |" for r in count_rows]
    md += ["", f"Load average (1/5/15 min) before {result['load_average_before']}, after "
               f"{result['load_average_after']}.", ""]
    write_results(Path(args.out), "count", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
