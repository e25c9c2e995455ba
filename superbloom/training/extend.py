"""`superbloom extend`: a trained model's folder with new ids added, no table resized.

    summary = extend("runs/wiki", "new_ids.txt", "runs/wiki-extended")

The hash maps grow one column per new id (hashing/grow.py: each new id into the least-filled
buckets, never all m tokens of an old id); the weights, optimizer and averages keep their shapes and
are copied as they are. Only a head that scores ids through their tokens can take new ids (the head
config's `extendable`): a head with one output row per id would need new rows. The new folder is
written next to nothing of the user's (storage/guarded.py) and swapped in complete.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..data.vocab import Vocab
from ..hashing.bloom import BloomHash, inverse_index
from ..hashing.config import ExtendConfig
from ..hashing.grow import assign, fill_stats, read_new_ids
from ..heads.config import head_config_from_dict
from ..model.config import ModelConfig
from ..model.encoder import build_model
from ..storage.checkpoint import check_checkpoint, latest_checkpoint, load_weights
from ..storage.files import load_json, save_json
from ..storage.guarded import claim
from ..storage.loading import expect_kind, read_config, typed_section

__all__ = ["check_extendable", "extend", "format_summary"]


def check_extendable(config: dict, hashing: BloomHash, model_dir: Path) -> None:
    head = head_config_from_dict(config.get("head", {"name": "superbloom"}))
    if not head.extendable:
        raise ValueError(f"{model_dir}: the {head.name} head owns one output row per id, so new ids would need new "
                         "rows; only a model with the superbloom (hashed) head can be extended")
    if hashing.m < 2:
        raise ValueError(f"{model_dir}: this model gives each id one token (alpha={hashing.alpha}, m={hashing.m}: "
                         "unhashed, as --alpha 0 picks for up to 50,000 ids), so a new id would share all its tokens "
                         "with an old one; extend needs m >= 2 (train with e.g. --alpha 4 --m 2)")


def extend(model_dir: str | Path, new_ids: str | Path, out: str | Path, cfg: ExtendConfig = ExtendConfig()) -> dict:
    """Write `out`: the model of `model_dir` with the ids of the file `new_ids` added (module
    docstring). -> the summary (also written to out/extend.json)."""
    target = claim(out, "model")  # before any work (storage/guarded.py): no "", "/", file or user's folder
    # every file read checked first (storage/loading.py): a set embedding, a broken config.json, truncated
    # weights or a truncated vocabulary is one line naming it, before anything is written
    model_dir, out = expect_kind(model_dir, "model"), target.path
    if not (model_dir / "config.json").is_file() or not (model_dir / "hashing.safetensors").is_file():
        raise FileNotFoundError(f"{model_dir}: not a model directory (no config.json / hashing.safetensors)")
    if out.resolve() == model_dir.resolve():
        raise ValueError(f"--out {out} is the model directory itself; write the extended model elsewhere")
    if target.holds_output():  # extend writes a new folder only
        raise ValueError(f"--out {out} already exists and is not empty; give a new directory")
    config = read_config(model_dir, {"model": dict, "head": dict})
    hashing = BloomHash.load(model_dir / "hashing.safetensors")
    check_extendable(config, hashing, model_dir)
    vocab = Vocab.load(model_dir)
    latest = latest_checkpoint(model_dir)
    best = latest_checkpoint(model_dir, "BEST")
    if latest is None and best is None:
        raise FileNotFoundError(f"{model_dir}: no complete checkpoint to extend")
    # copied as they are: complete, and weights that fit the model of this config (names, dtypes, shapes,
    # finite values, as a load checks them), or refused before anything is written
    model = build_model(typed_section(model_dir / "config.json", config, "model", ModelConfig),
                        head_config_from_dict(config["head"]), hashing, vocab.counts, vocab.strings)
    for ckpt in {p for p in (latest, best) if p is not None}:
        check_checkpoint(ckpt)
        load_weights(model, ckpt)
    del model
    new, read = read_new_ids(new_ids, vocab)

    rng = np.random.default_rng([cfg.seed, 15])
    nb = hashing.n_buckets
    buckets, moved = assign(hashing.buckets, nb, len(new), rng)
    grown = BloomHash(buckets, hashing.alpha, inverse=inverse_index(buckets, nb))  # as wide as the fullest bucket
    before, after = fill_stats(hashing.buckets, nb), fill_stats(buckets, nb)
    if after["full_collisions"]:  # place_apart guarantees none; a wrong model must never be written
        raise AssertionError(f"extend left {after['full_collisions']} full collisions")
    summary = {"model": str(model_dir), "out": str(out), **read, "ids_before": hashing.n_ids,
               "ids_after": grown.n_ids, "n_buckets_per_map": nb, "m": hashing.m, "alpha": hashing.alpha,
               "n_tokens": hashing.n_tokens, "new_ids_moved_apart": moved, "before": before, "after": after}

    tmp = target.stage()  # OUT.new, marked ours; swapped in complete (a kill leaves no half model at OUT)
    (tmp / "checkpoints").mkdir()
    for ckpt in {p for p in (latest, best) if p is not None}:  # weights, optimizer, averages: shapes unchanged
        shutil.copytree(ckpt, tmp / "checkpoints" / ckpt.name)
    for pointer, ckpt in (("LATEST", latest), ("BEST", best)):
        if ckpt is not None:
            (tmp / pointer).write_text(f"checkpoints/{ckpt.name}\n")
    if latest is not None:  # its best score was measured on the old data: a fine-tune starts a new BEST
        state = load_json(tmp / "checkpoints" / latest.name / "state.json")
        save_json(tmp / "checkpoints" / latest.name / "state.json", dict(state, best=None))
    if (model_dir / "metrics.jsonl").exists():
        shutil.copy2(model_dir / "metrics.jsonl", tmp / "metrics.jsonl")
    grown.save(tmp / "hashing.safetensors")
    Vocab(vocab.strings + new, np.concatenate([vocab.counts, np.zeros(len(new), np.int64)])).save(tmp)
    record = {k: summary[k] for k in ("model", "file", "new", "already_in_vocabulary", "ids_before", "ids_after")}
    save_json(tmp / "config.json", dict(config, extended=config.get("extended", []) + [record]))
    save_json(tmp / "extend.json", summary)
    target.commit()
    return summary


def format_summary(s: dict) -> str:
    b, a = s["before"], s["after"]
    rows = [("ids", f"{b['ids']:,}", f"{a['ids']:,}"),
            ("buckets per map (unchanged)", f"{s['n_buckets_per_map']:,}", f"{s['n_buckets_per_map']:,}"),
            ("max bucket fill", str(b["max_fill"]), str(a["max_fill"])),
            ("mean bucket fill", f"{b['mean_fill']:.3f}", f"{a['mean_fill']:.3f}"),
            ("empty buckets", str(b["empty_buckets"]), str(a["empty_buckets"])),
            ("ids sharing >= 1 token", f"{b['ids_sharing_a_token']:,}", f"{a['ids_sharing_a_token']:,}"),
            ("full collisions", str(b["full_collisions"]), str(a["full_collisions"]))]
    lines = [f"added {s['new']:,} ids from {s['file']} to {s['model']} -> {s['out']} "
             f"(m={s['m']}, alpha={s['alpha']}, {s['n_tokens']:,} tokens: every table keeps its shape)"]
    if s["already_in_vocabulary"]:
        lines.append(f"skipped {s['already_in_vocabulary']:,} ids already in the vocabulary: "
                     + "; ".join(s["already_in_vocabulary_first"]) + (" ..." if s["already_in_vocabulary"] > 5 else ""))
    if s["new_ids_moved_apart"]:
        lines.append(f"{s['new_ids_moved_apart']} new ids moved to another last-map bucket to avoid a full collision")
    w = max(len(r[0]) for r in rows)
    lines.append(f"{'':<{w}}  {'before':>10}  {'after':>10}")
    lines += [f"{r[0]:<{w}}  {r[1]:>10}  {r[2]:>10}" for r in rows]
    return "\n".join(lines)
