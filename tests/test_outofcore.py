"""Out-of-core prepare (outofcore.py, issue 14): the same bytes as the in-memory path, and the same errors."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.data.outofcore import parse_memory_limit
from superbloom.data.readers import InputError, ReadConfig

LIMIT = "64MB"  # the smallest allowed: DuckDB spills whatever does not fit


def random_links(seed: int, n_sets: int = 300, n_ids: int = 120):
    """(set, id) pairs with sets interleaved in the file, repeated ids within a set, skewed ids."""
    rng = np.random.default_rng(seed)
    sets = rng.integers(0, n_sets, 4000)
    ids = np.minimum(rng.zipf(1.3, 4000), n_ids) - 1
    rare = [(f"set{s}", f"rare{k}") for k, s in enumerate(range(0, n_sets, 7))]  # one link each: some only in test
    return [(f"set{s}", f"id_{i}") for s, i in zip(sets.tolist(), ids.tolist())] + rare


def cli(argv, capsys) -> tuple[int, str, str]:
    """Run the command line in this process -> (exit status, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code or 0, out.out, out.err


def prepare_both(tmp_path, path, **kw):
    """Prepare `path` in memory and out of core -> the two dataset directories and summaries."""
    out = {}
    for name, limit in (("mem", None), ("ooc", LIMIT)):
        cfg = sb.PrepareConfig(str(path), str(tmp_path / name), memory_limit=limit, **kw)
        out[name] = sb.prepare(cfg, progress=False)
    return tmp_path / "mem", tmp_path / "ooc", out["mem"], out["ooc"]


def assert_same_dataset(a, b, sa, sb_):
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir())
    for name in files:
        if name not in ("meta.json", ".superbloom.json"):  # the marker holds a run id
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    meta_a, meta_b = (json.loads((d / "meta.json").read_text()) for d in (a, b))
    for m in (meta_a, meta_b, sa, sb_):
        for k in ("seconds", "outofcore"):
            m.pop(k, None)
    assert meta_a == meta_b and sa == sb_


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_edges_byte_identical(tmp_path, seed):
    links = random_links(seed)
    text = "# a comment\n" + "".join(f"{s}\t{i}\r\n" if k % 7 == 0 else f"{s}\t{i}\n"
                                      for k, (s, i) in enumerate(links))
    (tmp_path / "in.tsv").write_text(text)
    a, b, sa, sb_ = prepare_both(tmp_path, tmp_path / "in.tsv", test_fraction=0.2, seed=seed)
    assert sa["duplicates_removed"] > 0 and sa["test_links_unseen_in_train"] > 0  # the input exercises both
    assert_same_dataset(a, b, sa, sb_)


def test_parquet_byte_identical_with_list_column_and_undirected(tmp_path):
    links = random_links(5)
    pq.write_table(pa.table({"set": [s for s, _ in links], "id": [i for _, i in links]}), tmp_path / "in.parquet")
    a, b, sa, sb_ = prepare_both(tmp_path, tmp_path / "in.parquet", read=ReadConfig(format="parquet"))
    assert_same_dataset(a, b, sa, sb_)
    # an id column of lists (exploded by the reader) and int keys (cast to strings)
    pq.write_table(pa.table({"set": [1, 2, 3], "ids": [[5, 6, 5], [6], [7, 5]]}), tmp_path / "l.parquet")
    for d in ("mem", "ooc"):
        sb.prepare(sb.PrepareConfig(str(tmp_path / "l.parquet"), str(tmp_path / f"l{d}"), test_fraction=0.0,
                                    read=ReadConfig(format="parquet"), memory_limit=None if d == "mem" else LIMIT),
                   progress=False)
    assert_same_dataset(tmp_path / "lmem", tmp_path / "looc", {}, {})
    assert sb.Dataset(tmp_path / "looc").meta["duplicates_removed"] == 1


def test_other_formats_byte_identical(tmp_path):
    (tmp_path / "in.txt").write_text("u1 a b c a\nu2 b d\n\n# not a comment in lines: a set '#'\nu3 c a e f\n")
    a, b, sa, sb_ = prepare_both(tmp_path, tmp_path / "in.txt", read=ReadConfig(format="lines"), test_fraction=0.34)
    assert_same_dataset(a, b, sa, sb_)


