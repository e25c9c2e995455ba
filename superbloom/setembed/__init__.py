"""Set embeddings and set classifiers (the blog's "Learning Local Neighborhoods With NCA",
"Simple Unsupervised Learning of Contextualized Bag-of-Word Representations", "Simple First: When
10K Parameters is All You Need"): one L2-normalised vector per set, kNN retrieval and kNN / softmax
classification with confidence rejection.

This subpackage imports the core (the encoder, datasets, label smoothing); the core never imports it.

    pool.py      AttentionPool: a learned query token attends over the encoder's hidden states
    model.py     SetEmbedder: the set encoder + AttentionPool (+ classifier head, NCA memory bank)
    config.py    EmbedConfig, EmbedTrainConfig and the names they allow (no torch)
    objectives.py  the objectives' registry (uniformity, nca, softmax): loss, batches, model parts
    train.py     embed_train: the chosen objective on train.fit's loop
    embedder.py  Embedder: a trained model's vectors, similar sets, classification with rejection
    knn.py       exact chunked top-k by cosine, kNN votes, rejection, coverage curve, scores
    losses.py    alignment, uniformity, NCA with a memory bank: pure functions of tensors

The labels file (set key, label) is read by data/labels.py; label smoothing is heads/losses.py's.
"""
from .._lazy import lazy_exports

_EXPORTS = {  # imported on first use, so that the torch-free settings (config.py) import no torch
    **{name: ".knn" for name in ("classify", "coverage_curve", "knn_votes", "label_agreement", "multilabel_scores",
                                 "topk_cosine")},
    **{name: "..data.labels" for name in ("LabelTable", "load_labels", "read_label_pairs")},
    "AttentionPool": ".pool",
    "EmbedConfig": ".config", "EmbedTrainConfig": ".config",
    "SetEmbedder": ".model", "embed_sets": ".model",
    "embed_train": ".train",
    **{name: ".embedder" for name in ("Classified", "Embedder", "Similar", "load_embedder")},
}
lazy_exports(globals(), _EXPORTS)

__all__ = ["AttentionPool", "Classified", "EmbedConfig", "EmbedTrainConfig", "Embedder", "LabelTable", "SetEmbedder",
           "Similar", "embed_sets", "embed_train", "load_embedder", "classify", "coverage_curve", "knn_votes", "label_agreement",
           "load_labels", "multilabel_scores", "read_label_pairs", "topk_cosine"]
