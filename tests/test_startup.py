"""Start-up cost: `import superbloom` and the command line's help import no torch (issue 28).

Each check runs in a fresh interpreter, so that what the test process already imported does not hide
an import."""
import inspect
import subprocess
import sys

import superbloom as sb

HEAVY = ("torch", "scipy", "pyarrow", "superbloom.training.train")


def _imported_after(code: str) -> set[str]:
    """The heavy modules in sys.modules after running `code` in a fresh interpreter."""
    probe = f"{code}\nimport sys; print('imported:', *(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.splitlines()[-1].split()[1:])  # after the command's own output


def test_import_superbloom_imports_no_torch():
    assert _imported_after("import superbloom; superbloom.__version__; superbloom.embedded_dataset()") == set()


def test_every_public_name_resolves():
    for name in sb.__all__:
        assert getattr(sb, name) is not None, name
    assert set(sb.__all__) <= set(dir(sb))
    assert inspect.isfunction(sb.train) and sb.train.__module__ == "superbloom.training.train"


def test_submodule_import_keeps_the_public_function():
    """Importing the modules behind the public functions leaves sb.evaluate (compare, ...) the functions."""
    code = ("import inspect, superbloom as sb, superbloom.evaluation.evaluate, superbloom.evaluation.compare, "
            "superbloom.inference.expand, superbloom.data.prepare, superbloom.training.train\n"
            "assert all(inspect.isfunction(getattr(sb, n)) for n in ('evaluate', 'compare', 'expand', 'prepare', "
            "'train'))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_unknown_name_is_an_attribute_error():
    try:
        sb.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("no AttributeError")


def _cli(args: str) -> str:
    return f"from superbloom.cli import main\ntry:\n    main({args.split()!r})\nexcept SystemExit:\n    pass"


def test_cli_help_and_version_import_no_torch():
    """The command list, the version and the help of the commands whose flags need no model code."""
    for args in ("--help", "--version", "fill --help", "demo --help", "prepare --help", "synth --help"):
        assert "torch" not in _imported_after(_cli(args)), args


def test_command_lines_match_the_modules():
    """`superbloom --help` lists COMMANDS' lines; each must be the line its module registers."""
    import argparse
    import importlib

    from superbloom.cli import COMMANDS, Parser

    for group in sorted({g for g, _ in COMMANDS.values()}):
        sub = Parser(prog="superbloom").add_subparsers(parser_class=Parser)
        importlib.import_module(f"superbloom.cli.{group}").register(sub)
        registered = {a.dest: a.help for a in sub._choices_actions}  # argparse's listing entries
        assert registered == {c: line for c, (g, line) in COMMANDS.items() if g == group}, group
        assert all(isinstance(p, argparse.ArgumentParser) for p in sub.choices.values())


def test_unknown_flag_names_the_command_help(capsys):
    from superbloom.cli import main

    for argv, prog in ((["extend", "m", "ids", "--out", "o", "--bogus"], "superbloom extend"),
                       (["--bogus", "extend", "m", "ids", "--out", "o"], "superbloom")):
        try:
            main(argv)
        except SystemExit as e:
            assert e.code == 2
        else:
            raise AssertionError("no exit")
        err = capsys.readouterr().err
        assert err == f"{prog}: error: unrecognized arguments: --bogus (see `{prog} --help`)\n", err


def test_decode_config_is_one_class():
    from superbloom.heads import beam as decode
    from superbloom.heads import ranking as ranking

    assert sb.DecodeConfig is decode.DecodeConfig
    assert ranking.SCORES == ("sum_log", "min", "max")
