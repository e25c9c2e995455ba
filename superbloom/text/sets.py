"""prepare-text --as-sets: every paragraph of the corpora -> a set of its unigram + bigram ids.

    superbloom prepare-text plaintext_articles.tar.xz gcide.dict.dz brown.tar.xz --as-sets --out data/text-sets

A real set dataset with a vocabulary of a million ids, written by the one writer
(data/writer.py) in the layout of `superbloom prepare --split sets`, so that every set model,
baseline and the "sets" evaluation protocol read it unchanged (its meta.json has no "text" key:
it is not a text-model dataset).

From the ids of tokenised.py (the same corpora, held-out documents and greedy n-gram tokenisation
as prepare-text's segments):
  set        one per paragraph (blank-line separated; Brown's files put a blank line after every
             sentence, so a Brown set is a sentence; a GCIDE entry's paragraphs are its senses),
             named `DOCUMENT#k`, k: the paragraph's rank among the document's paragraphs with words
  ids        each distinct id once, in order of first occurrence (repeats folded, counted);
             [UNK] dropped (counted); a paragraph left with < 2 ids dropped (counted)
  split      by document: every paragraph of a held-out document is a test set
  vocabulary the n-grams chosen from the training documents (vocab_size of them), then, as
             `prepare` does, only those in some training set, numbered by decreasing count (the
             number of training sets holding the id; ties: n-gram order); a test id outside it is -1
             (counted)

So the number of ids is at most vocab_size: n-grams that greedy tokenisation never emits in a
training set (`the_united states` shadowing) and those only in dropped paragraphs are not ids.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..data.readers import InputError
from ..data.writer import vocabulary_order, write_split, write_vocabulary
from .ngrams import SEPARATOR, UNK_ID
from .tokenised import TextPrepareConfig, TokenisedCorpus, vocab_summary

MIN_SET = 2  # a paragraph with fewer distinct ids is not a set


def paragraph_sets(ids: np.ndarray, sentence_ids: np.ndarray, sentence_paragraph: np.ndarray):
    """Tokens -> one set per paragraph: [UNK] dropped, each id once (first occurrence kept, order kept).

    ids (T,) int vocabulary ids, sentence_ids (S,) ids per sentence, sentence_paragraph (S,) its
    paragraph (non-decreasing) -> (paragraphs (P,) the paragraphs with >= 1 token, set_ids (L,) int32
    grouped by paragraph, set_len (P,) int64, unk tokens dropped, repeats folded)."""
    para_of = np.repeat(sentence_paragraph, sentence_ids)  # (T,)
    paragraphs = np.unique(sentence_paragraph[sentence_ids > 0])  # (P,)
    known = ids != UNK_ID
    unk = int((~known).sum())
    para_of, ids = para_of[known], ids[known]
    key = para_of.astype(np.int64) * (int(ids.max()) + 1 if len(ids) else 1) + ids  # (T',) (paragraph, id)
    order = np.argsort(key, kind="stable")
    first = np.ones(len(key), bool)
    first[1:] = key[order[1:]] != key[order[:-1]]
    keep = np.sort(order[first])  # first occurrences, token order (so grouped by paragraph)
    repeats = len(key) - len(keep)
    rank = np.searchsorted(paragraphs, para_of[keep])  # (L,) row of each kept id
    set_len = np.bincount(rank, minlength=len(paragraphs)).astype(np.int64)
    return paragraphs, ids[keep].astype(np.int32), set_len, unk, repeats


def write_text_sets(c: TokenisedCorpus, cfg: TextPrepareConfig, out: Path, t0: float) -> dict:
    """The set dataset of the tokenised corpora into `out` -> the summary (meta.json)."""
    t = time.time()
    paragraphs, set_ids, set_len, unk, repeats = paragraph_sets(c.ids, c.sentence_ids, c.sentence_paragraph)
    # document and name of each paragraph
    first_sentence = np.searchsorted(c.sentence_paragraph, paragraphs)  # (P,)
    para_doc = c.sentence_doc[first_sentence]
    para_rank = np.arange(len(paragraphs)) - np.searchsorted(para_doc, para_doc)  # k-th paragraph of its document
    row = np.repeat(np.arange(len(paragraphs)), set_len)  # (L,)
    is_set = set_len >= MIN_SET  # (P,)
    kept = is_set[row]
    set_ids, row = set_ids[kept], row[kept]
    set_test = c.is_test[para_doc]  # (P,)
    link_test = set_test[row]
    if not (is_set & ~set_test).any():
        raise InputError(f"{', '.join(map(str, cfg.inputs))}: no paragraph of the training documents has >= {MIN_SET} "
                         f"distinct known ids ({len(paragraphs):,} paragraphs); expected text with paragraphs of "
                         "several words (separated by blank lines)")

    # the vocabulary: the chosen n-grams that occur in the training sets, by decreasing set count
    n_grams = len(c.vocab_strings)
    keys, remap = vocabulary_order(np.bincount(set_ids[~link_test], minlength=n_grams))
    counts = np.bincount(set_ids[~link_test], minlength=n_grams)[keys]
    write_vocabulary(out, [c.vocab_strings[k] for k in keys.tolist()], counts)

    split = {}
    for name, chosen, links in (("train", is_set & ~set_test, ~link_test), ("test", is_set & set_test, link_test)):
        rows = np.flatnonzero(chosen)
        lengths = set_len[rows]
        write_split(out, name, lengths, remap[set_ids[links]],
                    [f"{c.names[d]}#{k}" for d, k in zip(para_doc[rows].tolist(), para_rank[rows].tolist())])
        split[name] = {"documents": int(len(np.unique(para_doc[rows]))), "sets": int(len(rows)),
                       "links": int(links.sum()),
                       "mean_set_size": round(float(lengths.mean()), 2) if len(lengths) else 0.0}
    test_ids = set_ids[link_test]
    unseen = remap[test_ids] < 0
    c.seconds["sets_and_write"] = time.time() - t

    ngrams = vocab_summary(c, cfg)
    ngrams["emitted_in_train_sets"] = len(keys)
    summary = {
        "input": ", ".join(map(str, cfg.inputs)), "inputs": list(map(str, cfg.inputs)), "format": "text-sets",
        "formats": c.stats.formats, "split": "sets", "seed": cfg.seed, "test_fraction": cfg.test_fraction,
        "sets": split["train"]["sets"] + split["test"]["sets"], "ids": int(len(keys)), "links": int(len(set_ids)),
        "train": split["train"], "test": split["test"],
        "test_links_unseen_in_train": int(unseen.sum()),
        "test_ids_unseen_in_train": int(len(np.unique(test_ids[unseen]))),
        "duplicates_removed": int(repeats),
        "documents": int(len(c.nonempty)), "empty_documents": int(len(c.names) - len(c.nonempty)),
        "paragraphs": int(len(paragraphs)), "short_paragraphs_dropped": int((~is_set).sum()),
        "min_set_size": MIN_SET, "unk_dropped": unk, "tokens": int(len(c.ids)), "words": int(c.doc_words.sum()),
        "sentences": int(len(c.sentence_ids)), "bigram_tokens": c.bigram_tokens,
        "ngrams": {**ngrams, "separator": SEPARATOR},
        "text_sets": {**asdict(cfg.text), "tokenizer": "bert-basic (Arrow RE2): words = runs of letters, digits "
                      "and marks; every other non-space character is a token", "unit": "paragraph",
                      "ordered": False},
        "corpus": {"files": c.stats.files, "bytes": c.stats.bytes, "skipped_members": c.stats.skipped_members,
                   "repaired_utf8_documents": c.stats.repaired, "repaired_examples": c.stats.examples},
        "seconds_by_stage": {k: round(v, 2) for k, v in c.seconds.items()},
        "seconds": round(time.time() - t0, 2),
    }
    return summary  # write_staged saves it as meta.json


def format_text_sets_summary(s: dict) -> str:
    v = s["ngrams"]
    rows = [
        ("documents", f"{s['documents']:,} ({s['train']['documents']:,} train / {s['test']['documents']:,} test; "
                      f"{s['empty_documents']:,} empty, dropped)"),
        ("words", f"{s['words']:,} -> {s['tokens']:,} tokens ({s['bigram_tokens']:,} bigram tokens)"),
        ("n-gram vocabulary", f"{v['size'] - 1:,} = {v['unigrams']:,} unigrams + {v['bigrams']:,} bigrams "
                              f"(smallest count kept {v['smallest_count_kept']})"),
        ("ids", f"{s['ids']:,} (the n-grams in some training set)"),
        ("sets (paragraphs)", f"{s['sets']:,} ({s['train']['sets']:,} train / {s['test']['sets']:,} test), mean size "
                              f"{s['train']['mean_set_size']} / {s['test']['mean_set_size']}"),
        ("dropped", f"{s['short_paragraphs_dropped']:,} of {s['paragraphs']:,} paragraphs with < {s['min_set_size']} "
                    f"ids, {s['unk_dropped']:,} [UNK] tokens, {s['duplicates_removed']:,} repeated ids folded"),
        ("test links with ids unseen in train", f"{s['test_links_unseen_in_train']:,} "
                                                f"({s['test_ids_unseen_in_train']:,} distinct ids)"),
        ("time", f"{s['seconds']} s"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {val}" for k, val in rows)
