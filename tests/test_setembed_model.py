"""The set-embedding model and its training on train.fit: padding and chunking invariance of the
set vector, each objective's loss against losses.py, embed_train end to end (checkpoints, BEST,
resume, index), and the Embedder's similar / classify with rejection."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads.losses import smoothed_cross_entropy
from superbloom.setembed.losses import alignment, nca_loss, uniformity
from superbloom.model.encoder import ModelConfig
from superbloom.setembed import EmbedConfig, EmbedTrainConfig, SetEmbedder, embed_sets, embed_train, load_embedder
from superbloom.setembed.model import chunk_rows, set_tokens
from superbloom.setembed.train import LabelledBatch, embed_loss, views_batch

TINY = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def tiny(objective="uniformity", n_ids=40, n_labels=3, bank=None, **kw) -> tuple[SetEmbedder, BloomHash]:
    torch.manual_seed(0)
    hashing = BloomHash.build(n_ids, HashConfig(alpha=2, m=2))
    net = SetEmbedder(TINY, EmbedConfig(objective=objective, pool_heads=2, **kw), hashing, n_labels, bank)
    return net.eval(), hashing


# ------------------------------------------------------------------------------ the set vector


def test_vector_is_unit_and_padding_invariant():
    net, hashing = tiny()
    elems = np.array([[3, 7, 9, -1, -1], [1, 2, 3, 4, 5]])
    z = net.embed(*set_tokens(elems, hashing))
    assert torch.allclose(z.norm(dim=1), torch.ones(2), atol=1e-5)
    wider = np.concatenate([elems, np.full((2, 4), -1)], axis=1)  # more padding
    assert torch.allclose(net.embed(*set_tokens(wider, hashing)), z, atol=1e-5)
    alone = net.embed(*set_tokens(elems[:1, :3], hashing))  # the same set without any padding
    assert torch.allclose(alone, z[:1], atol=1e-5)
    shuffled = np.array([[9, 3, 7]])
    assert torch.allclose(net.embed(*set_tokens(shuffled, hashing)), z[:1], atol=1e-5)  # a set: order-free


def test_chunk_rows_cover_each_set_once():
    lengths = np.array([0, 3, 10, 7])
    owner, start, size = chunk_rows(lengths, max_len=4)
    assert owner.tolist() == [1, 2, 2, 2, 3, 3]
    assert size.tolist() == [3, 3, 3, 4, 3, 4] and size.max() <= 4
    for s in (1, 2, 3):  # the chunks of a set tile [0, length) in order
        m = owner == s
        end = start[m] + size[m]
        assert start[m][0] == 0 and start[m][1:].tolist() == end[:-1].tolist() and end[-1] == lengths[s]


def test_embed_sets_matches_direct_and_chunks_average():
    net, hashing = tiny()
    sets = SetArray.from_lists([[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11], [12, -1, 13]])
    z = embed_sets(net, hashing, sets, batch_ids=4)  # several batches
    direct = net.embed(*set_tokens(np.array([[4, 5, 6, 7, 8, 9, 10]]), hashing))
    assert np.allclose(z[1], direct[0].detach().numpy(), atol=1e-5)
    assert np.allclose(z[3], net.embed(*set_tokens(np.array([[12, 13]]), hashing))[0].detach().numpy(), atol=1e-5)
    chunked = embed_sets(net, hashing, sets, rows=np.array([1]), max_len=3)  # 7 ids -> chunks of 2, 2, 3
    parts = [net.embed(*set_tokens(np.array([c]), hashing))[0] for c in ([4, 5], [6, 7], [8, 9, 10])]
    mean = torch.nn.functional.normalize(torch.stack(parts).sum(0), dim=0)
    assert np.allclose(chunked[0], mean.detach().numpy(), atol=1e-5)
    assert not np.allclose(chunked[0], z[1], atol=1e-3)  # chunking did change something: the test can fail
    empty = embed_sets(net, hashing, SetArray.from_lists([[-1, -1], [1]]))
    assert np.all(empty[0] == 0) and abs(np.linalg.norm(empty[1]) - 1) < 1e-5


# ------------------------------------------------------------------------------ losses per objective


def test_uniformity_objective_is_alignment_plus_uniformity():
    net, hashing = tiny(uniformity_weight=0.5, uniformity_t=3.0)
    sets = SetArray.from_lists([[1, 2, 3, 4], [5, 6], [7, 8, 9, 10, 11], [12, 13, 14]])
    b = views_batch(sets, np.arange(4), hashing, 32, np.random.default_rng(0))
    zl, zr = net.embed(b.left, b.left_pad), net.embed(b.right, b.right_pad)
    want = alignment(zl, zr) + 0.5 * 0.5 * (uniformity(zl, 3.0) + uniformity(zr, 3.0))
    assert torch.allclose(embed_loss(net, b), want, atol=1e-6)
    assert len(b.left) == len(b.right) == 4


def test_nca_objective_reads_and_updates_the_bank():
    labels = torch.tensor([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]], dtype=torch.bool)
    net, hashing = tiny("nca", bank=labels, temperature=0.1, momentum=0.5)
    net.bank.vectors.copy_(torch.nn.functional.normalize(torch.randn(4, 16), dim=1))
    before = net.bank.vectors.clone()
    tokens, pad = set_tokens(np.array([[1, 2], [3, 4]]), hashing)
    b = LabelledBatch(tokens, pad, labels[[0, 2]], torch.tensor([0, 2]))
    loss = embed_loss(net, b)
    z = net.embed(tokens, pad)
    assert torch.allclose(loss, nca_loss(z, b.labels, _copy(net.bank, before), b.index, 0.1), atol=1e-6)
    loss.backward()  # the queued update does not break the graph
    net.bank.flush()
    want = torch.nn.functional.normalize(0.5 * before[[0, 2]] + 0.5 * z.detach(), dim=1)
    assert torch.allclose(net.bank.vectors[[0, 2]], want, atol=1e-5)
    assert torch.equal(net.bank.vectors[[1, 3]], before[[1, 3]])


def _copy(bank, vectors):
    from superbloom.setembed.losses import MemoryBank
    return MemoryBank(vectors.clone(), bank.labels.clone(), bank.momentum)


def test_softmax_objective_is_smoothed_cross_entropy_with_split_multilabels():
    net, hashing = tiny("softmax", smoothing=0.1, logit_scale=5.0)
    tokens, pad = set_tokens(np.array([[1, 2], [3, 4]]), hashing)
    labels = torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=torch.bool)
    b = LabelledBatch(tokens, pad, labels, torch.tensor([-1, -1]))
    z = net.embed(tokens, pad)
    target = torch.tensor([[0.5, 0, 0.5], [0, 1, 0]])
    want = smoothed_cross_entropy(5.0 * net.classifier(z), target, 0.1)
    assert torch.allclose(embed_loss(net, b), want, atol=1e-6)


def test_a_registered_objective_plugs_in_without_generic_code(monkeypatch):
    """A new objective is one registry entry (and its name in the torch-free list): the model builds
    only the parts it asks for, and embed_loss calls its loss on the batches it asks for."""
    from superbloom.setembed import config as embed_config, objectives

    calls = []

    def aligned(model, batch):
        calls.append(1)
        return alignment(model.embed(batch.left, batch.left_pad), model.embed(batch.right, batch.right_pad))

    monkeypatch.setitem(objectives.REGISTRY, "alignment", objectives.EmbedObjective("alignment", aligned, views=True))
    monkeypatch.setattr(embed_config, "OBJECTIVES", (*embed_config.OBJECTIVES, "alignment"))
    net, hashing = tiny("alignment")
    assert net.classifier is None and net.bank is None
    sets = SetArray.from_lists([[1, 2, 3, 4], [5, 6], [7, 8, 9, 10, 11], [12, 13, 14]])
    b = views_batch(sets, np.arange(4), hashing, 32, np.random.default_rng(0))
    want = alignment(net.embed(b.left, b.left_pad), net.embed(b.right, b.right_pad))
    assert torch.allclose(embed_loss(net, b), want, atol=1e-6) and calls == [1]
    with pytest.raises(ValueError, match="unknown set-embedding objective 'triplet'; expected one of uniformity"):
        objectives.objective("triplet")


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="objective must be one of"):
        EmbedConfig(objective="triplet")
    with pytest.raises(ValueError, match="labels file"):
        EmbedTrainConfig(data="x", out="y", embed=EmbedConfig(objective="nca"))
    with pytest.raises(ValueError, match="position embeddings"):
        SetEmbedder(ModelConfig(d=16, heads=2, positions=8), EmbedConfig(pool_heads=2),
                    BloomHash.build(10, HashConfig(alpha=2)))


# ------------------------------------------------------------------------------ embed_train end to end


@pytest.fixture(scope="module")
def labelled(wiki_data, tmp_path_factory):
    """The embedded Wikispeedia links with a made-up label per page: the first letter's parity group."""
    path = tmp_path_factory.mktemp("labels") / "labels.tsv"
    names = wiki_data.set_names("train") + wiki_data.set_names("test")
    lines = [f"{k}\t{'AM' if k[:1].upper() < 'N' else 'NZ'}" for k in names]
    lines += [f"{names[0]}\tfirst"]  # one page with two labels
    path.write_text("\n".join(lines) + "\n")
    return wiki_data, path


