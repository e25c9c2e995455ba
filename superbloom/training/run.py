"""The end every trainer shares (train, embed-train, textclass-train): `fit` inside the run's attempt,
then the trainer's own files, the model card, and the processes leaving together."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..model.device import Dist, finish
from .callbacks import Callback
from .card import write_card
from .config import LoopConfig, OptimConfig
from .loop import RunState, fit
from .objectives import Objective
from .rundir import RunDir, attempt


def fit_run(out: Path, run: RunDir, obj: Objective, loop: LoopConfig, optim: OptimConfig, d: Dist,
            ckpt: Path | None, progress: bool, callbacks: Sequence[Callback] = (),
            files: Callable[[RunDir], None] | None = None, **options) -> RunState:
    """fit(obj, ...) in `run` (options: fit's keywords), inside attempt (a run that never reached a
    checkpoint leaves the previous model and goes); `files(run)` (rank 0, while the attempt holds) writes
    what the trainer keeps beside its checkpoints (the set embedding's index, the classifier's weights),
    after which a run staged to the end replaces OUT; then the model card (rank 0) and the barrier."""
    with attempt(run, d.main):
        state = fit(obj, loop, optim, run, d, ckpt, progress, callbacks, **options)
        if files is not None and d.main:
            files(run)
            run.finish()
    if d.main:
        write_card(out)  # README.md: the model card (card.py)
    finish(d)  # the ranks leave together
    return state
