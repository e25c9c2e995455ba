"""prepare from memory and from richer files (issue 31): DataFrames, Arrow tables, sparse matrices and
iterables of sets give the same dataset, byte for byte, as the same links in a file; named columns,
Parquet globs and directories, CSV with a header and quotes, an order column; errors that name the
column and what was expected."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.cli import main
from superbloom.data.inputs import SparseSets
from superbloom.data.readers import InputError, ReadConfig, ReadStats, read_links


def history(n=300, seed=0):
    """(user, item, time) rows in time order: unique times, repeats and a unicode / comma id."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 25, n)
    items = np.minimum(rng.zipf(1.5, n), 40)
    names = {1: "Davis, Miles", 2: "Ünï", 3: 'say "hi"'}
    return [(f"u{u}", names.get(int(i), f"item{i}"), 1000 + 7 * t) for t, (u, i) in enumerate(zip(users, items))]


def write_edges(path, rows):
    path.write_text("".join(f"{u}\t{i}\n" for u, i, *_ in rows), encoding="utf-8")
    return path


def write_csv(path, rows, sep=","):
    def q(v):
        v = str(v)
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\t') else v
    path.write_text(sep.join(["user", "item", "time"]) + "\n" + "".join(sep.join(map(q, r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def table(rows) -> pa.Table:
    return pa.table({"user": [r[0] for r in rows], "item": [r[1] for r in rows], "time": [r[2] for r in rows]})


def run(tmp_path, name, source, read=None, **kw):
    out = tmp_path / name
    sb.prepare(sb.PrepareConfig(source, str(out), read=read or ReadConfig(), **kw), progress=False)
    return out


def assert_same_dataset(a, b, same_source_record=False, lines_differ=False):
    """Every output file byte-identical; meta.json too, without the time and where and how the input was
    read (input, format, read: the columns chosen, an edge list's fields per line) unless
    `same_source_record`, and without the lines read where `lines_differ`."""
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        if name not in ("meta.json", ".superbloom.json"):  # the marker holds a run id
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((d / "meta.json").read_text()) for d in (a, b))
    for m in (ma, mb):
        m.pop("seconds")
        m.pop("input")
        m.pop("outofcore", None)  # the out-of-core engine's settings and stage times
        if lines_differ:
            m.pop("lines")
        if not same_source_record:
            m.pop("format")
            m.pop("read")
            m.pop("fields_per_line", None)
    if not same_source_record:  # a warning names the id column as the input was read
        assert len(ma.pop("warnings", [])) == len(mb.pop("warnings", []))
    assert ma == mb


@pytest.mark.parametrize("split", ["sets", "leave-one-out"])
def test_tables_give_the_file_dataset(tmp_path, split):
    pd = pytest.importorskip("pandas")
    rows = history()
    ref = run(tmp_path, "file", str(write_edges(tmp_path / "e.tsv", rows)), split=split, test_fraction=0.2)
    t = table(rows)
    sources = {"pandas": pd.DataFrame(rows, columns=["user", "item", "time"]), "arrow": t,
               "batch": t.combine_chunks().to_batches()[0]}
    try:
        import polars as pl
        sources["polars"] = pl.from_arrow(t)
    except ImportError:
        pass
    for name, source in sources.items():
        assert_same_dataset(ref, run(tmp_path, name, source, split=split, test_fraction=0.2))
    by_name = ReadConfig(set_column="user", id_column="item")
    assert_same_dataset(ref, run(tmp_path, "named", sources["pandas"][["time", "item", "user"]], read=by_name,
                                 split=split, test_fraction=0.2))


def sets_of(rows):
    out = {}
    for u, i, *_ in rows:
        out.setdefault(u, [])
        if i not in out[u]:
            out[u].append(i)
    return out


def write_lines(path, sets):
    path.write_text("".join(f"{k} {' '.join(v)}\n" for k, v in sets.items()), encoding="utf-8")
    return path


def test_sparse_matrix_gives_the_file_dataset(tmp_path):
    sp = pytest.importorskip("scipy.sparse")
    sets = {k: [i.replace(" ", "_").replace(",", "") for i in v] for k, v in sets_of(history()).items()}
    vocab = sorted({i for v in sets.values() for i in v})
    col = {i: c for c, i in enumerate(vocab)}
    # a row's ids in column order, as the matrix stores them
    sets = {k: sorted(v, key=col.__getitem__) for k, v in sets.items()}
    rows = np.repeat(np.arange(len(sets)), [len(v) for v in sets.values()])
    cols = np.array([col[i] for v in sets.values() for i in v])
    m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), len(vocab)))
    m.data[0] = 0.0  # an explicit zero is not a link
    first = next(iter(sets))
    sets[first] = sets[first][1:]
    ref = run(tmp_path, "file", str(write_lines(tmp_path / "l.txt", sets)), read=ReadConfig("lines"))
    assert_same_dataset(ref, run(tmp_path, "csr", SparseSets(m, list(sets), vocab)))
    numbered = {str(r): [str(col[i]) for i in v] for r, v in enumerate(sets.values())}
    ref2 = run(tmp_path, "file2", str(write_lines(tmp_path / "n.txt", numbered)), read=ReadConfig("lines"))
    assert_same_dataset(ref2, run(tmp_path, "csr2", m.tocoo()))  # any SciPy sparse format; keys = indices
    with pytest.raises(InputError, match=r"SparseSets.id_keys: expected \d+ keys .* got 2"):
        run(tmp_path, "bad", SparseSets(m, None, ["a", "b"]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=8), min_size=2, max_size=20))
