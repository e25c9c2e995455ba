"""superbloom.text: readers, normalisation, unigram+bigram vocabulary, greedy tokenisation, prepare-text."""
from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.cli import main
from superbloom.data.readers import InputError
from superbloom.text import TextConfig, TextPrepareConfig, prepare_text, read_documents, split_words
from superbloom.text.corpora import CorpusStats, clean_brown, clean_gcide, detect_format
from superbloom.text.ngrams import UNK_ID, BigramCounter, bigram_mask, NgramVocab, choose_vocabulary, greedy_encode, pair_keys, split_keys
from superbloom.text.prepare import pack_segments

from conftest import shared_file


def words(text: str, **kw) -> list[str]:
    return split_words(pa.array([text]), TextConfig(**kw)).tokens.to_pylist()


# ---------------------------------------------------------------- normalisation and words


def test_nfkc_lowercase_and_punctuation():
    assert words("ﬁne Ｆｕｌｌ\u00a0Width") == ["fine", "full", "width"]  # ligature, full-width, no-break space
    assert words("O'Neill, 13,517 km².") == ["o", "'", "neill", ",", "13", ",", "517", "km2", "."]
    assert words("Soft\u00adhyphen zero\u200bwidth") == ["softhyphen", "zerowidth"]  # format chars deleted
    assert words("Café CAFÉ", lowercase=False) == ["Café", "CAFÉ"]
    assert words("Cafe\u0301", nfkc=True) == ["café"] and words("Cafe\u0301", nfkc=False) != ["café"]
    assert words("x_y") == ["x", "_", "y"]  # `_` is punctuation: it cannot occur inside a word


def test_sentences_paragraphs_and_documents():
    w = split_words(pa.array(["Miles Davis played. He was\nborn in 1926!\n\n  \n\"Quoted.\" Next one", "", "Two? Yes"]),
                    TextConfig())
    assert w.tokens.to_pylist() == ["miles", "davis", "played", ".", "he", "was", "born", "in", "1926", "!",
                                    '"', "quoted", ".", '"', "next", "one", "two", "?", "yes"]
    assert w.sentence_lengths.tolist() == [4, 6, 4, 2, 2, 1]
    assert w.sentence_doc.tolist() == [0, 0, 0, 0, 2, 2]


# ---------------------------------------------------------------- greedy tokenisation


def tiny_vocab(n_words: int, unigrams: dict[int, int], bigrams: dict[tuple[int, int], int]) -> NgramVocab:
    keys = pair_keys(np.array([a for a, _ in bigrams], np.int64), np.array([b for _, b in bigrams], np.int64))
    return NgramVocab(n_words, np.array(list(unigrams), np.int64), np.array(list(unigrams.values())), keys,
                      np.array(list(bigrams.values())))


def test_greedy_prefers_bigrams_left_to_right_within_sentences():
    # words: 0 a, 1 b, 2 c, 3 d (not in the vocabulary); ids: a 1, b 2, c 3, a_b 10, b_c 11
    v = tiny_vocab(4, {0: 1, 1: 2, 2: 3}, {(0, 1): 10, (1, 2): 11})
    ids, lengths, nb = greedy_encode(np.array([0, 1, 2]), np.array([3]), v)
    assert ids.tolist() == [10, 3] and lengths.tolist() == [2] and nb == 1  # a_b c, not a b_c
    ids, lengths, _ = greedy_encode(np.array([1, 2, 3, 0, 1]), np.array([5]), v)
    assert ids.tolist() == [11, UNK_ID, 10] and lengths.tolist() == [3]
    ids, lengths, _ = greedy_encode(np.array([0, 1, 0, 1]), np.array([1, 3]), v)  # a | b a b: no a_b across
    assert ids.tolist() == [1, 2, 10] and lengths.tolist() == [1, 2]


def reference_greedy(words, lengths, unigrams, bigrams):
    out, lens, pos = [], [], 0
    for n in lengths:
        s, i, before = words[pos:pos + n], 0, len(out)
        while i < n:
            if i + 1 < n and (s[i], s[i + 1]) in bigrams:
                out.append(bigrams[(s[i], s[i + 1])])
                i += 2
            else:
                out.append(unigrams.get(s[i], UNK_ID))
                i += 1
        lens.append(len(out) - before)
        pos += n
    return out, lens


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=12), min_size=1, max_size=6),
       st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12), st.sets(st.integers(0, 5)))
