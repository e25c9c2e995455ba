"""prepare-text --as-sets (text/sets.py): paragraphs of a corpus -> a set dataset, checked against a
brute-force construction in plain Python; then a set model trains on it and `eval` runs its baselines."""
from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.cli import main
from superbloom.evaluation.protocols import resolve
from superbloom.text import TextConfig, TextPrepareConfig, prepare_text, split_words
from superbloom.text.ngrams import UNK
from superbloom.text.sets import MIN_SET, paragraph_sets

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--quiet", "--threads", "1"]

CORPUS = {  # ASCII only (no NFKC change), several paragraphs, repeats, a one-id paragraph, an empty document
    "a.txt": "Miles Davis played jazz. Miles Davis played jazz in Paris.\n\nThe band played. the the the\n\nOk.\n",
    "b.txt": "John Coltrane played jazz with Miles Davis.\n\n\nNew York is big. New York jazz!\n",
    "c.txt": "Paris jazz band.\n  \nMiles Davis in New York. Zebra quagga okapi zebra.\n\n!!\n",
    "d.txt": "The band played jazz in New York. Miles Davis played.\n\nJohn Coltrane in Paris.\n",
    "e.txt": "\n\n",
    "f.txt": "Okapi zebra band. The band is big.\n\nNew York, New York.\n",
}


def write_corpus(d):
    (d / "corpus").mkdir()
    for name, text in CORPUS.items():
        (d / "corpus" / name).write_text(text, encoding="utf-8")
    return d / "corpus"


# ------------------------------------------------------------------ the brute-force construction


def paragraphs_of(text: str) -> list[list[list[str]]]:
    """A document -> its paragraphs with words, each a list of sentences (lists of tokens), with the
    same tokenizer, one paragraph at a time."""
    out = []
    for para in re.split(r"\n[^\S\n]*\n", text):
        w = split_words(pa.array([para]), TextConfig())
        tokens, cuts = w.tokens.to_pylist(), np.cumsum(w.sentence_lengths).tolist()
        if tokens:
            out.append([tokens[a:b] for a, b in zip([0] + cuts[:-1], cuts)])
    return out


def is_word(token: str) -> bool:
    return token[0].isalnum()


def brute_ngrams(docs: dict[str, list], train: set[str], min_bigram_count: int) -> set[str]:
    """Every unigram and every bigram (two adjacent words of a sentence) seen >= min_bigram_count
    times, counted over the training documents (vocab_size large enough to keep them all)."""
    uni, big = Counter(), Counter()
    for name in train:
        for para in docs[name]:
            for sent in para:
                uni.update(sent)
                big.update(f"{a}_{b}" for a, b in zip(sent, sent[1:]) if is_word(a) and is_word(b))
    return set(uni) | {b for b, n in big.items() if n >= min_bigram_count}


def greedy(sentence: list[str], ngrams: set[str]) -> list[str]:
    """The left-to-right scan: a vocabulary bigram, else the word, else [UNK]."""
    out, i = [], 0
    while i < len(sentence):
        pair = f"{sentence[i]}_{sentence[i + 1]}" if i + 1 < len(sentence) else None
        if pair in ngrams:
            out.append(pair)
            i += 2
        else:
            out.append(sentence[i] if sentence[i] in ngrams else UNK)
            i += 1
    return out


def brute_sets(docs: dict[str, list], ngrams: set[str]):
    """-> ({name#k: id strings in first-occurrence order}, [UNK] tokens, repeats folded, short paragraphs)."""
    sets, unk, repeats, short = {}, 0, 0, 0
    for name, paras in docs.items():
        for k, para in enumerate(paras):
            tokens = [t for sent in para for t in greedy(sent, ngrams)]
            unk += tokens.count(UNK)
            known = [t for t in tokens if t != UNK]
            distinct = list(dict.fromkeys(known))
            repeats += len(known) - len(distinct)
            if len(distinct) < MIN_SET:
                short += 1
            else:
                sets[f"{name}#{k}"] = distinct
    return sets, unk, repeats, short


