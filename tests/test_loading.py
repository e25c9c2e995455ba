"""storage/loading.py's readers of what we load: each broken file is one LoadError naming the file (and
the line, where there is one), and a good file reads as before."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from superbloom.data.dataset import Dataset
from superbloom.data.labels import read_label_pairs
from superbloom.data.vocab import Vocab
from superbloom.storage.loading import LoadError, load_array, read_json, read_text, text_lines


def test_text_lines_reads_as_open_does_and_names_the_first_line_that_is_not_utf8(tmp_path):
    good = tmp_path / "good.txt"
    good.write_bytes("a\tb\r\nc\td\né\n".encode())
    with open(good, encoding="utf-8") as f:
        assert list(text_lines(good, "x")) == list(f)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a\tb\nc\td\nx\xff\n")
    with pytest.raises(LoadError, match=rf"^{bad}:3: not UTF-8 text \(byte 0xff"):
        list(text_lines(bad, "a labels file"))
    with pytest.raises(LoadError, match=rf"^{bad}:3: not UTF-8 text .*expected the texts$"):
        read_text(bad, "the texts")
    with pytest.raises(LoadError, match=rf"^{bad}:3: not UTF-8"):
        read_label_pairs(bad)
    with pytest.raises(LoadError, match=rf"^{tmp_path / 'none'}: missing; expected a labels file"):
        read_label_pairs(tmp_path / "none")


def test_read_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text('{\n  "ids": 3,\n  "sets": \n')
    with pytest.raises(LoadError, match=rf"^{path}, line 4: not valid JSON .*expected the summary$"):
        read_json(path, "the summary")
    path.write_text('{"ids": 3}')
    assert read_json(path, "the summary") == {"ids": 3}


@pytest.mark.parametrize("mmap", [False, True])
def test_load_array_refuses_a_truncated_file(tmp_path, mmap):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(1000, dtype=np.int32))
    assert np.array_equal(load_array(path, "ids", mmap=mmap), np.arange(1000))
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(LoadError, match=rf"^{path}: truncated or not a NumPy .npy file .*expected ids$"):
        load_array(path, "ids", mmap=mmap)


def test_a_dataset_whose_files_disagree_is_refused_naming_the_file(wiki_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(wiki_data.path, data)
    offsets = np.load(data / "test.offsets.npy")
    np.save(data / "test.offsets.npy", offsets[:-1])  # one set fewer: the ids file holds more ids
    with pytest.raises(LoadError, match=rf"^{data / 'test.ids.npy'}: holds [\d,]+ ids, but test.offsets.npy ends at"):
        Dataset(data)
    np.save(data / "test.offsets.npy", offsets)
    assert len(Dataset(data).test) == len(offsets) - 1
    (data / "vocab.txt").write_text("\n".join(Dataset(data).vocab.strings[:-1]) + "\n")  # one line lost
    with pytest.raises(LoadError, match=rf"^{data / 'vocab.txt'}: [\d,]+ ids, but counts.npy has [\d,]+ counts"):
        Vocab.load(data)
