"""MkDocs hooks (mkdocs.yml's `hooks`): the package tree of architecture.md generated from the code, as
the README's layout block is (tests/test_structure.py's layout_block), and the development notes that
docstrings carry ("(issue 14)") left out of the rendered pages."""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_structure import layout_block  # noqa: E402  (the one generator of the tree)

TREE = "<!-- the package tree -->"
REFS = re.compile(r"\s*\(issues? \d+(?:, \d+)*\)|,\s*issues? \d+(?=\))|\bissues? \d+(?:, \d+)*[;:,]\s*")


def strip_refs(text: str) -> str:
    """`text` without references to the project's issue tracker."""
    return REFS.sub("", text)


def on_page_markdown(markdown: str, **kwargs) -> str:
    return markdown.replace(TREE, strip_refs(layout_block()))


def on_page_content(html: str, **kwargs) -> str:
    return strip_refs(html)
