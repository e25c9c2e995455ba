"""Unigram + bigram vocabulary and greedy tokenisation into it (Superbloom sec. 4).

The paper's text vocabulary is "the most frequent unigrams and bigrams" (1M entries), so that
named entities such as `miles_davis` are single ids, hashed like any other id. Here:

  counting   words are ints (global unigram ids, first-appearance order); a bigram is the int64
             key `first << 32 | second` of two adjacent *words* of one sentence (never across a
             sentence, never with a punctuation token). Keys are counted per chunk with
             `np.unique` (a sort) and chunk tables are merged when the pending ones outgrow the
             merged one, so memory is the table of distinct bigrams (16 bytes each), not the
             text. On the 6.9M adjacent pairs of Brown + 1,500 Wikispeedia articles: np.unique
             0.53 s, Arrow's hash `value_counts` 2.6 s, a Python Counter of tuples 12.6 s.
             If the table passes `max_bigrams` entries, bigrams seen once so far are dropped
             (word2phrase's "reduce" step); the summary then says the counts are lower bounds.
  choosing   unigrams and bigrams ranked together by training count (ties: unigrams first, then
             first appearance); the top `vocab_size` are kept. A bigram's count never exceeds its
             words' counts, so a kept bigram's words are kept too. Bigrams seen fewer than
             `min_bigram_count` times are never kept.
  vocabulary id 0 is `[UNK]` (the only special id: [PAD], [MASK], [CLS], [SEP] are special
             elements of the hashing, hashing.py); then the n-grams by decreasing count. A bigram
             is written `first_second`: `_` is a punctuation token to the tokenizer, so it never
             occurs inside a word, and a vocabulary string with `_` (other than `_` itself) is a
             bigram.
  greedy     left to right in each sentence: a bigram token where the adjacent pair is in the
             vocabulary, else the word, else [UNK]. Vectorised: a pair at i is taken iff it is in
             the vocabulary and i is an even distance from the start of its run of consecutive
             in-vocabulary pairs (exactly what the left-to-right scan takes). The scan's cost: a
             pair can shadow the one to its right (`the_united states`, never `the united_states`);
             on the three corpora 68,952 of the 814,717 bigrams kept are never emitted in training
             (prepare-text's summary counts them: `never_emitted_in_train`).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .tokenize import is_word

SEPARATOR = "_"
UNK = "[UNK]"
UNK_ID = 0


def pair_keys(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Two arrays of word ints (< 2^31) -> int64 bigram keys `first << 32 | second`."""
    return (first.astype(np.int64) << 32) | second.astype(np.int64)


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (keys >> 32).astype(np.int64), (keys & 0xFFFFFFFF).astype(np.int64)


def sentence_pairs(n_tokens: int, sentence_lengths: np.ndarray) -> np.ndarray:
    """(T,) bool: token i and i+1 are in the same sentence (False at every sentence's last token)."""
    same = np.ones(n_tokens, bool)
    ends = np.cumsum(sentence_lengths) - 1
    same[ends[ends >= 0]] = False
    return same