def test_iterable_of_sets_gives_the_lines_dataset(tmp_path_factory, sets):
    tmp = tmp_path_factory.mktemp("it")
    numbered = {str(k): [str(i) for i in v] for k, v in enumerate(sets)}
    ref = run(tmp, "file", str(write_lines(tmp / "l.txt", numbered)), read=ReadConfig("lines"), test_fraction=0.3)
    assert_same_dataset(ref, run(tmp, "list", sets, test_fraction=0.3))
    assert_same_dataset(ref, run(tmp, "generator", (tuple(v) for v in sets), test_fraction=0.3))
    assert_same_dataset(ref, run(tmp, "dict", {k: v for k, v in zip(numbered, sets)}, test_fraction=0.3))


def test_python_sets_are_sorted_and_bad_members_named(tmp_path):
    out = run(tmp_path, "s", {"a": {"z", "y", "x"}, "b": {"y", "w"}}, test_fraction=0.0)
    assert (out / "vocab.txt").read_text().split() == ["y", "x", "z", "w"]  # count, then sorted first appearance
    with pytest.raises(InputError, match="set 'b': expected a collection of ids .* got str"):
        run(tmp_path, "bad", {"a": ["x"], "b": "xy"})
    with pytest.raises(InputError, match="set 1: ids must be strings, numbers"):
        run(tmp_path, "bad2", [["x"], ["y", None]])
    with pytest.raises(TypeError, match="expected a path or one of .* got int"):
        run(tmp_path, "bad3", 42)


def test_parquet_named_columns_glob_and_directory(tmp_path):
    rows = history()
    ref = run(tmp_path, "file", str(write_edges(tmp_path / "e.tsv", rows)))
    t = table(rows).select(["time", "item", "user"])
    (tmp_path / "parts").mkdir()
    for k, a in enumerate(range(0, len(rows), 120)):  # 3 files, in name order
        pq.write_table(t.slice(a, 120), tmp_path / "parts" / f"part-{k}.parquet")
    (tmp_path / "parts" / "_SUCCESS").write_text("")  # skipped, as pyarrow.dataset does
    named = ReadConfig("parquet", set_column="user", id_column="item")
    pq.write_table(t, tmp_path / "one.parquet")
    for name, source in (("one", tmp_path / "one.parquet"), ("glob", tmp_path / "parts" / "part-*.parquet"),
                         ("dir", tmp_path / "parts")):
        assert_same_dataset(ref, run(tmp_path, name, str(source), read=named))
    assert_same_dataset(ref, run(tmp_path, "positions", str(tmp_path / "one.parquet"),
                                 read=ReadConfig("parquet", set_column=2, id_column=1)))
    with pytest.raises(InputError, match="no file matches"):
        run(tmp_path, "none", str(tmp_path / "parts" / "*.pq"), read=named)
    with pytest.raises(InputError, match=r"one.parquet: no set column 'User'; the columns are \['time', 'item', "):
        run(tmp_path, "x", str(tmp_path / "one.parquet"), read=ReadConfig("parquet", set_column="User", id_column=1))


