"""prepare: split, train-only vocabulary, dedupe, unseen test ids, CSR layout."""
import json

import numpy as np
import pytest

import superbloom as sb
from superbloom.data.readers import InputError


def write_edges(path, sets):
    path.write_text("".join(f"{s}\t{i}\n" for s, ids in sets.items() for i in ids))


def test_prepare_roundtrip(tmp_path):
    sets = {f"s{k}": [f"id{(k * 7 + j) % 40}" for j in range(3 + k % 5)] for k in range(60)}
    sets["s0"] = ["id0", "id1", "id0", "id2"]  # a repeated id within a set
    write_edges(tmp_path / "in.tsv", sets)
    summary = sb.prepare(sb.PrepareConfig(str(tmp_path / "in.tsv"), str(tmp_path / "d"), test_fraction=0.2),
                         progress=False)
    data = sb.Dataset(tmp_path / "d")
    assert summary["duplicates_removed"] == 1
    assert len(data.train) + len(data.test) == 60 and len(data.test) == 12
    names = data.set_names("train") + data.set_names("test")
    assert sorted(names) == sorted(sets)
    vocab = data.vocab
    # training ids come back exactly (repeats removed, file order kept)
    for split, sa in (("train", data.train), ("test", data.test)):
        for row, name in enumerate(data.set_names(split)):
            want = list(dict.fromkeys(sets[name]))
            got = [vocab.strings[i] if i >= 0 else None for i in sa[row]]
            assert [g for g in got if g is not None] == [w for w in want if w in vocab.index]
    # vocabulary from the training sets only, most frequent first
    counts = {}
    for name in data.set_names("train"):
        for i in dict.fromkeys(sets[name]):
            counts[i] = counts.get(i, 0) + 1
    assert set(vocab.strings) == set(counts)
    assert list(data.counts) == sorted(data.counts, reverse=True)
    assert all(counts[s] == c for s, c in zip(vocab.strings, data.counts))
    assert json.loads((tmp_path / "d" / "meta.json").read_text())["ids"] == len(vocab)


def test_split_is_seeded(tmp_path):
    write_edges(tmp_path / "in.tsv", {f"s{k}": [f"i{k % 9}", f"i{k % 7}"] for k in range(100)})
    names = []
    for seed, out in ((1, "a"), (1, "b"), (2, "c")):
        sb.prepare(sb.PrepareConfig(str(tmp_path / "in.tsv"), str(tmp_path / out), seed=seed), progress=False)
        names.append(sb.Dataset(tmp_path / out).set_names("test"))
    assert names[0] == names[1] and names[0] != names[2]


def test_unseen_test_ids_are_counted(tmp_path):
    write_edges(tmp_path / "in.tsv", {f"s{k}": [f"only{k}", "common"] for k in range(20)})
    s = sb.prepare(sb.PrepareConfig(str(tmp_path / "in.tsv"), str(tmp_path / "d"), test_fraction=0.25),
                   progress=False)
    data = sb.Dataset(tmp_path / "d")
    assert s["test_links_unseen_in_train"] == 5 == (np.asarray(data.test.ids) < 0).sum()
    assert s["test_ids_unseen_in_train"] == 5


def test_interleaved_sets_are_grouped(tmp_path):
    (tmp_path / "in.tsv").write_text("a\t1\nb\t2\na\t3\nb\t4\n")
    sb.prepare(sb.PrepareConfig(str(tmp_path / "in.tsv"), str(tmp_path / "d"), test_fraction=0.0), progress=False)
    data = sb.Dataset(tmp_path / "d")
    got = {n: data.vocab.decode(data.train[r]) for r, n in enumerate(data.set_names("train"))}
    assert got == {"a": ["1", "3"], "b": ["2", "4"]}


def test_empty_input_is_an_error(tmp_path):
    (tmp_path / "in.tsv").write_text("# only a comment\n")
    with pytest.raises(InputError, match="no links found"):
        sb.prepare(sb.PrepareConfig(str(tmp_path / "in.tsv"), str(tmp_path / "d")), progress=False)


def test_embedded_wikispeedia(wiki_data):
    m = wiki_data.meta
    assert m["links"] == 119_882 and m["comment_lines"] == 11
    assert m["train"]["sets"] + m["test"]["sets"] == m["sets"]
    assert wiki_data.vocab.strings[0] == "United_States"


def test_fb15k237_triples_crlf_gzip(tmp_path):
    """A real knowledge graph from ../shared/data: gzipped, CRLF, head<TAB>relation<TAB>tail."""
    from conftest import shared_file

    path = shared_file("fb15k-237", "train.txt.gz")
    s = sb.prepare(sb.PrepareConfig(str(path), str(tmp_path / "d"), sb.ReadConfig("edges", id_column=2,
                                                                                   undirected=True)),
                   progress=False)
    assert s["lines"] == 272_115 and s["malformed_skipped"] == 0
    assert s["links"] + s["duplicates_removed"] == 2 * 272_115  # both directions, repeats counted
    data = sb.Dataset(tmp_path / "d")
    assert all(k.startswith("/m/") for k in data.vocab.strings[:100])  # no stray '\r' in keys
    assert not any(k.endswith("\r") for k in data.vocab.strings)
