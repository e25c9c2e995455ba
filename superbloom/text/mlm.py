"""The hashed masked language model on prepared text (Superbloom sec. 4; BERT's example procedure).

    superbloom prepare-text plaintext_articles.tar.xz gcide.dict.dz brown.tar.xz --out data/text
    superbloom train data/text --objective text-mlm --positions 128 --alpha 40 --m 2 --out runs/text

A prepared text row is an ordered segment of <= 128 token ids (unigrams and bigrams, text/prepare.py).
Each training example is a whole row (BERT: segments of up to 128 tokens) with 15% of its tokens
chosen as targets (at least one), fed 80% as [MASK], 10% as a uniformly random id, 10% unchanged.
The model is the id model with learned position embeddings (a token's element index in the row), so
repeated tokens and [MASK]s are told apart by their positions and are never merged. Every token
becomes m Bloom tokens through the same hash maps as the id model (alpha, m chosen by the user; the
unhashed baseline is alpha 1, m 1), and any head of the heads package predicts the targets.

[UNK] (id 0) is never a target: it stands for every out-of-vocabulary word, so predicting it says
nothing (it stays in the input as context).

Validation and evaluation mask IN PLACE: the row keeps its order and every other token, the chosen
targets are all fed as [MASK] (no random / unchanged inputs), and the ranking excludes nothing (a
word may well repeat a word of its context). Validation (which picks BEST) is rec@k of those masked
tokens on training rows held out from training; the test evaluation is text/evaluate.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..batches import MaskConfig, drop_elements, epoch_batches, mask_segments, sample_segments, to_batch
from ..dataset import SetArray
from ..decode import DecodeConfig
from ..hashing import PAD_ELEM, BloomHash
from ..metrics import summarize, target_ranks
from .ngrams import UNK_ID

TEXT_MASK = MaskConfig(n=128, mask_rate=0.15, p_mask=0.8, p_random=0.1, element_dropout=0.0)  # BERT's: the defaults of --objective text-mlm (objectives.TEXT_MASKING)
SELECT = "rec@10"  # validation metric that picks BEST
VAL_ROWS = 256  # held-out training rows validated (about 15% of ~100 tokens each: ~4,000 masked tokens)


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


@torch.no_grad()
def rank_masked(model, hashing: BloomHash, ex: MaskedRows, k: int, decode: DecodeConfig = DecodeConfig(),
                batch_rows: int = 32):
    """Top-k ids at every masked position of `ex`, nothing excluded -> ranking.Ranking (M, k), in the
    order of ex.flat()."""
    from ..ranking import Ranking

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = []
    for a in range(0, len(ex.elems), batch_rows):
        e, t = ex.elems[a:a + batch_rows], ex.targets[a:a + batch_rows]
        w = max(1, int((e != PAD_ELEM).sum(1).max()))  # trim trailing padding columns
        batch = to_batch(e[:, :w], t[:, :w], hashing, merge=False).to(device)
        parts.append(model.head.topk(model.target_hidden(batch), k, exclude=None, decode=decode).cpu())
    model.train(was_training)
    return Ranking.concat(parts) if parts else Ranking.empty(k)


def text_mlm(x, objective):
    """objectives.OBJECTIVES["text-mlm"]: BERT's masked LM on prepared text rows, BEST by in-place
    masked rec@10 on held-out training rows. x: objectives.ObjectiveInputs; objective: the
    objectives.Objective type to return (handed in: the text package does not import the training
    core, which imports this module only when the objective is built)."""
    cfg, mask = x.cfg, x.cfg.mask
    rows, seed = x.data.train, cfg.loop.seed
    lengths = rows.lengths
    check_text_setup(x.data.meta, x.model_cfg.positions, mask, int(lengths.max()) if len(lengths) else 0,
                     str(x.data.path))

    def epoch(e: int) -> list[np.ndarray]:  # a function of (seed, epoch) only
        return epoch_batches(x.train_rows, lengths, cfg.loop.batch_size, mask.n, np.random.default_rng([seed, 2, e]))

    def batch(which: np.ndarray, rng: np.random.Generator):
        return text_batch(rows, which, x.hashing, mask, rng).to(x.device)

    picked = np.sort(np.random.default_rng([seed, 5]).permutation(x.val_rows)[:VAL_ROWS])  # across documents
    val = masked_rows(rows, picked, mask.n, mask.mask_rate, seed) if len(picked) else None

    def validate() -> dict:
        ranking = rank_masked(x.model, x.hashing, val, 20)
        return summarize(target_ranks(ranking.ids.numpy(), val.flat()[2]))

    return objective(x.model, len(x.train_rows), epoch, batch, validate if val is not None else None, SELECT)
