"""The fixed part of a model's weights (a hybrid head's item-item term), stored once per model folder
(storage/fixed.py): the checkpoints hold the rest and name it; load, mapped load and resume read it back."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_model

import superbloom as sb
from superbloom.heads import head_config
from superbloom.storage.checkpoint import complete_checkpoints, save_checkpoint
from superbloom.storage.fixed import META_KEY, digest, named_fixed
from superbloom.storage.loading import LoadError

CONTEXTS = [["Copenhagen", "Aarhus"], ["Miles_Davis", "Jazz"], ["Cryptography", "Linux", "Google"]]


def train(data, out, steps=8, resume=False, head=None, hashing=sb.HashConfig(alpha=4, m=2)):
    cfg = sb.TrainConfig(data=str(data.path), out=str(out), hash=hashing,
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         head=head or head_config("hashed-hybrid", neighbours=20, term="cooccurrence"),
                         loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=4, checkpoint_every=4))
    sb.train(cfg, progress=False, resume=resume)


def keys(path):
    with safe_open(str(path), "pt") as f:
        return set(f.keys())


def answers(predictor):
    return [[i for i, _ in p.items] for p in predictor.predict_many(CONTEXTS, k=10)]


@pytest.fixture(scope="module")
def hybrid_dir(wiki_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("fixed") / "m"
    train(wiki_data, out)
    return out


def test_the_term_is_stored_once_and_each_checkpoint_names_it(hybrid_dir):
    fixed = sorted(hybrid_dir.glob("fixed-*.safetensors"))
    assert len(fixed) == 1
    assert keys(fixed[0]) == {"head.indptr", "head.cols", "head.values", "head.df"}
    ckpts = complete_checkpoints(hybrid_dir, "step") + complete_checkpoints(hybrid_dir, "best")
    assert len(ckpts) >= 2
    for c in ckpts:
        assert named_fixed(c / "model.safetensors") == fixed[0].name
        stored = keys(c / "model.safetensors")
        assert not stored & {"head.indptr", "head.cols", "head.values", "head.df"}
        assert {"head.mix", "head.weighting", "head.bias"} <= stored  # what validation chooses stays per checkpoint


def test_load_and_mapped_load_read_the_term_back(hybrid_dir):
    plain, mapped = sb.load(hybrid_dir, mmap=False), sb.load(hybrid_dir, mmap=True)
    assert len(plain.model.head.values) > 0 and float(plain.model.head.mix) == float(mapped.model.head.mix)
    for name in ("indptr", "cols", "values", "df"):
        assert torch.equal(getattr(plain.model.head, name), getattr(mapped.model.head, name))
    assert answers(plain) == answers(mapped)
    from superbloom.storage.mapped import is_mapped

    (fixed,) = hybrid_dir.glob("fixed-*.safetensors")  # serve's workers share the term's pages
    assert is_mapped(mapped.model.head.values, fixed) and not is_mapped(plain.model.head.values, fixed)


def test_a_checkpoint_with_the_term_inside_still_loads_the_same(hybrid_dir, tmp_path):
    """A model folder written before the split (the whole state in model.safetensors, no metadata)."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(hybrid_dir, old)
    model = sb.load(hybrid_dir, mmap=False).model
    ckpt = old / (old / "BEST").read_text().strip()
    save_model(model, str(ckpt / "model.safetensors"))  # as save_checkpoint wrote it before
    for f in old.glob("fixed-*.safetensors"):
        f.unlink()
    assert named_fixed(ckpt / "model.safetensors") is None and "head.values" in keys(ckpt / "model.safetensors")
    assert answers(sb.load(old, mmap=False)) == answers(sb.load(hybrid_dir, mmap=False))


@pytest.mark.parametrize("mmap", [False, True])
def test_a_missing_term_file_is_one_error_naming_it(hybrid_dir, tmp_path, mmap):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(hybrid_dir, broken)
    name = next(broken.glob("fixed-*.safetensors")).name
    (broken / name).unlink()
    with pytest.raises(LoadError, match=name):
        sb.load(broken, mmap=mmap)


def test_resume_keeps_one_term_file_and_a_changed_term_replaces_it(wiki_data, tmp_path):
    out = tmp_path / "m"
    train(wiki_data, out, steps=4)
    first = {f.name for f in out.glob("fixed-*.safetensors")}
    train(wiki_data, out, steps=12, resume=True)
    assert {f.name for f in out.glob("fixed-*.safetensors")} == first
    model = sb.load(out, mmap=False).model
    with torch.no_grad():
        model.head.values.mul_(2.0)  # a refitted term (fit_weightings on an older model does this to df)
    (out / "stray-fixed").write_text("")  # not a fixed file: never touched
    for step in (20, 21):
        save_checkpoint(out, step, model, None, {"step": step}, keep=1)
    names = {f.name for f in out.glob("fixed-*.safetensors")}
    assert len(names) == 2 and first < names  # BEST still names the first term: kept
    save_checkpoint(out, 22, model, None, {"step": 22}, keep=1, kind="best", pointer="BEST")
    (now,) = {f.name for f in out.glob("fixed-*.safetensors")}  # no checkpoint names the first one now
    assert now not in first and (out / "stray-fixed").exists()
    fixed = {k: v for k, v in model.state_dict().items() if k.split(".")[-1] in ("indptr", "cols", "values", "df")}
    assert now == f"fixed-{digest(fixed)}.safetensors"
    assert np.allclose(sb.load(out, mmap=False).model.head.values.numpy(), model.head.values.numpy())


def test_the_unhashed_hybrid_stores_its_term_once_too(wiki_data, tmp_path):
    out = tmp_path / "h"
    train(wiki_data, out, steps=4, head=head_config("hybrid", neighbours=10, term="cooccurrence"),
          hashing=sb.HashConfig(alpha=1, m=1))
    (fixed,) = out.glob("fixed-*.safetensors")
    assert "head.values" in keys(fixed)
    ckpt = out / (out / "LATEST").read_text().strip()
    assert named_fixed(ckpt / "model.safetensors") == fixed.name and "head.values" not in keys(ckpt / "model.safetensors")
    with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
        assert f.metadata()[META_KEY] == fixed.name
    assert answers(sb.load(out, mmap=False)) == answers(sb.load(out, mmap=True))


def test_a_model_without_fixed_buffers_writes_no_term_file(tiny_model):
    assert not list(tiny_model.glob("fixed-*.safetensors"))
    ckpt = tiny_model / (tiny_model / "LATEST").read_text().strip()
    assert named_fixed(ckpt / "model.safetensors") is None
