"""The quality harness's training recipes: every knob flat in one `Recipe`, and the named ones
(`--recipes`), the library's defaults first, then each probe of the issues with why it was tried.

Results name a recipe by its key here (benchmarks/results/quality*.json), so a key is never reused
for other settings.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import superbloom as sb

@dataclass(frozen=True)
class Recipe:
    """Every knob of one training recipe, flat. alpha = 0: chosen from the vocabulary (auto_alpha)."""
    alpha: int = 2
    m: int = 2
    d: int = 128
    layers: int = 2
    heads: int = 4
    d_ff: int = 512
    dropout: float = 0.1
    mask_rate: float = 0.5
    p_mask: float = 0.8  # of the masked ids: fed as [MASK] (p_random: a random id; the rest unchanged)
    p_random: float = 0.1
    element_dropout: float = 0.0
    segment: int = 32  # MaskConfig.n: ids per training segment (a random contiguous run of the set)
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 300
    weight_decay: float = 0.0
    schedule: str = "rsqrt"  # the learning rate after the warm-up (OptimConfig.schedule): rsqrt | linear | cosine
    label_smoothing: float = 0.0
    ema: float = 0.0
    init: str = "normal"  # the token embedding's start: normal | cooccurrence (superbloom.model.warmstart)
    val_fraction: float = 0.05  # training sets carved off inside train() for the learning curve / BEST
    eval_every: int = 250
    head: str = "superbloom"  # hybrid: + a sparse item-item term mixed in at validation (heads/hybrid.py; unhashed)
    neighbours: int = 200  # hybrid: item-item values per id
    item_term: str = "auto"  # hybrid: ease | cooccurrence | auto (HybridConfig.term)
    samples: int = 0  # hybrid: > 0 trains the network with sampled softmax (HybridConfig.samples)
    proposal: str = "log_uniform"  # hybrid, samples > 0: where the negatives are drawn from (HybridConfig.proposal)
    mix: float | None = None  # hybrid: a fixed term weight (HybridConfig.mix; 0: the network alone picks BEST)
    time_budget: float = 0.0  # > 0: training stops after this many seconds too (LoopConfig.time_budget)
    seed: int = 0  # LoopConfig.seed: another seed, the same recipe (benchmarks/quality/ensemble.py)
    members: int = 1  # > 1: the library's `train --members` (training/members.py): that many seeds as one ensemble
    member_proposals: tuple = ()  # members, samples > 0: member i's proposal (train --member-proposals), cycled
    exclude_shown: bool = False  # a probe: the training softmax leaves out the ids the row shows (shown.py)


def auto_alpha(n_ids: int, alpha: int, m: int) -> tuple[int, int]:
    """alpha = 0 -> the library's choice for this vocabulary (HashConfig.resolve)."""
    h = sb.HashConfig(alpha=alpha, m=m).resolve(n_ids)
    return h.alpha, h.m


