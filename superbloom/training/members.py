"""Train an ensemble: K models of one recipe and other seeds, saved as one model folder.

    superbloom train data/toys --out runs/toys6 --members 6      # six hybrids; load / eval / predict / serve runs/toys6
    superbloom train data/beauty --objective next-item --samples 2048 --out runs/pair \
        --members 2 --member-proposals log_uniform,uniform       # two networks whose negatives differ

    from superbloom.training.members import train_members
    train_members(cfg, 6)                                        # -> cfg.out, an "ensemble" folder

Member i is trained by train() into OUT/member-i with the seed cfg.loop.seed + i; with `proposals`
(a head trained on sampled negatives) member i draws them from proposals[i % len(proposals)], so
that two members err apart. Every member holds out the same validation sets (cfg.validation_seed:
the first member's), so the ensemble's term weight is chosen on sets none of them trained on: the
members are ranked as one (inference/ensemble.py: the mean of their networks' log p + mix x the
first hybrid member's item-item term) on those examples, mix is chosen from MIXES by recall@10, and
OUT/config.json records the members, the weight and every candidate's score. `superbloom.load(OUT)`
returns the sb.Ensemble.

The members train on the same sets, so an item-item term is built once and reused (heads/hybrid.py
shared_terms). A kill loses no finished member: `--resume` skips the members whose run is complete
(its done.json, written when its training ended) and resumes the rest from their last checkpoints.
What ensembles measured against one model is on the results page (docs/results.md).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Sequence

from ..data.dataset import Dataset
from ..evaluation.protocols import make_examples
from ..heads.hybrid import shared_terms
from ..heads.registry import scores_every_id
from ..inference.ensemble import Ensemble
from ..storage.files import load_json, save_json
from ..storage.guarded import claim
from ..storage.kinds import id_model_kind
from .callbacks import Callback
from .card import write_card
from .config import TrainConfig
from .objectives import VAL_TARGETS_PER_SET, objective_entry
from .sequence import validation_examples
from .train import split_validation, train

log = logging.getLogger(__name__)

DONE = "done.json"  # in a member's folder once its training has ended (what --resume skips)


def member_config(cfg: TrainConfig, i: int, proposals: Sequence[str] = ()) -> TrainConfig:
    """Member i: the recipe of `cfg` with the seed cfg.loop.seed + i, the validation sets of the first
    member, the sampled negatives' proposal proposals[i % len(proposals)] if any, written to OUT/member-i."""
    head = dataclasses.replace(cfg.head, proposal=proposals[i % len(proposals)]) if proposals else cfg.head
    return dataclasses.replace(cfg, out=str(Path(cfg.out) / f"member-{i}"), val_seed=cfg.validation_seed, head=head,
                               loop=dataclasses.replace(cfg.loop, seed=cfg.loop.seed + i))


def check_members(cfg: TrainConfig, members: int, proposals: Sequence[str] = ()) -> None:
    """Refuse, before anything is trained, what an ensemble cannot be made of (one line each)."""
    if members < 2:
        raise ValueError(f"--members {members}: an ensemble has at least 2 members (1 is `train` itself)")
    if proposals:
        settings = dataclasses.asdict(cfg.head)
        if "proposal" not in settings or not settings.get("samples"):
            raise ValueError(f"--member-proposals: the members' sampled negatives come from them; the {cfg.head.name} "
                             "head here trains with the full softmax (a hybrid head with --samples N, or --head sampled)")
        if len(proposals) > members:
            raise ValueError(f"--member-proposals: {len(proposals)} proposals for {members} members (--members)")
        for i in range(members):
            member_config(cfg, i, proposals)  # an unknown proposal: the head config's own error
    if not scores_every_id(cfg.head.name):
        raise ValueError(f"--members: the {cfg.head.name} head does not score every id; an ensemble's members "
                         "are full or hybrid heads (--head)")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # torchrun (model/device.py): every rank would write the folder
        raise ValueError("--members runs in one process; under torchrun train each member with its own --seed and "
                         "--out, then rank them as one with `eval` / `predict MODEL --with OTHER ...`")
    if cfg.val_fraction <= 0:
        raise ValueError("--members: the ensemble's weight is chosen on held-out training sets; --val-fraction "
                         "must be > 0")


