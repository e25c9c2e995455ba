"""Lazy re-exports for a package's __init__ (PEP 562): a public name is imported from its module on
first use, so importing a package (the root, a stage folder) imports nothing heavy until a name is used."""
from __future__ import annotations

import importlib


def lazy_exports(namespace: dict, exports: dict[str, str]) -> None:
    """Install __getattr__ / __dir__ in a package's `namespace` (its globals()) for `exports`:
    public name -> the module (relative to the package, e.g. ".bloom") that defines it."""
    package = namespace["__name__"]

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], package), name)
        namespace[name] = value  # cached: the next use is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    namespace["__getattr__"], namespace["__dir__"] = __getattr__, __dir__
