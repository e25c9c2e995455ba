"""The command line's flags as one vocabulary: the computing flags every command has (a table), one
meaning per flag name across commands, renamed flags kept as warning aliases, one boolean style, and
an unknown flag pointing to the command's own help. Each parser is built as `superbloom CMD` builds it
(cli.command_parser, --config / --print-config included)."""
from __future__ import annotations

import argparse
import collections

import pytest

from superbloom.cli import COMMANDS, command_parser, main
from superbloom.cli.flags import DEPRECATED

COMPUTING_FLAGS = ("--threads", "--device", "--json", "--quiet")

# every command, and why it lacks one of COMPUTING_FLAGS (none listed: it has all four)
COMPUTING = {
    "demo": {"--json": "a walk-through for people; `eval --json` gives its numbers"},
    "prepare": {"--threads": "no torch (NumPy / DuckDB)", "--device": "no torch"},
    "prepare-text": {"--threads": "no torch", "--device": "no torch"},
    "synth": {"--threads": "no torch", "--device": "no torch"},
    "train": {},
    "eval": {},
    "predict": {},
    "expand": {"--quiet": "no progress bar: one seed, --add predictions"},
    "similar-ids": {"--quiet": "no progress bar: one query"},
    "vectors": {"--quiet": "no progress bar: one pass over the table"},
    "serve": {"--json": "a server: its answers are JSON", "--quiet": "a server: --no-access-log silences it"},
    "fill": {"--quiet": "no progress bar"},
    "embed-train": {},
    "embed": {"--quiet": "no progress bar"},
    "similar": {"--quiet": "no progress bar: one query"},
    "classify": {"--quiet": "no progress bar: one query"},
    "textclass-train": {"--quiet": "no progress bar: one line per epoch"},
    "textclass": {"--quiet": "no progress bar"},
    "card": {"--threads": "runs no model: renders the folder's JSON files", "--device": "runs no model",
             "--json": "writes or prints a markdown card", "--quiet": "no progress bar: one file"},
    "extend": {"--threads": "runs no model: new hash rows and a copy of the weights",
               "--device": "runs no model", "--quiet": "no progress bar"},
}

# the one meaning of every flag name that several commands share (a new shared name states its meaning here)
MEANINGS = {
    "--threads": "torch CPU threads", "--device": "where torch runs", "--json": "print one JSON object",
    "--quiet": "no progress bar", "--out": "what the command writes", "--seed": "the seed of the command's randomness",
    "--k": "how many results", "--batch-size": "examples per training step / queries per model call",
    "--steps": "stop training after N steps", "--epochs": "stop training after N passes",
    "--time-budget": "stop training after N seconds", "--resume": "continue the run in --out",
    "--overwrite": "replace the model in --out", "--keep-best": "keep the best validated weights",
    "--no-keep-best": "(--keep-best's negation)", "--eval-every": "validate every N steps",
    "--checkpoint-every": "seconds between checkpoints", "--eval-every-steps": "(--eval-every's older name)",
    "--checkpoint-every-seconds": "(--checkpoint-every's older name)", "--val-fraction": "training sets held out for validation",
    "--test-fraction": "what prepare holds out for testing", "--split": "how prepare splits a dataset",
    "--format": "the file format of the command's file", "--segment": "ids per segment (training example, row)",
    "--objective": "what the trainer trains for (its registry)", "--attention": "the attention (its registry)",
    "--labels": "a file of labels", "--lr": "peak learning rate", "--warmup": "warm-up steps",
    "--weight-decay": "weight decay", "--clip": "gradient norm clip", "--optimizer": "the optimizer",
    "--d": "vector size", "--heads": "attention heads", "--d-ff": "feed-forward size", "--layers": "layers",
    "--dropout": "dropout", "--alpha": "ids per hash bucket", "--m": "hash maps per id",
    "--hash-seed": "hash maps seed", "--dynamic-embedding": "add the dynamic embedding of each id's string",
    "--ema": "weight average decay", "--temperature": "a softmax's temperature", "--smoothing": "label smoothing",
    "--input": "the command's input file", "--beam": "beam width per map",
    "--exact": "certify the top-k", "--score": "how the m scores combine", "--exhaustive": "score every id",
    "--config": "options from a file", "--print-config": "print the options as TOML",
    "--log-level": "the library's messages on stderr at this level and above",
    "--log-to": "where a trainer's metrics also go (tensorboard:DIR, mlflow:URI)",
    "--memory-limit": "the memory a command may use (refused above it, or spilled to disk by prepare)",
    "--item-mix": "the item-item term's weight beside the network's log p (a hybrid's, an ensemble's)",
    "--with": "another model of the same data, ranked with MODEL as one (an ensemble)",
    "--part": "what ranks: the whole model, or a hybrid's network or term alone",
    "--allow": "a file of the only ids returned", "--allow-ids": "the only ids returned, inline",
    "--deny": "a file of ids never returned", "--deny-ids": "ids never returned, inline",
    "--include-seen": "a query's own ids may be returned",
}