def train_members(cfg: TrainConfig, members: int, progress: bool = True, resume: bool = False,
                  overwrite: bool = False, record: dict | None = None, callbacks: Sequence[Callback] = (),
                  proposals: Sequence[str] = ()) -> Path:
    """Train `members` models of `cfg` and save them as one ensemble folder at cfg.out (module docstring);
    `proposals`: the members' proposals for sampled negatives, cycled (empty: the recipe's)."""
    proposals = tuple(proposals)
    check_members(cfg, members, proposals)
    data = Dataset(cfg.data)
    if id_model_kind(data.meta) == "text-model":
        raise ValueError(f"--members: {cfg.data} is text; ensembles are built of set and sequence models")
    target = claim(cfg.out, "ensemble")
    started = [i for i in range(members) if Path(member_config(cfg, i, proposals).out).exists()]
    if (target.holds_output() or started) and not (resume or overwrite):
        raise ValueError(f"{cfg.out} already holds an ensemble (or its first members); pass --resume to finish it "
                         "(its complete members are kept) or --overwrite to train it again")
    out = target.mark_in_place()
    t0 = time.time()
    dirs, runs = [], []
    with shared_terms():  # the members train on the same sets: an item-item term is built once
        for i in range(members):
            mcfg = member_config(cfg, i, proposals)
            mdir = Path(mcfg.out)
            drawn = {"proposal": mcfg.head.proposal} if proposals else {}
            if resume and (mdir / DONE).is_file():
                log.info(f"member {i + 1} of {members}: complete ({mdir}), kept")
            else:
                log.info(f"member {i + 1} of {members}: seed {mcfg.loop.seed}"
                         + (f", {mcfg.head.proposal} negatives" if proposals else "") + f" -> {mdir}")
                s0 = time.time()
                train(mcfg, progress, resume=resume and mdir.exists(), overwrite=overwrite, record=record,
                      callbacks=callbacks)
                save_json(mdir / DONE, {"seconds": round(time.time() - s0, 1)})
            dirs.append(mdir)
            runs.append({"dir": mdir.name, "seed": mcfg.loop.seed, **drawn, **load_json(mdir / DONE)})
    ens = Ensemble.load(dirs, device=cfg.loop.device)
    chosen = {}
    if ens.term_member is not None:  # the term's weight, on the validation sets every member held out
        ex = held_out(cfg, data)
        chosen = ens.choose_mix(ex.contexts, ex.targets, exclude=ex.excluded)
        log.info(f"ensemble of {members}: item-item weight {ens.mix:g} (validation rec@10 "
                 + ", ".join(f"{w:g}: {r:.4f}" for w, r in chosen.items()) + ")")
    first = load_json(dirs[0] / "config.json")  # what the members share, for the card and `superbloom card`
    save_json(out / "config.json", {
        "kind": "ensemble", "members": [r["dir"] for r in runs], "item_mix": ens.mix,
        "parameters": ens.n_parameters, **{k: first[k] for k in ("dataset", "data", "preset", "versions") if k in first},
        "mix_validation": {f"{w:g}": round(r, 6) for w, r in chosen.items()},
        "validation": {"seed": cfg.validation_seed, "fraction": cfg.val_fraction},
        "runs": runs, "seconds": round(time.time() - t0, 1)})
    write_card(out)  # README.md: the members, the weight and how to load it (card.py)
    return out


def held_out(cfg: TrainConfig, data: Dataset):
    """The validation examples every member held out (evaluation.Examples): as the objective's own
    validation makes them (objectives.masked; sequence.validation_examples for an ordered one)."""
    _, val_rows = split_validation(data.train, cfg.val_fraction, cfg.validation_seed)
    if objective_entry(cfg.objective).ordered:
        return validation_examples(data, val_rows, cfg.validation_seed, cfg.model.positions - 1)
    return make_examples(data.train.subset(val_rows), cfg.mask.n, VAL_TARGETS_PER_SET, cfg.validation_seed)
