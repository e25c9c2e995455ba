"""A sentence with blanks -> the element ids a model reads, tokenised exactly as prepare-text did.

    enc = TextEncoder.from_dataset("data/text")       # vocab.txt + meta.json's text settings
    q = enc.encode("Miles Davis is a jazz musician, he is similar to [MASK] .")
    q.elements -> [id(miles_davis), id(is), ..., MASK_ELEM, id(.)];  q.blanks -> [11]

This is the tokenising half of fill-in-the-blank (the paper's appendix E): blanks
are `[MASK]` (or numbered, `[MASK1]`, `[MASK2]`, as in the paper); the text between blanks goes
through the same NFKC, sentence and word split (tokenize.py) and the same greedy bigram merge
(ngrams.greedy_encode) as the training data, so `miles davis` becomes the one id `miles_davis`;
no bigram spans a blank. Words not in the vocabulary become [UNK] and are listed. Element ids are
what batches.query_batch / hashing.encode take: vocabulary ids >= 0, MASK_ELEM (< 0) at blanks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..storage.files import load_json
from ..hashing.bloom import MASK_ELEM
from ..data.vocab import Vocab
from .ngrams import SEPARATOR, UNK_ID, NgramVocab, greedy_encode, pair_keys
from .tokenize import TextConfig, split_words

BLANK = re.compile(r"\[MASK\d*\]")


@dataclass
class EncodedText:
    elements: np.ndarray  # (n,) int64 vocabulary ids, MASK_ELEM at every blank
    blanks: list[int]  # positions of the blanks in `elements`, in text order
    words: list[str]  # (n,) the token shown for each element ("[MASK]" at blanks)
    unknown: list[str]  # words that became [UNK]


class TextEncoder:
    def __init__(self, vocab: Vocab, cfg: TextConfig = TextConfig(), max_words: int = 512):
        self.vocab, self.cfg, self.max_words = vocab, cfg, max_words

    @classmethod
    def from_dataset(cls, path: str | Path, max_words: int = 512) -> "TextEncoder":
        """The vocabulary and text settings of a directory written by prepare_text (meta.json), or of a
        model trained on one (train.py copies vocab.txt there and the data summary into config.json)."""
        path = Path(path)
        if (path / "meta.json").exists():
            meta = load_json(path / "meta.json")
        elif (path / "config.json").exists():
            meta = load_json(path / "config.json").get("data", {})
        else:
            raise FileNotFoundError(f"{path}: neither a prepared dataset (meta.json) nor a model (config.json)")
        if "text" not in meta:
            raise ValueError(f"{path}: not prepared by prepare-text (its data summary has no 'text' settings)")
        t = meta["text"]
        cfg = TextConfig(**{k: t[k] for k in ("lowercase", "nfkc", "sentences") if k in t})
        return cls(Vocab.load(path), cfg, max_words)

    def encode(self, text: str, require_blank: bool = True) -> EncodedText:
        if not text or not text.strip():
            raise ValueError("empty text: expected a sentence with at least one [MASK]")
        pieces = BLANK.split(text)
        if require_blank and len(pieces) == 1:
            raise ValueError("no [MASK] in the text: mark each blank to fill with [MASK] (or [MASK1], [MASK2], ...)")
        w = split_words(pa.array(pieces, pa.large_string()), self.cfg)
        tokens = w.tokens.to_pylist()
        if len(tokens) + len(pieces) - 1 > self.max_words:
            raise ValueError(f"text too long: {len(tokens):,} words, at most {self.max_words} are read")
        # local word ints -> the vocabulary's unigram and bigram ids, then the shared greedy merge
        local = {s: i for i, s in enumerate(dict.fromkeys(tokens))}
        words = np.array([local[s] for s in tokens], np.int64)
        strings = list(local)
        uni_ids = np.array([self.vocab.get(s) if self.vocab.get(s) is not None else UNK_ID for s in strings])
        pairs = set(zip(words[:-1].tolist(), words[1:].tolist()))
        found = [(a, b, self.vocab.get(strings[a] + SEPARATOR + strings[b])) for a, b in pairs]
        found = [(a, b, i) for a, b, i in found if i is not None]
        keys = pair_keys(np.array([a for a, _, _ in found], np.int64), np.array([b for _, b, _ in found], np.int64))
        ngrams = NgramVocab(len(strings), np.arange(len(strings)), uni_ids, keys,
                            np.array([i for _, _, i in found], np.int64))
        ids, lengths, _ = greedy_encode(words, w.sentence_lengths, ngrams)
        # re-insert the blanks between pieces: piece k's ids come from its sentences
        piece_ids = np.bincount(w.sentence_doc, weights=lengths, minlength=len(pieces)).astype(np.int64)
        parts, pos = [], 0
        for k, n in enumerate(piece_ids.tolist()):
            parts.append(ids[pos:pos + n].astype(np.int64))
            pos += n
            if k < len(pieces) - 1:
                parts.append(np.array([MASK_ELEM], np.int64))
        elements = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        blanks = np.flatnonzero(elements == MASK_ELEM).tolist()
        shown = ["[MASK]" if e == MASK_ELEM else self.vocab.strings[e] for e in elements.tolist()]
        unknown = [s for s in strings if self.vocab.get(s) is None]
        return EncodedText(elements, blanks, shown, unknown)