# shared flag names whose parsers differ on purpose (the meaning is MEANINGS'; the values are the command's)
DIFFERENT_VALUES = {
    "--format": "prepare reads, prepare-text reads text, synth writes: each lists its own formats",
    "--objective": "train's and embed-train's objectives are two registries",
    "--attention": "textclass-train also has kernel-auto (the text classifier's cheaper kernel form)",
    "--epochs": "textclass-train counts whole epochs (int); the id trainers stop mid-epoch (float)",
    "--memory-limit": "prepare also takes auto (40% of RAM, DuckDB's spill cap); the trainers take a size",
}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    return {c: command_parser(c) for c in COMMANDS}


def _visible(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Long option -> action, the hidden (deprecated) aliases left out."""
    return {o: a for a in p._actions if a.help != argparse.SUPPRESS  # argparse keeps no public list
            for o in a.option_strings if o.startswith("--")}


def test_every_command_is_in_the_table():
    assert set(COMPUTING) == set(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_computing_flags(command):
    flags = _visible(command_parser(command))
    missing = [f for f in COMPUTING_FLAGS if f not in flags and f not in COMPUTING[command]]
    assert not missing, f"superbloom {command} lacks {missing}"
    stale = [f for f in COMPUTING[command] if f in flags]
    assert not stale, f"superbloom {command} has {stale}: drop the exemption"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_and_argument_says_what_it_is(command):
    """`superbloom CMD --help` gives each flag and positional a line of its own (argparse prints a bare
    name for one without help)."""
    bare = [a.option_strings[-1] if a.option_strings else a.dest for a in command_parser(command)._actions
            if not a.help and not isinstance(a, argparse._SubParsersAction)]
    assert not bare, f"superbloom {command}: no help text for {bare}"


def _signature(a: argparse.Action):
    """What a flag stores: its action, choices, arity and type (its destination is the config path of
    the field it sets, which may differ: train's --segment sets mask.n, embed-train's embed.segment)."""
    return (type(a).__name__, tuple(sorted(map(str, a.choices))) if a.choices else None, a.nargs,
            getattr(a.type, "__name__", None))


def test_one_meaning_per_flag_name():
    """A flag name shared by commands stores the same field with the same action, type and
    choices everywhere (DIFFERENT_VALUES: on purpose), and states its one meaning in MEANINGS."""
    uses = collections.defaultdict(dict)
    for command, p in _parsers().items():
        for flag, action in _visible(p).items():
            uses[flag][command] = action
    shared = {f: u for f, u in uses.items() if len(u) > 1 and f != "--help"}
    unstated = sorted(set(shared) - set(MEANINGS))
    assert not unstated, f"shared flag names without their one meaning in MEANINGS: {unstated}"
    for flag, by_command in shared.items():
        kinds = collections.defaultdict(list)
        for command, action in by_command.items():
            kinds[_signature(action)].append(command)
        if flag not in DIFFERENT_VALUES:
            assert len(kinds) == 1, f"{flag} differs between commands: {dict(kinds)}"
    assert set(DIFFERENT_VALUES) <= set(shared)


@pytest.mark.parametrize("command, old, new, value, dest", [
    ("expand", "--steps", "--add", "3", "steps"),  # --steps: train's step limit
    ("classify", "--k", "--voters", "5", "k"),  # --k: how many results everywhere else
    ("eval", "--split", "--holdout", "valid", "split"),  # --split: prepare's split kind
    ("embed", "--split", "--sets", "test", "split"),
])
def test_renamed_flags_keep_working_with_a_warning(command, old, new, value, dest, capsys):
    p = command_parser(command)
    assert DEPRECATED[(command, old)] == new
    assert old not in _visible(p) and new in _visible(p)
    assert old not in p.format_usage()
    argv = _required(p)
    typed = p.parse_args([*argv, old, value])
    assert "warning: " + old + " is deprecated, use " + new in capsys.readouterr().err
    assert getattr(typed, dest) == getattr(p.parse_args([*argv, new, value]), dest) != p.get_default(dest)
    assert capsys.readouterr().err == ""  # the new name: no warning


def test_one_boolean_style():
    """Every --no-X flag is the negation of an --X of the same parser (BooleanOptionalAction, or a pair)."""
    for command, p in _parsers().items():
        flags = _visible(p)
        for flag, action in flags.items():
            if flag.startswith("--no-"):
                positive = "--" + flag[5:]
                assert positive in flags and flags[positive].dest == action.dest, f"{command} {flag}"


def _required(p: argparse.ArgumentParser) -> list[str]:
    """Values for `p`'s positionals and required options, so that only what a test adds can fail."""
    argv = []
    for a in p._actions:
        if not a.option_strings and a.nargs != "*" and a.dest != "help":
            argv.append("x")
        elif a.option_strings and a.required:
            argv += [a.option_strings[0], "x"]
    return argv


@pytest.mark.parametrize("command", list(COMMANDS))
def test_unknown_flag_names_the_command_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, *_required(command_parser(command)), "--bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"superbloom {command}: error: unrecognized arguments: --bogus "
                   f"(see `superbloom {command} --help`)\n"), err