def test_csv_and_tsv_with_header_and_quotes(tmp_path):
    rows = history()
    assert any("," in r[1] for r in rows) and any('"' in r[1] for r in rows)
    ref = run(tmp_path, "file", str(write_edges(tmp_path / "e.tsv", rows)))
    by_name = dict(set_column="user", id_column="item")
    assert_same_dataset(ref, run(tmp_path, "csv", str(write_csv(tmp_path / "h.csv", rows)),
                                 read=ReadConfig("csv", **by_name)))
    assert_same_dataset(ref, run(tmp_path, "tsv", str(write_csv(tmp_path / "h.tsv", rows, "\t")),
                                 read=ReadConfig("tsv", **by_name)))
    assert_same_dataset(ref, run(tmp_path, "pos", str(tmp_path / "h.csv"), read=ReadConfig("csv")))  # 0, 1
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "h.csv").read_bytes())  # as spreadsheets write it
    assert_same_dataset(ref, run(tmp_path, "bom", str(bom), read=ReadConfig("csv", **by_name)))
    bad = tmp_path / "bad.csv"
    bad.write_text('user,item\nu1,"a, b"\nu2\nu3,c\n')
    with pytest.raises(InputError, match=r"bad.csv:3: expected 2 csv fields \(as in the header\), got 1"):
        run(tmp_path, "bad", str(bad), read=ReadConfig("csv"))
    out = run(tmp_path, "skip", str(bad), read=ReadConfig("csv", skip_malformed=True), test_fraction=0.0)
    assert (out / "vocab.txt").read_text().split("\n")[:2] == ["a, b", "c"]
    assert json.loads((out / "meta.json").read_text())["malformed_skipped"] == 1


def test_format_auto_reads_what_the_file_name_says(tmp_path, capsys):
    """prepare's --format auto (the default): a .csv / .parquet / .jsonl name (also .gz, a directory by its
    files) picks that reader; other names stay edges. The same links, the same dataset as the format named."""
    from superbloom.data.readers import format_from_name

    rows = history()
    csv = write_csv(tmp_path / "interactions.csv", rows)
    assert main(["prepare", str(csv), "--out", str(tmp_path / "auto"), "--set-column", "user",
                 "--id-column", "item"]) == 0
    assert "format auto -> csv (the file name)" in capsys.readouterr().err
    assert_same_dataset(run(tmp_path, "named", str(csv), read=ReadConfig("csv", set_column="user", id_column="item")),
                        tmp_path / "auto", same_source_record=True)
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "_SUCCESS").write_text("")
    pq.write_table(pa.table({"u": ["a"], "i": ["b"]}), tmp_path / "parts" / "part-0.parquet")
    names = {"x.csv": "csv", "x.CSV.gz": "csv", "x.parquet": "parquet", "x.pq": "parquet", "x.jsonl.gz": "jsonl",
             "item2attributes.json": "json", "x.JSON.gz": "json",
             "x.ndjson": "jsonl", "links.tsv": None, "links.tsv.gz": None, "sets.txt": None, "noext": None,
             "parts/*.parquet": "parquet", "parts": "parquet", "notes": None}
    (tmp_path / "notes").mkdir()  # a directory is read only in a columnar format: its .json / .jsonl say nothing
    (tmp_path / "notes" / "a.json").write_text("{}")
    (tmp_path / "notes" / "b.jsonl").write_text("")
    assert {n: format_from_name(tmp_path / n) for n in names} == names
    edges = write_edges(tmp_path / "links.tsv", rows)
    assert main(["prepare", str(edges), "--out", str(tmp_path / "e"), "--quiet"]) == 0
    assert json.loads((tmp_path / "e" / "meta.json").read_text())["read"]["format"] == "edges"
    # the edges reader on a CSV file (the Python API's default format) names the format to pass
    with pytest.raises(InputError, match=r"interactions.csv: expected at least 2 tab-separated fields per line, "
                                         r"the first data line has 1; the file name says csv: pass --format csv"):
        run(tmp_path, "api", str(csv))


