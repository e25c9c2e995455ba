"""The command-line reference page (docs/cli.md), generated from the commands' own parsers, so it says
what `superbloom CMD --help` says: `python docs/cli_reference.py` writes it again after a change to a
command's flags (tests/test_docs.py checks the page is current)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "cli.md"
WIDTH = 100  # help lines wrap here, whatever the terminal


def render() -> str:
    """The page: every command of `superbloom --help`, in its order, with its full --help."""
    sys.path.insert(0, str(ROOT))
    from superbloom.cli import COMMANDS, command_parser

    lines = ["# Command-line reference", "",
             "Every command and flag, as `superbloom COMMAND --help` prints it (generated from the parsers by "
             "`python docs/cli_reference.py`; do not edit by hand). Every command also takes `--log-level`; a "
             "command that needs an optional extra says which, and how to install it, before it starts "
             f"([install](install.md)). Generated with Python {sys.version_info[0]}.{sys.version_info[1]}, whose "
             "argparse sets the layout.", ""]
    lines += [f"- [`{name}`](#superbloom-{name}): {line}" for name, (_, line) in COMMANDS.items()]
    for name in COMMANDS:
        parser = command_parser(name)
        parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
        lines += ["", f"## superbloom {name}", "", "```text", parser.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE}")