def read_sets(data: sb.Dataset, split: str) -> dict[str, list]:
    strings = data.vocab.strings
    rows = getattr(data, split)
    return {n: [strings[i] if i >= 0 else None for i in rows[k].tolist()]
            for k, n in enumerate(data.set_names(split))}


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("test_fraction,seed", [(0.4, 0), (0.25, 3)])
def test_sets_equal_the_brute_force_construction(tmp_path, test_fraction, seed):
    corpus = write_corpus(tmp_path)
    s = prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "sets"), min_bigram_count=2, as_sets=True,
                                       test_fraction=test_fraction, seed=seed), progress=False)
    data = sb.Dataset(tmp_path / "sets")
    docs = {f"corpus/{n}": paragraphs_of(t) for n, t in sorted(CORPUS.items())}
    nonempty = [n for n, p in docs.items() if p]
    docs = {n: docs[n] for n in nonempty}
    order = np.random.default_rng(seed).permutation(len(nonempty))[:int(round(test_fraction * len(nonempty)))]
    test_docs = {nonempty[i] for i in order}
    train_docs = set(nonempty) - test_docs
    ngrams = brute_ngrams(docs, train_docs, 2)
    want, unk, repeats, short = brute_sets(docs, ngrams)

    train, test = read_sets(data, "train"), read_sets(data, "test")
    # the split is by document: a document's paragraphs are all on one side
    assert {n.split("#")[0] for n in train} <= train_docs and {n.split("#")[0] for n in test} <= test_docs
    assert train == {n: v for n, v in want.items() if n.split("#")[0] in train_docs}
    vocab = set(data.vocab.strings)
    assert {n: [t if t in vocab else None for t in v] for n, v in want.items() if n.split("#")[0] in test_docs} == test
    # the ids are the n-grams of the training sets, by decreasing number of training sets holding them
    held = Counter(t for v in train.values() for t in v)
    assert vocab == set(held) and UNK not in vocab
    assert data.counts.tolist() == [held[t] for t in data.vocab.strings]
    assert (np.diff(data.counts) <= 0).all()
    # what was dropped, counted
    assert (s["unk_dropped"], s["duplicates_removed"], s["short_paragraphs_dropped"]) == (unk, repeats, short)
    assert s["paragraphs"] == sum(len(p) for p in docs.values()) and s["empty_documents"] == 1
    assert s["sets"] == len(want) and s["ids"] == len(vocab) and s["links"] == sum(map(len, want.values()))
    unseen = [t for n, v in test.items() for t in v if t is None]
    assert s["test_links_unseen_in_train"] == len(unseen)
    assert "text" not in s and s["split"] == "sets"  # an ordinary set dataset, not a text-model one
    if seed == 0:  # this split exercises every count
        assert unk > 0 and repeats > 0 and short > 0 and unseen


def test_capped_vocabulary_is_the_one_prepare_text_chose(tmp_path):
    """With a small vocab_size the sets hold the n-grams the segments' dataset chose (same training
    documents, same greedy tokenisation), less [UNK]."""
    corpus = write_corpus(tmp_path)
    kw = dict(vocab_size=9, min_bigram_count=1, test_fraction=0.3, seed=1)
    prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "rows"), **kw), progress=False)
    s = prepare_text(TextPrepareConfig((str(corpus),), str(tmp_path / "sets"), as_sets=True, **kw), progress=False)
    rows, data = sb.Dataset(tmp_path / "rows"), sb.Dataset(tmp_path / "sets")
    ngrams = set(rows.vocab.strings) - {UNK}
    assert len(ngrams) == 9 and set(data.vocab.strings) <= ngrams
    docs = {f"corpus/{n}": paragraphs_of(t) for n, t in sorted(CORPUS.items())}
    want, unk, repeats, short = brute_sets(docs, ngrams)
    got = {**read_sets(data, "train"), **read_sets(data, "test")}
    assert {n: [t if t in data.vocab.strings else None for t in v] for n, v in want.items()} == got
    assert (s["unk_dropped"], s["duplicates_removed"], s["short_paragraphs_dropped"]) == (unk, repeats, short)
    assert s["unk_dropped"] == rows.meta["unk"]  # the same tokens as the segments: the [UNK] ones dropped


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=6), min_size=1, max_size=3),
                min_size=1, max_size=6))