def test_greedy_equals_a_left_to_right_scan(sentences, pairs, known):
    unigrams = {w: 1 + w for w in sorted(known)}
    bigrams = {p: 100 + k for k, p in enumerate(sorted(pairs))}
    flat = np.array([w for s in sentences for w in s], np.int64)
    lengths = np.array([len(s) for s in sentences])
    ids, lens, nb = greedy_encode(flat, lengths, tiny_vocab(6, unigrams, bigrams))
    ref, ref_lens = reference_greedy(flat.tolist(), lengths.tolist(), unigrams, bigrams)
    assert ids.tolist() == ref and lens.tolist() == ref_lens and nb == sum(1 for i in ref if i >= 100)


# ---------------------------------------------------------------- counting and choosing


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=300), min_size=1, max_size=8))
def test_bigram_counter_merges_chunks_exactly(chunks):
    counter, ref = BigramCounter(), Counter()
    for c in chunks:
        a = np.array(c, np.int64)
        keys = pair_keys(a[:-1], a[1:]) if len(a) > 1 else np.zeros(0, np.int64)
        counter.add(keys)
        ref.update(zip(c[:-1], c[1:]))
        counter._merge()  # merge every time (the real trigger is size-based)
    keys, counts = counter.result()
    a, b = split_keys(keys)
    assert dict(zip(zip(a.tolist(), b.tolist()), counts.tolist())) == dict(ref) and counter.exact


def test_bigram_counter_prunes_singletons_beyond_its_budget():
    counter = BigramCounter(max_bigrams=3)
    counter.add(np.array([1, 1, 1, 2, 2, 3, 4, 5], np.int64))
    keys, counts = counter.result()
    assert keys.tolist() == [1, 2] and counts.tolist() == [3, 2] and counter.pruned == 3 and not counter.exact


def test_choose_vocabulary_ranks_jointly_unigrams_first_on_ties():
    uni = np.array([5, 0, 2, 2])  # word 1 never seen in training
    keys = np.sort(pair_keys(np.array([0, 2, 3]), np.array([2, 3, 0])))
    big_counts = np.array([2, 5, 1])  # (0,2): 2, (2,3): 5, (3,0): 1
    is_big, item, count = choose_vocabulary(uni, keys, big_counts, vocab_size=4, min_bigram_count=2)
    assert is_big.tolist() == [False, True, False, False] and count.tolist() == [5, 5, 2, 2]
    assert item.tolist() == [0, int(pair_keys(np.array([2]), np.array([3]))[0]), 2, 3]


CORPUS = {
    "a.txt": "miles davis was a jazz trumpeter. miles davis played with john coltrane.\n\n"
             "john coltrane played the saxophone. new york is big.\n",
    "b.txt": "miles davis and john coltrane lived in new york. new york has jazz.\n",
    "c.txt": "jazz in new york. miles davis, the trumpeter.\n",
    "d.txt": "the saxophone is big. the trumpeter is miles davis.\n",
}


@pytest.fixture()
def corpus(tmp_path) -> Path:
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    for name, text in CORPUS.items():
        (d / ("sub" if name == "d.txt" else "") / name).write_text(text, encoding="utf-8")
    (d / "notes.md").write_text("not a .txt file, not read")
    return d


def brute_force_counts(texts):
    uni, big = Counter(), Counter()
    for text in texts:
        for sentence in text.replace("\n", " ").split("."):
            toks = sentence.replace(",", " , ").split()
            uni.update(toks)
            ws = [t for t in toks]
            big.update(f"{a}_{b}" for a, b in zip(ws[:-1], ws[1:]) if a != "," and b != ",")
    uni["."] = sum(t.count(".") for t in texts)
    return uni, big


