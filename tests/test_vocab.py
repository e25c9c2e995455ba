"""Vocab lookups accept what people see and type: stored, URL-decoded, spaces for underscores."""
import numpy as np
import pytest

from superbloom.data import vocab as vocab_module
from superbloom.data.vocab import Vocab

STRINGS = ["United_States", "Miles_Davis", "%C3%85land_Islands", "New York", "A_B", "A B", "C%2B%2B",
           "%C3%85land Islands"]


@pytest.fixture()
def vocab():
    return Vocab(STRINGS, np.arange(len(STRINGS))[::-1])


@pytest.mark.parametrize("key,want", [
    ("Miles_Davis", 1), ("Miles Davis", 1), ("Miles%20Davis", 1), ("Miles%5FDavis", 1),
    ("%C3%85land_Islands", 2), ("Åland_Islands", 2), ("%C3%85land Islands", 7),
    ("Åland Islands", 7),  # the display form of id 7 exactly; of id 2 only with spaces for underscores
    ("New York", 3), ("New_York", 3), ("New%20York", 3),
    ("A_B", 4), ("A B", 5),  # an exact stored id always wins
    ("C++", 6), ("C%2B%2B", 6),
    ("miles davis", None), ("Miles  Davis", None), ("Nope", None), ("", None),
])
def test_get_accepts_display_forms(vocab, key, want):
    assert vocab.get(key) == want


def test_clash_goes_to_the_most_frequent(vocab):
    # "%C3%85land_Islands" (id 2) and "%C3%85land Islands" (id 7) share the canonical form "Åland_Islands";
    # the smaller (more frequent) id wins it
    assert vocab.aliases["Åland_Islands"] == 2 and vocab.aliases["Åland Islands"] == 7


def test_lookup_keeps_order_and_reports_unknown(vocab):
    known, unknown = vocab.lookup(["Miles Davis", "nope", "New_York", "Åland_Islands"])
    assert known.tolist() == [1, 3, 2] and unknown == ["nope"]


def test_aliases_only_touch_ids_with_percent_or_space(monkeypatch):
    """The alias table is built from an Arrow filter, not a Python pass decoding every id."""
    calls = []
    monkeypatch.setattr(vocab_module, "unquote", lambda s: calls.append(s) or s)
    strings = [f"id_{i}" for i in range(10_000)] + ["a%20b", "c d"]
    v = Vocab(strings, np.ones(len(strings), np.int64))
    assert v.aliases == {"c_d": 10_001}  # the patched unquote leaves "a%20b" alone
    assert sorted(calls) == ["a%20b", "a%20b", "c d"]  # display + canonical of each special id only


def test_predictor_takes_the_page_form(tiny_predictor):
    """What the web page shows ("Miles Davis", "Washington, D.C.") predicts like the stored ids."""
    shown = tiny_predictor.predict(["Miles Davis", "Washington, D.C."], k=5)
    stored = tiny_predictor.predict(["Miles_Davis", "Washington%2C_D.C."], k=5)
    assert shown.context == stored.context == ["Miles_Davis", "Washington%2C_D.C."] and not shown.unknown
    assert shown.items == stored.items
