"""The memory-mapped vocabulary (mapped_vocab.py) that serve's worker processes share: the same
answers as the in-memory list and dict, its cache files built once and rebuilt when stale."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.data import mapped_vocab as mv
from superbloom.data.mapped_vocab import MappedStrings, SortedLookup
from superbloom.serving.autocomplete import PrefixIndex
from superbloom.data.vocab import Vocab

STRINGS = ["Copenhagen", "%C3%85land", "Miles_Davis", "New York", "zebra", "Äpfel", "a", "ab", "日本", "😀x", "b%20c"]


def saved(tmp_path, strings=STRINGS):
    Vocab(strings, np.arange(len(strings))[::-1].copy()).save(tmp_path)
    return tmp_path


def test_mapped_vocab_answers_as_the_list_and_dict_do(tmp_path):
    d = saved(tmp_path)
    plain, mapped = Vocab.load(d), Vocab.load(d, mapped=True)
    assert isinstance(mapped.strings, MappedStrings) and isinstance(mapped.index, SortedLookup)
    assert mapped.strings == plain.strings and list(mapped.strings) == STRINGS and len(mapped) == len(STRINGS)
    assert mapped.strings[3] == "New York" and mapped.strings[1:3] == STRINGS[1:3]
    assert np.array_equal(mapped.counts, plain.counts)
    for key in STRINGS + ["Åland", "Miles Davis", "New_York", "b c", "nope", "", "Copenhagen "]:
        assert mapped.get(key) == plain.get(key), key
    assert mapped.get("Åland") == 1 and mapped.get("nope") is None and "zebra" in mapped.index
    assert mapped.lookup(["Miles Davis", "x"])[1] == ["x"] and mapped.display(1) == "Åland"
    assert (d / mv.STRINGS_FILE).exists() and (d / mv.SORTED_FILE).exists()


def test_cache_files_are_reused_and_rebuilt_when_the_vocabulary_is_newer(tmp_path):
    d = saved(tmp_path)
    Vocab.load(d, mapped=True)
    built = (d / mv.STRINGS_FILE).stat().st_mtime_ns
    Vocab.load(d, mapped=True)
    assert (d / mv.STRINGS_FILE).stat().st_mtime_ns == built  # reused
    saved(d, STRINGS + ["new_id"])
    later = (d / mv.STRINGS_FILE).stat().st_mtime + 5
    os.utime(d / "vocab.txt", (later, later))
    again = Vocab.load(d, mapped=True)
    assert list(again.strings) == STRINGS + ["new_id"] and again.get("new_id") == len(STRINGS)


def test_a_directory_that_cannot_be_written_gets_the_in_memory_vocabulary(tmp_path, monkeypatch):
    d = saved(tmp_path)
    monkeypatch.setattr(mv.os, "access", lambda *a: False)
    v = Vocab.load(d, mapped=True)
    assert isinstance(v.strings, list) and v.get("Miles Davis") == 2 and not (d / mv.STRINGS_FILE).exists()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=40, unique=True), st.text(max_size=6))
def test_sorted_lookup_is_the_dict_for_any_unicode(tmp_path_factory, strings, probe):
    strings = [s for s in strings if "\n" not in s and "\r" not in s and not any(0xD800 <= ord(c) < 0xE000 for c in s)]
    if not strings:
        return
    d = saved(tmp_path_factory.mktemp("v"), strings)
    mapped = Vocab.load(d, mapped=True)
    index = {s: i for i, s in enumerate(strings)}
    for key in strings + [probe]:  # Arrow's byte order is Python's code point order
        assert mapped.index.get(key) == index.get(key)


def test_autocomplete_over_mapped_tables_matches_the_in_memory_one(tmp_path):
    d = saved(tmp_path)
    plain, mapped = PrefixIndex(Vocab.load(d)), PrefixIndex(Vocab.load(d, mapped=True))
    for prefix in ["", "a", "miles d", "new", "åla", "日", "z", "q"]:
        assert mapped.search(prefix, 5).tolist() == plain.search(prefix, 5).tolist(), prefix
    assert (d / "vocab.prefix_keys.arrow").exists()


def test_a_predictor_with_a_mapped_vocabulary_predicts_the_same(wiki_data, tmp_path, monkeypatch):
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(tmp_path / "m"),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         loop=sb.LoopConfig(steps=3, batch_size=16, eval_every=0))
    sb.train(cfg, progress=False)
    plain = sb.load(tmp_path / "m")
    assert isinstance(plain.vocab.strings, list)  # 4K ids: below the size that is mapped
    monkeypatch.setattr(mv, "MAPPED_MIN_IDS", 0)
    monkeypatch.setattr("superbloom.inference.predictor.MAPPED_MIN_IDS", 0)
    mapped = sb.load(tmp_path / "m")
    assert isinstance(mapped.vocab.strings, MappedStrings)
    a, b = plain.predict(["Copenhagen", "Aarhus"], 10), mapped.predict(["Copenhagen", "Aarhus"], 10)
    assert a.items == b.items and a.context == b.context
    from superbloom.evaluation.evaluate import EvalConfig, evaluate
    r = evaluate(mapped, wiki_data, EvalConfig(max_sets=20, baselines=()), progress=False)  # same vocabulary
    assert r.counts["examples"] > 0
