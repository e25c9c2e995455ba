"""Readers: every format, comments / CRLF / gzip, and errors that name file and line."""
import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from superbloom.data.readers import InputError, ReadConfig, ReadStats, read_links


def links(path, cfg):
    stats = ReadStats()
    out = []
    for s, i in read_links(path, cfg, stats):
        out += list(zip(s.to_pylist(), i.to_pylist()))
    return out, stats


def test_edges_comments_crlf_blank(tmp_path):
    p = tmp_path / "e.tsv"
    p.write_bytes(b"# header\r\n#\r\na\tx\r\n\r\na\ty\r\nb\tx\r\n")
    got, stats = links(p, ReadConfig("edges"))
    assert got == [("a", "x"), ("a", "y"), ("b", "x")]
    assert (stats.comments, stats.blank, stats.links, stats.lines) == (2, 1, 3, 6)


def test_edges_gzip_and_columns(tmp_path):
    p = tmp_path / "kg.txt.gz"
    with gzip.open(p, "wt") as f:
        f.write("h1\trel\tt1\nh1\trel2\tt2\n")
    got, _ = links(p, ReadConfig("edges", set_column=0, id_column=2))
    assert got == [("h1", "t1"), ("h1", "t2")]
    got, _ = links(p, ReadConfig("edges", set_column=0, id_column=2, undirected=True))
    assert sorted(got) == sorted([("h1", "t1"), ("h1", "t2"), ("t1", "h1"), ("t2", "h1")])


def test_edges_malformed_names_file_and_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("# c\na\tx\nbroken line without tab\nb\ty\n")
    with pytest.raises(InputError, match=r"bad\.tsv:3: expected 2 tab-separated fields, got 1"):
        links(p, ReadConfig("edges"))
    got, stats = links(p, ReadConfig("edges", skip_malformed=True))
    assert got == [("a", "x"), ("b", "y")]
    assert stats.malformed == 1 and "bad.tsv:3" in stats.examples[0]


def test_edges_empty_field(tmp_path):
    p = tmp_path / "e.tsv"
    p.write_text("# a\tcomment with a tab\na\tx\n\n#\n\ty\n")
    with pytest.raises(InputError, match=r"e\.tsv:5: empty set or id field"):
        links(p, ReadConfig("edges"))
    got, stats = links(p, ReadConfig("edges", skip_malformed=True))
    assert got == [("a", "x")] and (stats.comments, stats.blank, stats.malformed) == (2, 1, 1)


def test_invalid_utf8(tmp_path):
    p = tmp_path / "e.tsv"
    p.write_bytes(b"a\tx\n\xff\xfe\ty\n")
    with pytest.raises(InputError, match="UTF-8"):
        links(p, ReadConfig("edges"))


