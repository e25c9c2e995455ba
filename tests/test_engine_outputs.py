"""Data written by the engines users already run: a Spark- or Ray-style Parquet directory (hive
partition folders, part-*.parquet files, _SUCCESS and .crc checksum files), written here with pyarrow's
dataset writer, is prepared as it is, partition columns included, and gives byte for byte the dataset
its rows give as one Arrow table."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import superbloom as sb
from superbloom.cli import main


def engine_output(root: Path, partitioning=("day",)) -> pa.Table:
    """A partitioned Parquet folder as Spark leaves it -> the rows, in the order of its sorted files."""
    rng = np.random.default_rng(0)
    n = 4000
    table = pa.table({"basket": [f"b{i % 400}" for i in range(n)], "item": [f"i{x}" for x in rng.integers(0, 90, n)],
                      "ts": np.arange(n, dtype=np.int64), "day": [f"2024-01-0{1 + i % 3}" for i in range(n)],
                      "shard": (np.arange(n) % 2).astype(np.int32)})
    ds.write_dataset(table, root, format="parquet", partitioning=list(partitioning), partitioning_flavor="hive",
                     basename_template="part-{i}-c000.snappy.parquet", max_rows_per_file=500, max_rows_per_group=250)
    (root / "_SUCCESS").write_bytes(b"")
    (root / "._SUCCESS.crc").write_bytes(b"crc\x00")
    (root / "_committed_123").write_text("{}")  # what Databricks adds
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".parquet"):
                Path(dirpath, f".{f}.crc").write_bytes(b"crc\x00\x01")  # Hadoop's checksums: hidden, binary
    parts = []
    for f in sorted(p for p in root.rglob("*.parquet") if not p.name.startswith(".")):
        t = pq.read_table(f)
        for seg in f.relative_to(root).parts[:-1]:
            key, value = seg.split("=", 1)
            typed = int(value) if value.isdigit() else value
            t = t.append_column(key, pa.array([typed] * len(t), pa.int32() if isinstance(typed, int) else pa.string()))
        parts.append(t)
    return pa.concat_tables(parts, promote_options="default")


def files_of(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name not in ("meta.json",)
            and not p.name.startswith(".")}


@pytest.mark.parametrize("set_column,order", [("basket", None), ("day", None), ("basket", "ts"), ("shard", "ts")])
def test_a_partitioned_parquet_folder_prepares_as_its_rows(tmp_path, set_column, order):
    root = tmp_path / "events"
    rows = engine_output(root, ("day", "shard"))
    split = "leave-one-out" if order else "sets"
    read = sb.ReadConfig(format="parquet", set_column=set_column, id_column="item", order_column=order)
    sb.prepare(sb.PrepareConfig(str(root), str(tmp_path / "from_dir"), read=read, split=split), progress=False)
    sb.prepare(sb.PrepareConfig(rows, str(tmp_path / "from_rows"), read=read, split=split), progress=False)
    a, b = files_of(tmp_path / "from_dir"), files_of(tmp_path / "from_rows")
    assert a == b and "vocab.txt" in a  # byte for byte the same dataset
    data = sb.Dataset(tmp_path / "from_dir")
    assert data.meta["lines"] == len(rows)  # every row read, none of _SUCCESS, .crc, _committed_*
    if set_column == "day":
        assert data.meta["sets"] == 3  # a partition column is a column like the others


def test_the_command_line_reads_the_folder_with_format_auto(tmp_path, capsys):
    root = tmp_path / "events"
    engine_output(root)
    assert main(["prepare", str(root), "--set-column", "basket", "--id-column", "item", "--out",
                 str(tmp_path / "d")]) == 0  # --format auto: the folder's files say parquet
    assert sb.Dataset(tmp_path / "d").meta["format"] == "parquet"
    assert main(["prepare", str(root), "--set-column", "nope", "--id-column", "item", "--out",
                 str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "no set column 'nope'" in err and "'day'" in err  # the partition column is named among the columns