def test_paragraph_sets_equal_a_python_reference(paragraphs):
    """paragraph_sets (vectorised) == dedupe per paragraph in plain Python; id 0 is [UNK]."""
    ids = np.array([i for p in paragraphs for sent in p for i in sent], np.int32)
    sentence_ids = np.array([len(sent) for p in paragraphs for sent in p], np.int64)
    sentence_para = np.array([3 * k for k, p in enumerate(paragraphs) for _ in p], np.int64)  # gaps allowed
    got_paras, set_ids, set_len, unk, repeats = paragraph_sets(ids, sentence_ids, sentence_para)
    want = [list(dict.fromkeys(i for sent in p for i in sent if i != 0)) for p in paragraphs]
    assert got_paras.tolist() == [3 * k for k in range(len(paragraphs))]
    cuts = np.cumsum(set_len).tolist()
    assert [set_ids[a:b].tolist() for a, b in zip([0] + cuts[:-1], cuts)] == want
    assert unk == int((ids == 0).sum()) and repeats == int((ids != 0).sum()) - sum(map(len, want))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A corpus of 40 documents of 4 paragraphs, prepared as sets through the CLI, and a tiny set model."""
    d = tmp_path_factory.mktemp("textsets")
    (d / "corpus").mkdir()
    rng = np.random.default_rng(0)
    topics = [["miles davis", "jazz", "trumpet", "john coltrane", "saxophone", "new york"],
              ["paris", "france", "eiffel tower", "seine", "louvre", "wine"],
              ["dog", "cat", "pet", "food", "walk", "park"]]
    for i in range(40):
        paras = [" ".join(" ".join(rng.choice(topics[(i + k) % 3], 5)) + " ." for _ in range(2)) for k in range(4)]
        (d / "corpus" / f"doc{i}.txt").write_text("\n\n".join(paras) + "\n")
    assert main(["prepare-text", str(d / "corpus"), "--out", str(d / "data"), "--as-sets", "--json"]) == 0
    assert main(["train", "--preset", "none", str(d / "data"), "--out", str(d / "model"), "--steps", "3", "--eval-every", "0",
                 "--alpha", "4", "--m", "2", *TINY]) == 0
    return d


def test_a_set_model_trains_and_eval_runs_its_baselines(trained, capsys):
    data = sb.Dataset(trained / "data")
    assert data.meta["format"] == "text-sets" and data.split == "sets" and len(data.train) == 36 * 4
    assert resolve("auto", data).name == "sets"  # not the text protocol: the data is sets
    capsys.readouterr()
    assert main(["eval", str(trained / "model"), str(trained / "data"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "targets_per_set" in out["protocol"]  # the sets protocol's settings
    assert {"popularity", "cooccurrence"} <= set(out["baselines"])
    assert out["examples"] > 0 and 0 <= out["rec@1"] <= out["rec@10"] <= 1


def test_cli_help_and_segment_conflict(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["prepare-text", "--help"])
    assert "--as-sets" in capsys.readouterr().out
    corpus = write_corpus(tmp_path)
    assert main(["prepare-text", str(corpus), "--out", str(tmp_path / "x"), "--as-sets", "--segment", "64"]) == 2
    assert "--segment" in capsys.readouterr().err and not (tmp_path / "x").exists()
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "a.txt").write_text("Word\n\nOther\n")  # no paragraph of 2 ids: an error naming the input
    assert main(["prepare-text", str(tmp_path / "one"), "--out", str(tmp_path / "y"), "--as-sets",
                 "--test-fraction", "0"]) == 2
    assert "no paragraph of the training documents" in capsys.readouterr().err and not (tmp_path / "y").exists()