def test_a_header_row_above_numeric_ids(tmp_path, capsys):
    """A tab-separated file with a header row (user, item, ...) above numeric ids: --format auto reads it
    as tsv (the header is column names, not a set "user" with the id "item"), and says so; --format edges
    and the Python API stop at line 1 and name the format to pass (below a comment line, which tsv cannot
    read, only the line). String ids keep reading as edges."""
    import gzip

    rows = [(u, i, 3) for u, i in zip(np.arange(200) % 17, np.arange(200) * 7 % 53)]
    text = "user\titem\trating\n" + "".join(f"{u}\t{i}\t{r}\n" for u, i, r in rows)
    src = tmp_path / "ratings.tsv.gz"
    src.write_bytes(gzip.compress(text.encode()))
    assert main(["prepare", str(src), "--out", str(tmp_path / "auto")]) == 0
    assert "format auto -> tsv (line 1 is a header row: user, item, rating)" in capsys.readouterr().err
    meta = json.loads((tmp_path / "auto" / "meta.json").read_text())
    assert meta["read"]["format"] == "tsv"
    plain = tmp_path / "plain.tsv"  # the same links, no header: the same dataset
    plain.write_text("".join(f"{u}\t{i}\n" for u, i, _ in rows))
    assert_same_dataset(run(tmp_path, "plain", str(plain)), tmp_path / "auto")
    assert main(["prepare", str(src), "--out", str(tmp_path / "e"), "--format", "edges"]) == 2
    err = capsys.readouterr().err
    assert "ratings.tsv.gz:1: (user, item, rating) looks like a header row above numeric ids" in err
    assert "pass --format tsv" in err and not (tmp_path / "e").exists()
    with pytest.raises(InputError, match=r"ratings.tsv.gz:1: .* pass --format tsv"):
        run(tmp_path, "api", str(src))
    commented = tmp_path / "commented.tsv"
    commented.write_text("# from a database\n" + text)
    assert main(["prepare", str(commented), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "commented.tsv:2: (user, item, rating) looks like a header row" in err and "--format" not in err
    words = tmp_path / "words.tsv"  # string ids: a first line like the others is data
    words.write_text("set\tid\n" + "".join(f"s{u}\tx{i}\n" for u, i, _ in rows))
    assert main(["prepare", str(words), "--out", str(tmp_path / "w"), "--quiet"]) == 0
    assert json.loads((tmp_path / "w" / "meta.json").read_text())["read"]["format"] == "edges"


def test_space_separated_files_are_read_without_flags(tmp_path, capsys):
    """--format auto on a file with no tab: `user item` lines (SASRec's Video) and `set id id ...`
    lines (S3-Rec's) are read as lines, giving the dataset of --format edges --delimiter space and of
    --format lines; `user item rating` columns as space-separated edges. Each says so in one line.
    --format edges names the flag to pass; a tab-separated file is edges as before."""
    pairs = [(u, i) for u in range(30) for i in range(u % 7, u % 7 + 5)]
    two = tmp_path / "Video.txt"
    two.write_text("".join(f"{u} {i}\n" for u, i in pairs))
    assert main(["prepare", str(two), "--out", str(tmp_path / "two")]) == 0
    assert "format auto -> lines (no tab; space-separated: a set, then its ids, on each line)" in capsys.readouterr().err
    assert main(["prepare", str(two), "--out", str(tmp_path / "two_e"), "--format", "edges", "--delimiter", "space",
                 "--quiet"]) == 0
    assert_same_dataset(tmp_path / "two", tmp_path / "two_e")
    many = tmp_path / "LastFM.txt"
    many.write_text("".join(f"{u} " + " ".join(str(i) for i in range(u % 7, u % 7 + 2 + u % 4)) + "\n"
                            for u in range(30)))
    assert main(["prepare", str(many), "--out", str(tmp_path / "many"), "--quiet"]) == 0
    assert main(["prepare", str(many), "--out", str(tmp_path / "many_l"), "--format", "lines", "--quiet"]) == 0
    assert_same_dataset(tmp_path / "many", tmp_path / "many_l", same_source_record=True)
    rated = tmp_path / "ratings.txt"
    rated.write_text("".join(f"{u} {i} 5\n" for u, i in pairs))
    assert main(["prepare", str(rated), "--out", str(tmp_path / "rated")]) == 0
    out, err = capsys.readouterr()
    assert "format auto -> edges (no tab; space-separated columns: --delimiter space)" in err
    assert "set 0, id 1 of the 3 per line" in out
    assert_same_dataset(tmp_path / "rated", tmp_path / "two_e")
    assert main(["prepare", str(two), "--out", str(tmp_path / "e"), "--format", "edges"]) == 2
    assert "the lines are space-separated: pass --format lines" in capsys.readouterr().err
    assert main(["prepare", str(rated), "--out", str(tmp_path / "e"), "--format", "edges"]) == 2
    assert "space-separated columns: pass --delimiter space" in capsys.readouterr().err
    tabs = tmp_path / "links.tsv"
    tabs.write_text("".join(f"{u}\t{i}\n" for u, i in pairs))
    assert main(["prepare", str(tabs), "--out", str(tmp_path / "tabs")]) == 0
    assert "format auto" not in capsys.readouterr().err
    assert_same_dataset(tmp_path / "tabs", tmp_path / "two_e")


def test_a_wrong_id_column_is_named_in_the_summary(tmp_path, capsys):
    """An edge list of more than two fields is read from columns 0 and 1 unless told otherwise. When
    that column is a triple's relation (most links repeat an id in their set) or a timestamp (no test
    id was seen in training), the summary names the columns read and warns, in text and JSON; read
    from the right column, the same file prepares without a warning."""
    rng = np.random.default_rng(0)
    heads, tails = rng.integers(0, 60, 3000), rng.integers(0, 60, 3000)
    triples = tmp_path / "train.txt"
    triples.write_text("".join(f"e{h}\trel{h % 3}\te{t}\n" for h, t in zip(heads, tails)))
    assert main(["prepare", str(triples), "--out", str(tmp_path / "rel"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "columns read                         set 0, id 1 of the 3 per line" in out
    assert "warning: 98% of the links (2,940) repeat an id already in their set" in out
    assert "is column 1 the id column (the lines have 3 fields)?" in out
    meta = json.loads((tmp_path / "rel" / "meta.json").read_text())
    assert meta["fields_per_line"] == 3 and len(meta["warnings"]) == 1
    assert main(["prepare", str(triples), "--out", str(tmp_path / "kg"), "--id-column", "2", "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert "warnings" not in meta and meta["read"]["id_column"] == 2
    stamped = tmp_path / "paths.tsv"  # user, time, page: column 1 is a new timestamp on every line
    stamped.write_text("".join(f"u{h}\t{1_000_000 + k}\tp{t}\n" for k, (h, t) in enumerate(zip(heads, tails))))
    for split in ("sets", "leave-one-out"):
        summary = run(tmp_path, f"t_{split}", str(stamped), split=split)
        warnings = json.loads((summary / "meta.json").read_text())["warnings"]
        assert len(warnings) == 1 and "100% of the test" in warnings[0] and "no method can predict them" in warnings[0]
    two = tmp_path / "links.tsv"  # two fields, ids seen in training: no row, no warning
    two.write_text("".join(f"e{h}\te{t}\n" for h, t in zip(heads, tails)))
    assert main(["prepare", str(two), "--out", str(tmp_path / "two"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "columns read" not in out and "warning" not in out


def test_swapped_columns_most_sets_of_one_id_are_named(tmp_path, capsys):
    """An item's groups read as its set (`article<TAB>category`, as Wikispeedia's categories.tsv): most
    sets hold one id; the summary warns and names the swap. Read the other way, no such warning."""
    rng = np.random.default_rng(0)
    groups = [f"g{k}" for k in range(8)]
    rows = [(f"a{i}", groups[int(g)]) for i in range(400) for g in rng.choice(8, 1 + (rng.random() < 0.1), False)]
    (tmp_path / "cats.tsv").write_text("".join(f"{a}\t{g}\n" for a, g in rows))
    assert main(["prepare", str(tmp_path / "cats.tsv"), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "warning: the training sets hold 1.1 ids on average (more than half hold one)" in out
    assert "is column 0 the set column? --set-column 1 --id-column 0 reads the sets the other way" in out
    assert main(["prepare", str(tmp_path / "cats.tsv"), "--out", str(tmp_path / "b"), "--set-column", "1",
                 "--id-column", "0", "--quiet"]) == 0
    assert "more than half hold one" not in capsys.readouterr().out
    df_warn = sb.prepare(sb.PrepareConfig([[1], [2], [3, 4]], str(tmp_path / "c")), progress=False)["warnings"]
    assert df_warn[0].endswith("to learn or evaluate from")  # no columns to name


def test_order_column_reads_as_if_sorted(tmp_path):
    rows = history(400, seed=3)
    shuffled = [rows[k] for k in np.random.default_rng(1).permutation(len(rows))]
    by_time = ReadConfig("csv", set_column="user", id_column="item", order_column="time")
    loo = dict(split="leave-one-out")
    ordered = run(tmp_path, "ordered", str(write_csv(tmp_path / "o.csv", rows)), read=by_time, **loo)
    shuffled_out = run(tmp_path, "shuffled", str(write_csv(tmp_path / "s.csv", shuffled)), read=by_time, **loo)
    assert_same_dataset(ordered, shuffled_out, same_source_record=True)
    plain = run(tmp_path, "plain", str(write_edges(tmp_path / "e.tsv", rows)), **loo)  # file order, no column
    for f in plain.iterdir():
        if f.name not in ("meta.json", ".superbloom.json"):  # the marker holds a run id
            assert f.read_bytes() == (ordered / f.name).read_bytes(), f.name
    named = ReadConfig(set_column="user", id_column="item", order_column="time")
    assert_same_dataset(ordered, run(tmp_path, "arrow", table(shuffled), read=named, **loo))
    pq.write_table(table(shuffled), tmp_path / "s.parquet")
    pq_read = ReadConfig("parquet", set_column="user", id_column="item", order_column="time")
    assert_same_dataset(ordered, run(tmp_path, "parquet", str(tmp_path / "s.parquet"), read=pq_read, **loo))
    # out of core (split sets): the same files as in memory
    mem = run(tmp_path, "mem", str(tmp_path / "s.parquet"), read=pq_read)
    assert_same_dataset(mem, run(tmp_path, "ooc", str(tmp_path / "s.parquet"), read=pq_read, memory_limit="64MB"),
                        same_source_record=True)
    assert_same_dataset(mem, run(tmp_path, "mem_ordered", str(write_edges(tmp_path / "e2.tsv", rows))))


def test_order_is_stable_and_timestamps_work(tmp_path):
    t = pa.table({"u": ["a"] * 4 + ["b"] * 3, "i": ["x", "y", "z", "w", "p", "q", "r"],
                  "t": pa.array([5, 2, 5, 9, 3, 1, 2], pa.int64()).cast(pa.timestamp("s"))})
    out = run(tmp_path, "d", t, read=ReadConfig(set_column="u", id_column="i", order_column="t"),
              split="leave-one-out")
    vocab = (out / "vocab.txt").read_text().split()
    sets = (out / "train.sets.txt").read_text().split()
    ids, offsets = np.load(out / "train.ids.npy"), np.load(out / "train.offsets.npy")
    train = {k: [vocab[i] for i in ids[offsets[n]:offsets[n + 1]]] for n, k in enumerate(sets)}
    # a: y(2) x(5) z(5, after x as read) w(9); b: q(1) r(2) p(3). Sets and ids are numbered as if the rows
    # had been sorted by time: b (q at 1) before a
    assert sets == ["b", "a"] and train == {"a": ["y", "x"], "b": ["q"]}
    assert vocab == ["q", "y", "x"]
    assert np.load(out / "valid.targets.npy").tolist() == [-1, -1]  # r, z: never in a training prefix
    assert (out / "test.sets.txt").read_text().split() == ["b", "a"]


def test_errors_name_the_column_and_what_was_expected(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "when": ["mon", "tue"]})
    with pytest.raises(InputError, match=r"DataFrame: no id column 'items'; the columns are \['user', 'item', 'when'\]"):
        run(tmp_path, "a", df, read=ReadConfig(set_column="user", id_column="items"))
    with pytest.raises(InputError, match="order column 'when' has type (large_)?string; expected integers, floats, dates"):
        run(tmp_path, "b", df, read=ReadConfig(set_column="user", id_column="item", order_column="when"))
    with pytest.raises(InputError, match="column 'item' has type struct"):
        run(tmp_path, "c", pa.table({"user": ["a"], "item": [{"k": 1}]}))
    with pytest.raises(InputError, match="a sets input has no columns"):
        run(tmp_path, "d", [["x", "y"]], read=ReadConfig(order_column="t"))
    with pytest.raises(InputError, match="the edges format has no column names"):
        run(tmp_path, "e", str(write_edges(tmp_path / "e.tsv", history(5))), read=ReadConfig(set_column="user"))
    with pytest.raises(InputError, match=r"DataFrame: row 2: null in column 'user', 'item' or 'when'"):
        run(tmp_path, "f", pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "when": [1.0, None]}),
            read=ReadConfig(set_column="user", id_column="item", order_column="when"))
    assert not any((tmp_path / n).exists() for n in "abcdef")


def test_cli_named_columns_glob_and_order(tmp_path, capsys):
    rows = history()
    shuffled = [rows[k] for k in np.random.default_rng(2).permutation(len(rows))]
    (tmp_path / "parts").mkdir()
    for k in range(3):
        pq.write_table(table(shuffled[k::3]), tmp_path / "parts" / f"p{k}.parquet")
    ref = run(tmp_path, "ref", str(write_edges(tmp_path / "e.tsv", rows)), split="leave-one-out")
    assert main(["prepare", str(tmp_path / "parts" / "*.parquet"), "--format", "parquet", "--set-column", "user",
                 "--id-column", "item", "--order-column", "time", "--split", "leave-one-out",
                 "--out", str(tmp_path / "cli")]) == 0
    for f in ref.iterdir():
        if f.name not in ("meta.json", ".superbloom.json"):  # the marker holds a run id
            assert f.read_bytes() == (tmp_path / "cli" / f.name).read_bytes(), f.name
    meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    assert meta["read"]["set_column"] == "user" and meta["read"]["order_column"] == "time"
    capsys.readouterr()
    assert main(["prepare", str(tmp_path / "parts"), "--format", "parquet", "--set-column", "usr",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "p0.parquet: no set column 'usr'; the columns are ['user', 'item', 'time']" in err
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = capsys.readouterr().out
    assert "--order-column NAME|N" in out and "csv" in out and "glob" in out


def test_id_separator_one_field_per_history_gives_the_edge_lists_dataset(tmp_path, capsys):
    """A history held in one field (`A;B;C`, as Wikispeedia's paths) read with id_separator: the same
    dataset as one link per line, from edges, csv and parquet, in order (leave-one-out)."""
    rows = history()
    per_user: dict = {}
    for u, i, _ in rows:
        per_user.setdefault(u, []).append(i.replace(",", "_").replace('"', "q"))
    rows = [(u, i) for u, items in per_user.items() for i in items]
    ref = run(tmp_path, "ref", str(write_edges(tmp_path / "e.tsv", rows)), split="leave-one-out")
    (tmp_path / "paths.tsv").write_text("".join(f"{u}\tx\t{';'.join(v)}\n" for u, v in per_user.items()))
    assert main(["prepare", str(tmp_path / "paths.tsv"), "--id-column", "2", "--id-separator", ";", "--split",
                 "leave-one-out", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    assert_same_dataset(ref, tmp_path / "cli", lines_differ=True)
    assert json.loads((tmp_path / "cli" / "meta.json").read_text())["read"]["id_separator"] == ";"
    assert "id_separator" not in json.loads((ref / "meta.json").read_text())["read"]  # older meta.json unchanged
    pq.write_table(pa.table({"user": list(per_user), "path": ["|".join(v) for v in per_user.values()]}),
                   tmp_path / "p.parquet")
    pq_out = run(tmp_path, "pq", str(tmp_path / "p.parquet"),
                 ReadConfig("parquet", set_column="user", id_column="path", id_separator="|"), split="leave-one-out")
    assert_same_dataset(ref, pq_out, lines_differ=True)
    # an empty id is named (file, set, field), or skipped and counted
    (tmp_path / "bad.tsv").write_text("u1\tx\tA;B\nu2\tx\tA;;C\nu3\tx\tB;\n")
    capsys.readouterr()
    assert main(["prepare", str(tmp_path / "bad.tsv"), "--id-column", "2", "--id-separator", "semicolon",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "bad.tsv: set 'u2': an empty id in 'A;;C' (ids separated by ';')" in capsys.readouterr().err
    stats = ReadStats()
    got = [(s, i) for c in read_links(tmp_path / "bad.tsv", ReadConfig(id_column=2, id_separator=";",
                                                                       skip_malformed=True), stats)
           for s, i in zip(c[0].to_pylist(), c[1].to_pylist())]
    assert got == [("u1", "A"), ("u1", "B"), ("u2", "A"), ("u2", "C"), ("u3", "B")]
    assert stats.malformed == 2 and stats.links == 5
    with pytest.raises(ValueError, match="id_separator must be one character"):
        ReadConfig(id_separator="\t")


def test_back_ids_are_resolved_to_the_id_they_return_to(tmp_path, capsys):
    """--back-id '<' (Wikispeedia's back click): a path is a stack, each back visits the id below again;
    a back with nothing below is dropped; both counted in meta.json and the summary."""
    (tmp_path / "p.tsv").write_text("u1\tx\tA;B;C;<;<;D\nu2\tx\t<;A;B\nu3\tx\tA;B;<;C;<;<;E\nu4\tx\tA;B;C\n")
    stats = ReadStats()
    got = [(s, i) for c in read_links(tmp_path / "p.tsv", ReadConfig(id_column=2, id_separator=";", back_id="<"),
                                      stats) for s, i in zip(c[0].to_pylist(), c[1].to_pylist())]
    by_set = {u: [i for s, i in got if s == u] for u in ("u1", "u2", "u3", "u4")}
    assert by_set == {"u1": list("ABCBAD"), "u2": list("AB"), "u3": list("ABACA") + ["E"], "u4": list("ABC")}
    # u3: A B, back to A, C, back to A, then nothing below A: that back is dropped, E follows A
    assert stats.backs == {"back_ids_resolved": 4, "back_ids_dropped": 2} and stats.links == len(got)
    assert main(["prepare", str(tmp_path / "p.tsv"), "--id-column", "2", "--id-separator", ";", "--back-id", "<",
                 "--split", "leave-one-out", "--out", str(tmp_path / "out")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "back ids" in x)
    assert line.split() == ["back", "ids", "'<'", "4", "replaced", "by", "the", "id", "they", "return", "to,", "2",
                            "dropped", "(nothing", "to", "return", "to)"]
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["read"]["back_id"] == "<" and (meta["back_ids_resolved"], meta["back_ids_dropped"]) == (4, 2)
    with pytest.raises(ValueError, match="needs id_separator"):
        ReadConfig(back_id="<")
    with pytest.raises(ValueError, match="without the id separator"):
        ReadConfig(id_separator=";", back_id="a;b")