# ---------------------------------------------------------------- the trainers' --json, textclass-train's --steps


def test_trainers_json_is_one_object(tmp_path, capsys):
    """train and textclass-train --json: stdout is one JSON object (the run's lines on stderr);
    textclass-train --steps stops before its epochs end."""
    import json

    import numpy as np

    import superbloom as sb
    from superbloom.storage.files import load_json

    rng = np.random.default_rng(0)
    (tmp_path / "sets.txt").write_text("\n".join(
        f"s{i} " + " ".join(f"i{j}" for j in rng.choice(30, 5, replace=False)) for i in range(60)) + "\n")
    sb.prepare(sb.PrepareConfig(str(tmp_path / "sets.txt"), str(tmp_path / "d"), read=sb.ReadConfig(format="lines")),
               progress=False)
    assert main(["train", str(tmp_path / "d"), "--out", str(tmp_path / "m"), "--d", "16", "--heads", "2",
                 "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--threads", "1", "--steps", "2",
                 "--eval-every", "0", "--quiet", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"out": str(tmp_path / "m"), "parameters": load_json(tmp_path / "m" / "config.json")
                                   ["parameters"]}
    assert "preset auto" in out.err

    docs = tmp_path / "docs"
    docs.mkdir()
    words = "the cat and a dog saw a drill and a hammer".split()
    for i in range(12):
        (docs / f"doc{i}.txt").write_text(" ".join(rng.choice(words, 8)) + ".\n")
    (tmp_path / "labels.tsv").write_text("".join(f"doc{i}\t{'ab'[i % 2]}\n" for i in range(12)))
    assert main(["textclass-train", str(docs), "--labels", str(tmp_path / "labels.tsv"), "--out",
                 str(tmp_path / "tc"), "--d", "8", "--heads", "2", "--epochs", "3", "--batch-size", "5", "--steps", "2",
                 "--threads", "1", "--device", "cpu", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["out"] == str(tmp_path / "tc") and printed["parameters"] > 0
    metrics = [json.loads(line) for line in (tmp_path / "tc" / "metrics.jsonl").read_text().splitlines()]
    assert max(m.get("step", 0) for m in metrics) == 2  # 3 epochs would be 6 steps (10 training documents)


# ---------------------------------------------------------------- --help without torch (no timed test)

# Every command's parser is built from torch-free modules: the config dataclasses and the names of
# the registries its flags read live in each stage's config.py (hashing/, model/, heads/, training/,
# evaluation/, setembed/, textclass/), the registries themselves (torch code) beside them; a names
# list is checked against its registry below. So no --help waits for torch to import.


def _torch_after(code: str) -> bool:
    import subprocess
    import sys

    probe = f"{code}\nimport sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    return out.stdout.splitlines()[-1] == "True"


def test_no_help_imports_torch():
    """`superbloom CMD --help` for every command (as typed: through main, its --config / --print-config
    flags included), `--version` and the command list render without importing torch, all in one
    fresh interpreter."""
    code = ("import contextlib, io\nfrom superbloom.cli import COMMANDS, main\n"
            "for argv in (*([c, '--help'] for c in COMMANDS), ['--version'], ['--help']):\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "    assert out.getvalue().startswith(('usage: superbloom', 'superbloom ')), argv")
    assert not _torch_after(code)


def test_the_probe_sees_torch():
    """The probe above can fail: running a command that loads a model's code imports torch."""
    assert _torch_after("from superbloom.cli import command_parser\ncommand_parser('train')\n"
                        "import superbloom.training.train")


# the torch-free names lists the parsers read, and the registries (of torch code) they stand for
def _registries():
    from superbloom.evaluation import baselines, config as evaluation_config, protocols
    from superbloom.heads import config as head_configs, registry
    from superbloom.model import attention, config as model_config, embeddings, warmstart
    from superbloom.setembed import config as embed_config, objectives as embed_objectives
    from superbloom.training import config as training_config, objectives, optim

    return {
        "heads/config.py HEAD_CONFIGS": (list(head_configs.HEAD_CONFIGS.items()),
                                         [(name, config) for name, (config, _) in registry.HEADS.items()]),
        "model/config.py ATTENTION_NAMES": (model_config.ATTENTION_NAMES, attention.ATTENTIONS),
        "model/config.py INPUT_NAMES": (model_config.INPUT_NAMES, embeddings.INPUTS),
        "model/config.py INIT_NAMES": (model_config.INIT_NAMES, warmstart.INITS),
        "training/config.py OPTIMIZER_NAMES": (training_config.OPTIMIZER_NAMES, optim.OPTIMIZERS),
        "training/config.py OBJECTIVE_NAMES": (training_config.OBJECTIVE_NAMES, objectives.OBJECTIVES),
        "evaluation/config.py PROTOCOLS": (evaluation_config.PROTOCOLS, ("auto", *protocols.REGISTRY)),
        "evaluation/config.py BASELINE_NAMES": (evaluation_config.BASELINE_NAMES, baselines.BASELINES),
        "setembed/config.py OBJECTIVES": (embed_config.OBJECTIVES, embed_objectives.REGISTRY),
        "setembed/config.py SUPERVISED": (embed_config.SUPERVISED,
                                          [n for n, o in embed_objectives.REGISTRY.items() if o.supervised]),
    }


def test_the_names_lists_are_their_registries_keys():
    """Each torch-free names list (what a --help shows) is exactly its registry's keys, in order."""
    for where, (names, registry) in _registries().items():
        assert tuple(names) == tuple(registry), f"{where} {names} != the registry's {tuple(registry)}"
