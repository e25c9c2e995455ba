"""--config FILE / --print-config / --recipe (cli/config_file.py, cli/recipe.py): a file of flag names
as defaults, the resolved options as TOML that reproduce the run, a model's config.json as a recipe,
and train's flags checked against its config dataclasses through recipe.py's one table of names."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import superbloom as sb
from superbloom.model.batches import MaskConfig
from superbloom.cli import command_parser, main
from superbloom.cli import recipe
from superbloom.cli.config_file import INTERNAL_DESTS

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--threads", "1",
        "--quiet", "--steps", "2", "--eval-every", "0"]
RECIPE = ("hash", "model", "mask", "optim", "loop", "val_fraction", "objective", "init")  # config.json's "train"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cfgdata")
    rng = np.random.default_rng(0)
    lines = [f"s{i} " + " ".join(f"i{j}" for j in rng.choice(40, rng.integers(3, 8), replace=False))
             for i in range(120)]
    (root / "sets.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(root / "sets.txt"), str(root / "d"), read=sb.ReadConfig(format="lines")),
               progress=False)
    return root / "d"


def _config(out) -> dict:
    return json.loads((Path(out) / "config.json").read_text())


def _same_recipe(a: dict, b: dict):
    for key in ("hash", "model", "head"):
        assert a[key] == b[key], key
    for key in (*RECIPE, "head"):
        assert a["train"][key] == b["train"][key], key


# ---------------------------------------------------------------- round trips


def test_print_config_fed_back_reproduces_the_run(data, tmp_path, capsys):
    flags = [*TINY, "--lr", "0.01", "--segment", "8", "--label-smoothing", "0.1", "--post-ln"]
    assert main(["train", str(data), "--out", str(tmp_path / "a"), *flags]) == 0
    capsys.readouterr()
    assert main(["train", str(data), "--out", str(tmp_path / "b"), *flags, "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert not (tmp_path / "b").exists()  # printed, nothing trained
    assert "# preset auto -> small" in printed and 'head = "hybrid"' in printed and "post-ln = true" in printed
    (tmp_path / "run.toml").write_text(printed)
    assert main(["train", str(data), "--config", str(tmp_path / "run.toml")]) == 0  # --out from the file
    _same_recipe(_config(tmp_path / "a"), _config(tmp_path / "b"))


def test_a_model_directory_is_a_recipe(data, tmp_path):
    flags = [*TINY, "--preset", "none", "--alpha", "4", "--m", "2", "--coherent", "1", "--per-hash-softmax",
             "--dropout", "0.0", "--optimizer", "adapsgd"]
    assert main(["train", str(data), "--out", str(tmp_path / "a"), *flags]) == 0
    assert main(["train", str(data), "--out", str(tmp_path / "b"), "--recipe", str(tmp_path / "a")]) == 0
    assert main(["train", str(data), "--out", str(tmp_path / "c"), "--quiet",
                 "--config", str(tmp_path / "a" / "config.json"), "--steps", "1"]) == 0
    a, b, c = (_config(tmp_path / x) for x in "abc")
    _same_recipe(a, b)
    assert c["train"]["loop"]["steps"] == 1  # the typed flag wins over the recipe
    assert c["train"]["hash"] == a["train"]["hash"] and c["train"]["optim"] == a["train"]["optim"]
    assert "preset" not in b  # the recipe of a --preset none run


def test_recipe_reads_the_flags_of_every_train_field():
    cfg = sb.TrainConfig(data="d", out="o", hash=sb.HashConfig(alpha=3, seed=5), mask=MaskConfig(n=9),
                         model=sb.ModelConfig(norm_first=False, dynamic=True))
    flags = recipe.recipe_flags(cfg.to_dict())
    assert flags["segment"] == 9 and flags["hash_seed"] == 5 and flags["post_ln"] is True
    assert flags["dynamic_embedding"] is True and flags["head"] == "superbloom"
    assert "data" not in flags and "out" not in flags and "p_mask" not in flags
    assert "label_smoothing" not in flags  # the head's default: left to the flag's own


# ---------------------------------------------------------------- the file's keys and values


def test_a_typed_flag_wins_and_both_key_spellings_read(data, tmp_path, capsys):
    (tmp_path / "c.toml").write_text('batch_size = 4\nmask-rate = 0.25\nkeep-best = false\nout = "x"\n')
    assert main(["train", str(data), "--config", str(tmp_path / "c.toml"), "--batch-size", "16",
                 "--steps", "1", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "batch-size = 16" in out and "mask-rate = 0.25" in out and "keep-best = false" in out
    assert 'out = "x"' in out


def test_yaml_config(data, tmp_path, capsys):
    pytest.importorskip("yaml")
    (tmp_path / "c.yaml").write_text("lr: 0.02\nhead: full\nout: y\nsteps: 3\n")
    assert main(["train", str(data), "--config", str(tmp_path / "c.yaml"), "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "lr = 0.02" in out and 'head = "full"' in out and "steps = 3" in out


@pytest.mark.parametrize("text, expected", [
    ("bogus = 1\n", "unknown key 'bogus'"),
    ("lr = \"fast\"\n", "key 'lr': expected a number, got 'fast'"),
    ("lr = -1.0\n", "key 'lr': expected a number > 0"),
    ("head = \"nope\"\n", "key 'head': expected one of"),
    ("quiet = 1\n", "key 'quiet': expected true or false"),
    ("data = \"x\"\n", "a positional argument (give it on the command line) 'data'"),
    ("lr = [\n", "not valid toml"),
])
def test_bad_config_names_the_file_and_key(data, tmp_path, capsys, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["train", str(data), "--out", str(tmp_path / "m"), "--config", str(path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"superbloom train: error: --config {path}: ") and expected in err, err
    assert not (tmp_path / "m").exists()


def test_a_model_config_is_no_recipe_for_eval(data, tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"versions": {}, "train": {}}))
    with pytest.raises(SystemExit):
        main(["eval", "m", str(data), "--config", str(tmp_path / "config.json")])
    assert "reads no recipe" in capsys.readouterr().err


def test_every_config_command_prints_its_config(capsys):
    from superbloom.cli import CONFIG_COMMANDS

    for command in CONFIG_COMMANDS:
        dests = {a.dest for a in command_parser(command)._actions}
        assert {"config", "print_config"} <= dests, command


# ---------------------------------------------------------------- train --help <-> the config dataclasses


def _fields(cls, prefix="") -> set[str]:
    out = set()
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.type) or f.name in recipe.SECTIONS:
            continue
        out.add(prefix + f.name)
    return out


def _train_config_fields() -> set[str]:
    """Every field of TrainConfig as config.json's "train" spells it; the head: every head's fields."""
    from superbloom.heads.registry import HEADS

    sections = {"hash": sb.HashConfig, "model": sb.ModelConfig, "mask": MaskConfig, "optim": sb.OptimConfig,
                "loop": sb.LoopConfig}
    out = {f.name for f in dataclasses.fields(sb.TrainConfig) if f.name not in recipe.SECTIONS}
    for name, cls in sections.items():
        out |= _fields(cls, name + ".")
    out.add("head.name")
    for config_class, _ in HEADS.values():
        out |= _fields(config_class, "head.")
    assert set(recipe.SECTIONS) == set(sections) | {"head"}
    return out


def test_train_flags_and_config_fields_agree():
    """Every field has a flag (same name, or recipe.ALIASES) or is DERIVED with its reason; every flag
    sets a field or is in NOT_SETTINGS."""
    parser = command_parser("train")
    dests = {a.dest for a in parser._actions if a.option_strings} - INTERNAL_DESTS
    fields = _train_config_fields()
    no_flag = sorted(p for p in fields if p not in recipe.DERIVED and recipe.flag_of(p) not in dests)
    assert not no_flag, f"config fields without a train flag (add one, or a DERIVED entry): {no_flag}"
    set_by_flags = {recipe.flag_of(p) for p in fields if p not in recipe.DERIVED}
    no_field = sorted(dests - set_by_flags - set(recipe.NOT_SETTINGS))
    assert not no_field, f"train flags that set no config field (map them in recipe.py): {no_field}"
    assert set(recipe.ALIASES) <= fields and set(recipe.DERIVED) <= fields
    assert set(recipe.NOT_SETTINGS) <= dests
    for path, dest in recipe.ALIASES.items():  # an alias is a real rename, its flag a train flag
        assert dest != path.rsplit(".", 1)[-1] and dest in dests, path
    assert recipe.NEGATED <= set(recipe.ALIASES.values())


def test_the_drift_names_are_in_the_alias_table():
    for path, flag in [("mask.n", "segment"), ("head.term", "item_term"), ("model.norm_first", "post_ln"),
                       ("hash.seed", "hash_seed"), ("optim.name", "optimizer")]:
        assert recipe.ALIASES[path] == flag


@pytest.mark.parametrize("argv", [
    ["eval", "M", "D", "--holdout", "valid", "--no-exclude-history", "--compare", "M2", "--beam", "4", "--quiet"],
    ["prepare", "IN", "--out", "D", "--format", "lines", "--split", "leave-one-out", "--delimiter", "space"],
    ["serve", "M", "--port", "9000", "--no-access-log", "--max-k", "50"],
    ["embed-train", "D", "--out", "E", "--objective", "nca", "--no-keep-best", "--lr", "0.01"],
])
def test_print_config_is_a_fixed_point(argv, tmp_path, capsys):
    """A command's printed options, read back by --config, print the same options (flag names as keys)."""
    assert main([*argv, "--print-config"]) == 0
    first = capsys.readouterr().out
    (tmp_path / "c.toml").write_text(first)
    positionals = [a for a in argv[1:3] if not a.startswith("--")][: 2 if argv[0] == "eval" else 1]
    assert main([argv[0], *positionals, "--config", str(tmp_path / "c.toml"), "--print-config"]) == 0
    assert capsys.readouterr().out == first
    assert "split" not in first or argv[0] == "prepare"  # eval's --holdout is written under its own name
