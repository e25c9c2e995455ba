"""The README and the documentation pages against the code: every `superbloom ...` command in their
code blocks parses with that command's real parser (the subcommand exists, every flag exists, every
choice is allowed), the README's presets table is the preset registry, every file they cite exists,
and no user-facing page carries a work-log, issue, session or commit reference."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from superbloom.cli import COMMANDS, command_parser
from superbloom.training.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def shell_blocks(text: str) -> list[str]:
    """The code blocks of a markdown text that hold shell commands (```bash, ```sh, ```console)."""
    return [body for lang, body in FENCE.findall(text) if lang in ("bash", "sh", "shell", "console")]


def commands(block: str) -> list[list[str]]:
    """Each `superbloom ...` invocation of a shell block as its words (continued lines joined, comments
    dropped, chains split at && ; |); the program may be written as a path (.venv/bin/superbloom)."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in words + [";"]:
            if w in ("&&", ";", "|", "||"):
                if cmd and Path(cmd[0]).name == "superbloom":
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def test_commands_finds_the_invocations():
    """The extractor itself, on a block like the README's."""
    block = ("# a comment\npython3 -m venv .venv && .venv/bin/superbloom demo\n"
             "superbloom prepare 'a b.csv' --format csv \\\n    --out d  # trailing\ncurl -s x\n")
    assert commands(block) == [[".venv/bin/superbloom", "demo"],
                               ["superbloom", "prepare", "a b.csv", "--format", "csv", "--out", "d"]]


def _parse_error(words: list[str]) -> str | None:
    """None when `superbloom WORDS...` parses with its command's parser, else argparse's message."""
    name, args = words[1], words[2:]
    if name not in COMMANDS:
        return f"no command {name!r} (commands: {', '.join(COMMANDS)})"
    parser = command_parser(name)
    known = {o for action in parser._actions for o in action.option_strings}  # argparse keeps no public list
    abbreviated = [a.split("=", 1)[0] for a in args if a.startswith("--") and a.split("=", 1)[0] not in known]
    if abbreviated:  # argparse would accept a prefix of a flag: the docs spell flags out
        return f"flags not spelled as the parser names them: {', '.join(abbreviated)}"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args)
    except SystemExit as e:
        return None if e.code == 0 else err.getvalue().strip() or f"exit {e.code}"
    return None


def _all_commands():
    return [(page.relative_to(ROOT).as_posix(), words) for page in PAGES
            for block in shell_blocks(page.read_text()) for words in commands(block)]


def test_the_readme_shows_commands():
    found = [w for page, w in _all_commands() if page == "README.md"]
    assert {w[1] for w in found} >= {"demo", "prepare", "train", "eval", "predict", "serve"}


@pytest.mark.parametrize("page,words", _all_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v[1:4]))
def test_every_shown_command_parses(page, words):
    err = _parse_error(words)
    assert err is None, f"{page}: `{shlex.join(words)}` does not parse: {err}"


def test_the_parse_check_sees_a_wrong_flag():
    """The check itself: an unknown flag, an unknown command and a bad choice are caught."""
    assert _parse_error(["superbloom", "train", "data", "--out", "m", "--no-such-flag"])
    assert _parse_error(["superbloom", "trian", "data"])
    assert _parse_error(["superbloom", "train", "data", "--out", "m", "--time-bud", "60"])  # a prefix
    assert _parse_error(["superbloom", "prepare", "x.csv", "--format", "xls", "--out", "d"])
    assert _parse_error(["superbloom", "prepare", "x.csv", "--format", "csv", "--out", "d"]) is None


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1].split("\n## ", 1)[0]


def test_the_presets_table_is_the_registry():
    """One row per registered preset, each naming the preset's own evidence file."""
    rows = [r for r in _section(README.read_text(), "## Presets").splitlines() if r.startswith("| `")]
    named = {re.match(r"\| `([\w-]+)`", r).group(1): r for r in rows}
    assert set(named) == set(PRESETS), f"README's presets table lists {sorted(named)}, the registry {sorted(PRESETS)}"
    for name, row in named.items():
        assert f"`{PRESETS[name].evidence}`" in row, f"README's {name} row does not name {PRESETS[name].evidence}"


def test_cited_files_exist():
    cited = [(page.relative_to(ROOT).as_posix(), m.group(1)) for page in PAGES
             for m in re.finditer(r"`((?:benchmarks|superbloom|tests)/[\w./-]+\.\w+)`", page.read_text())]
    assert cited
    missing = [f"{page}: {path}" for page, path in cited if not (ROOT / path).exists()]
    assert not missing, "files cited that do not exist:\n" + "\n".join(missing)


# a commit hash: 7-40 hex characters with a digit and a letter (not a word such as "feedback")
WORKLOG = re.compile(r"\b(?:issues? #?\d+|sessions? \d+|wave \d+|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40})\b",
                     re.I)


def test_no_worklog_references_in_user_facing_pages():
    refs = [f"{page.relative_to(ROOT)}: {m.group(0)}" for page in PAGES
            for m in WORKLOG.finditer(page.read_text())]
    assert not refs, "work-log / issue / session / commit references:\n" + "\n".join(refs)


def test_the_worklog_check_sees_references():
    for text in ("as in issue 16", "(session 6)", "the code of d6fce66", "wave 4"):
        assert WORKLOG.search(text), text
    for text in ("Implicit-feedback ALS", "rec@10 0.3341", "1,005,296 ids", "sha256"):
        assert not WORKLOG.search(text), text


def test_the_readme_is_a_users_guide():
    """Short, and its first screen says what to bring, what to run and what is experimental."""
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move details into docs/ (aim at ~120)"
    first = "\n".join(lines[:40])
    for needed in (".venv/bin/superbloom demo", "pytest", "Status", "Experimental", "predicts the missing"):
        assert needed in first, f"README.md's first screen (40 lines) lacks {needed!r}"
    for section in ("## Install", "## Quickstart", "## Input formats", "## Presets", "## Python", "## Serving",
                    "## Results", "## Licence"):
        assert section in text, f"README.md lacks a {section!r} section"


def test_the_readme_python_section_runs(tmp_path, monkeypatch):
    """The README's Python block, run as written on the quickstart's baskets.csv (made here), with its
    training budget cut to a few steps: the in-memory API from a DataFrame to a saved model."""
    pytest.importorskip("pandas")
    import numpy as np

    block = next(body for lang, body in FENCE.findall(_section(README.read_text(), "## Python")) if lang == "python")
    assert "sb.fit(" in block and ".recommend(" in block and ".similar_items(" in block and ".save(" in block
    assert "logging.basicConfig" in block  # the training report is shown
    assert block.count("time_budget=120") == 1
    code = block.replace("time_budget=120", "steps=3, d=16, heads=2, d_ff=32, layers=1, batch_size=16")
    rng = np.random.default_rng(0)
    items = ["milk", "bread", "coffee", "butter", "yogurt", "tea", "jam", "eggs", "rice", "salt"]
    rows = [f"b{s},{items[j]}" for s in range(150) for j in rng.choice(len(items), 4, replace=False)]
    (tmp_path / "baskets.csv").write_text("basket,item\n" + "\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md (Python)", "exec"), {"__name__": "readme"})
    import superbloom as sb

    assert sb.load("models/baskets").info()["kind"] == "set-model" and (tmp_path / "data/baskets/meta.json").is_file()
