"""Every loaded value checked before it is used, and CSV / TSV read by the format's quoting rules.

- the sizes a config.json may hold are those the flags allow (each setting's declared range);
- check_array: dimensions, integers, sign, bounds, never-decreasing offsets, read in pieces;
- weights: a tensor of another dtype or shape, a missing one, NaN or inf values: a LoadError naming the
  tensor, before the model holds them (mapped or read);
- JSON nested deeper than the parser follows: invalid JSON naming the file (and line), never a RecursionError;
- CSV / TSV: a quote that does not close on its line is that line's error (its text shortened), and with
  skip_malformed that line alone is skipped and counted; more than a small fraction is refused.
(The command-line rows of each are in tests/test_hostile_cli.py.)
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.data.read_config import MALFORMED_FLOOR, InputError, ReadConfig, ReadStats
from superbloom.data.readers import read_chunks
from superbloom.hashing.config import MAX_M
from superbloom.storage.checkpoint import check_finite, check_state
from superbloom.storage.files import json_loads
from superbloom.storage.loading import LoadError, check_array, read_json


def test_config_sizes_are_held_to_the_ranges_their_flags_allow():
    """A config.json is read through the config dataclasses, which hold each size to the range its
    setting declares (the range its flag allows): one beyond is an ArgumentError naming it."""
    import dataclasses

    from superbloom._settings import about

    for cls, names in ((sb.ModelConfig, ("d", "heads", "d_ff", "layers", "positions")), (sb.HashConfig, ("m",))):
        for f in dataclasses.fields(cls):
            if f.name in names:
                lo, hi = about(f)["range"]
                assert hi is not None, f.name
                extra = {"heads": 1} if f.name == "d" else {"d": hi} if f.name == "heads" else {}
                cls(**{f.name: hi, **extra})
                with pytest.raises(sb.ArgumentError, match=f"{f.name} must be between"):
                    cls(**{f.name: hi + 1, **extra})
    assert MAX_M == 1024


def test_check_array(tmp_path, monkeypatch):
    import superbloom.storage.loading as loading

    monkeypatch.setattr(loading, "ARRAY_CHUNK", 7)  # several pieces: a value is found in any of them
    where = tmp_path / "a.npy"
    ok = np.arange(50)
    assert check_array(ok, where, "ids", low=0, high=50, increasing=True) is ok
    for a, kw, words in [(ok.reshape(5, 10), {}, "2-D"), (ok.astype(float), {}, "float64"),
                         (ok, {"length": 49}, "49 of them"), (ok - 1, {"low": 0}, "value -1 at position 0"),
                         (ok, {"high": 40}, "value 40 at position 40"),
                         (np.r_[ok[:30], 3, ok[30:]], {"increasing": True}, "decreases at position 30 (29 then 3)"),
                         (np.r_[ok[:13], 3, ok[13:]], {"increasing": True}, "decreases at position 13 (12 then 3)")]:
        with pytest.raises(LoadError, match=words.replace("(", r"\(").replace(")", r"\)")):
            check_array(a, where, "ids", **kw)


def _small_model():
    return torch.nn.Sequential(torch.nn.Linear(3, 2))


@pytest.mark.parametrize("change,words", [
    (lambda s: s.update({"0.weight": s["0.weight"].double()}), "'0.weight' is float64; .* expects float32"),
    (lambda s: s.update({"0.weight": torch.zeros(1, 3)}), r"'0.weight' has shape \[1, 3\]; .* expects \[2, 3\]"),
    (lambda s: s["0.bias"].__setitem__(1, float("nan")), "'0.bias' holds 1 non-finite values"),
    (lambda s: s["0.weight"].fill_(float("inf")), "'0.weight' holds 6 non-finite values"),
])
def test_weights_are_checked_before_use(change, words):
    model = _small_model()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    change(state)
    with pytest.raises(LoadError, match=words):
        check_state(model, state, "ckpt")


def test_non_finite_found_in_any_piece(monkeypatch):
    import superbloom.storage.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "FINITE_CHUNK", 5)
    t = torch.zeros(23)
    check_finite({"t": t}, "w")
    t[17] = t[21] = float("nan")
    with pytest.raises(LoadError, match="'t' holds 2 non-finite values .* of 23"):
        check_finite({"t": t}, "w")


def test_a_loaded_model_with_nan_weights_is_refused_naming_the_tensor(tiny_model, tmp_path):
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file

    out = tmp_path / "m"
    shutil.copytree(tiny_model, out)
    for f in out.rglob("model.safetensors"):
        with safe_open(str(f), "pt") as h:
            meta, t = h.metadata(), {k: h.get_tensor(k) for k in h.keys()}
        name = sorted(k for k in t if t[k].is_floating_point())[0]
        t[name][..., 0] = float("nan")
        save_file(t, str(f), metadata=meta)
    for mmap in (True, False):  # mapped views and tensors read into memory: both checked
        with pytest.raises(LoadError, match=f"tensor '{name}' holds .* non-finite"):
            sb.load(out, mmap=mmap)


def test_json_nested_too_deep_is_invalid_json(tmp_path):
    with pytest.raises(json.JSONDecodeError, match="nested deeper than"):
        json_loads("[" * 100_000 + "]" * 100_000)
    assert json_loads('{"a": [[1]]}') == {"a": [[1]]}
    deep = tmp_path / "config.json"
    deep.write_text('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}")
    with pytest.raises(LoadError, match="config.json, line 1: not valid JSON \\(nested deeper than"):
        read_json(deep, "settings")


# ---------------------------------------------------------------- CSV / TSV quoting


def _read(path, **kw):
    stats = ReadStats()
    links = [(s, i) for chunk in read_chunks(path, ReadConfig(**kw), stats)
             for s, i in zip(chunk.sets.to_pylist(), chunk.ids.to_pylist())]
    return links, stats


def test_an_unterminated_quote_is_its_own_line(tmp_path):
    """The 2,007-line file of the report: one quote that never closes, in the id column. Refused naming
    line 1002 in one short line; with skip_malformed that line alone is skipped and counted, the 2,005
    other rows read, the lines read the file's."""
    rows = [f"s{i // 5},id{i % 300}" for i in range(2006)]
    rows[1000] = 's200,"an id that never closes'
    p = tmp_path / "q.csv"
    p.write_text("set,id\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError) as e:
        _read(p, format="csv")
    msg = str(e.value)
    assert msg.startswith(f"{p}:1002: a quote that does not close on its line") and "\n" not in msg
    assert len(msg) < 400 and "s201" not in msg  # the rest of the file is not printed
    links, stats = _read(p, format="csv", skip_malformed=True)
    assert len(links) == 2005 and stats.malformed == 1 and stats.lines == 2006
    assert ("s200", "an id that never closes") not in links and ("s201", "id105") in links


@pytest.mark.parametrize("text,kept,bad", [
    ('set,id\na,"x, y"\na,"say ""hi"""\nb,z\n', [("a", "x, y"), ("a", 'say "hi"'), ("b", "z")], []),
    ('set,id\na,x"y\nb,"z\n', [("a", 'x"y')], [3]),  # a quote inside an unquoted field is a character
    ('set,id\na,"x"y\nb,z\n', [("b", "z")], [2]),  # text after the closing quote
    ('set,id\n"a,x\nb,z\n"c,w\n', [("b", "z")], [2, 4]),  # each such line counted on its own
    ('set\tid\na\t"x\ty"\nb\t"\n', [("a", "x\ty")], [3]),
])
def test_quoting_follows_the_format(tmp_path, text, kept, bad):
    p = tmp_path / ("f.tsv" if "\t" in text else "f.csv")
    p.write_text(text)
    fmt = "tsv" if "\t" in text else "csv"
    links, stats = _read(p, format=fmt, skip_malformed=True)
    assert links == kept and stats.malformed == len(bad)
    assert [int(x.split(":")[1]) for x in stats.examples] == bad
    if bad:
        with pytest.raises(InputError, match=rf"{p.name}:{bad[0]}: a quote"):
            _read(p, format=fmt)


def test_skip_malformed_refuses_more_than_a_small_fraction(tmp_path):
    p = tmp_path / "m.csv"

    def write(n_bad: int, n: int = 2000):
        p.write_text("set,id\n" + "".join(f's{i},"x{i}\n' if i < n_bad else f"s{i // 3},id{i}\n" for i in range(n)))

    write(20)  # 1%: skipped
    links, stats = _read(p, format="csv", skip_malformed=True)
    assert stats.malformed == 20 and len(links) == 1980
    write(21)
    with pytest.raises(InputError, match=r"m.csv: 21 of 2,000 lines malformed \(1.1%\), more than --skip-malformed"):
        _read(p, format="csv", skip_malformed=True)
    _, stats = _read(p, format="csv", skip_malformed=True, max_malformed=0.5)  # the Python API may allow more
    assert stats.malformed == 21
    write(MALFORMED_FLOOR, n=20)  # a small file's few bad lines: skipped however large the fraction
    assert _read(p, format="csv", skip_malformed=True)[1].malformed == MALFORMED_FLOOR
    with pytest.raises(sb.ArgumentError, match="max_malformed"):
        ReadConfig(max_malformed=2)


def test_prepare_skips_more_malformed_lines_only_when_told(tmp_path, capsys):
    """prepare --skip-malformed refuses a file with more than 1% bad lines, naming --max-malformed;
    with --max-malformed 0.05 it reads it, the skipped lines counted."""
    from superbloom.cli import main

    p = tmp_path / "m.csv"
    p.write_text("set,id\n" + "".join(f's{i},"x{i}\n' if i < 40 else f"s{i // 3},id{i}\n" for i in range(2000)))
    common = ["prepare", str(p), "--format", "csv", "--skip-malformed", "--quiet"]
    assert main(common + ["--out", str(tmp_path / "a")]) == 2
    assert "--max-malformed" in capsys.readouterr().err and not (tmp_path / "a" / "meta.json").exists()
    assert main(common + ["--out", str(tmp_path / "b"), "--max-malformed", "0.05", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["malformed_skipped"] == 40
