"""The first half of prepare-text, shared by its two outputs: corpora -> greedy unigram+bigram ids.

    corpus = tokenise_corpora(cfg, work_dir, progress)   # TokenisedCorpus
    corpus.ids (T,) int32, corpus.sentence_ids (S,), corpus.sentence_doc (S,), corpus.sentence_paragraph (S,)

prepare.py packs the sentences into ordered segments (the text model's rows); sets.py makes a set of
each paragraph (`--as-sets`). Both start from the same ids, split and vocabulary, computed here:

Steps: stream documents (corpora.py) in chunks; NFKC, sentences and words with Arrow kernels
(tokenize.py); words -> provisional ints per chunk (`dictionary_encode`, prepare.KeyEncoder), spilled
to disk as uint32; one unification pass; then with NumPy: split non-empty documents train/test with
a seeded permutation (all sentences of a document on one side), count unigrams and bigrams of the
training documents only (ngrams.py), choose the vocabulary, tokenise greedily (bigram, else word,
else [UNK]). Memory: about 30 bytes per word plus 16 bytes per distinct training bigram.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.prepare import KeyEncoder
from ..data.readers import InputError
from ..data.writer import held_out
from .corpora import CorpusStats, read_documents
from .ngrams import (UNK, BigramCounter, NgramVocab, choose_vocabulary, greedy_encode, pair_keys, sentence_pairs,
    vocabulary_strings, word_mask)
from .tokenize import TextConfig, split_words
from .._log import progress_bar

_BLOCK_TOKENS = 4 << 20  # words per counting / encoding block


@dataclass(frozen=True)
class TextPrepareConfig:
    inputs: tuple[str, ...]
    out: str
    format: str = "auto"  # auto | txt | gcide | brown (auto: per input)
    text: TextConfig = field(default_factory=TextConfig)
    vocab_size: int = 1_000_000  # unigrams + bigrams kept ([UNK] comes on top)
    min_bigram_count: int = 2
    max_bigrams: int = 64_000_000  # distinct bigrams held while counting (16 bytes each)
    segment: int = 128  # ids per row (whole sentences packed); 0: one row per document; unused with as_sets
    test_fraction: float = 0.1
    seed: int = 0
    as_sets: bool = False  # rows are paragraphs as sets (sets.py): each id once, [UNK] dropped, no order

    def __post_init__(self):
        if isinstance(self.inputs, (str, Path)):
            object.__setattr__(self, "inputs", (str(self.inputs),))
        if not self.inputs:
            raise ValueError("no input given")
        if not 0.0 <= self.test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in [0, 1), got {self.test_fraction}")
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {self.vocab_size}")
        if self.segment < 0:
            raise ValueError(f"segment must be >= 0 (0: whole documents), got {self.segment}")


@dataclass
class TokenisedCorpus:
    """Every sentence of the corpora as vocabulary ids, with its document and paragraph."""
    names: list[str]  # (D,) document names
    stats: CorpusStats
    ids: np.ndarray  # (T',) int32 vocabulary ids, sentence after sentence ([UNK] = 0 included)
    sentence_ids: np.ndarray  # (S,) int64 ids per sentence (a bigram token is one id)
    sentence_doc: np.ndarray  # (S,) int64 document of each sentence, non-decreasing
    sentence_paragraph: np.ndarray  # (S,) int64 paragraph of each sentence, numbered across the corpora
    doc_words: np.ndarray  # (D,) int64 words per document
    nonempty: np.ndarray  # (D',) documents with words
    is_test: np.ndarray  # (D,) bool held-out documents (empty ones: False)
    vocab_strings: list[str]  # (V,) [UNK] then the n-grams by decreasing training n-gram count
    is_bigram: np.ndarray  # (V - 1,) bool
    ngram_count: np.ndarray  # (V - 1,) int64 training n-gram counts that chose the vocabulary
    unigram_counts: np.ndarray  # (U,) training counts of every word int
    n_bigram_keys: int  # distinct training bigrams counted
    counter: BigramCounter
    bigram_tokens: int  # bigram tokens emitted by the greedy tokenisation
    seconds: dict  # stage -> seconds


def tokenise_corpora(cfg: TextPrepareConfig, out: Path, t0: float, progress: bool) -> TokenisedCorpus:
    """Steps 1-5 (module docstring); `out` holds the spill file while reading."""
    seconds = {}

    # ---- 1. read, split into words, encode words as provisional ints (spilled)
    stats = CorpusStats()
    enc = KeyEncoder("word")
    names: list[str] = []
    sent_len, sent_doc, sent_para = [], [], []
    n_paras = 0
    spill = out / ".words.tmp"
    try:
        with open(spill, "wb") as fw, progress_bar(desc="reading", unit=" words", unit_scale=True,
                                                   progress=progress) as bar:
            for chunk_names, texts in read_documents(cfg.inputs, cfg.format, stats):
                words = split_words(texts, cfg.text)
                fw.write(enc.encode(words.tokens).tobytes())
                sent_len.append(words.sentence_lengths)
                sent_doc.append(words.sentence_doc + len(names))
                sent_para.append(words.sentence_paragraph + n_paras)
                n_paras += int(words.sentence_paragraph[-1]) + 1 if len(words.sentence_paragraph) else 0
                names += chunk_names
                bar.update(len(words.tokens))
        seconds["read_and_split"] = time.time() - t0
        t = time.time()
        code_map, word_strings = enc.finish()
        words = code_map[np.fromfile(spill, dtype=np.uint32)]  # (T,) int32 word ints
        del code_map
    finally:
        spill.unlink(missing_ok=True)
    sent_len = np.concatenate(sent_len) if sent_len else np.zeros(0, np.int64)
    sent_doc = np.concatenate(sent_doc) if sent_doc else np.zeros(0, np.int64)
    sent_para = np.concatenate(sent_para) if sent_para else np.zeros(0, np.int64)
    n_docs = len(names)
    if len(words) == 0:
        raise InputError(f"{', '.join(map(str, cfg.inputs))}: no words found ({n_docs} documents, "
                         f"{stats.bytes:,} bytes); expected UTF-8 text")
    seconds["unify_words"] = time.time() - t

    # ---- 2. split documents (non-empty ones) train/test
    doc_words = np.bincount(sent_doc, weights=sent_len, minlength=n_docs).astype(np.int64)
    nonempty = np.flatnonzero(doc_words > 0)
    is_test = np.zeros(n_docs, bool)
    is_test[nonempty] = held_out(len(nonempty), cfg.test_fraction, cfg.seed)
    sent_test = is_test[sent_doc]

    # ---- 3. count unigrams and bigrams of the training documents
    t = time.time()
    train_words = np.repeat(~sent_test, sent_len)  # (T,) bool
    unigram_counts = np.bincount(words[train_words], minlength=len(word_strings)).astype(np.int64)
    is_word = word_mask(word_strings)  # (U,)
    counter = BigramCounter(cfg.max_bigrams)
    for a, b, s0, s1 in _blocks(sent_len):
        w = words[a:b]
        ok = sentence_pairs(b - a, sent_len[s0:s1])[:-1] & train_words[a:b - 1] & is_word[w[:-1]] & is_word[w[1:]]
        i = np.flatnonzero(ok)
        counter.add(pair_keys(w[i], w[i + 1]))
    bigram_keys, bigram_counts = counter.result()
    seconds["count"] = time.time() - t

    # ---- 4. the vocabulary: [UNK] + top n-grams
    t = time.time()
    is_bigram, item, ngram_count = choose_vocabulary(unigram_counts, bigram_keys, bigram_counts, cfg.vocab_size,
                                                     cfg.min_bigram_count)
    ids = np.arange(1, len(item) + 1, dtype=np.int64)
    uni_strings, big_strings = vocabulary_strings(word_strings, item[~is_bigram], item[is_bigram])
    strings = np.empty(len(item), object)
    strings[~is_bigram], strings[is_bigram] = uni_strings, big_strings
    vocab_strings = [UNK] + strings.tolist()
    del strings, uni_strings, big_strings
    ngrams = NgramVocab(len(word_strings), item[~is_bigram], ids[~is_bigram], item[is_bigram], ids[is_bigram])
    seconds["vocabulary"] = time.time() - t

    # ---- 5. greedy tokenisation, block by block
    t = time.time()
    out_ids, out_len, n_bigram_tokens = [], [], 0
    for a, b, s0, s1 in _blocks(sent_len):
        i, ln, nb = greedy_encode(words[a:b], sent_len[s0:s1], ngrams)
        out_ids.append(i)
        out_len.append(ln)
        n_bigram_tokens += nb
    ids_all = np.concatenate(out_ids)
    tok_len = np.concatenate(out_len)
    del out_ids, out_len, words, train_words
    seconds["tokenise"] = time.time() - t
    return TokenisedCorpus(names, stats, ids_all, tok_len, sent_doc, sent_para, doc_words, nonempty,
                           is_test, vocab_strings, is_bigram, ngram_count, unigram_counts, len(bigram_keys), counter,
                           n_bigram_tokens, seconds)


def vocab_summary(c: TokenisedCorpus, cfg: TextPrepareConfig) -> dict:
    """What the summary says of the n-gram vocabulary (both outputs)."""
    n_big = int(c.is_bigram.sum())
    return {"size": len(c.vocab_strings), "unigrams": len(c.is_bigram) - n_big, "bigrams": n_big,
            "requested": cfg.vocab_size, "train_distinct_unigrams": int((c.unigram_counts > 0).sum()),
            "train_distinct_bigrams": c.n_bigram_keys, "min_bigram_count": cfg.min_bigram_count,
            "bigram_counts_exact": c.counter.exact, "bigrams_pruned": c.counter.pruned,
            "smallest_count_kept": int(c.ngram_count[-1]) if len(c.ngram_count) else 0}


def _blocks(sent_len: np.ndarray):
    """(token start, token end, sentence start, sentence end) of blocks of about _BLOCK_TOKENS words,
    cut at sentence boundaries."""
    ends = np.cumsum(sent_len)
    s0, a = 0, 0
    while s0 < len(sent_len):
        s1 = max(int(np.searchsorted(ends, a + _BLOCK_TOKENS, side="right")), s0 + 1)
        b = int(ends[s1 - 1])
        yield a, b, s0, s1
        s0, a = s1, b
