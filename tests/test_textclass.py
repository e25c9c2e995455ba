"""The text classifier (textclass.py) and its labelled documents (text/labelled.py), on tiny hand-made
documents; one check on the real Wikispeedia articles (skipped when the shared data is absent)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from superbloom.training.optim import OptimConfig
from superbloom.data.readers import InputError
from superbloom.textclass.docs import LabelledDocs, first_words, load_wikispeedia, split_rows, strip_wikispeedia, top_level_categories
from superbloom.textclass.batches import text_batch
from superbloom.textclass.config import TextClassConfig, TrainTextConfig
from superbloom.textclass.loss import evaluate
from superbloom.textclass.model import TextClassifier
from superbloom.textclass.train import fit_classifier

from conftest import shared_file

torch.set_num_threads(1)

ANIMALS = ["cat", "dog", "horse", "cow", "sheep", "goat", "lion", "tiger"]
TOOLS = ["hammer", "saw", "drill", "wrench", "chisel", "pliers", "file", "plane"]


def toy_docs(n: int = 24, seed: int = 0) -> LabelledDocs:
    """Two classes, each a bag of its own words plus shared filler words."""
    rng = np.random.default_rng(seed)
    docs, labels = [], []
    for i in range(n):
        own = ANIMALS if i % 2 == 0 else TOOLS
        words = list(rng.choice(own, 3)) + list(rng.choice(["the", "a", "of", "and"], int(rng.integers(1, 5))))
        docs.append([str(w) for w in rng.permutation(words)])
        labels.append("animal" if i % 2 == 0 else "tool")
    return LabelledDocs.from_lists(docs, labels)


# ------------------------------------------------------------------------------ config and parameters


def test_heads_must_divide_d_and_the_error_lists_the_choices():
    with pytest.raises(ValueError, match=r"heads=3 must divide d=100.*\[1, 2, 4, 5, 10, 20, 25, 50, 100\]"):
        TextClassConfig(d=100, heads=3)
    with pytest.raises(ValueError, match="attention"):
        TextClassConfig(attention="linear")
    with pytest.raises(ValueError, match="embedding"):
        TextClassConfig(embedding="hashed")


@pytest.mark.parametrize("attention", ["kernel-auto", "softmax"])
def test_heads_add_no_parameters_at_d100(attention):
    counts = {h: TextClassifier(TextClassConfig(d=100, heads=h, attention=attention), 15).n_parameters
              for h in (1, 5, 10, 20, 50)}
    assert len(set(counts.values())) == 1, counts
    # dynamic embedding 64 x 100, attention 100 x 300 + 300 and 100 x 100 + 100, classifier 100 x 15 + 15
    assert counts[1] == 64 * 100 + (100 * 300 + 300) + (100 * 100 + 100) + (100 * 15 + 15)


def test_embedding_parameters_dynamic_vs_table():
    dyn = TextClassifier(TextClassConfig(d=8, heads=2), 2)
    tab = TextClassifier(TextClassConfig(d=8, heads=2, embedding="table"), 2, vocab=["a", "b", "c", "a"])
    assert sum(p.numel() for p in dyn.embed.parameters()) == 64 * 8
    assert sum(p.numel() for p in tab.embed.parameters()) == (3 + 1) * 8  # distinct words + unknown
    with pytest.raises(ValueError, match="vocabulary"):
        TextClassifier(TextClassConfig(d=8, heads=2, embedding="table"), 2)


def test_inputs_table_rows_unknown_is_row_0_and_dynamic_trits():
    tab = TextClassifier(TextClassConfig(d=8, heads=2, embedding="table"), 2, vocab=["a", "b"])
    assert tab.inputs(["b", "zzz", "a"]).tolist() == [2, 0, 1]
    dyn = TextClassifier(TextClassConfig(d=8, heads=2), 2)
    x = dyn.inputs(["a", "never-seen-word"])
    assert x.shape == (2, 64) and set(x.unique().tolist()) <= {-1.0, 0.0, 1.0}


# ------------------------------------------------------------------------------ padding


@pytest.mark.parametrize("attention", ["kernel", "kernel-auto", "softmax"])
@pytest.mark.parametrize("embedding", ["dynamic", "table"])
def test_padding_with_any_content_does_not_change_the_logits(attention, embedding):
    torch.manual_seed(0)
    docs = toy_docs(6)
    model = TextClassifier(TextClassConfig(d=20, heads=5, attention=attention, embedding=embedding), 2,
                           vocab=list(docs.words)).eval()
    inputs = model.inputs(docs.words)
    b = text_batch(docs, np.arange(6), inputs)
    ref = model(b.x, b.pad)
    extra = 7
    x = torch.cat([b.x, inputs[torch.randint(len(inputs), (6, extra))]], dim=1)  # real words as padding content
    pad = torch.cat([b.pad, torch.ones(6, extra, dtype=torch.bool)], dim=1)
    x[:, :b.x.shape[1]][b.pad] = inputs[1]  # and overwrite the existing padding too
    torch.testing.assert_close(model(x, pad), ref, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ training


@pytest.mark.parametrize("optim", ["adamw", "adapsgd"])
@pytest.mark.parametrize("attention", ["kernel-auto", "softmax"])
def test_learns_a_separable_toy_task(optim, attention):
    torch.manual_seed(0)
    docs = toy_docs(24)
    model = TextClassifier(TextClassConfig(d=20, heads=5, attention=attention), 2)
    before = evaluate(model, docs, np.arange(24))["loss"]
    cfg = TrainTextConfig(epochs=15, batch_size=8, optim=OptimConfig(name=optim, lr=1e-2, warmup=10))
    hist = fit_classifier(model, docs, np.arange(24), cfg, eval_rows=np.arange(24))
    assert len(hist) == 15 and hist[0]["steps"] == 3 and hist[0]["examples"] == 24
    assert hist[-1]["loss"] < before
    assert hist[-1]["eval"]["accuracy"] == 1.0, hist[-1]
    assert 0 <= hist[-1]["errors"] <= 24


def test_dynamic_embedding_classifies_words_never_seen_in_training():
    """Trained on animal/tool documents, it still gives a prediction for out-of-vocabulary words, and
    the prediction for a known-word document is what the training taught."""
    torch.manual_seed(0)
    docs = toy_docs(24)
    model = TextClassifier(TextClassConfig(d=20, heads=5, attention="softmax"), 2)
    fit_classifier(model, docs, np.arange(24), TrainTextConfig(epochs=15, batch_size=8,
                                                                 optim=OptimConfig(lr=1e-2, warmup=10)))
    p = model.predict([["cat", "dog", "the"], ["hammer", "saw"], ["xylophone", "qwerty"]])
    assert p.shape == (3, 2) and np.allclose(p.sum(1), 1, atol=1e-5)
    assert p[0].argmax() == docs.label_names.index("animal") and p[1].argmax() == docs.label_names.index("tool")
    with pytest.raises(ValueError, match="at least one word"):
        model.predict([[]])


# ------------------------------------------------------------------------------ labelled documents


def test_from_lists_padded_and_split_rows():
    docs = LabelledDocs.from_lists([["a", "b", "a"], ["c"]], ["x", "y"])
    assert list(docs.words) == ["a", "b", "c"] and docs.lengths.tolist() == [3, 1]
    ids, pad = docs.padded(np.array([1, 0]))
    assert ids.tolist() == [[2, 0, 0], [0, 1, 0]] and pad.tolist() == [[False, True, True], [False, False, False]]
    tr, va, te = split_rows(100, (0.8, 0.1, 0.1), seed=3)
    assert (len(tr), len(va), len(te)) == (80, 10, 10)
    assert sorted(np.concatenate([tr, va, te]).tolist()) == list(range(100))
    assert np.array_equal(split_rows(100, seed=3)[2], te) and not np.array_equal(split_rows(100, seed=4)[2], te)
    with pytest.raises(ValueError, match="at least one word"):
        LabelledDocs.from_lists([["a"], []], ["x", "y"])


def test_top_level_categories_first_listed_and_bad_lines(tmp_path):
    f = tmp_path / "categories.tsv"
    f.write_text("# comment\n\nA\tsubject.Science.Biology\nA\tsubject.People.X\nA\tsubject.Science.Physics\n"
                 "B\tsubject.Countries\n")
    assert top_level_categories(f) == {"A": ["Science", "People"], "B": ["Countries"]}
    f.write_text("A\tScience.Biology\n")
    with pytest.raises(InputError, match=r"categories.tsv:1: expected 'page<TAB>subject"):
        top_level_categories(f)


def test_header_with_the_label_and_trailer_are_cut_and_words_capped():
    text = ("   #copyright\n\nAland\n\n2007 Schools Wikipedia Selection. Related subjects: Countries; European\n"
            "Countries\n\n   Aland is an island group, in Finland.\n\nRetrieved from \"http://x\"\nlicence words\n")
    texts, had = strip_wikispeedia(pa.array([text, "No header here."], pa.large_string()))
    assert had == 1
    tokens, n = first_words(texts, max_words=4)
    assert n.tolist() == [4, 3]
    assert tokens.to_pylist() == ["aland", "is", "an", "island", "no", "header", "here"]
    assert "countries" not in first_words(texts, 100)[0].to_pylist()


def test_wikispeedia_articles_load_with_labels_and_no_header():
    directory = shared_file("wikispeedia", "plaintext_articles.tar.xz").parent
    docs = load_wikispeedia(directory, max_words=64, limit=50)
    s = docs.stats
    assert s["kept"] >= 50 and s["headers_cut"] == s["documents"]
    assert docs.lengths.max() <= 64 and s["multi_label"] >= 1
    assert docs.label_names[docs.labels[docs.names.index("%C3%85land")]] == "Countries"  # first listed
    first = [list(docs.words[docs.doc_ids(i)][:8]) for i in range(len(docs))]
    assert not any("subjects" in w for w in first), "the 'Related subjects' header leaked"


@pytest.mark.parametrize("embedding", ["dynamic", "table"])
def test_save_and_load_give_the_same_predictions(tmp_path, embedding):
    from superbloom.textclass.folder import load_classifier, save_classifier

    torch.manual_seed(0)
    docs = toy_docs(8)
    model = TextClassifier(TextClassConfig(d=8, heads=2, embedding=embedding), 2, vocab=list(docs.words))
    save_classifier(model, tmp_path / "m", docs.label_names, {"max_words": 5})
    again, names, config = load_classifier(tmp_path / "m")
    q = [["cat", "saw", "unseen"], ["the"]]
    np.testing.assert_allclose(again.predict(q), model.predict(q), rtol=1e-6)
    assert names == docs.label_names and config["max_words"] == 5
    with pytest.raises(ValueError, match="3 label names for a model of 2 classes"):
        save_classifier(model, tmp_path / "n", ["a", "b", "c"])


def test_memory_parts_counts_parameters_the_padded_batch_and_the_word_inputs():
    """textclass-train's lower bound (memory_parts): a batch of B documents pads to at least the B-th
    shortest training document; parameters and gradients; the dynamic embedding's trits per word."""
    from superbloom.textclass.config import TextClassConfig
    from superbloom.textclass.train import memory_parts

    lengths = np.array([5, 3, 8])
    table = memory_parts(TextClassConfig(d=10, heads=1, embedding="table"), 2, 4, 7, lengths, batch_size=2)
    assert table == {"--d": 8 * ((4 + 1) * 10 + 10 * 2 + 2), "--batch-size": 4 * 2 * 5 * 20,
                     "word inputs (--max-words)": 8 * 7}
    dyn = memory_parts(TextClassConfig(d=10, heads=1), 2, 4, 7, lengths, batch_size=100)  # B: the 3 documents
    assert dyn == {"--d": 8 * (64 * 10 + 10 * 2 + 2), "--batch-size": 4 * 3 * 8 * (20 + 64),
                   "word inputs (--max-words)": 4 * 64 * 7}
