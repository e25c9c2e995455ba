"""MkDocs hooks (mkdocs.yml's `hooks`): the development notes that docstrings carry ("(issue 14)") left
out of the rendered pages (the API reference reads the docstrings). The package tree of architecture.md
is written in the page itself, checked against the code by tests/test_structure.py."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_structure import strip_refs  # noqa: E402  (one pattern for the tree and the pages)


def on_page_content(html: str, **kwargs) -> str:
    return strip_refs(html)
