"""Decoding settings (`DecodeConfig`) and the names of the built-in scores gamma (`SCORES`), in a
module that imports nothing heavy: the command line shows their defaults and choices without
importing torch. decode.py (Algorithm 1) and ranking.py (gamma) use them."""
from dataclasses import dataclass

from .._settings import setting

SCORES = ("sum_log", "min", "max")  # gamma over the m per-map log-probabilities (ranking.py folds them)


@dataclass(frozen=True)
class DecodeConfig:
    beam: int | None = setting(None, range=(1, None), shown="B = k", help="beam width B per hash map (appendix B)")
    exact: bool = setting(False, help="widen the beam until the top-k is certified exact")
    score: str = setting("sum_log", choices=SCORES, help=(
        "gamma: how the m scores combine (library callers may pass a callable)"))
    exhaustive: bool = setting(False, help="score every id (the reference; slow for big vocabularies)")

    def __post_init__(self):
        """Each field checked (superbloom.ArgumentError naming it)."""
        from .. import _bounds as check

        if self.beam is not None:
            check.integer("beam", self.beam, 1)
        check.flag("exact", self.exact)
        check.flag("exhaustive", self.exhaustive)
        if not callable(self.score):
            check.one_of("score", self.score, SCORES)

    def settings(self) -> dict:
        """The settings as JSON values (a callable score by its repr), for reports."""
        return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
                for k, v in self.__dict__.items()}
