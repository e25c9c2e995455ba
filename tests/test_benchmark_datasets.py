"""benchmarks/datasets.py: one registry of the shared datasets, one name per file and reading, and the older
names each family of benchmark scripts wrote into its committed results."""
from __future__ import annotations

import pytest

from benchmarks import datasets as reg
from tests.conftest import shared_file

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def test_one_name_per_file_and_every_entry_complete():
    paths = [(s.path, s.corpora, s.read) for s in reg.DATASETS.values()]
    assert len(paths) == len(set(paths))  # one name per file and way of reading it (or list of corpora made into sets)
    for name, s in reg.DATASETS.items():
        assert s.kind in reg.KINDS and s.about and s.origin, name
        assert (s.read is None) == (s.kind in ("text", "archive") or bool(s.corpora)), name
        assert not s.corpora or (s.kind == "sets" and s.path in s.corpora), name


def test_aliases_name_registry_entries_and_beauty_differs_by_family():
    for family, aliases in reg.ALIASES.items():
        for old, new in aliases.items():
            assert old not in reg.DATASETS and new in reg.DATASETS, (family, old)
    assert reg.resolve("beauty", "paper") == "beauty-bert4rec"
    assert reg.resolve("beauty", "quality") == reg.resolve("beauty", "sequence") == "beauty-s3rec"
    assert reg.resolve("beauty-s3rec", "paper") == "beauty-s3rec"  # a registry name means itself everywhere
    with pytest.raises(SystemExit, match="unknown dataset 'beauty'"):
        reg.resolve("beauty")  # ambiguous outside a family
    with pytest.raises(SystemExit, match="unknown dataset 'nope'"):
        reg.resolve("nope", "quality")


def test_prepare_reads_a_shared_file_and_refuses_what_it_cannot(tmp_path, monkeypatch):
    root = shared_file("s3rec", "LastFM.txt").parents[1]
    monkeypatch.setattr(reg, "DATA_ROOT", root)
    data = reg.prepare("lastfm", tmp_path / "data" / "lastfm")
    assert data.meta["ids"] == data.n_ids > 3000 and data.split == "sets"
    seq = reg.prepare("lastfm", tmp_path / "data" / "lastfm-loo", split="leave-one-out")
    assert seq.split == "leave-one-out" and len(seq.test) == 1090
    with pytest.raises(SystemExit, match="not sequences"):
        reg.prepare("wikispeedia", tmp_path / "data" / "w", split="leave-one-out")
    with pytest.raises(SystemExit, match="cannot read"):
        reg.prepare("brown", tmp_path / "data" / "b")


def test_prepare_makes_sets_of_text_paragraphs(tmp_path, monkeypatch):
    """An entry with corpora is prepared by prepare-text --as-sets (here on a tiny corpus)."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("Miles Davis played jazz.\n\nJohn Coltrane played jazz.\n")
    (tmp_path / "c" / "b.txt").write_text("Miles Davis and John Coltrane.\n")
    monkeypatch.setattr(reg, "DATA_ROOT", tmp_path)
    monkeypatch.setitem(reg.DATASETS, "text-sets", reg.Source("c", "sets", None, "tiny", "test", corpora=("c",),
                                                              vocab_size=50))
    data = reg.prepare("text-sets", tmp_path / "data" / "ts")
    assert data.split == "sets" and data.meta["format"] == "text-sets" and data.meta["ngrams"]["requested"] == 50
    assert len(data.train) + len(data.test) == 3
    with pytest.raises(SystemExit, match="no leave-one-out split"):
        reg.prepare("text-sets", tmp_path / "data" / "x", split="leave-one-out")
