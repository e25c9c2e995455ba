"""Optional dependencies (the extras): check that one is installed, or fail naming how to install it.

The server (fastapi, pydantic, uvicorn, fastapi-offline), the out-of-core prepare (duckdb), the
training trackers (tensorboard, mlflow) and the item2vec / ALS baselines (gensim, implicit) are extras,
so that a user who only trains installs none of them. Every path that needs one checks it before any
work (the command line: cli/checks.py's check_extras; the library: the function that needs it), so a
missing extra is one message naming the extra and the command that installs it, from a clone
(`pip install -e '.[serve]'`) and from a wheel (`pip install 'superbloom[serve]'`), not a traceback
after minutes of work.
"""
from __future__ import annotations

import importlib.util
import sys

# extra (as pyproject.toml names it) -> the import names it provides
EXTRAS = {
    "serve": ("fastapi", "pydantic", "uvicorn", "fastapi_offline", "prometheus_client"),
    "outofcore": ("duckdb",),
    # training/callbacks.py's --log-to; its mlflow adapter asks for mlflow itself (require_extra's
    # `modules`): the [test] extra installs tensorboard, not the large mlflow
    "track": ("tensorboard",),
    "baselines": ("gensim", "implicit"),  # evaluation/item2vec.py, als.py (each asks for its own)
    "sansa": ("sansa", "sksparse"),  # the sansa baseline (evaluation/sansa.py); scikit-sparse needs SuiteSparse
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra and how to install it."""


def installed(module: str) -> bool:
    """Whether `module` (a top-level import name) can be imported, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: import blocked (how the tests hide a package)
    return importlib.util.find_spec(module) is not None


def install_commands(extra: str) -> str:
    """How to install `extra`: from a clone of the repository and from a wheel."""
    return f"pip install -e '.[{extra}]' from a clone, pip install 'superbloom[{extra}]' from a wheel"


def require_extra(extra: str, purpose: str, modules: tuple[str, ...] | None = None) -> None:
    """MissingExtra unless every module of `extra` (or those of its `modules` that the caller needs) is
    installed. purpose: what needs it ("superbloom serve")."""
    missing = [m for m in (modules or EXTRAS[extra]) if not installed(m)]
    if missing:
        raise MissingExtra(f"{purpose} needs {', '.join(missing)} (the [{extra}] extra): {install_commands(extra)}",
                           name=missing[0])
