"""Sequence recommendation (issue 12), training half: causal masking (no position sees a later id),
the next-item and masked-sequence batches on hand-made sequences, ordered queries, leave-one-out
validation inside train (the test targets untouched), and ordered prediction end to end."""
import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.model.batches import MaskConfig, to_batch
from superbloom.cli import main
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.model.encoder import ModelConfig, build_model
from superbloom.training.objectives import check_objective
from superbloom.model.sequence_batches import keep_last_known, masked_sequence_batch, next_item_batch, next_item_query, ordered_query_batch
from superbloom.training.train import LoopConfig, TrainConfig, train

torch.set_num_threads(1)


def hashing(n_ids=30, alpha=1, m=1):
    return BloomHash.build(n_ids, HashConfig(alpha=alpha, m=m))


def elements(batch, h, b, w):
    """The element ids of a batch back from its tokens (unhashed: token = id + specials)."""
    return batch.tokens.view(b, w, h.m)[..., 0]


# ---------------------------------------------------------------- causal attention


@pytest.mark.parametrize("m", [1, 2])
def test_causal_model_no_position_sees_a_later_id(m):
    h = hashing(40, alpha=2 if m == 2 else 1, m=m)
    torch.manual_seed(0)
    model = build_model(ModelConfig(d=16, heads=2, d_ff=32, layers=2, positions=8, causal=True, dropout=0.0),
                        head_config("superbloom"), h).eval()
    elems = np.array([[MASK_ELEM, 3, 7, 1, 9, 12]])
    other = elems.copy()
    other[0, 4:] = [20, 30]  # change the two newest elements

    def hidden(net, e):  # (1, elements, m, d)
        b = to_batch(e, np.full(e.shape, -1), h)
        with torch.no_grad():
            return net.encoder(b.tokens, b.pad, b.positions).view(1, e.shape[1], m, -1)

    a, c = hidden(model, elems), hidden(model, other)
    assert torch.equal(a[:, :4], c[:, :4])  # elements 0..3 never see elements 4, 5 (exactly)
    assert not torch.allclose(a[:, 4:], c[:, 4:])
    # and a bidirectional model does see them
    bi = build_model(ModelConfig(d=16, heads=2, d_ff=32, layers=2, positions=8, dropout=0.0),
                     head_config("superbloom"), h).eval()
    assert not torch.allclose(hidden(bi, elems)[:, :4], hidden(bi, other)[:, :4])


def test_causal_flag_is_recorded_and_old_configs_load():
    cfg = ModelConfig(positions=8, causal=True)
    assert asdict(cfg)["causal"] is True and ModelConfig.from_dict(asdict(cfg)) == cfg
    old = {k: v for k, v in asdict(ModelConfig()).items() if k != "causal"}  # a config.json from before
    assert ModelConfig.from_dict(old).causal is False
    with pytest.raises(ValueError, match="causal attention needs attention='softmax'"):
        ModelConfig(causal=True, attention="kernel")


def test_objective_settings_are_checked():
    with pytest.raises(ValueError, match="needs a causal model"):
        check_objective("next-item", ModelConfig(positions=32), MaskConfig(n=32))
    with pytest.raises(ValueError, match="next-item objective only"):
        check_objective("masked", ModelConfig(positions=32, causal=True), MaskConfig(n=32))
    with pytest.raises(ValueError, match="--positions 50 or more"):
        check_objective("masked-sequence", ModelConfig(positions=10), MaskConfig(n=50))
    with pytest.raises(ValueError, match="needs a causal model"):  # TrainConfig checks before anything is written
        TrainConfig("d", "o", objective="next-item", model=ModelConfig(positions=32))
    check_objective("masked", ModelConfig(), MaskConfig())  # the set model is unchanged


# ---------------------------------------------------------------- batches and queries


