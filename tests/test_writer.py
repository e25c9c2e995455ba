"""The one data writer (writer.py): prepare, out-of-core prepare and prepare-text write the same bytes
as before it existed (digests recorded from the code before the writer, commit cdd6d7c), and its
pieces on hand-made inputs."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from superbloom.storage.guarded import MARKER, OutputError

import superbloom as sb
from superbloom.storage.files import load_json, read_lines
from superbloom.hashing.bloom import key_weights, mix_keys
from superbloom.data.readers import InputError
from superbloom.text import TextPrepareConfig, prepare_text
from superbloom.data.writer import held_out, offsets_of, vocabulary_from_counts, vocabulary_order, write_split, write_staged, write_strings

# meta.json keys that change from run to run: times, and the out-of-core engine's version and stage times
_VOLATILE = ("seconds", "seconds_by_stage", "outofcore")

TEXT = {"a.txt": "miles davis was a jazz trumpeter. miles davis played with john coltrane.\n\n"
                 "john coltrane played the saxophone. new york is big.\n",
        "b.txt": "miles davis and john coltrane lived in new york. new york has jazz. " * 3 + "\n",
        "c.txt": "jazz in new york. miles davis, the trumpeter. a very long sentence " + "with many words " * 40
                 + ".\n",
        "d.txt": "the saxophone is big. the trumpeter is miles davis.\n",
        "e.txt": "\n\n",  # empty: dropped, counted
        "f.txt": "café ﬁne, Ｆｕｌｌ width; o'neill 13,517 km². new york new york new york.\n"}


def digests(directory, tmp) -> dict[str, str]:
    """sha256 of every file of a dataset directory; meta.json's with `tmp` (the inputs' folder) written
    TMP and the package's data folder PKG, without the volatile keys, but with the memory limit of an out-of-core run."""
    out = {}
    for f in sorted(os.listdir(directory)):
        if f == MARKER:  # the ownership marker (storage/guarded.py): a run id, new with every run
            continue
        data = (directory / f).read_bytes()
        if f == "meta.json":
            text = data.decode().replace(str(tmp), "TMP").replace(str(sb.embedded_dataset().parent), "PKG")
            meta = json.loads(text)  # (the embedded dataset's folder depends on where the checkout is)
            limit = meta.get("outofcore", {}).get("memory_limit_bytes")
            meta = {k: v for k, v in meta.items() if k not in _VOLATILE}
            data = json.dumps([meta, limit], sort_keys=True).encode()
        out[f] = hashlib.sha256(data).hexdigest()[:16]
    return out