def run_cfg(data, out, objective, labels="", steps=6, **loop):
    return EmbedTrainConfig(data=str(data.path), out=str(out), labels=str(labels),
                            embed=EmbedConfig(objective=objective, segment=8, pool_heads=2), hash=HashConfig(alpha=8),
                            model=TINY, optim=sb.OptimConfig(lr=3e-3, warmup=2),
                            loop=sb.LoopConfig(steps=steps, batch_size=16, eval_every=3, **loop), val_fraction=0.1)


@pytest.mark.parametrize("objective", ["uniformity", "nca", "softmax"])
def test_embed_train_writes_a_model_directory(labelled, tmp_path, objective):
    data, labels = labelled
    out = embed_train(run_cfg(data, tmp_path / "m", objective, labels), progress=False)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["embed"]["objective"] == objective and set(cfg["labels"]) == {"AM", "NZ", "first"}
    assert (out / "LATEST").is_file() and (out / "BEST").is_file()
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("val_knn_accuracy" in r for r in log)
    emb = load_embedder(out, device="cpu")
    assert emb.vectors.shape == (len(data.train), 16)
    assert np.allclose(emb.vectors.norm(dim=1).numpy(), 1, atol=1e-4)
    page = data.set_names("train")[5]
    ids = emb.vocab.decode(np.asarray(data.train[5]).tolist())
    sim = emb.similar(ids, k=3)
    assert sim.items[0][0] == page and sim.items[0][1] > 0.999  # a training set is its own nearest
    c = emb.classify(ids + ["no_such_page"], reject=0.0)
    assert c.label in {"AM", "NZ", "first"} and c.unknown == ["no_such_page"]
    assert c.method == ("head" if objective == "softmax" else "knn")
    assert abs(sum(s for _, s in c.scores) - 1) < 1e-4
    assert emb.classify(ids, reject=1.01).label is None  # rejected: confidence < threshold
    with pytest.raises(ValueError, match="none of the 1 ids"):
        emb.similar(["no_such_page"])