class BigramCounter:
    """Counts of int64 bigram keys, merged from per-chunk `np.unique` tables in bounded memory."""

    def __init__(self, max_bigrams: int = 64_000_000):
        self.keys = np.zeros(0, np.int64)  # (K,) sorted distinct keys
        self.counts = np.zeros(0, np.int64)  # (K,)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending_rows = 0
        self.max_bigrams = max_bigrams
        self.pruned = 0  # distinct bigrams dropped by the reduce step (their counts are lost)
        self.min_reduce = 1

    def add(self, keys: np.ndarray) -> None:
        if len(keys):
            k, c = np.unique(keys, return_counts=True)
            self.pending.append((k, c.astype(np.int64)))
            self.pending_rows += len(k)
            if self.pending_rows > max(len(self.keys), 1 << 22):
                self._merge()

    def _merge(self) -> None:
        if not self.pending:
            return
        keys = np.concatenate([self.keys] + [k for k, _ in self.pending])
        counts = np.concatenate([self.counts] + [c for _, c in self.pending])
        self.pending, self.pending_rows = [], 0
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        first = np.ones(len(keys), bool)
        first[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(first)
        self.keys, self.counts = keys[starts], np.add.reduceat(counts, starts) if len(starts) else counts[:0]
        while len(self.keys) > self.max_bigrams:
            keep = self.counts > self.min_reduce
            self.pruned += int((~keep).sum())
            self.keys, self.counts = self.keys[keep], self.counts[keep]
            self.min_reduce += 1

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """-> (sorted distinct keys, counts)."""
        self._merge()
        return self.keys, self.counts

    @property
    def exact(self) -> bool:
        return self.pruned == 0


def choose_vocabulary(unigram_counts: np.ndarray, bigram_keys: np.ndarray, bigram_counts: np.ndarray,
                      vocab_size: int, min_bigram_count: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top `vocab_size` n-grams by training count, in vocabulary order (decreasing count; ties:
    unigrams first, then first appearance) -> (is_bigram (V,) bool, item (V,) int64: the word int or
    the bigram key, count (V,) int64).

    unigram_counts: (U,) per word int; bigram_keys, bigram_counts: (K,) sorted keys and counts."""
    uni = np.flatnonzero(unigram_counts > 0)
    big = np.flatnonzero(bigram_counts >= max(min_bigram_count, 1))
    counts = np.concatenate([unigram_counts[uni], bigram_counts[big]]).astype(np.int64)
    kind = np.concatenate([np.zeros(len(uni), np.int8), np.ones(len(big), np.int8)])
    item = np.concatenate([uni.astype(np.int64), bigram_keys[big]])
    # ties within a kind: word ints are in first-appearance order, keys sort by (first, second)
    order = np.lexsort((item, kind, -counts))[:max(vocab_size, 0)]
    return kind[order] == 1, item[order], counts[order]


class NgramVocab:
    """The chosen n-grams as lookup arrays over word ints: word -> id, bigram key -> id."""

    def __init__(self, n_words: int, unigrams: np.ndarray, unigram_ids: np.ndarray,
                 bigram_keys: np.ndarray, bigram_ids: np.ndarray):
        self.word_id = np.full(n_words, UNK_ID, np.int32)  # (U,) vocabulary id of every word int
        self.word_id[unigrams] = unigram_ids
        order = np.argsort(bigram_keys)
        self.bigram_keys = bigram_keys[order]  # (B,) sorted
        self.bigram_ids = bigram_ids[order].astype(np.int32)
        self._lookup = pc.SetLookupOptions(pa.array(self.bigram_keys, pa.int64()))

    def bigram_id(self, keys: np.ndarray) -> np.ndarray:
        """(P,) keys -> (P,) vocabulary id, -1 where the bigram is not in the vocabulary."""
        if not len(self.bigram_keys) or not len(keys):
            return np.full(len(keys), -1, np.int32)
        # a hash lookup (Arrow, C++): 4M keys into 800K in 1.1 s, where np.searchsorted's binary
        # search takes 2.4-3.7 s (cache misses)
        pos = pc.index_in(pa.array(keys, pa.int64()), options=self._lookup).fill_null(-1).to_numpy()
        return np.where(pos >= 0, self.bigram_ids[pos], -1).astype(np.int32)


def greedy_encode(words: np.ndarray, sentence_lengths: np.ndarray, vocab: NgramVocab):
    """Word ints of whole sentences -> (vocabulary ids, (S,) ids per sentence, bigram tokens emitted).

    words: (T,) int, sentence_lengths: (S,) summing to T."""
    n = len(words)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(len(sentence_lengths), np.int64), 0
    same = sentence_pairs(n, sentence_lengths)  # (T,)
    big = np.full(n, -1, np.int32)
    i = np.flatnonzero(same[:-1])
    big[i] = vocab.bigram_id(pair_keys(words[i], words[i + 1]))
    hit = big >= 0  # (T,) pair (i, i+1) is a vocabulary bigram
    # start of each run of consecutive hits: a scan takes the pairs at even distance from it
    idx = np.arange(n)
    run_start = np.maximum.accumulate(np.where(hit & ~np.r_[False, hit[:-1]], idx, 0))
    take = hit & ((idx - run_start) % 2 == 0)
    consumed = np.r_[False, take[:-1]]  # second word of a taken pair
    ids = np.where(take, big, vocab.word_id[words])[~consumed]
    sentence = np.repeat(np.arange(len(sentence_lengths)), sentence_lengths)
    lengths = sentence_lengths - np.bincount(sentence[take], minlength=len(sentence_lengths))
    return ids.astype(np.int32), lengths.astype(np.int64), int(take.sum())


def vocabulary_strings(words: pa.Array, unigrams: np.ndarray, bigram_keys: np.ndarray) -> tuple[list, list]:
    """Strings of the kept unigrams and bigrams (`first_second`), from the word dictionary."""
    uni = words.take(pa.array(unigrams, pa.int64())).to_pylist()
    a, b = split_keys(bigram_keys)
    big = pc.binary_join_element_wise(words.take(pa.array(a)), words.take(pa.array(b)),
                                        pa.scalar(SEPARATOR, words.type)).to_pylist()
    return uni, big


def word_mask(words: pa.Array) -> np.ndarray:
    """(U,) bool over the word dictionary: a word (may be part of a bigram), not punctuation."""
    return is_word(words)


def bigram_mask(strings: pa.Array | list) -> np.ndarray:
    """(V,) bool over vocabulary strings: the id is a bigram (`first_second`), for per-kind metrics."""
    strings = pa.array(strings, pa.large_string()) if isinstance(strings, list) else strings
    has = pc.match_substring(strings, SEPARATOR).to_numpy(zero_copy_only=False)
    return has & (pc.utf8_length(strings).to_numpy(zero_copy_only=False) > 1)
