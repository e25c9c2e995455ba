"""The embedded default dataset: Wikispeedia's link list, shipped gzipped in the package."""
from __future__ import annotations

import importlib.resources
from pathlib import Path


def embedded_dataset() -> Path:
    """The shipped default dataset: Wikispeedia's link list (West & Leskovec 2012; West et al. 2009)."""
    return Path(str(importlib.resources.files("superbloom") / "data" / "wikispeedia_links.tsv.gz"))
