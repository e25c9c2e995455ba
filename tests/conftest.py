"""Shared fixtures: tiny hand-made inputs, the embedded Wikispeedia links, and ../shared/data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import superbloom as sb

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_file(*parts: str) -> Path:
    """A file from ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs {path} (the shared datasets are not beside this checkout)")
    return path


@pytest.fixture(scope="session")
def wiki_data(tmp_path_factory) -> sb.Dataset:
    """The embedded Wikispeedia links, prepared once per session."""
    out = tmp_path_factory.mktemp("wiki") / "data"
    sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(out)), progress=False)
    return sb.Dataset(out)


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
