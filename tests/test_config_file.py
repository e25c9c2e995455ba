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


def test_recipe_reads_every_train_setting():
    cfg = sb.TrainConfig(data="d", out="o", hash=sb.HashConfig(alpha=3, seed=5), mask=MaskConfig(n=9),
                         model=sb.ModelConfig(norm_first=False, dynamic=True))
    settings = recipe.recipe_settings(cfg)
    assert settings["mask.n"] == 9 and settings["hash.seed"] == 5 and settings["model.norm_first"] is False
    assert settings["model.dynamic"] is True and settings["head.name"] == "superbloom"
    assert "data" not in settings and "out" not in settings and "mask.p_mask" not in settings
    assert "head.label_smoothing" not in settings  # the head's default: left to the option's own


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


def test_positionals_and_required_options_come_from_the_file(data, tmp_path, capsys):
    (tmp_path / "c.toml").write_text(f'data = "{data}"\nout = "{tmp_path / "m"}"\n')
    assert main(["train", "--config", str(tmp_path / "c.toml"), *TINY, "--print-config"]) == 0
    assert f'data = "{data}"' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--out", "m", "--print-config"])  # neither typed nor in a file: required
    assert "the following arguments are required: data" in capsys.readouterr().err


# ---------------------------------------------------------------- train's options <-> the config dataclasses


def _train_config_fields() -> set[str]:
    """Every setting of TrainConfig as config.json's "train" spells it (config paths), the head's of every
    head, less those no option sets (cli=False)."""
    from superbloom._settings import about
    from superbloom.heads.registry import HEADS
    from superbloom.training.resolve import SECTIONS, TOP

    fields = {**{f"{s}.{f.name}": f for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)},
              **{name: f for f in dataclasses.fields(sb.TrainConfig) for name in (f.name,) if name in (*TOP, "data", "out")}}
    for config_class, _ in HEADS.values():
        fields.update({f"head.{f.name}": f for f in dataclasses.fields(config_class)})
    return {p for p, f in fields.items() if (about(f) or {}).get("cli", True)} | {"head.name"}


def test_every_train_setting_has_an_option_and_every_option_a_setting():
    """The options are derived from the fields (cli/settings.py): each setting with cli=True is one
    option whose destination is its config path, and each option with a path sets a real field."""
    parser = command_parser("train")
    paths = {o.path for o in parser.options if o.path}
    fields = _train_config_fields()
    assert not fields - paths, f"settings without a train option: {sorted(fields - paths)}"
    assert not paths - fields, f"train options that set no field: {sorted(paths - fields)}"
    for o in parser.options:
        assert o.path is None or o.dest == o.path, o


def test_the_flag_names_users_know():
    names = {o.path: o.name for o in command_parser("train").options if o.path}
    for path, flag in [("mask.n", "segment"), ("head.term", "item-term"), ("model.norm_first", "post-ln"),
                       ("hash.seed", "hash-seed"), ("optim.name", "optimizer"), ("head.mix", "item-mix"),
                       ("head.name", "head"), ("model.dynamic", "dynamic-embedding")]:
        assert names[path] == flag


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
