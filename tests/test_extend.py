"""superbloom extend (superbloom/extend.py): new ids in the least-filled buckets, never a full collision,
every table keeps its shape, old ids' scores unchanged, new ids predictable and fine-tunable (train
--resume on a dataset prepared with its own vocabulary, remap.py); the command line's input errors."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file

import superbloom as sb
from superbloom.model.batches import query_batch
from superbloom.storage.checkpoint import inference_checkpoint, latest_checkpoint
from superbloom.cli import main
from superbloom.heads.beam import DecodeConfig
from superbloom.hashing.grow import assign, least_filled, read_new_ids
from superbloom.training.extend import extend
from superbloom.storage.files import load_json
from superbloom.hashing.bloom import BloomHash, HashConfig, duplicate_rows, inverse_index
from superbloom.data.readers import InputError
from superbloom.data.vocab import Vocab

NEW = [f"New_page_{i}" for i in range(60)]
TINY = sb.ModelConfig(d=32, heads=2, d_ff=64, layers=1)


def write_ids(path, ids):
    path.write_text("".join(s + "\n" for s in ids), encoding="utf-8")
    return path


def train_tiny(data, out, model=TINY, alpha=8, m=2, steps=6):
    cfg = sb.TrainConfig(data=str(data.path), out=str(out), hash=HashConfig(alpha=alpha, m=m), model=model,
                         loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=0))
    sb.train(cfg, progress=False)
    return out


@pytest.fixture(scope="module")
def grown(wiki_data, tmp_path_factory):
    """(source model, extended model, summary) for the table and the dynamic input."""
    root = tmp_path_factory.mktemp("extend")
    new = write_ids(root / "new.txt", NEW)
    out = {}
    for dyn in (False, True):
        src = train_tiny(wiki_data, root / f"model-{dyn}", sb.ModelConfig(d=32, heads=2, d_ff=64, layers=1, dynamic=dyn))
        out[dyn] = (src, root / f"grown-{dyn}", extend(src, new, root / f"grown-{dyn}"))
    return out


# ------------------------------------------------------------------------------ the bucket assignment


def min_max_fill(fill: np.ndarray, k: int) -> int:
    """Reference: the lowest possible fullest bucket after adding k ids (brute force over levels)."""
    level = int(fill.min())
    while np.maximum(0, level - fill).sum() < k:
        level += 1
    return max(level, int(fill.max()))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=30), st.integers(1, 100), st.integers(0, 2**31))
def test_least_filled_is_water_filling(fill, k, seed):
    fill = np.array(fill)
    got = least_filled(fill, k, np.random.default_rng(seed))
    after = fill + np.bincount(got, minlength=len(fill))
    assert len(got) == k and after.max() == min_max_fill(fill, k)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(2, 6), st.integers(2, 3), st.integers(1, 200), st.integers(0, 2**31))
@example(6, 2, 3, 170, 0)  # 182 of 216 tuples used: no one-map move frees the last ids (the fallback lists tuples)
def test_assign_never_makes_a_full_collision_and_never_moves_old_ids(n, alpha, m, k, seed):
    try:
        h = BloomHash.build(n * alpha, HashConfig(alpha=alpha, m=m, seed=seed % 1000))
    except ValueError:  # too few buckets for distinct tuples of the old ids themselves
        return
    nb = h.n_buckets
    if nb ** m < n * alpha + k:  # not enough distinct tuples at all
        with pytest.raises(ValueError, match="tuple of its own"):
            assign(h.buckets, nb, k, np.random.default_rng(seed))
        return
    old = h.buckets.copy()
    out, moved = assign(h.buckets, nb, k, np.random.default_rng(seed))
    assert out.shape == (m, n * alpha + k) and (out < nb).all() and (out >= 0).all()
    assert np.array_equal(out[:, :n * alpha], old)
    assert duplicate_rows(out).size == 0
    # water-filling in every map, give or take the moved ids
    for j in range(m):
        best = min_max_fill(np.bincount(old[j], minlength=nb), k)
        fullest = np.bincount(out[j], minlength=nb).max()
        assert fullest == best if moved == 0 else best <= fullest <= best + moved


def test_inverse_index_lists_every_id_of_every_bucket_once():
    buckets = np.array([[0, 1, 1, 2, 1], [2, 2, 0, 1, 0]], np.int32)
    inv = inverse_index(buckets, 3)
    assert inv.shape == (2, 3, 3)
    for j in range(2):
        for b in range(3):
            assert sorted(inv[j, b][inv[j, b] >= 0].tolist()) == np.flatnonzero(buckets[j] == b).tolist()


# ------------------------------------------------------------------------------ the model directory


def test_extend_keeps_every_table_and_the_token_space(grown):
    for src, out, summary in grown.values():
        for ckpt in ("LATEST", "BEST"):
            a = load_file(str((latest_checkpoint(src, ckpt)) / "model.safetensors"))
            b = load_file(str((latest_checkpoint(out, ckpt)) / "model.safetensors"))
            assert a.keys() == b.keys()
            assert all(a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a)
        h0, h1 = BloomHash.load(src / "hashing.safetensors"), BloomHash.load(out / "hashing.safetensors")
        assert (h1.n_buckets, h1.n_tokens, h1.m, h1.alpha) == (h0.n_buckets, h0.n_tokens, h0.m, h0.alpha)
        assert h1.n_ids == h0.n_ids + len(NEW) and np.array_equal(h1.buckets[:, :h0.n_ids], h0.buckets)
        assert duplicate_rows(h1.buckets).size == 0
        assert Vocab.load(out).strings == Vocab.load(src).strings + NEW
        assert summary["after"]["full_collisions"] == 0 and summary["new"] == len(NEW)
        assert summary["after"]["max_fill"] == summary["before"]["max_fill"] + 1  # 60 ids over 512 buckets of 8
        assert load_json(out / "config.json")["extended"][0]["new"] == len(NEW)
        assert load_json(latest_checkpoint(out) / "state.json")["best"] is None  # a fine-tune starts a new BEST


def test_old_ids_keep_their_exact_scores_and_new_ids_are_predictable(grown):
    for src, out, _ in grown.values():
        p0, p1 = sb.load(src), sb.load(out)
        n0 = len(p0.vocab)
        ctx = np.array([[0, 5, 17], [3, -1, -1], [100, 200, -1]])
        h0 = p0.model.target_hidden(query_batch(ctx, p0.hashing))
        h1 = p1.model.target_hidden(query_batch(ctx, p1.hashing))
        assert torch.equal(h0, h1)
        lp0, lp1 = p0.model.head.log_probs(h0), p1.model.head.log_probs(h1)
        b0, b1 = p0.model.head.buckets, p1.model.head.buckets
        s0 = sum(lp0[:, j, b0[j]] for j in range(p0.hashing.m))  # (Q, N0) every old id's score
        s1 = sum(lp1[:, j, b1[j]] for j in range(p1.hashing.m))  # (Q, N0 + new)
        assert torch.equal(s0, s1[:, :n0])
        # the same beam gives the same old ids, in the same order, with the same scores
        dec = DecodeConfig(beam=64)
        r0 = p0.rank(ctx, 10, dec)
        r1 = p1.rank(ctx, 10 + len(NEW), dec)
        for q in range(len(ctx)):
            old = [(i, s) for i, s in zip(r1.ids[q].tolist(), r1.scores[q].tolist()) if 0 <= i < n0][:10]
            assert old == list(zip(r0.ids[q].tolist(), r0.scores[q].tolist()))
        # a new id in the context is known; every new id gets a finite score and can be returned
        pred = p1.predict(["New_page_7", "Jazz"], k=5)
        assert pred.unknown == [] and pred.context == ["New_page_7", "Jazz"] and len(pred.items) == 5
        assert torch.isfinite(s1[:, n0:]).all()
        everything = p1.rank(ctx[:1], len(p1.vocab) - 3, DecodeConfig(exhaustive=True))
        assert set(range(n0, n0 + len(NEW))) <= set(everything.ids[0].tolist())


def test_dynamic_model_gives_new_ids_their_own_input(grown):
    src, out, _ = grown[True]
    p = sb.load(out)
    assert p.config["model"]["dynamic"] and p.model.encoder.dynamic is not None
    ids = torch.tensor([[len(p.vocab) - 1, len(p.vocab) - 2]])
    toks = torch.from_numpy(p.hashing.encode(ids.numpy()))
    assert torch.equal(p.model.encoder.dynamic.ids(toks), ids)
    x = p.model.encoder.dynamic(toks)  # (1, 2m, d)
    assert x.shape == (1, 2 * p.hashing.m, 32) and x.abs().sum() > 0 and not torch.equal(x[0, 0], x[0, -1])
    # the table-only model gives two new ids sharing both buckets' rows nothing to tell them apart; here
    # the inputs of any two ids differ (their strings' trits differ)
    assert not sb.load(grown[False][1]).model.encoder.dynamic


def test_resume_fine_tunes_the_extended_model_on_data_with_its_own_vocabulary(grown, wiki_data, tmp_path, capsys):
    src, out, _ = grown[False]
    # new links: sets of old ids with new ids among them (prepared on their own: another numbering)
    rng = np.random.default_rng(0)
    strings = wiki_data.vocab.strings
    lines = []
    for s in range(300):
        members = [strings[i] for i in rng.choice(500, 6, replace=False)] + [NEW[s % len(NEW)], NEW[(s * 7) % len(NEW)]]
        lines += [f"set{s}\t{x}" for x in dict.fromkeys(members)]
    lines += ["set_unknown\tNot_in_the_model", "set_unknown\tJazz"]
    (tmp_path / "links.tsv").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(tmp_path / "links.tsv"), str(tmp_path / "data")), progress=False)
    before = load_file(str(latest_checkpoint(out) / "model.safetensors"))
    step = load_json(latest_checkpoint(out) / "state.json")["step"]
    assert main(["train", "--preset", "none", str(tmp_path / "data"), "--out", str(out), "--resume", "--steps", str(step + 4),
                 "--quiet", "--batch-size", "32"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err  # the run's lines are log lines (stderr)
    assert "mapped onto the model's by string" in text and "Not_in_the_model" in text
    after = load_file(str(latest_checkpoint(out) / "model.safetensors"))
    assert load_json(latest_checkpoint(out) / "state.json")["step"] == step + 4
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert inference_checkpoint(out).name.startswith("best-") and int(inference_checkpoint(out).name[5:14]) == step + 4
    assert Vocab.load(out).strings[-len(NEW):] == NEW  # the model's vocabulary, not the data's
    assert sb.load(out).predict(["New_page_3"], k=3).items


# ------------------------------------------------------------------------------ input errors


def test_read_new_ids_counts_the_known_ones(tmp_path):
    vocab = Vocab(["a", "b"], np.array([2, 1]))
    new, summary = read_new_ids(write_ids(tmp_path / "n.txt", ["x", "b", "y"]), vocab)
    assert new == ["x", "y"] and summary["already_in_vocabulary"] == 1
    assert summary["already_in_vocabulary_first"] == [f"{tmp_path / 'n.txt'}:2: b"]


@pytest.mark.parametrize("text, words", [
    ("", ["empty file"]),
    ("x\ny\nx\n", [":3:", "'x' repeats line 1"]),
    ("x\n\ny\n", [":2:", "blank line"]),
    ("a\nb\n", ["all 2 ids are already in the model's vocabulary", "nothing to add"]),
])
def test_read_new_ids_errors_name_file_and_line(tmp_path, text, words):
    path = tmp_path / "n.txt"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        read_new_ids(path, Vocab(["a", "b"], np.array([2, 1])))
    assert str(path) in str(e.value) and all(w in str(e.value) for w in words)


def test_cli_extend_prints_and_refuses_clearly(grown, wiki_data, tmp_path, capsys):
    src = grown[False][0]
    new = write_ids(tmp_path / "new.txt", ["Jazz", "Brand_new"])
    assert main(["extend", str(src), str(new), "--out", str(tmp_path / "g"), "--json"]) == 0
    s = load_json(tmp_path / "g" / "extend.json")
    assert s["new"] == 1 and s["already_in_vocabulary"] == 1 and '"full_collisions": 0' in capsys.readouterr().out
    cases = [
        ([str(src), str(new), "--out", str(tmp_path / "g")], ["already exists and is not empty"]),
        ([str(src), str(tmp_path / "missing.txt"), "--out", str(tmp_path / "h")], ["missing.txt"]),
        ([str(src), str(write_ids(tmp_path / "dup.txt", ["p", "q", "p"])), "--out", str(tmp_path / "h")],
         ["dup.txt:3", "repeats line 1"]),
        ([str(tmp_path), str(new), "--out", str(tmp_path / "h")], ["not a model directory"]),
        ([str(src), str(new), "--out", str(src)], ["is the model directory itself"]),
    ]
    for argv, words in cases:
        assert main(["extend", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("superbloom extend: error:") and all(w in err for w in words), err
    assert not (tmp_path / "h").exists()


def test_unhashed_and_per_id_head_models_are_refused(wiki_data, tmp_path, capsys):
    new = write_ids(tmp_path / "new.txt", ["Brand_new"])
    unhashed = train_tiny(wiki_data, tmp_path / "u", alpha=1, m=1, steps=2)
    assert main(["extend", str(unhashed), str(new), "--out", str(tmp_path / "x")]) == 2
    assert "m >= 2" in capsys.readouterr().err
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(tmp_path / "f"), hash=HashConfig(alpha=8), model=TINY,
                         head=sb.FullConfig(), loop=sb.LoopConfig(steps=2, batch_size=32, eval_every=0))
    sb.train(cfg, progress=False)
    assert main(["extend", str(tmp_path / "f"), str(new), "--out", str(tmp_path / "x")]) == 2
    assert "the full head owns one output row per id" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_md5_of_a_new_id_is_what_its_dynamic_input_uses(grown):
    """The new id's input trits are those of its own string (dynamic.py), cached in the vocabulary buffer."""
    p = sb.load(grown[True][1])
    table = p.model.encoder.dynamic.embed.table
    digest = hashlib.md5(NEW[0].encode()).digest()
    bits = np.unpackbits(np.frombuffer(digest, np.uint8)).reshape(64, 2)
    expect = np.array([0, -1, -1, 1])[2 * bits[:, 0] + bits[:, 1]]
    assert table.dtype == torch.int8 and table[len(p.vocab) - len(NEW)].tolist() == expect.tolist()
