"""Masked-language-model batches for text (paper sec. 4): BERT's masking of token rows, the masked
rows of a validation or an evaluation, and the checks that a dataset is text. No training code."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batches import MaskConfig, drop_elements, mask_segments, sample_segments, to_batch
from ..data.dataset import SetArray
from ..hashing.bloom import BloomHash
from ..text.ngrams import UNK_ID


TEXT_MASK = MaskConfig(n=128, mask_rate=0.15, p_mask=0.8, p_random=0.1, element_dropout=0.0)  # BERT's: the defaults of --objective text-mlm (objectives.TEXT_MASKING)


def is_text_dataset(meta: dict) -> bool:
    """A dataset (meta.json) or model data summary written by prepare-text."""
    return "text" in meta


def check_text_setup(meta: dict, positions: int, mask: MaskConfig, longest: int, where: str = "") -> None:
    """The settings text-mlm needs, with errors that say which flag to give. longest: the longest row."""
    if not is_text_dataset(meta):
        raise ValueError(f"{where or 'the dataset'}: --objective text-mlm trains on a dataset written by "
                         "`superbloom prepare-text` (its meta.json has no 'text' settings)")
    n = min(mask.n, longest)  # tokens an example can hold
    if positions <= 0:
        raise ValueError(f"--objective text-mlm needs position embeddings (text is ordered): pass --positions "
                         f"{n} (the example length: --segment {mask.n}, rows of up to {longest} tokens)")
    if positions < n:
        raise ValueError(f"--positions {positions} is shorter than the examples ({n} tokens: --segment {mask.n}, rows "
                         f"of up to {longest} tokens): tokens past position {positions} would share one position "
                         f"embedding; pass --positions {n} or a smaller --segment")


def mask_tokens(segs: np.ndarray, n_ids: int, cfg: MaskConfig, rng: np.random.Generator,
                maskable: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking of token rows, in place. (B, w) ids (PAD_ELEM padded) -> (input elements (B, w),
    targets (B, w): the original id at chosen positions, -1 elsewhere).

    Of the maskable tokens of a row (ids >= 0, and `maskable` (B, w) where given) round(mask_rate x
    count), at least one, are chosen uniformly; each chosen token is fed as MASK_ELEM with
    probability p_mask, as a uniform random id with p_random, else unchanged. A row with no
    maskable token has no target."""
    return mask_segments(segs, n_ids, cfg, rng, maskable)  # the set model's masking, restricted to `maskable`


def text_batch(rows: SetArray, which: np.ndarray, hashing: BloomHash, cfg: MaskConfig, rng: np.random.Generator):
    """Training batch of rows `which`: a random contiguous segment of <= cfg.n tokens of each (the
    whole row when rows were prepared with --segment <= n), BERT masking, positions, no merging."""
    segs = sample_segments(rows, which, cfg.n, rng)  # (B, w)
    elems, targets = mask_tokens(segs, hashing.n_ids, cfg, rng, segs != UNK_ID)
    if cfg.element_dropout:  # word dropout, if asked for: context tokens become padding, positions kept
        elems = drop_elements(elems, targets, cfg.element_dropout, rng)
    return to_batch(elems, targets, hashing, merge=False)


@dataclass
class MaskedRows:
    """Fixed in-place masked examples (validation, evaluation): the same for every method."""
    elems: np.ndarray  # (R, w) input elements, MASK_ELEM at every target, PAD_ELEM padding
    targets: np.ndarray  # (R, w) target id at masked positions, -1 elsewhere
    rows: np.ndarray  # (R,) row of the split each example row comes from

    @property
    def n_targets(self) -> int:
        return int((self.targets >= 0).sum())

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """-> (row (M,), column (M,), target id (M,)) of every target, row-major: the order in which
        `rank_masked` returns their rankings."""
        r, c = np.nonzero(self.targets >= 0)
        return r, c, self.targets[r, c]


def masked_rows(rows: SetArray, which: np.ndarray, n: int, mask_rate: float, seed: int) -> MaskedRows:
    """In-place masked examples of rows `which` (seeded): a segment of <= n tokens of each row,
    round(mask_rate x tokens) of its non-[UNK] tokens (at least one) all fed as [MASK]. Rows without
    a maskable token are dropped."""
    rng = np.random.default_rng([seed, 7])
    segs = sample_segments(rows, np.asarray(which, np.int64), n, rng)
    cfg = MaskConfig(n=max(n, 2), mask_rate=mask_rate, p_mask=1.0, p_random=0.0)
    elems, targets = mask_tokens(segs, 1, cfg, rng, segs != UNK_ID)
    keep = (targets >= 0).any(1)
    return MaskedRows(elems[keep], targets[keep], np.asarray(which)[keep])