def test_malformed_lines_same_errors_and_counts(tmp_path, capsys):
    (tmp_path / "bad.tsv").write_text("s1\ta\ns1\tb\njustone\ns2\ta\n\ts3\n")
    for limit in (None, LIMIT):
        with pytest.raises(InputError, match=r"bad\.tsv:3: .*--skip-malformed"):
            sb.prepare(sb.PrepareConfig(str(tmp_path / "bad.tsv"), str(tmp_path / "x"), memory_limit=limit),
                       progress=False)
        assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()
    a, b, sa, sb_ = prepare_both(tmp_path, tmp_path / "bad.tsv", read=ReadConfig(skip_malformed=True),
                                 test_fraction=0.0)
    assert sa["malformed_skipped"] == 2 and "bad.tsv:3: " in sa["malformed_examples"][0]
    assert_same_dataset(a, b, sa, sb_)
    # the CLI: the same message, exit status and no traceback
    for extra in ([], ["--memory-limit", "64MB"]):
        code, _, err = cli(["prepare", str(tmp_path / "bad.tsv"), "--out", str(tmp_path / "cli"), *extra], capsys)
        assert code == 2 and "bad.tsv:3:" in err and "Traceback" not in err, err


def test_empty_input_and_line_break_keys(tmp_path):
    (tmp_path / "empty.tsv").write_text("# only a comment\n")
    with pytest.raises(InputError, match="no links found"):
        sb.prepare(sb.PrepareConfig(str(tmp_path / "empty.tsv"), str(tmp_path / "e"), memory_limit=LIMIT),
                   progress=False)
    pq.write_table(pa.table({"set": ["a", "b\nc"], "id": ["x", "y"]}), tmp_path / "nl.parquet")
    for limit in (None, LIMIT):
        with pytest.raises(InputError, match="set key 'b\\\\nc' contains a line break"):
            sb.prepare(sb.PrepareConfig(str(tmp_path / "nl.parquet"), str(tmp_path / "n"),
                                        read=ReadConfig(format="parquet"), memory_limit=limit), progress=False)


def test_memory_limit_values(tmp_path):
    assert parse_memory_limit("4GB") == 4 * 10 ** 9 and parse_memory_limit("2GiB") == 2 * 2 ** 30
    assert parse_memory_limit(" 500 mb ") == 500 * 10 ** 6 and parse_memory_limit("auto") >= 64 * 10 ** 6
    for bad in ("lots", "4XB", "10MB", "-1GB"):
        with pytest.raises(ValueError, match="memory limit"):
            parse_memory_limit(bad)
    (tmp_path / "x.tsv").write_text("a\tb\n")
    with pytest.raises(ValueError, match="split sets only"):
        sb.prepare(sb.PrepareConfig(str(tmp_path / "x.tsv"), str(tmp_path / "o"), split="leave-one-out",
                                    memory_limit="1GB"))
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


def test_cli_flag(tmp_path, capsys):
    (tmp_path / "in.tsv").write_text("".join(f"s{k}\ti{k % 5}\ns{k}\ti{k % 3}\n" for k in range(30)))
    code, out, err = cli(["prepare", str(tmp_path / "in.tsv"), "--out", str(tmp_path / "d"), "--memory-limit", "64MB",
                          "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["outofcore"]["engine"].startswith("duckdb") and sb.Dataset(tmp_path / "d").n_ids == 5
    code, _, err = cli(["prepare", str(tmp_path / "in.tsv"), "--out", str(tmp_path / "e"), "--memory-limit", "lots"],
                       capsys)
    assert code == 2 and "--memory-limit" in err and "expected a size" in err and not (tmp_path / "e").exists()


def test_many_chunks_byte_identical(tmp_path, monkeypatch):
    """An input read in several chunks (every real input past ~1M links): the out-of-core spill checks
    each later chunk's columns against the first's (it once failed on the second chunk of any input)."""
    import superbloom.data.inputs as inputs

    monkeypatch.setattr(inputs, "_CHUNK_LINKS", 500)  # 4,000+ links -> 9 chunks
    links = random_links(7)
    table = pa.table({"set": [s for s, _ in links], "id": [i for _, i in links]})
    out = {}
    for name, limit in (("mem", None), ("ooc", LIMIT)):
        out[name] = sb.prepare(sb.PrepareConfig(table, str(tmp_path / name), memory_limit=limit), progress=False)
    assert_same_dataset(tmp_path / "mem", tmp_path / "ooc", out["mem"], out["ooc"])


def test_later_chunk_of_another_type_is_cast_or_refused():
    from superbloom.data.outofcore import _conform

    first = pa.schema([("s", pa.string()), ("i", pa.string()), ("o", pa.int64())])
    later = pa.table({"s": pa.array(["a"], pa.large_string()), "i": ["b"], "o": pa.array([2.0])})
    got = _conform(later, first, sb.PrepareConfig("x", "y", read=ReadConfig(order_column="t")))
    assert got.schema == first and got["o"].to_pylist() == [2]
    bad = pa.table({"s": ["a"], "i": ["b"], "o": pa.array([2.5])})
    with pytest.raises(InputError, match="order column 't': double values after int64 ones"):
        _conform(bad, first, sb.PrepareConfig("x", "y", read=ReadConfig(order_column="t")))