def test_embed_train_resume_continues_and_refuses_architecture_changes(labelled, tmp_path):
    data, labels = labelled
    out = tmp_path / "m"
    embed_train(run_cfg(data, out, "nca", labels, steps=4, checkpoint_every=0), progress=False)
    with pytest.raises(ValueError, match="already holds a model"):
        embed_train(run_cfg(data, out, "nca", labels, steps=8), progress=False)
    with pytest.raises(ValueError, match="embed"):
        bad = run_cfg(data, out, "softmax", labels, steps=8)
        embed_train(bad, progress=False, resume=True)
    embed_train(run_cfg(data, out, "nca", labels, steps=8), progress=False, resume=True)
    state = json.loads((out / (out / "LATEST").read_text().strip() / "state.json").read_text())
    assert state["step"] == 8
    assert load_embedder(out).net.bank is not None


def test_supervised_objective_needs_known_keys(wiki_data, tmp_path):
    bad = tmp_path / "labels.tsv"
    bad.write_text("not_a_page\tX\n")
    with pytest.raises(ValueError, match="none of its set keys"):
        embed_train(run_cfg(wiki_data, tmp_path / "m", "softmax", bad), progress=False)


@pytest.mark.slow
def test_torchrun_two_ranks_update_one_bank(labelled, tmp_path):
    """Under torchrun each rank embeds its share of a batch; the NCA bank takes every rank's rows
    (all-gathered), so after one step of batch 16 sixteen bank rows have moved, not eight."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    from superbloom.storage.checkpoint import latest_checkpoint

    data, labels = labelled
    out = tmp_path / "m"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29571",
           "-m", "superbloom", "--", "embed-train", str(data.path), "--out", str(out), "--objective", "nca",
           "--labels", str(labels), "--steps", "1", "--batch-size", "16", "--d", "16", "--heads", "2", "--d-ff", "32",
           "--pool-heads", "2", "--alpha", "8", "--eval-every", "0", "--threads", "1", "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    bank = load_file(str(latest_checkpoint(out) / "model.safetensors"))["net.bank.vectors"]
    start = torch.nn.functional.normalize(torch.randn(bank.shape, generator=torch.Generator().manual_seed(0)), dim=1)
    moved = (bank - start).norm(dim=1) > 1e-6
    assert int(moved.sum()) == 16
    assert load_embedder(out).classify(["Paris"]).label is not None
