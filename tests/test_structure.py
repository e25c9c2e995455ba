"""The package's structure, read from the code: stage folders in the order of the data flow, and
every import (function-level and TYPE_CHECKING ones included) pointing to its own stage or an earlier
one, with no cycle between modules; the layout block of the architecture page (docs/architecture.md) is
the tree as it is."""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "superbloom"

# the stages, in the order the data flows: a folder imports only from itself and the folders before it
STAGES = ("storage", "data", "hashing", "text", "heads", "model", "inference", "evaluation", "training",
          "setembed", "textclass", "serving", "cli")
BOTTOM = ("_version", "_lazy", "_extras", "_log", "_bounds", "_settings")  # top-level modules every stage may import
TOP = ("__init__", "__main__", "fitting")  # the public API (fitting: sb.fit, the in-memory one) and `python -m superbloom`: may import any stage


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The superbloom modules `path` imports anywhere in its body (as dotted names)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "superbloom"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "superbloom":
                continue
            for a in node.names:
                out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    out.discard(name)
    return out


def stage_of(name: str) -> int | None:
    """Index of a module's stage; None for the top (public API); -1 for the bottom modules."""
    parts = name.split(".")
    if len(parts) == 1:  # the package itself: its __init__ is the public API
        return None
    if parts[1] in STAGES:
        return STAGES.index(parts[1])
    if parts[1] in BOTTOM:
        return -1
    if parts[1] in TOP:
        return None
    raise AssertionError(f"{name}: a top-level module outside every stage folder (add it to a stage)")


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {n: imports_of(n, p, set(mods)) for n, p in mods.items()}


def test_every_module_is_in_a_stage():
    for name in modules():
        stage_of(name)


def test_no_import_points_to_a_later_stage():
    wrong = []
    for name, deps in graph().items():
        here = stage_of(name)
        if here is None:
            continue
        for dep in deps:
            there = stage_of(dep)
            if there is None or there > here:
                wrong.append(f"{name} imports {dep}")
    assert not wrong, "imports against the stage order (" + " < ".join(STAGES) + "):\n" + "\n".join(sorted(wrong))


def test_no_import_cycle():
    g = graph()
    # a package __init__ that only re-exports is part of its modules' cycle otherwise: edges to a
    # package mean its __init__, so they count too (a cycle through an __init__ is a real cycle)
    colour, stack, cycles = defaultdict(int), [], []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for d in sorted(g.get(n, ())):
            if colour[d] == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif colour[d] == 0:
                visit(d)
        stack.pop()
        colour[n] = 2

    for n in sorted(g):
        if colour[n] == 0:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])


def test_the_checker_sees_a_wrong_import(tmp_path):
    """The checker itself: a function-level import of a later stage is found."""
    p = tmp_path / "superbloom" / "data" / "x.py"
    p.parent.mkdir(parents=True)
    p.write_text("def f():\n    from ..training import loop\n")
    deps = imports_of("superbloom.data.x", p, {"superbloom.training.loop"})
    assert deps == {"superbloom.training.loop"}
    assert stage_of("superbloom.training.loop") > stage_of("superbloom.data.x")


# ------------------------------------------------------------------- the architecture page's layout

LAYOUT_PAGE = ROOT / "docs" / "architecture.md"  # the user-facing tree (the README links to it)
START, END = "<!-- layout: generated from the tree; tests/test_structure.py checks it -->", "<!-- layout end -->"
# references to the project's issue tracker that docstrings carry ("(issue 14)"), left out of the docs
ISSUE_REFS = re.compile(r"\s*\(issues? \d+(?:, \d+)*\)|,\s*issues? \d+(?=\))|\bissues? \d+(?:, \d+)*[;:,]\s*")


def strip_refs(text: str) -> str:
    """`text` without references to the project's issue tracker."""
    return ISSUE_REFS.sub("", text)


def first_line(path: Path) -> str:
    """The first line of a module's docstring, without issue references, cut to 96 characters."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    line = strip_refs(doc.strip().split("\n")[0].strip())
    return line if len(line) <= 96 else line[:93].rstrip() + "..."


def layout_block() -> str:
    """The package tree, one line per stage folder and module, each with its docstring's first line."""
    lines = ["```", "superbloom/"]
    for p in sorted(PKG.glob("*.py")):
        lines.append(f"  {p.name:<22}{first_line(p)}")
    for stage in STAGES:
        folder = PKG / stage
        lines.append(f"  {stage + '/':<22}{first_line(folder / '__init__.py')}")
        for p in sorted(folder.rglob("*.py")):
            if p.name != "__init__.py":
                rel = str(p.relative_to(folder))
                lines.append(f"    {rel:<20}{first_line(p)}")
    lines.append("```")
    return "\n".join(lines)


def test_every_stage_folder_and_module_has_a_docstring():
    missing = [str(p.relative_to(ROOT)) for p in PKG.rglob("*.py") if not first_line(p)]
    assert not missing, "modules without a docstring: " + ", ".join(missing)


def test_the_layout_block_is_the_tree():
    text = LAYOUT_PAGE.read_text()
    page = LAYOUT_PAGE.relative_to(ROOT)
    assert START in text and END in text, f"{page} lacks the layout markers {START!r} ... {END!r}"
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    expected = layout_block()
    assert block == expected, (f"{page}'s layout block is not the tree; replace it with:\n\n" + expected)


def test_strip_refs():
    assert strip_refs("Growing the vocabulary (issue 15).") == "Growing the vocabulary."
    assert strip_refs('Set embeddings (issue 13; the blog\'s "Learning")') == 'Set embeddings (the blog\'s "Learning")'
    assert strip_refs("Training for sequences (issue 12): ordered") == "Training for sequences: ordered"


# ------------------------------------------------------------------- what the library's text may not hold


def test_no_issue_numbers_process_wide_settings_or_pick_tables():
    """Docstrings say what and why, not which issue (the docs hold the history); torch's thread count is
    set in one place (model/device.set_threads, called by the command line); the command line derives
    its configs from the fields, with no per-field copy table."""
    issue = re.compile(r"issues? [0-9]")
    texts = {p: p.read_text() for p in PKG.rglob("*.py")}
    assert not [str(p.relative_to(ROOT)) for p, t in texts.items() if issue.search(t)]
    threads = [str(p.relative_to(ROOT)) for p, t in texts.items() if "torch.set_num_threads" in t
               and p.parent.name != "cli" and p.relative_to(PKG).as_posix() != "model/device.py"]
    assert not threads, threads
    assert not [str(p.relative_to(ROOT)) for p, t in texts.items() if p.parent.name == "cli" and "pick(" in t]