def test_lines_format(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("u1 1 2 3\nu2 4\n\n   \nu3\n")
    got, stats = links(p, ReadConfig("lines"))
    assert got == [("u1", "1"), ("u1", "2"), ("u1", "3"), ("u2", "4")]
    assert stats.blank == 2


def test_jsonl(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"set": "a", "ids": ["x", "y"]}\n{"set": 7, "ids": [1, 2]}\n')
    got, _ = links(p, ReadConfig("jsonl"))
    assert got == [("a", "x"), ("a", "y"), ("7", "1"), ("7", "2")]


@pytest.mark.parametrize("line,why", [
    ('{"set": "a", "ids": ["x"', "invalid JSON"),
    ('["a", ["x"]]', "expected a JSON object"),
    ('{"set": "a"}', "expected keys 'set' and 'ids'"),
    ('{"set": "a", "ids": "x"}', "field 'ids' must be a list"),
    ('{"set": "a", "ids": [["x"]]}', "field 'ids' must hold strings or numbers"),
])
def test_jsonl_errors(tmp_path, line, why):
    p = tmp_path / "s.jsonl"
    p.write_text('{"set": "ok", "ids": ["x"]}\n' + line + "\n")
    with pytest.raises(InputError, match=rf"s\.jsonl:2: {why}"):
        links(p, ReadConfig("jsonl"))
    got, stats = links(p, ReadConfig("jsonl", skip_malformed=True))
    assert got == [("ok", "x")] and stats.malformed == 1


def test_json_document_as_an_object_or_an_array_of_sets(tmp_path):
    """The json format (one document: S3-Rec's item2attributes.json is an object {item: [attribute ids]})
    gives the same links as the same sets in jsonl; an array holds set objects or id lists."""
    (tmp_path / "o.json").write_text('{"4": [1, 2, 3], "83": [4, 5],\n "x": ["a"]}')
    got, stats = links(tmp_path / "o.json", ReadConfig("json"))
    assert got == [("4", "1"), ("4", "2"), ("4", "3"), ("83", "4"), ("83", "5"), ("x", "a")] and stats.lines == 3
    (tmp_path / "o.jsonl").write_text('{"set": 4, "ids": [1, 2, 3]}\n{"set": 83, "ids": [4, 5]}\n{"set": "x", "ids": ["a"]}\n')
    assert links(tmp_path / "o.jsonl", ReadConfig("jsonl"))[0] == got
    with gzip.open(tmp_path / "a.json.gz", "wt") as f:
        f.write('[{"set": "s", "ids": ["x", "y"]}, ["z", 7]]')
    assert links(tmp_path / "a.json.gz", ReadConfig("json"))[0] == [("s", "x"), ("s", "y"), ("1", "z"), ("1", "7")]


@pytest.mark.parametrize("doc,why", [
    ('{"a": ["x"],\n "b": ["y"', r"o\.json:2: invalid JSON"),  # the line of the syntax error
    ('"a"', r"o\.json: expected a JSON object \{set: \[ids\], ...\} or an array of sets, got a JSON str"),
])
def test_json_document_errors(tmp_path, doc, why):
    (tmp_path / "o.json").write_text(doc)
    with pytest.raises(InputError, match=why):
        links(tmp_path / "o.json", ReadConfig("json", skip_malformed=True))


@pytest.mark.parametrize("doc,why", [
    ('{"ok": ["x"], "b": "y"}', r"set 'b': expected a collection of ids .*got str"),
    ('{"ok": ["x"], "b": {"y": 1}}', r"set 'b': expected a collection of ids .*got dict"),
    ('{"ok": ["x"], "b": [["y"]]}', r"set 'b': ids must be strings, numbers"),
    ('[{"set": "ok", "ids": ["x"]}, {"name": "b"}]', r"element 1: expected a list of ids or an object with keys "
                                                        r"'set' and 'ids', got keys \['name'\]"),
    ('[["x"], 3]', r"element 1: expected .* got a JSON int"),
])
def test_json_malformed_sets_are_named_or_skipped_and_counted(tmp_path, doc, why):
    p = tmp_path / "o.json"
    p.write_text(doc)
    with pytest.raises(InputError, match=rf"o\.json: {why}.*--skip-malformed"):
        links(p, ReadConfig("json"))
    got, stats = links(p, ReadConfig("json", skip_malformed=True))
    assert [i for _, i in got] == ["x"] and stats.malformed == 1 and "o.json: " in stats.examples[0]


def test_parquet_rows_and_lists(tmp_path):
    p = tmp_path / "l.parquet"
    pq.write_table(pa.table({"page": ["a", "a", "b"], "link": [1, 2, 3]}), p)
    got, _ = links(p, ReadConfig("parquet"))
    assert got == [("a", "1"), ("a", "2"), ("b", "3")]
    q = tmp_path / "s.parquet"
    pq.write_table(pa.table({"set": ["a", "b"], "ids": [["x", "y"], ["z"]]}), q)
    got, _ = links(q, ReadConfig("parquet"))
    assert got == [("a", "x"), ("a", "y"), ("b", "z")]


def test_parquet_nulls(tmp_path):
    p = tmp_path / "l.parquet"
    pq.write_table(pa.table({"page": ["a", None], "link": ["x", "y"]}), p)
    with pytest.raises(InputError, match="row 2: null"):
        links(p, ReadConfig("parquet"))


def test_missing_file_and_not_parquet(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        links(tmp_path / "nope.tsv", ReadConfig("edges"))
    p = tmp_path / "x.parquet"
    p.write_text("not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        links(p, ReadConfig("parquet"))


def test_line_numbers_across_blocks(tmp_path, monkeypatch):
    from superbloom.data import readers as readers

    monkeypatch.setattr(readers, "BLOCK_BYTES", 64)  # many small Arrow blocks
    p = tmp_path / "e.tsv"
    p.write_text("".join(f"s{i}\tid{i}\n" for i in range(200)) + "oops\n")
    with pytest.raises(InputError, match=r"e\.tsv:201:"):
        links(p, ReadConfig("edges"))


@pytest.mark.parametrize("piece", [1, 2, 3, 5, 64])
def test_text_check_across_pieces(tmp_path, monkeypatch, piece):
    """Multi-byte characters and long lines split across the pieces read: valid text passes, and the
    first bad byte is named by line and byte of the line, whatever the piece size."""
    from superbloom.data import textcheck

    monkeypatch.setattr(textcheck, "PIECE_BYTES", piece)
    text = "".join(f"Åland_{i}\t東京€{'x' * (i % 7)}\n" for i in range(40))
    p = tmp_path / "e.tsv"
    p.write_text(text, encoding="utf-8")
    got, _ = links(p, ReadConfig("edges"))
    assert len(got) == 40 and got[3] == ("Åland_3", "東京€xxx")
    lines = text.encode().split(b"\n")
    lines[25] = lines[25][:9] + b"\xe6\x9d" + lines[25][9:]  # a cut 3-byte character inside line 26
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=r"e\.tsv:26: not a UTF-8 text file in the edges format \(invalid UTF-8 "
                                         r"byte 0xe6 at byte 10 of the line"):
        links(p, ReadConfig("edges"))


def test_sets_with_no_ids_are_counted_not_silently_lost(tmp_path):
    """A record (line, row, entry) that names a set and no ids adds nothing; each format counts it
    (ReadStats.no_ids), and prepare's summary and meta.json say how many, only where there were any."""
    import numpy as np
    import scipy.sparse as spm

    from superbloom.data.inputs import read_source
    from superbloom.data.prepare import format_summary
    (tmp_path / "l.txt").write_text("a x y\nb\nc z\n")
    (tmp_path / "j.jsonl").write_text('{"set": "a", "ids": ["x"]}\n{"set": "b", "ids": []}\n')
    (tmp_path / "d.json").write_text('{"a": ["x"], "b": [], "c": []}')
    pq.write_table(pa.table({"s": ["a", "b", "c"], "i": pa.array([["x"], [], None], pa.list_(pa.string()))}),
                   tmp_path / "p.parquet")
    for name, fmt, want in [("l.txt", "lines", 1), ("j.jsonl", "jsonl", 1), ("d.json", "json", 2),
                            ("p.parquet", "parquet", 2)]:
        got, stats = links(tmp_path / name, ReadConfig(fmt))
        assert got and stats.no_ids == want and stats.shape() == {"records_without_ids": want}, name
    stats = ReadStats()
    matrix = spm.csr_matrix(np.array([[1, 0], [0, 0], [0, 1], [0, 0]], np.float32))
    assert sum(len(chunk[0]) for chunk in read_source(matrix, ReadConfig(), stats)) == 2 and stats.no_ids == 2
    stats = ReadStats()
    assert list(read_source([["x", "y"], []], ReadConfig(), stats)) and stats.no_ids == 1
    _, plain = links(tmp_path / "l.txt", ReadConfig("edges", delimiter=" ", skip_malformed=True))
    assert "records_without_ids" not in plain.shape() and plain.malformed == 2  # "b" and "c z": malformed lines
    summary = {"sets": 2, "ids": 3, "links": 3, "train": {"sets": 2, "links": 3, "mean_set_size": 1.5},
               "test": {"sets": 0, "links": 0}, "test_links_unseen_in_train": 0, "test_ids_unseen_in_train": 0,
               "duplicates_removed": 0, "lines": 3, "comment_lines": 0, "blank_lines": 0, "malformed_skipped": 0,
               "seconds": 0.1}
    assert "no ids" not in format_summary(summary)
    row = [line.split() for line in format_summary(dict(summary, records_without_ids=1)).splitlines() if "no ids" in line]
    assert row == [["records", "with", "a", "set", "key,", "no", "ids", "1"]]