RECIPES = {
    # the library's defaults (superbloom.TrainConfig()): alpha auto, co-occurrence start, element dropout 0.2, EMA
    "default": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                      val_fraction=0.02, eval_every=500),
    # the default before the masking change (80/10/10): the first test runs of this session
    "default_pm8": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", val_fraction=0.02, eval_every=500),
    "demo": Recipe(),  # the demo's recipe before issue 16: alpha 2, m 2, d 128, 2 layers, dropout 0.1, mask 0.5
    "a1": Recipe(alpha=1, m=1),
    "a4": Recipe(alpha=4, m=2),
    "a1_ema": Recipe(alpha=1, m=1, ema=0.999),
    "a1_ed": Recipe(alpha=1, m=1, element_dropout=0.2),
    "a1_ema_ed": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2),
    "a1_ema_ed_d3": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, dropout=0.3),
    "a1_ls": Recipe(alpha=1, m=1, label_smoothing=0.1),
    "a2_ema_ed": Recipe(alpha=2, m=2, ema=0.999, element_dropout=0.2),
    "a1_ema_ed4": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.4),
    "a1_ema_ed_d2": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, dropout=0.2),
    "a1_ema_ed_m3": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, mask_rate=0.3),
    "a1_ema_m3": Recipe(alpha=1, m=1, ema=0.999, mask_rate=0.3),
    "a1_ema_ed_w256": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, d=256, d_ff=1024),
    "a1_ema_ed_cooc": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="cooccurrence"),
    "a1_ema_ed_pm1": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, p_mask=1.0, p_random=0.0),
    "a1_ema_ed_m7": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, mask_rate=0.7),
    "a1_ema_m7": Recipe(alpha=1, m=1, ema=0.999, mask_rate=0.7),
    "a1_ema_ed_cooc_w256": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="cooccurrence", d=256,
                                  d_ff=1024),
    "a1_ema_ed_cooc_pm6": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="cooccurrence", p_mask=0.6,
                                 p_random=0.2),
    "a1_ema_cooc": Recipe(alpha=1, m=1, ema=0.999, init="cooccurrence"),
    "a1_ema_ed_m2": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, mask_rate=0.2),
    # session 4: variations of the default (the short purchase histories are where it loses)
    "default_b256": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                           val_fraction=0.02, eval_every=500, batch_size=256),
    "default_w256": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                           val_fraction=0.02, eval_every=500, d=256, d_ff=1024),
    "default_pm4": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.4, p_random=0.3,
                          val_fraction=0.02, eval_every=500),
    "default_l1": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                         val_fraction=0.02, eval_every=500, layers=1),
    "default_w512": Recipe(alpha=0, m=2, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                           val_fraction=0.02, eval_every=500, d=512, d_ff=1024, heads=8),
    # session 5: the hybrid head (a named head, reported beside the pure model): the default's network and
    # training + a sparse item-item term (EASE's weights up to 25K ids, else cosine) mixed in at validation
    "hybrid": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                     val_fraction=0.02, eval_every=500, head="hybrid"),
    # session 6: the hybrid for a vocabulary where a full softmax step is slow (Epinions, 278K ids): the
    # network trained with 4,096 sampled negatives for 10 minutes, then ONE validation (choosing mix from
    # one ranking pass of 6,400 examples against 278K ids: minutes on one thread), inside the 15-minute budget
    "hybrid_sampled": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                             val_fraction=0.02, eval_every=0, head="hybrid", samples=4096, time_budget=600.0),
    "hybrid_n1000": Recipe(alpha=1, m=1, ema=0.999, element_dropout=0.2, init="auto", p_mask=0.6, p_random=0.2,
                           val_fraction=0.02, eval_every=500, head="hybrid", neighbours=1000),
}

# (the term inside training, residual and distilled, and the mixture-of-softmaxes head were measured here and
# removed from the library: docs/results.md)
RECIPES.update({
    # BEST chosen on 10% of the training sets instead of 2% (LastFM: ~98 sets, not ~20, whose BEST step was
    # anywhere from 500 to 2,000): is the seed noise the choice of checkpoint?
    "net_v10": replace(RECIPES["hybrid"], head="full", val_fraction=0.1),
    "net_v10_s1": replace(RECIPES["hybrid"], head="full", val_fraction=0.1, seed=1),
    "net_v10_s2": replace(RECIPES["hybrid"], head="full", val_fraction=0.1, seed=2),
})

