"""Optional dependencies (the extras): check that one is installed, or fail naming its pip command.

The server (fastapi, pydantic, uvicorn, fastapi-offline) and the out-of-core prepare (duckdb) are extras,
so that a user who only trains installs neither. The modules that need one call `require_extra` before
importing it, so a missing extra is one message naming `pip install 'superbloom[EXTRA]'`, not a bare
"No module named ...".
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
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def installed(module: str) -> bool:
    """Whether `module` (a top-level import name) can be imported, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: import blocked (how the tests hide a package)
    return importlib.util.find_spec(module) is not None


def require_extra(extra: str, purpose: str, modules: tuple[str, ...] | None = None) -> None:
    """MissingExtra unless every module of `extra` (or those of its `modules` that the caller needs) is
    installed. purpose: what needs it ("superbloom serve")."""
    missing = [m for m in (modules or EXTRAS[extra]) if not installed(m)]
    if missing:
        raise MissingExtra(f"{purpose} needs {', '.join(missing)} (the [{extra}] extra): "
                           f"pip install 'superbloom[{extra}]'", name=missing[0])
