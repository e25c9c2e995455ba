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
tokens on training rows held out from training; a head may choose its settings there (heads/base.py
choose: the hashed hybrid with the bigram term, heads/bigram.py, its weight and eps); the test
evaluation is evaluation/text_protocol.py.
"""
from __future__ import annotations

import numpy as np

from ..model.batches import epoch_batches
from ..heads.base import Validation
from ..evaluation.metrics import summarize, target_ranks
from ..inference.rank import rank_masked
from ..model.text_batches import check_text_setup, masked_rows, text_batch

SELECT = "rec@10"  # validation metric that picks BEST
VAL_ROWS = 256  # held-out training rows validated (about 15% of ~100 tokens each: ~4,000 masked tokens)


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

    def rank():
        return rank_masked(x.model, x.hashing, val, 20)

    def metrics(ranking) -> dict:
        return summarize(target_ranks(ranking.ids.numpy(), val.flat()[2]))

    def validate() -> Validation:
        return x.model.head.choose(rank, metrics, SELECT)  # a head may choose settings here (heads/base.py)

    return objective(x.model, len(x.train_rows), epoch, batch, validate if val is not None else None, SELECT,
                     lambda best, step: x.model.head.parts_note(best, SELECT, step))