def test_vocabulary_counts_match_a_brute_force_count(corpus, tmp_path):
    s = prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "out"), vocab_size=10_000, test_fraction=0.0,
                                       min_bigram_count=1), progress=False)
    uni, big = brute_force_counts(CORPUS.values())
    data = sb.Dataset(tmp_path / "out")
    ngram = np.load(tmp_path / "out" / "ngram_counts.npy")
    got = dict(zip(data.vocab.strings[1:], ngram[1:].tolist()))
    assert got == {**uni, **big}
    assert s["vocab"]["unigrams"] == len(uni) and s["vocab"]["bigrams"] == len(big) and s["words"] == sum(uni.values())
    assert s["documents"] == 4 and s["test"]["sets"] == 0
    # counts.npy: how often each id occurs in train.ids (after greedy bigram merging)
    assert data.counts.tolist() == np.bincount(data.train.ids, minlength=len(data.vocab)).tolist()
    never = data.counts[1:] == 0  # `miles` (always inside `miles_davis`), `davis_was` (after `miles_davis`)
    assert s["vocab"]["never_emitted_in_train"] == int(never.sum()) and never[data.vocab.index["miles"] - 1]
    assert 0 < s["vocab"]["bigrams_never_emitted_in_train"] < never.sum() and never[data.vocab.index["davis_was"] - 1]


def test_prepare_text_output_reads_as_a_dataset_in_text_order(corpus, tmp_path):
    s = prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "out"), vocab_size=20, test_fraction=0.25,
                                       segment=8, seed=3), progress=False)
    data = sb.Dataset(tmp_path / "out")
    assert data.meta == json.loads((tmp_path / "out" / "meta.json").read_text()) and data.n_ids == s["ids"] == 21
    assert data.vocab.strings[0] == "[UNK]" and "miles_davis" in data.vocab.index and "new_york" in data.vocab.index
    names = data.set_names("train") + data.set_names("test")
    assert len(names) == s["sets"] == len(data.train) + len(data.test) and s["test"]["documents"] == 1
    assert {n.split("#")[0] for n in data.set_names("test")}.isdisjoint({n.split("#")[0] for n in data.set_names("train")})
    assert (data.train.lengths <= 8).all() and (data.test.lengths <= 8).all()
    # the first row of a.txt is its first sentence, in order, with bigram tokens
    first = data.vocab.decode(data.train[data.set_names("train").index("corpus/a.txt#0")].tolist()) \
        if "corpus/a.txt#0" in data.set_names("train") else data.vocab.decode(
            data.test[data.set_names("test").index("corpus/a.txt#0")].tolist())
    assert first[:2] == ["miles_davis", "was"]
    assert s["unk"] == s["train"]["unk"] + s["test"]["unk"] and s["links"] == len(data.train.ids) + len(data.test.ids)


def test_split_is_seeded(corpus, tmp_path):
    def test_docs(seed, name):
        prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / name), test_fraction=0.5, seed=seed),
                     progress=False)
        return sb.Dataset(tmp_path / name).set_names("test")

    assert test_docs(0, "a") == test_docs(0, "b")
    assert len({tuple(test_docs(seed, f"s{seed}")) for seed in range(6)}) > 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 20), min_size=1, max_size=8), min_size=1, max_size=5), st.integers(1, 12))
def test_pack_segments_keeps_sentences_whole_and_documents_apart(docs, segment):
    sent_len = np.array([n for d in docs for n in d])
    sent_doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    lengths, row_doc = pack_segments(sent_len, sent_doc, len(docs), segment)
    assert (lengths >= 1).all() and (lengths <= segment).all()
    assert np.bincount(row_doc, weights=lengths, minlength=len(docs)).tolist() == [sum(d) for d in docs]
    # every row boundary is a sentence boundary unless a sentence is longer than `segment`
    cuts = set(np.cumsum(lengths).tolist())
    sentence_ends = set(np.cumsum(sent_len).tolist())
    pos = 0
    for n in sent_len.tolist():
        inner = {c for c in cuts if pos < c < pos + n}
        assert not inner or n > segment
        pos += n
    assert sentence_ends >= {c for c in cuts if c in sentence_ends}
    whole, docs_of = pack_segments(sent_len, sent_doc, len(docs), 0)
    assert whole.tolist() == [sum(d) for d in docs] and docs_of.tolist() == list(range(len(docs)))


# ---------------------------------------------------------------- readers and bad input