def test_next_item_batch_shifts_targets():
    h = hashing(30)
    sets = SetArray.from_lists([[4, 5, 6, 7], [9, 2], [3]])
    b = next_item_batch(sets, np.array([0, 1, 2]), h, n=8, rng=np.random.default_rng(0))
    got = elements(b, h, 3, 4).numpy()
    enc = lambda e: int(h.encode(np.array([[e]]))[0, 0])  # noqa: E731
    bos, pad = enc(MASK_ELEM), enc(PAD_ELEM)
    assert got.tolist() == [[bos, enc(4), enc(5), enc(6)], [bos, enc(9), pad, pad], [bos, pad, pad, pad]]
    # element i predicts the id after it; every id of every sequence is a target once
    assert b.target_elem.tolist() == [0, 1, 2, 3, 4, 5, 8]
    assert b.target_ids.tolist() == [4, 5, 6, 7, 9, 2, 3]
    assert b.positions.view(3, 4)[0].tolist() == [0, 1, 2, 3]
    assert b.pad.view(3, 4).tolist() == [[False] * 4, [False, False, True, True], [False, True, True, True]]


def test_next_item_batch_windows_are_contiguous():
    h = hashing(30)
    sets = SetArray.from_lists([list(range(20))])
    for seed in range(5):
        b = next_item_batch(sets, np.array([0]), h, n=5, rng=np.random.default_rng(seed))
        t = b.target_ids.tolist()
        assert len(t) == 5 and t == list(range(t[0], t[0] + 5))


def test_masked_sequence_last_item_examples():
    h = hashing(30)
    sets = SetArray.from_lists([[4, 5, 6, 7], [9, 2, 8]])
    b = masked_sequence_batch(sets, np.array([0, 1]), h, MaskConfig(n=8), np.random.default_rng(0), last_fraction=1.0)
    enc = lambda e: int(h.encode(np.array([[e]]))[0, 0])  # noqa: E731
    got = elements(b, h, 2, 4).numpy()
    assert got.tolist() == [[enc(4), enc(5), enc(6), enc(MASK_ELEM)],
                            [enc(9), enc(2), enc(MASK_ELEM), enc(PAD_ELEM)]]
    assert b.target_elem.tolist() == [3, 6] and b.target_ids.tolist() == [7, 8]
    plain = masked_sequence_batch(sets, np.array([0, 1]), h, MaskConfig(n=8, mask_rate=0.5), np.random.default_rng(0),
                                  last_fraction=0.0)
    assert plain.n_targets == 2 + 2  # round(0.5 * 4), round(0.5 * 3)


def test_ordered_queries():
    h = hashing(30)
    assert keep_last_known(np.array([[1, -1, 2, 3], [-1, -1, 5, -1]]), 2).tolist() == [[2, 3], [-1, 5]]
    ctx = np.array([[-1, 4, 5, 6], [-1, -1, -1, 9], [-1, -1, -1, -1]])
    b = next_item_query(ctx, h, positions=3)  # [BOS] + the 2 newest ids
    enc = lambda e: int(h.encode(np.array([[e]]))[0, 0])  # noqa: E731
    got = elements(b, h, 3, 3).numpy()
    assert got.tolist() == [[enc(MASK_ELEM), enc(5), enc(6)], [enc(MASK_ELEM), enc(9), enc(PAD_ELEM)],
                            [enc(MASK_ELEM), enc(PAD_ELEM), enc(PAD_ELEM)]]
    assert b.target_elem.tolist() == [2, 4, 6]  # the newest element (or [BOS] for an empty history)
    # a model with positions, bidirectional: the newest positions - 1 ids, then the [MASK]
    q = ordered_query_batch(np.array([[1, 2, 3, 4]]), h, ModelConfig(positions=3))
    assert elements(q, h, 1, 3).tolist() == [[enc(3), enc(4), enc(MASK_ELEM)]]
    # a set model: the whole context (unchanged behaviour)
    q = ordered_query_batch(np.array([[1, 2, 3, 4]]), h, ModelConfig())
    assert elements(q, h, 1, 5).tolist() == [[enc(1), enc(2), enc(3), enc(4), enc(MASK_ELEM)]]


# ---------------------------------------------------------------- training end to end