# the network alone against EASE: the hybrid recipe's network with no term (`full`)
RECIPES.update({
    "net": replace(RECIPES["hybrid"], head="full"),
    "net_wd01": replace(RECIPES["hybrid"], head="full", weight_decay=0.1),  # AdamW's decoupled weight decay
    "net_wd1": replace(RECIPES["hybrid"], head="full", weight_decay=1.0),
    "net_cos": replace(RECIPES["hybrid"], head="full", schedule="cosine"),  # the learning rate to 0 at the last step
    "net_lin": replace(RECIPES["hybrid"], head="full", schedule="linear"),
    "net_s1": replace(RECIPES["hybrid"], head="full", seed=1),  # seeds of `net` for ensemble.py
    "net_s2": replace(RECIPES["hybrid"], head="full", seed=2),
    # EASE's term past term auto's 25,000 ids (float32 up to 60,000: BERT4Rec Beauty's 52,985, WN18RR's 39,672)
    "hybrid_ease": replace(RECIPES["hybrid"], item_term="ease"),
    # depth at equal steps (1 and 4 Transformer layers against 2) and longer training segments (64 ids: LastFM's
    # sets average 49 ids and 36% are longer than 32, so a 32-id segment shows a fraction of a set's pairs)
    "net_l1": replace(RECIPES["hybrid"], head="full", layers=1),
    "net_l4": replace(RECIPES["hybrid"], head="full", layers=4),
    "net_n64": replace(RECIPES["hybrid"], head="full", segment=64),
    # the peak learning rate (3e-3 everywhere above), a third and three times it
    "net_lr1": replace(RECIPES["hybrid"], head="full", lr=1e-3),
    "net_lr10": replace(RECIPES["hybrid"], head="full", lr=1e-2),
    # width at 5x the steps (a GPU probe: d 256 and 512, the feed-forward 4 x d, 4 heads as before)
    "net_d256": replace(RECIPES["hybrid"], head="full", d=256, d_ff=1024),
    "net_d512": replace(RECIPES["hybrid"], head="full", d=512, d_ff=2048),
    # the GPU runs found over-fitting (the inner validation flat from step ~2,000 while the loss falls):
    # stronger dropout inside the network, and twice the element dropout of the input sets
    "net_do3": replace(RECIPES["hybrid"], head="full", dropout=0.3),
    "net_ed4": replace(RECIPES["hybrid"], head="full", element_dropout=0.4),
    # the same on a lent GPU (benchmarks/quality/gpu_probe.sh): 10,000 steps asked, stopped at 360 s if not done
    "gpu_net": replace(RECIPES["hybrid"], head="full", time_budget=360.0),
    "gpu_net_d512": replace(RECIPES["hybrid"], head="full", d=512, d_ff=2048, time_budget=360.0),
})

# issue 33: the library's `train --members K` (training/members.py): K seeds of the hybrid recipe sharing their
# validation sets, ranked as one sb.Ensemble (mean network log p + the weight chosen on those sets x the term);
# member 0 is the `hybrid` recipe itself
RECIPES.update({f"hybrid_x{k}": replace(RECIPES["hybrid"], members=k) for k in (3, 6)})
# a probe: the training softmax without the ids the row shows (shown.py), as every ranking excludes them and
# EASE's diagonal is 0; the network alone and the hybrid
RECIPES.update({"net_xs": replace(RECIPES["net"], exclude_shown=True),
                "hybrid_xs": replace(RECIPES["hybrid"], exclude_shown=True)})

# the sequence finding on sets (issue 33): two networks whose sampled negatives come from different proposals
# err apart (benchmarks/results/sequence_decomposition.md); S sampled negatives per step, members log-uniform and
# uniform (train --member-proposals), against two seeds of one recipe and the single networks
RECIPES.update({"hybrid_x2": replace(RECIPES["hybrid"], members=2),
                "hybrid_s512": replace(RECIPES["hybrid"], samples=512),
                "hybrid_s512u": replace(RECIPES["hybrid"], samples=512, proposal="uniform"),
                "hybrid_s512_x2": replace(RECIPES["hybrid"], samples=512, members=2),
                "hybrid_s512_q2": replace(RECIPES["hybrid"], samples=512, members=2,
                                          member_proposals=("log_uniform", "uniform"))})
# the uniform proposal alone on sets: cheaper steps than the full softmax (Toys 72 s against 192 s for 2,000 steps)
RECIPES.update({"hybrid_s512u_x2": replace(RECIPES["hybrid_s512u"], members=2),
                "hybrid_s2048u": replace(RECIPES["hybrid"], samples=2048, proposal="uniform")})
# ... and at 277,910 ids (Epinions): the `large` preset's recipe (4,096 log-uniform negatives, 10 minutes) with
# uniform ones
RECIPES.update({"hybrid_sampled_u": replace(RECIPES["hybrid_sampled"], proposal="uniform")})