def links(n: int = 1500, seed: int = 3) -> list[tuple[str, str]]:
    """(user, item) links, users interleaved, repeats, skewed items, a line-break-free unicode key."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 90, n)
    items = np.minimum(rng.zipf(1.4, n), 200)
    return [(f"u{u}", f"item_{i}" if i % 17 else f"Ünï_{i}") for u, i in zip(users.tolist(), items.tolist())]


def prepared(tmp_path) -> dict[str, object]:
    """Every prepared directory of the comparison, by name."""
    wiki = sb.embedded_dataset()
    pairs = links()
    (tmp_path / "edges.tsv").write_text("".join(f"{s}\t{i}\n" for s, i in pairs), encoding="utf-8")
    by_user: dict[str, list[str]] = {}
    for s, i in pairs:
        by_user.setdefault(s, []).append(i)
    (tmp_path / "lines.txt").write_text("".join(" ".join(v) + "\n" for v in by_user.values()), encoding="utf-8")
    pq.write_table(pa.table({"set": [s for s, _ in pairs], "id": [i for _, i in pairs]}), tmp_path / "links.parquet")
    runs = {
        "wiki": sb.PrepareConfig(str(wiki), "", seed=0),
        "wiki_ooc": sb.PrepareConfig(str(wiki), "", seed=0, memory_limit="64MB"),
        "wiki_loo": sb.PrepareConfig(str(wiki), "", split="leave-one-out"),
        "edges": sb.PrepareConfig(str(tmp_path / "edges.tsv"), "", test_fraction=0.2, seed=5),
        "edges_ooc": sb.PrepareConfig(str(tmp_path / "edges.tsv"), "", test_fraction=0.2, seed=5, memory_limit="64MB"),
        "lines": sb.PrepareConfig(str(tmp_path / "lines.txt"), "", sb.ReadConfig(format="lines"), test_fraction=0.3),
        "parquet": sb.PrepareConfig(str(tmp_path / "links.parquet"), "", sb.ReadConfig(format="parquet"), seed=1),
        "lines_loo": sb.PrepareConfig(str(tmp_path / "lines.txt"), "", sb.ReadConfig(format="lines"),
                                      split="leave-one-out"),
    }
    out = {}
    for name, cfg in runs.items():
        out[name] = tmp_path / name
        sb.prepare(sb.PrepareConfig(**{**cfg.__dict__, "out": str(out[name])}), progress=False)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f, text in TEXT.items():
        (corpus / f).write_text(text, encoding="utf-8")
    for name, kw in (("text", {}), ("text_docs", {"segment": 0, "test_fraction": 0.25, "seed": 2}),
                     ("text_small", {"segment": 8, "vocab_size": 12, "min_bigram_count": 1})):
        out[name] = tmp_path / name
        prepare_text(TextPrepareConfig((str(corpus),), str(out[name]), **kw), progress=False)
    return out


# recorded with the code before writer.py (commit cdd6d7c): sha256[:16] of every output file
EXPECTED: dict[str, dict[str, str]] = {
    "edges": {"counts.npy": "922ed7f48077daaf", "meta.json": "aa217b6d57165f60", "test.ids.npy": "7a5bb2c2cc27cdbb",
        "test.offsets.npy": "d40921b4aa9ab692", "test.sets.txt": "bbb1e579def2b773",
        "train.ids.npy": "1d09aedee2dbf156", "train.offsets.npy": "b4a528fd3f46b162",
        "train.sets.txt": "37ffd21df3ae29a9", "vocab.txt": "7313b4409dbe9db8"},
    "edges_ooc": {"counts.npy": "922ed7f48077daaf", "meta.json": "ef3cc4f0d17f381c",
        "test.ids.npy": "7a5bb2c2cc27cdbb", "test.offsets.npy": "d40921b4aa9ab692",
        "test.sets.txt": "bbb1e579def2b773", "train.ids.npy": "1d09aedee2dbf156",
        "train.offsets.npy": "b4a528fd3f46b162", "train.sets.txt": "37ffd21df3ae29a9",
        "vocab.txt": "7313b4409dbe9db8"},
    # meta.json since prepare warns (input_warnings): 70% of these lines' links repeat an id in their set
    "lines": {"counts.npy": "33a07e98ca85343f", "meta.json": "32f885d532feae9a", "test.ids.npy": "6f77b2e9d2a3c376",
        "test.offsets.npy": "b17e2130c0bb07c3", "test.sets.txt": "0dd5021678075743",
        "train.ids.npy": "896290edfedbfa3f", "train.offsets.npy": "ed19d263e2327b44",
        "train.sets.txt": "a28d37b482aa6aac", "vocab.txt": "df1641d362280999"},
    "lines_loo": {"counts.npy": "291e82366bdae24c", "meta.json": "f42c726610c340e2",
        "test.ids.npy": "5230a38dca996131", "test.offsets.npy": "37acd480825f1222",
        "test.sets.txt": "68a51d57fd787ca8", "test.targets.npy": "a018010161195664",
        "train.ids.npy": "e44f545e49d551b4", "train.offsets.npy": "14fd6ad6b2621239",
        "train.sets.txt": "68a51d57fd787ca8", "valid.ids.npy": "e44f545e49d551b4",
        "valid.offsets.npy": "14fd6ad6b2621239", "valid.sets.txt": "68a51d57fd787ca8",
        "valid.targets.npy": "b568eb29d2c7f72d", "vocab.txt": "c8a57b7772bc4a45"},
    "parquet": {"counts.npy": "b38038aef3ec2a42", "meta.json": "48a7ed70225dc4c6",
        "test.ids.npy": "95ea557f8ef52832", "test.offsets.npy": "62da2da67ae511b1",
        "test.sets.txt": "da87a6f4480f071a", "train.ids.npy": "33afee861a0f8a2b",
        "train.offsets.npy": "dcfc74dda3b2fc65", "train.sets.txt": "fb3903025565ff34",
        "vocab.txt": "6c9db48f9b563deb"},
    "text": {"counts.npy": "fe6de113e051c482", "meta.json": "b1eb0d67cef6fb53",
        "ngram_counts.npy": "bd9fe00993d9e5b7", "test.ids.npy": "040ce28f7590a34a",
        "test.offsets.npy": "f6df0000bed676f0", "test.sets.txt": "e3b0c44298fc1c14",
        "train.ids.npy": "e84d126f227c3fd6", "train.offsets.npy": "108e4e311c25d6b7",
        "train.sets.txt": "149b5e6bb2146a7d", "vocab.txt": "3ad94d37c56f3511"},
    "text_docs": {"counts.npy": "51a98795628dc2d1", "meta.json": "229985077d08b9bc",
        "ngram_counts.npy": "b38ed9e8792d35a1", "test.ids.npy": "8cd9e28ad16d1cae",
        "test.offsets.npy": "f3fdd1bad1362153", "test.sets.txt": "e971c65f32797c19",
        "train.ids.npy": "98a67cec19a17d4f", "train.offsets.npy": "2b02302928c012c0",
        "train.sets.txt": "b8025d291adce448", "vocab.txt": "aec9a67181624a89"},
    "text_small": {"counts.npy": "547f40765b29a3a0", "meta.json": "9cfbcab943b3adbf",
        "ngram_counts.npy": "cc64a785a6cad4b4", "test.ids.npy": "040ce28f7590a34a",
        "test.offsets.npy": "f6df0000bed676f0", "test.sets.txt": "e3b0c44298fc1c14",
        "train.ids.npy": "07a3337b50bdd2cd", "train.offsets.npy": "9bdd3cdb2256ea0d",
        "train.sets.txt": "9aa08f61ff6587e7", "vocab.txt": "a54d344e15193b0b"},
    "wiki": {"counts.npy": "f89c07451e303d3b", "meta.json": "f1cd1e85b9069b1a", "test.ids.npy": "c2308d059da2df78",
        "test.offsets.npy": "6fa95308e7ed5f1d", "test.sets.txt": "0283554ea1f874a5",
        "train.ids.npy": "ae4aad533fde5401", "train.offsets.npy": "ca2edacb922fd903",
        "train.sets.txt": "4da865aacf3dc4ce", "vocab.txt": "c3acf09087a9d21d"},
    "wiki_loo": {"counts.npy": "1c60a1229077233b", "meta.json": "da9aa89232aebee6",
        "test.ids.npy": "8b96531a05364d97", "test.offsets.npy": "45210e3540a32d5a",
        "test.sets.txt": "0c2a6acb5913563e", "test.targets.npy": "6c158b3336f715f1",
        "train.ids.npy": "9bd0a65e839d8774", "train.offsets.npy": "80a6f5d647130f7e",
        "train.sets.txt": "f3f5ed3f4fab5f1c", "valid.ids.npy": "50b80b4be8943216",
        "valid.offsets.npy": "f12e57b9bdc269da", "valid.sets.txt": "0c2a6acb5913563e",
        "valid.targets.npy": "47b3d71e816662cc", "vocab.txt": "8d8655851382d4c0"},
    "wiki_ooc": {"counts.npy": "f89c07451e303d3b", "meta.json": "03ac9e41d5dcf2ce",
        "test.ids.npy": "c2308d059da2df78", "test.offsets.npy": "6fa95308e7ed5f1d",
        "test.sets.txt": "0283554ea1f874a5", "train.ids.npy": "ae4aad533fde5401",
        "train.offsets.npy": "ca2edacb922fd903", "train.sets.txt": "4da865aacf3dc4ce",
        "vocab.txt": "c3acf09087a9d21d"},
}


def test_outputs_are_byte_identical_to_before_the_writer(tmp_path):
    got = {name: digests(path, tmp_path) for name, path in prepared(tmp_path).items()}
    if os.environ.get("SUPERBLOOM_RECORD_DIGESTS"):
        print(json.dumps(got, indent=1, sort_keys=True))
    assert got == EXPECTED


def hashing_digests() -> dict[str, str]:
    """sha256[:16] of the buckets and inverse of random hash maps (collisions separated: the key mixing)
    and of an extended vocabulary's (extend.assign, and the inverse extend builds: hashing.inverse_index)."""
    from superbloom.hashing.grow import assign
    from superbloom.hashing.bloom import BloomHash, HashConfig, inverse_index

    def sha(*arrays) -> str:
        return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:16]

    out = {}
    for n, alpha, m, seed in ((1000, 4, 2, 0), (5003, 16, 2, 1), (3001, 8, 3, 2), (4000, 40, 2, 3), (5000, 8, 7, 4),
                              (300, 1, 1, 0)):  # (5000, 8, 7, 4): hashed keys (625^7 >= 2^62)
        h = BloomHash.build(n, HashConfig(alpha=alpha, m=m, seed=seed))
        out[f"build {n} {alpha} {m} {seed}"] = sha(h.buckets, h.inverse)
        if m >= 2:
            grown, moved = assign(h.buckets, h.n_buckets, n // 3, np.random.default_rng([seed, 15]))
            out[f"extend {n} {alpha} {m} {seed}"] = sha(grown, inverse_index(grown, h.n_buckets), np.int64(moved))
    return out


EXPECTED_HASHING: dict[str, str] = {
    "build 1000 4 2 0": "51b2c29f07ac1404",
    "extend 1000 4 2 0": "af9c435d88beeefc",
    "build 5003 16 2 1": "581dc406767291ed",
    "extend 5003 16 2 1": "c379c81af94d0265",
    "build 3001 8 3 2": "a6f5884158d69580",
    "extend 3001 8 3 2": "3a477609b98e3a8e",
    "build 4000 40 2 3": "39745ac9e27f5f62",
    "extend 4000 40 2 3": "711c23783ed20865",
    "build 5000 8 7 4": "5637cd4a63e2f13c",
    "extend 5000 8 7 4": "3f803d01436db82b",
    "build 300 1 1 0": "b8465acefc3ca374",
}


def test_hash_maps_and_extended_maps_are_bit_identical_to_before():
    got = hashing_digests()
    if os.environ.get("SUPERBLOOM_RECORD_DIGESTS"):
        print(json.dumps(got, indent=1, sort_keys=True))
    assert got == EXPECTED_HASHING


# ------------------------------------------------------------------------------ the writer's pieces


def test_held_out_is_the_first_rows_of_a_seeded_permutation():
    mask = held_out(10, 0.25, seed=4)
    assert mask.dtype == bool and mask.sum() == 2  # round(2.5) = 2
    assert np.flatnonzero(mask).tolist() == sorted(np.random.default_rng(4).permutation(10)[:2].tolist())
    assert not held_out(7, 0.0, 0).any() and held_out(0, 0.5, 0).shape == (0,)


def test_vocabulary_order_most_frequent_first_ties_in_key_order(tmp_path):
    counts = np.array([2, 0, 5, 2, 1])
    keys, remap = vocabulary_order(counts)
    assert keys.tolist() == [2, 0, 3, 4] and remap.tolist() == [1, -1, 0, 2, 3] and remap.dtype == np.int32
    remap = vocabulary_from_counts(tmp_path, pa.array(["a", "b", "c", "d", "e"]), counts)
    assert read_lines(tmp_path / "vocab.txt") == ["c", "a", "d", "e"]
    assert np.load(tmp_path / "counts.npy").tolist() == [5, 2, 2, 1] and remap.tolist() == [1, -1, 0, 2, 3]


def test_write_split_from_an_array_or_streamed_chunks_gives_the_same_bytes(tmp_path, monkeypatch):
    from superbloom.data import writer as writer

    monkeypatch.setattr(writer, "_LINES", 2)  # several chunks of lines
    lengths, ids = np.array([2, 0, 3]), np.array([4, 1, -1, 0, 7], np.int64)
    names = ["s0", "s1", "ünï"]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    off = write_split(tmp_path / "a", "train", lengths, ids, names)
    write_split(tmp_path / "b", "train", lengths, iter([ids[:1], ids[1:4], ids[4:]]), pa.array(names))
    assert off.tolist() == [0, 2, 2, 5] and off.tolist() == offsets_of(lengths).tolist()
    for f in ("train.ids.npy", "train.offsets.npy", "train.sets.txt"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    data = np.load(tmp_path / "a" / "train.ids.npy")
    assert data.dtype == np.int32 and data.tolist() == ids.tolist()
    assert read_lines(tmp_path / "a" / "train.sets.txt") == names
    with pytest.raises(AssertionError, match="4 ids streamed for 5"):
        write_split(tmp_path / "b", "test", lengths, iter([ids[:4]]), names)


def test_write_strings_list_and_arrow_agree_and_empty_is_empty(tmp_path):
    write_strings(tmp_path / "a", ["x", "y"])
    write_strings(tmp_path / "b", pa.array(["x", "y"]))
    write_strings(tmp_path / "c", [])
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes() == b"x\ny\n"
    assert (tmp_path / "c").read_bytes() == b""


def test_write_staged_writes_meta_last_and_keeps_the_old_dataset_on_failure(tmp_path):
    out = tmp_path / "d"

    def build(work):
        assert not (work / "meta.json").exists() and work.name == "d.partial"
        (work / "train.ids.npy").write_bytes(b"")
        return {"n": 1}

    assert write_staged(str(out), build) == {"n": 1} and load_json(out / "meta.json") == {"n": 1}

    def fail(work):
        raise InputError("bad input")

    with pytest.raises(OutputError, match="already holds a prepared dataset .*; pass --overwrite"):
        write_staged(str(out), build)  # an earlier dataset is replaced only when asked
    with pytest.raises(InputError, match="bad input"):
        write_staged(str(out), fail, overwrite=True)
    assert load_json(out / "meta.json") == {"n": 1} and not (tmp_path / "d.partial").exists()
    assert write_staged(str(out), lambda work: {"n": 2}, overwrite=True) == {"n": 2}
    assert load_json(out / "meta.json") == {"n": 2}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("keep")
    with pytest.raises(OutputError, match="holds files that superbloom did not write"):
        write_staged(str(tmp_path / "other"), build)
    assert (tmp_path / "other" / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize("m, n_buckets", [(2, 7), (3, 1000), (7, 625)])  # (7, 625): hashed keys
def test_mix_keys_is_linear_in_each_bucket_and_tells_exact_tuples_apart(m, n_buckets):
    rng = np.random.default_rng(m)
    buckets = rng.integers(0, n_buckets, (m, 500)).astype(np.int32)
    w, exact = key_weights(m, n_buckets)
    assert exact == (n_buckets ** m < 2 ** 62) and w[-1] == 1
    key = mix_keys(buckets, n_buckets)
    moved = buckets.copy()
    moved[0, 3] = (moved[0, 3] + 1) % n_buckets
    with np.errstate(over="ignore"):
        assert mix_keys(moved, n_buckets)[3] == key[3] + np.int64(moved[0, 3] - buckets[0, 3]) * w[0]
    if exact:
        same = key[:, None] == key[None, :]
        assert np.array_equal(same, (buckets[:, :, None] == buckets[:, None, :]).all(0))