def test_readers_tar_and_single_file(tmp_path, corpus):
    tar = tmp_path / "c.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(corpus, arcname="corpus")
    stats = CorpusStats()
    names = [n for chunk, _ in read_documents([tar], "auto", stats) for n in chunk]
    assert sorted(names) == ["corpus/a.txt", "corpus/b.txt", "corpus/c.txt", "corpus/sub/d.txt"]
    assert stats.skipped_members == 1 and stats.formats == {str(tar): "txt"}
    gz = tmp_path / "one.txt.gz"
    gz.write_bytes(gzip.compress(CORPUS["a.txt"].encode()))
    (_, texts), = list(read_documents([gz]))
    assert texts.to_pylist() == [CORPUS["a.txt"]]


@pytest.mark.parametrize("make, message", [
    (lambda p: (p / "empty.txt").write_text("") and None or p / "empty.txt", "empty file"),
    (lambda p: (p / "x.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" * 64) and None or p / "x.bin", "binary content"),
    (lambda p: (p / "l1.txt").write_bytes(bytes(range(128, 256)) * 8) and None or p / "l1.txt", "not UTF-8 text"),
    (lambda p: (p / "d").mkdir() or (p / "d" / "a.md").write_text("x") and None or p / "d", "no .txt files"),
    (lambda p: (p / "bad.tar.gz").write_bytes(b"not a tar") and None or p / "bad.tar.gz", "not a readable tar"),
    (lambda p: p / "missing.txt", "no such file"),
    (lambda p: (p / "x.dict.dz").write_bytes(gzip.compress(b"x")) and None or p / "x.dict.dz", "index beside it"),
])
def test_bad_input_is_a_clear_error(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(InputError, match=message) as e:
        prepare_text(TextPrepareConfig((str(path),), str(tmp_path / "out")), progress=False)
    assert str(path) in str(e.value)
    assert not (tmp_path / "out" / "meta.json").exists()


def test_a_tar_member_that_is_binary_is_named(tmp_path):
    tar = tmp_path / "t.tar"
    with tarfile.open(tar, "w") as tf:
        for name, data in [("ok.txt", b"fine text."), ("bad.txt", b"\x00\x01\x02")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with pytest.raises(InputError, match=r"t\.tar:bad\.txt: binary content"):
        prepare_text(TextPrepareConfig((str(tar),), str(tmp_path / "out")), progress=False)


def test_a_few_invalid_bytes_are_repaired_and_counted(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_bytes(b"the market\x92s drop. " + b"ok text here. " * 20)
    s = prepare_text(TextPrepareConfig((str(tmp_path / "c"),), str(tmp_path / "out")), progress=False)
    assert s["corpus"]["repaired_utf8_documents"] == 1 and "cp1252" in s["corpus"]["repaired_examples"][0]
    assert "\u2019" in sb.Dataset(tmp_path / "out").vocab.index


def test_markup_cleaners():
    brown = clean_brown(pa.array(["\tThe/at jury/nn ``/`` 1/2/cd ''/'' ./."])).to_pylist()
    assert brown == ['\tThe jury " 1/2 " .']
    gcide = clean_gcide(pa.array(['Apple \\Ap"ple\\, n. [1913 Webster] {Pyrus} C[ae]sar [=a]b [WordNet 1.5 +PJC]']))
    assert gcide.to_pylist()[0].split() == ["Apple", ",", "n.", "Pyrus", "Caesar", "ab"]


# ---------------------------------------------------------------- CLI


def test_cli_prepare_text(corpus, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["prepare-text", str(corpus), "--out", str(out), "--vocab-size", "10", "--no-lowercase",
                 "--test-fraction", "0.25", "--seed", "1", "--format", "txt", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["vocab"]["size"] == 11 and summary["text"]["lowercase"] is False
    assert sb.Dataset(out).meta["seed"] == 1
    assert main(["prepare-text", str(corpus), "--out", str(tmp_path / "d2"), "--quiet"]) == 0
    assert "[UNK] tokens" in capsys.readouterr().out
    assert main(["prepare-text", str(tmp_path / "nothing"), "--out", str(tmp_path / "d3")]) == 2
    err = capsys.readouterr().err
    assert "prepare-text: error:" in err and "no such file" in err


def test_cli_error_names_the_directory(tmp_path, capsys):
    (tmp_path / "empty_dir").mkdir()
    assert main(["prepare-text", str(tmp_path / "empty_dir"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "prepare-text: error:" in err and "empty_dir: no .txt files" in err


# ---------------------------------------------------------------- the real corpora (../shared/data)


def test_brown_corpus_documents_have_no_tags():
    path = shared_file("brown_corpus", "brown.tar.xz")
    assert detect_format(path) == "brown"
    names, texts = next(iter(read_documents([path], chunk_bytes=1)))
    assert names == ["ca01"] or names[0].endswith("ca01")
    w = split_words(texts, TextConfig()).tokens.to_pylist()
    assert w[:8] == ["the", "fulton", "county", "grand", "jury", "said", "friday", "an"] and "/" not in w[:200]


def test_gcide_entries_are_documents():
    path = shared_file("gcide", "gcide.dict.dz")
    assert detect_format(path) == "gcide"
    names, texts = next(iter(read_documents([path], chunk_bytes=4000)))
    assert not any(n.split(":", 1)[1].startswith("00-") for n in names)
    assert names[:2] == ["gcide.dict.dz:0", "gcide.dict.dz:1"]
    first, second = texts.to_pylist()[:2]
    assert "indicating the absence of any" in first and second.split()[:3] == ["1", "adj.", "1."]
    assert "\\" not in second and "[WordNet" not in second


def test_wikispeedia_articles_are_documents():
    path = shared_file("wikispeedia", "plaintext_articles.tar.xz")
    stats = CorpusStats()
    n = sum(len(names) for names, _ in read_documents([path], "auto", stats, chunk_bytes=64 << 20))
    assert n == 4598 and stats.formats[str(path)] == "txt" and stats.repaired == 0


# ---------------------------------------------------------------- queries with blanks (for fill)


def test_text_encoder_tokenises_queries_like_the_training_data(corpus, tmp_path):
    from superbloom.hashing.bloom import MASK_ELEM
    from superbloom.text.encode import TextEncoder

    prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "out"), test_fraction=0.0), progress=False)
    enc = TextEncoder.from_dataset(tmp_path / "out", max_words=20)
    q = enc.encode("Miles Davis played with [MASK1], then New York [MASK2] zzz.")
    assert q.words == ["miles_davis", "played", "with", "[MASK]", ",", "[UNK]", "new_york", "[MASK]", "[UNK]", "."]
    assert q.blanks == [3, 7] and q.unknown == ["then", "zzz"] and (q.elements[q.blanks] == MASK_ELEM).all()
    assert enc.encode("new [MASK] york").words == ["new", "[MASK]", "york"]  # no bigram across a blank
    data = sb.Dataset(tmp_path / "out")
    assert q.elements[0] == data.vocab.index["miles_davis"]
    kinds = bigram_mask(data.vocab.strings)
    assert kinds[data.vocab.index["new_york"]] and not kinds[data.vocab.index["york"]] and not kinds[0]
    for bad, msg in [("", "empty text"), ("   ", "empty text"), ("no blank here", r"no \[MASK\]"),
                     ("word " * 30 + "[MASK]", "too long")]:
        with pytest.raises(ValueError, match=msg):
            enc.encode(bad)


def test_output_directory_is_replaced_only_when_complete(corpus, tmp_path):
    out = tmp_path / "out"
    prepare_text(TextPrepareConfig((str(corpus),), str(out), vocab_size=5), progress=False)
    (tmp_path / "no_text").mkdir()
    with pytest.raises(InputError, match="no .txt files"):
        prepare_text(TextPrepareConfig((str(tmp_path / "no_text"),), str(out)), progress=False, overwrite=True)
    assert sb.Dataset(out).n_ids == 6 and not (tmp_path / "out.partial").exists()  # the earlier dataset stays
    with pytest.raises(ValueError, match="already holds a prepared dataset"):  # replaced only when asked
        prepare_text(TextPrepareConfig((str(corpus),), str(out), vocab_size=9), progress=False)
    prepare_text(TextPrepareConfig((str(corpus),), str(out), vocab_size=9), progress=False, overwrite=True)
    assert sb.Dataset(out).n_ids == 10
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds files that superbloom did not write"):  # guarded.OutputError
        prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "other")), progress=False)
    assert (tmp_path / "other" / "keep.txt").read_text() == "mine"
