"""Every command takes --config FILE and --print-config, and the printed config fed back runs the same
command: the namespace its function receives is the same, option for option (cli/parser.py,
cli/config_file.py); and one config field has one option name on every command that sets it."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from superbloom.cli import COMMANDS, command_parser, main

# each command with arguments that parse (paths need not exist: the function is replaced before it runs);
# {data} is a prepared dataset (train's preset reads its meta.json when the config is printed)
ARGV = {
    "demo": ["--out", "w", "--time-budget", "5"],
    "prepare": ["in.tsv", "--out", "d", "--format", "lines", "--split", "leave-one-out", "--delimiter", "space"],
    "prepare-text": ["corpus", "--out", "t", "--vocab-size", "100", "--no-lowercase"],
    "synth": ["--out", "s.parquet", "--ids", "100", "--links", "1000"],
    "train": ["{data}", "--out", "m", "--steps", "3", "--item-mix", "0", "--post-ln", "--no-keep-best"],
    "eval": ["m", "{data}", "--holdout", "valid", "--no-exclude-history", "--compare", "m2", "--beam", "4"],
    "predict": ["m", "a", "b", "--k", "5", "--exact", "--with", "m2", "--item-mix", "1"],
    "expand": ["m", "a", "--add", "3", "--strategy", "sample", "--temperature", "0.5"],
    "similar-ids": ["m", "a", "--k", "3"],
    "vectors": ["m", "--out", "v.npy"],
    "serve": ["m", "--port", "9000", "--no-access-log", "--max-k", "50"],
    "fill": ["m", "a [MASK] b", "--k", "3", "--no-scores"],
    "embed-train": ["{data}", "--out", "e", "--objective", "nca", "--labels", "l.tsv", "--no-keep-best", "--lr", "0.01"],
    "embed": ["e", "{data}", "--out", "v.parquet", "--sets", "train"],
    "similar": ["e", "a", "b", "--k", "4"],
    "classify": ["e", "a", "--reject", "0.5", "--voters", "3"],
    "textclass-train": ["corpus", "--labels", "l.tsv", "--out", "tc", "--epochs", "2", "--optimizer", "adamw"],
    "textclass": ["tc", "some text", "--k", "2"],
    "extend": ["m", "new.txt", "--out", "m3", "--seed", "1"],
    "card": ["m", "--print"],
}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    import superbloom as sb

    root = tmp_path_factory.mktemp("cmdcfg")
    (root / "sets.txt").write_text("\n".join(f"s{i} a{i % 7} b{i % 5} c{i % 3}" for i in range(60)) + "\n")
    sb.prepare(sb.PrepareConfig(str(root / "sets.txt"), str(root / "d"), read=sb.ReadConfig(format="lines")),
               progress=False)
    return root / "d"


def _received(argv: list[str], monkeypatch) -> dict:
    """The namespace `superbloom ARGV` hands its command's function (the function itself not run)."""
    import superbloom.cli as cli

    seen = {}
    real = cli.command_parser

    def capture(command):
        p = real(command)
        p.set_defaults(func=lambda args: seen.update(vars(args)) or 0)
        return p

    monkeypatch.setattr(cli, "command_parser", capture)
    assert main(argv) == 0
    return {k: v for k, v in seen.items() if k not in ("func", "given", "parser", "resolve", "recipe_hook", "config")}


def test_every_command_is_in_the_table():
    assert set(ARGV) == set(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_print_config_fed_back_runs_the_same_command(command, data, tmp_path, capsys, monkeypatch):
    argv = [a.replace("{data}", str(data)) for a in ARGV[command]]
    assert main([command, *argv, "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"# superbloom {command} --config FILE")
    (tmp_path / "c.toml").write_text(printed)
    again = [command, "--config", str(tmp_path / "c.toml")]
    assert main([*again, "--print-config"]) == 0
    settings = lambda text: [x for x in text.splitlines() if not x.startswith("#")]  # noqa: E731 (comments: records)
    assert settings(capsys.readouterr().out) == settings(printed)  # a fixed point
    if command == "train":  # the printed config is the resolved one (the preset applied): the same TrainConfig
        assert _resolved(argv, []) == _resolved([], again[1:])
        return
    direct = _received([command, *argv], monkeypatch)
    from_file = _received(again, monkeypatch)
    assert from_file == direct  # every option the command runs with, positionals included


def _resolved(argv: list[str], config_argv: list[str]):
    """train's TrainConfig of the command line ARGV with the --config of CONFIG_ARGV."""
    from superbloom.cli.config_file import convert, read_config_argv
    from superbloom.cli.parser import expect_from_file, finish
    from superbloom.cli.training import resolve_args

    raw, path = read_config_argv(config_argv)
    with expect_from_file(set(raw)):
        p = command_parser("train")
    args = finish(p, p.parse_args(argv), convert(p, raw, path))
    args.parser = p
    return resolve_args(args)[0]


def test_one_config_field_has_one_option_name_everywhere():
    """A field of a config dataclass (LoopConfig.batch_size, DecodeConfig.beam, ...) is set by an option of
    the same name on every command that sets it."""
    names: dict = collections.defaultdict(set)
    for command in COMMANDS:
        for o in command_parser(command).options:
            if o.owner is None or o.hidden:
                continue
            owners = o.owner if isinstance(o.owner[0], tuple) else (o.owner,)
            for cls, field in owners:
                names[(cls.__qualname__, field)].add((o.name, command))
    wrong = {k: sorted(v) for k, v in names.items() if len({n for n, _ in v}) > 1}
    assert not wrong, f"config fields named differently by commands: {wrong}"
    assert ("DecodeConfig", "beam") in names and len({c for _, c in names[("DecodeConfig", "beam")]}) >= 4


def test_no_command_reads_argparse_internals():
    """The options are recorded as declared (cli/parser.py): nothing in cli/ touches `_actions`."""
    root = Path(__file__).resolve().parents[1] / "superbloom" / "cli"
    offenders = [p.name for p in root.glob("*.py") if "_actions" in p.read_text()]
    assert not offenders, offenders