def cycles(tmp_path, users=200, items=20, seed=0):
    """Each user walks item i -> i + 1 (mod `items`) from a random start: order is everything."""
    rng = np.random.default_rng(seed)
    lines = []
    for u in range(users):
        s, length = rng.integers(items), rng.integers(4, 10)
        lines.append(f"u{u} " + " ".join(f"i{(s + j) % items}" for j in range(length)))
    (tmp_path / "seq.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(tmp_path / "seq.txt"), str(tmp_path / "d"), read=sb.ReadConfig(format="lines"),
                                split="leave-one-out"), progress=False)
    return tmp_path / "d"


def small(data, out, objective, steps=120):
    return TrainConfig(data=str(data), out=str(out), hash=HashConfig(alpha=1, m=1), head=head_config("full"),
                       model=ModelConfig(d=32, heads=2, d_ff=64, layers=1, positions=12,
                                         causal=objective == "next-item"),
                       mask=MaskConfig(n=12, p_mask=0.8, p_random=0.1, element_dropout=0.0), objective=objective,
                       loop=LoopConfig(steps=steps, batch_size=32, eval_every=40, checkpoint_every=1e9))


@pytest.mark.parametrize("objective", ["next-item", "masked-sequence"])
def test_sequence_objective_learns_order_and_validates_leave_one_out(tmp_path, objective, caplog):
    import logging

    data = cycles(tmp_path)
    (data / "test.targets.npy").unlink()  # validation must never read the test targets
    with caplog.at_level(logging.INFO, logger="superbloom"):
        out = train(small(data, tmp_path / "m", objective), progress=False)
    users = len(np.load(data / "valid.targets.npy"))
    # the model line says what validates: every user's validation target, not held-out training sets
    assert f"training sequences, validation: the validation targets of {users:,} users; device" in caplog.text
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in records if "val_ndcg@10" in r]
    assert len(val) == 4 and all("val_hr@10" in r for r in val)
    best = max(r["val_ndcg@10"] for r in val)
    assert best > 0.8  # a set model cannot tell i -> i+1 from i+1 -> i; popularity is ~0.1
    config = json.loads((out / "config.json").read_text())
    assert config["model"]["causal"] is (objective == "next-item") and config["train"]["objective"] == objective
    model = sb.load(out)
    assert model.predict(["i1", "i2", "i3"], 1).items[0][0] == "i4"  # ordered: the id after the newest
    assert model.predict(["i5", "i6", "i7"], 1).items[0][0] == "i8"
    if objective == "next-item":  # the causal model's prediction is its newest id's
        assert model.predict(["i7", "i3"], 1).items[0][0] == "i4"
        assert model.predict(["i3", "i7"], 1).items[0][0] == "i8"


def test_hashed_next_item_model_and_http_predict_keep_order(tmp_path):
    from fastapi.testclient import TestClient

    from superbloom.serving.app import create_app

    data = cycles(tmp_path)
    cfg = small(data, tmp_path / "m", "next-item", steps=200)
    cfg = TrainConfig(**{**cfg.__dict__, "hash": HashConfig(alpha=2, m=2), "head": head_config("superbloom")})
    out = train(cfg, progress=False)
    model = sb.load(out)
    assert model.hashing.m == 2 and model.hashing.n_tokens < 2 * 20
    with TestClient(create_app(model)) as client:
        top = lambda ctx: client.post("/v1/predict", json={"context": ctx, "k": 1}).json()["predictions"][0]["id"]  # noqa: E731
        assert top(["i1", "i2", "i3"]) == "i4" and top(["i5", "i6", "i7"]) == "i8"
        assert top(["i7", "i3"]) == "i4" and top(["i3", "i7"]) == "i8"  # the order is used


def test_next_item_validation_targets_are_the_second_to_last(tmp_path):
    from superbloom.training.sequence import validation_examples
    from superbloom.training.train import ObjectiveInputs

    data = sb.Dataset(cycles(tmp_path, users=50))
    cfg = small(data.path, tmp_path / "m", "next-item")
    x = ObjectiveInputs(None, None, data, np.arange(50), np.arange(0), cfg, cfg.model, torch.device("cpu"))
    ex = validation_examples(x.data, x.val_rows, x.cfg.loop.seed, 11)
    assert np.array_equal(ex.targets, np.asarray(data.targets("valid")))
    v = data.history("valid")
    last = np.asarray(v.ids)[v.offsets[1:] - 1]
    assert np.array_equal(ex.contexts[:, -1], last)  # the newest history id is the last context column


