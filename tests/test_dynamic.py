"""Dynamic word embeddings (superbloom/dynamic.py): trit encoding, projection, open vocabulary."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.model.dynamic import N_TRITS, DynamicEmbedding, TritVocab, trits


def reference_trits(s: str) -> list[int]:
    """Independent reference: the hex digest as a 128-character binary string, pairs merged in Python."""
    bits = format(int(hashlib.md5(s.encode("utf-8")).hexdigest(), 16), "0128b")
    rule = {"11": 1, "00": 0, "01": -1, "10": -1}
    return [rule[bits[i:i + 2]] for i in range(0, 128, 2)]


def test_known_string_by_hand():
    # md5("hello") = 5d41402a bc4b2a76 b9719d91 1017c592
    assert hashlib.md5(b"hello").hexdigest() == "5d41402abc4b2a76b9719d911017c592"
    t = trits(["hello"])
    assert t.shape == (1, 64) and t.dtype == np.int8
    # 0x5d = 01 01 11 01 -> -1 -1 1 -1;  0x41 = 01 00 00 01 -> -1 0 0 -1
    # 0x40 = 01 00 00 00 -> -1 0 0 0;    0x2a = 00 10 10 10 -> 0 -1 -1 -1
    assert t[0, :16].tolist() == [-1, -1, 1, -1, -1, 0, 0, -1, -1, 0, 0, 0, 0, -1, -1, -1]
    # last byte 0x92 = 10 01 00 10 -> -1 -1 0 -1
    assert t[0, -4:].tolist() == [-1, -1, 0, -1]
    assert t[0].tolist() == reference_trits("hello")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=8))
def test_trits_match_reference(strings):
    t = trits(strings)
    assert t.shape == (len(strings), N_TRITS)
    assert t.tolist() == [reference_trits(s) for s in strings]


def test_trits_rejects_a_bare_string():
    with pytest.raises(TypeError, match="sequence of strings"):
        trits("hello")


def test_trit_frequencies():
    t = trits([f"word{i}" for i in range(4000)])
    freq = {v: float((t == v).mean()) for v in (-1, 0, 1)}
    assert abs(freq[0] - 0.25) < 0.01 and abs(freq[1] - 0.25) < 0.01 and abs(freq[-1] - 0.5) < 0.01


def test_projection_shape_parameters_and_determinism():
    torch.manual_seed(0)
    emb = DynamicEmbedding(32)
    assert sum(p.numel() for p in emb.parameters()) == 64 * 32
    assert sum(p.numel() for p in DynamicEmbedding(32, bias=True).parameters()) == 64 * 32 + 32
    a = emb.embed_strings(["cat", "dog", "cat"])
    assert a.shape == (3, 32)
    assert torch.equal(a[0], a[2])
    assert torch.equal(a, emb.embed_strings(["cat", "dog", "cat"]))
    # a (B, T, 64) batch of trits -> (B, T, d)
    x = torch.from_numpy(trits(["a", "b", "c", "d", "e", "f"])).float().view(2, 3, 64)
    assert emb(x).shape == (2, 3, 32)
    assert torch.allclose(emb(x)[1, 2], emb.embed_strings(["f"])[0], atol=1e-6)


def test_ids_through_the_vocabulary_buffer_and_oov():
    torch.manual_seed(0)
    vocab = TritVocab(["paris", "london", "berlin"])
    emb = DynamicEmbedding(16, vocab)
    ids = torch.tensor([[2, 0], [1, 1]])
    out = emb(ids)  # (2, 2, 16)
    assert out.shape == (2, 2, 16)
    assert torch.allclose(out[0, 0], emb.embed_strings(["berlin"])[0], atol=1e-6)
    assert "table" not in emb.state_dict()  # rebuilt from the vocabulary, never saved
    # an out-of-vocabulary string embeds, and after extending the vocabulary it has an id
    oov = emb.embed_strings(["reykjavik"])[0]
    assert torch.isfinite(oov).all() and oov.abs().sum() > 0
    emb.set_vocab(vocab.extend(["reykjavik"]))
    assert torch.allclose(emb(torch.tensor([3]))[0], oov, atol=1e-6)
    assert torch.allclose(emb(ids), out)  # old ids unchanged


def test_different_strings_differ():
    torch.manual_seed(0)
    words = [f"w{i}" for i in range(2000)] + ["Cat", "cat", "cat ", "caT"]
    t = trits(words)
    assert len(np.unique(t, axis=0)) == len(words)
    e = DynamicEmbedding(32).embed_strings(words)
    assert len(torch.unique(e, dim=0)) == len(words)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no vocabulary"):
        DynamicEmbedding(8)(torch.tensor([0]))
    with pytest.raises(ValueError, match=r"\(\.\.\., 64\)"):
        DynamicEmbedding(8)(torch.zeros(3, 10))


def test_gradient_reaches_the_projection():
    emb = DynamicEmbedding(8, TritVocab(["x", "y"]), bias=True)
    emb(torch.tensor([0, 1])).sum().backward()
    assert emb.proj.weight.grad is not None and emb.proj.weight.grad.abs().sum() > 0
