"""prepare-text: plain-text corpora -> a prepared dataset of token-id sequences (Superbloom sec. 4).

    superbloom prepare-text plaintext_articles.tar.xz gcide.dict.dz brown.tar.xz --out data/text

Writes the same directory as `superbloom prepare` (prepare.py), so `superbloom.Dataset` reads it
and the id model trains on it (with positions on: a row is an ordered sequence here):

    DATA_DIR/vocab.txt, counts.npy     id 0 `[UNK]`, then unigrams and bigrams (`miles_davis`) by
                                       decreasing training n-gram count; counts.npy holds how often
                                       each id occurs in train.ids (what the heads, baselines and
                                       deciles need), ngram_counts.npy the raw n-gram counts that
                                       chose the vocabulary
    DATA_DIR/{train,test}.offsets.npy, .ids.npy   CSR (writer.py): row = one segment of a document:
                                       whole sentences packed up to `segment` ids (BERT's procedure;
                                       a longer sentence is cut), or the whole document (segment 0)
    DATA_DIR/{train,test}.sets.txt     row names `DOCUMENT#k` (k-th segment of the document)
    DATA_DIR/meta.json                 summary (written last: marks completion), with the text
                                       settings that `fill` must reuse to tokenise a query the same way

Steps: tokenised.py reads the corpora, holds out documents (seeded; all segments of a document on
one side; empty documents dropped and counted), chooses the vocabulary from the training documents
and tokenises greedily (bigram, else word, else [UNK]; counted); here: pack segments and write
(writer.py, as prepare.py). Memory: about 30 bytes per word plus 16 bytes per distinct training bigram.

`as_sets=True` (`--as-sets`) writes a set dataset instead, one set per paragraph (sets.py).
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..data.writer import write_split, write_staged, write_vocabulary
from .ngrams import SEPARATOR, UNK, UNK_ID
from .tokenised import TextPrepareConfig, tokenise_corpora

__all__ = ["TextPrepareConfig", "format_text_summary", "pack_segments", "prepare_text"]


def prepare_text(cfg: TextPrepareConfig, progress: bool = True, overwrite: bool = False) -> dict:
    """Run the whole text preparation; returns the summary also written to meta.json.

    As `superbloom prepare`: the dataset is written into `OUT.partial` and moved into place when
    complete (an earlier dataset in OUT, replaced only with overwrite=True, stays loadable until then); an
    OUT holding other files is refused.
    With cfg.as_sets the dataset holds one set per paragraph (sets.py) instead of ordered segments."""
    t0 = time.time()
    if cfg.as_sets:
        from .sets import write_text_sets

        return write_staged(cfg.out, lambda work: write_text_sets(tokenise_corpora(cfg, work, t0, progress),
                                                                  cfg, work, t0), overwrite)
    return write_staged(cfg.out, lambda work: _prepare_text_into(cfg, work, t0, progress), overwrite)


def _prepare_text_into(cfg: TextPrepareConfig, out: Path, t0: float, progress: bool) -> dict:
    c = tokenise_corpora(cfg, out, t0, progress)  # steps 1-5
    seconds = c.seconds
    names, stats, ids_all, tok_len, sent_doc = c.names, c.stats, c.ids, c.sentence_ids, c.sentence_doc
    is_test, doc_words, nonempty, vocab_strings = c.is_test, c.doc_words, c.nonempty, c.vocab_strings
    is_bigram, ngram_count, unigram_counts, counter = c.is_bigram, c.ngram_count, c.unigram_counts, c.counter
    n_docs, n_bigram_tokens, item_count = len(names), c.bigram_tokens, len(is_bigram)

    # ---- 6. segments and the two splits
    t = time.time()
    seg_len, seg_doc = pack_segments(tok_len, sent_doc, n_docs, cfg.segment)
    seg_rank = np.arange(len(seg_doc)) - np.searchsorted(seg_doc, seg_doc)  # k-th segment of its document
    seg_test = is_test[seg_doc]
    tok_test = np.repeat(seg_test, seg_len)
    split = {}
    for name, rows, tokens in (("train", ~seg_test, ~tok_test), ("test", seg_test, tok_test)):
        ids = ids_all[tokens]
        lengths = seg_len[rows]
        docs = seg_doc[rows]
        write_split(out, name, lengths, ids,
                    [f"{names[d]}#{k}" for d, k in zip(docs.tolist(), seg_rank[rows].tolist())])
        unk = int((ids == UNK_ID).sum())
        split[name] = {"documents": int(len(np.unique(docs))), "sets": int(rows.sum()), "links": int(len(ids)),
                       "mean_set_size": round(float(lengths.mean()), 2) if len(lengths) else 0.0,
                       "words": int(doc_words[is_test == (name == "test")].sum()),
                       "unk": unk, "unk_rate": round(unk / max(len(ids), 1), 5)}
        if name == "train":
            train_counts = np.bincount(ids, minlength=len(vocab_strings)).astype(np.int64)
    write_vocabulary(out, vocab_strings, train_counts)
    np.save(out / "ngram_counts.npy", np.concatenate([[split["train"]["unk"]], ngram_count]).astype(np.int64))
    seconds["write"] = time.time() - t

    n_big = int(is_bigram.sum())
    summary = {
        "input": ", ".join(map(str, cfg.inputs)), "inputs": list(map(str, cfg.inputs)), "format": "text",
        "formats": stats.formats, "seed": cfg.seed, "test_fraction": cfg.test_fraction,
        "sets": int(len(seg_len)), "ids": len(vocab_strings), "links": int(len(ids_all)),
        "train": split["train"], "test": split["test"],
        "documents": int(len(nonempty)), "empty_documents": int(n_docs - len(nonempty)),
        "sentences": int(len(tok_len)), "words": int(doc_words.sum()),
        "bigram_tokens": n_bigram_tokens,
        "unk": split["train"]["unk"] + split["test"]["unk"],
        "vocab": {"size": len(vocab_strings), "unigrams": item_count - n_big, "bigrams": n_big,
                  "specials": [UNK], "unk_id": UNK_ID, "separator": SEPARATOR, "requested": cfg.vocab_size,
                  "train_distinct_unigrams": int((unigram_counts > 0).sum()),
                  "train_distinct_bigrams": c.n_bigram_keys,
                  "min_bigram_count": cfg.min_bigram_count, "bigram_counts_exact": counter.exact,
                  "bigrams_pruned": counter.pruned,
                  "smallest_count_kept": int(ngram_count[-1]) if len(ngram_count) else 0,
                  # n-grams of the vocabulary that greedy tokenisation never emits in train.ids (a bigram
                  # whose left word is always taken by an overlapping pair first: `the_united states`)
                  "never_emitted_in_train": int((train_counts[1:] == 0).sum()),
                  "bigrams_never_emitted_in_train": int((train_counts[1:][is_bigram] == 0).sum())},
        "text": {**asdict(cfg.text), "tokenizer": "bert-basic (Arrow RE2): words = runs of letters, digits and "
                 "marks; every other non-space character is a token", "segment": cfg.segment,
                 "ordered": True},
        "corpus": {"files": stats.files, "bytes": stats.bytes, "skipped_members": stats.skipped_members,
                   "repaired_utf8_documents": stats.repaired, "repaired_examples": stats.examples},
        "seconds_by_stage": {k: round(v, 2) for k, v in seconds.items()},
        "seconds": round(time.time() - t0, 2),
    }
    return summary  # write_staged saves it as meta.json


def pack_segments(sent_len: np.ndarray, sent_doc: np.ndarray, n_docs: int, segment: int):
    """Rows of whole sentences, at most `segment` ids each (BERT's packing; a longer sentence is cut
    into pieces of `segment`), never across documents -> (row lengths (R,), row document (R,)).

    sent_len: (S,) ids per sentence, sent_doc: (S,) non-decreasing document of each sentence.
    Vectorised over documents: round r packs the r-th row of every document at once."""
    keep = sent_len > 0
    sent_len, sent_doc = sent_len[keep], sent_doc[keep]
    if len(sent_len) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if segment == 0:
        lengths = np.bincount(sent_doc, weights=sent_len, minlength=n_docs).astype(np.int64)
        docs = np.flatnonzero(lengths)
        return lengths[docs], docs
    cum = np.zeros(len(sent_len) + 1, np.int64)
    np.cumsum(sent_len, out=cum[1:])
    first = np.searchsorted(sent_doc, np.arange(n_docs + 1))  # (D + 1,) first sentence of each document
    cur, end = first[:-1].copy(), first[1:]
    starts = []
    active = np.flatnonzero(cur < end)
    while len(active):
        c, e = cur[active], end[active]
        starts.append(c)
        nxt = np.searchsorted(cum, cum[c] + segment, side="right") - 1  # sentences c..nxt-1 fit
        cur[active] = np.clip(nxt, c + 1, e)
        active = active[cur[active] < e]
    row_start = np.sort(np.concatenate(starts))  # (R0,) first sentence of each row
    bounds = np.r_[cum[row_start], cum[-1]]
    lengths = np.diff(bounds)
    row_doc = sent_doc[row_start]
    pieces = -(-lengths // segment)  # a row longer than `segment` is one long sentence: cut it
    if (pieces > 1).any():
        rep = np.repeat(np.arange(len(lengths)), pieces)
        k = np.arange(len(rep)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        lengths = np.minimum(lengths[rep] - k * segment, segment)
        row_doc = row_doc[rep]
    return lengths.astype(np.int64), row_doc.astype(np.int64)


def format_text_summary(s: dict) -> str:
    v = s["vocab"]
    rows = [
        ("documents", f"{s['documents']:,} ({s['train']['documents']:,} train / {s['test']['documents']:,} test; "
                      f"{s['empty_documents']:,} empty, dropped)"),
        ("words", f"{s['words']:,} in {s['sentences']:,} sentences"),
        ("vocabulary", f"{v['size']:,} = [UNK] + {v['unigrams']:,} unigrams + {v['bigrams']:,} bigrams "
                       f"(smallest count kept {v['smallest_count_kept']})"),
        ("training n-grams seen", f"{v['train_distinct_unigrams']:,} unigrams, {v['train_distinct_bigrams']:,} "
                                  f"bigrams{'' if v['bigram_counts_exact'] else ' (pruned: counts are lower bounds)'}"),
        ("tokens (ids)", f"{s['links']:,} ({s['bigram_tokens']:,} bigram tokens; {v['never_emitted_in_train']:,} "
                         f"vocabulary n-grams never emitted in train)"),
        ("rows (segments)", f"{s['sets']:,} ({s['train']['sets']:,} train / {s['test']['sets']:,} test), "
                            f"up to {s['text']['segment'] or 'whole documents'} ids"),
        ("[UNK] tokens", f"{s['train']['unk']:,} train ({s['train']['unk_rate']:.3%}), {s['test']['unk']:,} test "
                         f"({s['test']['unk_rate']:.3%})"),
        ("invalid UTF-8 repaired", f"{s['corpus']['repaired_utf8_documents']} documents"),
        ("time", f"{s['seconds']} s"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"  {k:<{width}}  {v}" for k, v in rows]
    lines += [f"    e.g. {e}" for e in s["corpus"].get("repaired_examples", [])]
    return "\n".join(lines)