def test_cli_next_item_implies_causal_and_predicts_in_order(tmp_path, capsys):
    data, model = str(cycles(tmp_path)), str(tmp_path / "model")
    assert main(["train", "--preset", "none", data, "--out", model, "--objective", "next-item", "--positions", "12", "--segment", "12",
                 "--steps", "120", "--d", "32", "--heads", "2", "--d-ff", "64", "--layers", "1", "--alpha", "1",
                 "--m", "1", "--head", "full", "--batch-size", "32", "--eval-every", "0", "--quiet",
                 "--threads", "1"]) == 0
    assert json.loads((tmp_path / "model" / "config.json").read_text())["model"]["causal"] is True
    capsys.readouterr()
    assert main(["predict", model, "i7", "i3", "--k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"][0]["id"] == "i4"
    assert main(["eval", model, data, "--protocol", "leave-one-out", "--json", "--threads", "1",
                 "--baselines", "popularity"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["hr@10"] > r["baselines"]["popularity"]["hr@10"]
    assert main(["train", "--preset", "none", data, "--out", str(tmp_path / "bad"), "--objective", "next-item", "--steps", "1"]) == 2
    assert "--positions" in capsys.readouterr().err


# ---------------------------------------------------------------- prepare: user-item lines (BERT4Rec's files)


def test_edges_with_a_space_delimiter_read_user_item_lines(tmp_path, capsys):
    (tmp_path / "beauty.txt").write_text("1 1\n1 2\n2 3\n1 3\n2 1\n1 4\n2 2\n")  # `user item`, per user in order
    assert main(["prepare", str(tmp_path / "beauty.txt"), "--format", "edges", "--delimiter", "space",
                 "--split", "leave-one-out", "--out", str(tmp_path / "d"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["links"] == 7 and s["too_short_kept_for_training"] == 0
    data = sb.Dataset(tmp_path / "d")
    names = data.vocab.strings
    assert [[names[i] for i in data.train[r]] for r in range(2)] == [["1", "2"], ["3"]]
    assert [names[i] if i >= 0 else None for i in data.targets("valid")] == ["3", "1"]
    assert [names[i] if i >= 0 else None for i in data.targets("test")] == [None, "2"]  # 4 unseen
    # a line with another field count names its line and the delimiter
    (tmp_path / "bad.txt").write_text("1 1\n1 2 3\n")
    assert main(["prepare", str(tmp_path / "bad.txt"), "--delimiter", " ", "--out", str(tmp_path / "e")]) == 2
    assert "bad.txt:2: expected 2 space-separated fields, got 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["prepare", str(tmp_path / "bad.txt"), "--delimiter", "ab", "--out", str(tmp_path / "e")])
    assert exit_.value.code == 2 and "--delimiter: expected tab, space" in capsys.readouterr().err
    with pytest.raises(ValueError, match="delimiter must be one character"):
        sb.ReadConfig(delimiter="\n")


def test_bert4rec_beauty_reads_as_edges_and_as_lines_alike(tmp_path):
    from conftest import shared_file

    path = shared_file("bert4rec_beauty", "beauty.txt")
    a = sb.prepare(sb.PrepareConfig(str(path), str(tmp_path / "a"), read=sb.ReadConfig(format="edges", delimiter=" "),
                                    split="leave-one-out"), progress=False)
    b = sb.prepare(sb.PrepareConfig(str(path), str(tmp_path / "b"), read=sb.ReadConfig(format="lines"),
                                    split="leave-one-out"), progress=False)
    assert a["sets"] == b["sets"] == 40_226 and a["links"] == b["links"] == 353_962
    assert a["ids"] == b["ids"] and a["train"] == b["train"]
