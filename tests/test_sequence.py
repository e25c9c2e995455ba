"""Sequence recommendation (issue 12), data and evaluation half: the leave-one-out split, the
protocol's contexts, HR / NDCG / MRR on hand-computed rankings, baselines with and without history
exclusion, the CLI end to end, and the split sizes of S3-Rec Beauty (skipped without the data)."""
import json

import numpy as np
import pytest

import superbloom as sb
from superbloom.evaluation.baselines import fit_baseline
from superbloom.cli import main
from superbloom.data.dataset import SetArray
from superbloom.evaluation.evaluate import EvalConfig
from superbloom.evaluation.metrics import hit_rate_at, sequence_summary, target_ranks
from superbloom.data.prepare import PrepareConfig, format_summary, prepare
from superbloom.evaluation.protocols import LEAVE_ONE_OUT, Examples, LeaveOneOut, SetHoldout, protocol, resolve
from superbloom.data.dataset import history_matrix, last_known

from conftest import shared_file

LINES = "u1 a b c d e\nu2 x y\nu3 c a c b\nu4 e d z\nu5 q\n"


def loo(tmp_path, text=LINES, fmt="lines", name="in.txt"):
    (tmp_path / name).write_text(text)
    summary = prepare(PrepareConfig(str(tmp_path / name), str(tmp_path / "d"), read=sb.ReadConfig(format=fmt),
                                    split="leave-one-out"), progress=False)
    return summary, sb.Dataset(tmp_path / "d")


def strings(data, ids):
    return [data.vocab.strings[i] if i >= 0 else None for i in ids]


def test_leave_one_out_split_on_hand_made_sequences(tmp_path):
    s, data = loo(tmp_path)
    assert data.split == "leave-one-out" and s["split"] == "leave-one-out"
    # training prefixes: the last two ids of every sequence of >= 3 ids removed; short ones kept whole
    assert data.set_names("train") == ["u1", "u2", "u3", "u4", "u5"]
    assert [strings(data, data.train[r]) for r in range(5)] == [["a", "b", "c"], ["x", "y"], ["c", "a"], ["e"], ["q"]]
    assert s["too_short_kept_for_training"] == 2 and s["min_sequence"] == 3
    assert s["repeats_kept"] == 1  # u3's second c
    # validation: history = the prefix, target = second-to-last; test: history = all but the last, target = last
    assert data.set_names("valid") == data.set_names("test") == ["u1", "u3", "u4"]
    assert [strings(data, data.valid[r]) for r in range(3)] == [["a", "b", "c"], ["c", "a"], ["e"]]
    assert [strings(data, data.test[r]) for r in range(3)] == [["a", "b", "c", None], ["c", "a", "c"], ["e", None]]
    assert strings(data, data.targets("valid")) == [None, "c", None]  # d never occurs in a training prefix
    assert strings(data, data.targets("test")) == ["e", "b", None]  # z neither
    assert s["valid"]["targets_unseen_in_train"] == 2 and s["test"]["targets_unseen_in_train"] == 1
    # vocabulary from the training prefixes only, repeats counted, most frequent first
    assert set(data.vocab.strings) == {"a", "b", "c", "e", "x", "y", "q"}
    assert data.vocab.strings[:2] == ["a", "c"] and data.counts[:2].tolist() == [2, 2]  # ties: first appearance
    assert s["train"]["links"] == 9 and s["links"] == 15
    text = format_summary(s)
    assert "kept whole for training" in text and "2" in text


def test_edge_lists_keep_file_order_per_sequence(tmp_path):
    edges = "u1\ta\nu2\tz\nu1\tb\nu2\ty\nu1\tc\nu2\tx\nu1\td\n"  # interleaved sequences
    s, data = loo(tmp_path, edges, "edges", "in.tsv")
    assert data.set_names("test") == ["u1", "u2"]
    assert strings(data, data.train[0]) == ["a", "b"] and strings(data, data.train[1]) == ["z"]
    assert strings(data, data.targets("test")) == [None, None]  # d and x: not in any prefix
    assert [strings(data, data.valid[r]) for r in range(2)] == [["a", "b"], ["z"]]


def test_set_split_is_unchanged_by_default(tmp_path):
    (tmp_path / "in.txt").write_text(LINES)
    s = prepare(PrepareConfig(str(tmp_path / "in.txt"), str(tmp_path / "d"), read=sb.ReadConfig(format="lines")),
                progress=False)
    assert s["split"] == "sets" and s["duplicates_removed"] == 1
    data = sb.Dataset(tmp_path / "d")
    assert data.valid is None
    with pytest.raises(ValueError, match="leave-one-out"):
        data.targets("test")
    with pytest.raises(ValueError, match="--split leave-one-out"):
        LeaveOneOut().examples(data)


def test_bad_split_name():
    with pytest.raises(ValueError, match="split must be one of"):
        PrepareConfig("x", "y", split="random")


# ---------------------------------------------------------------- the protocol


def test_last_known_keeps_order_drops_unknown_and_truncates():
    hist = SetArray.from_lists([[1, 2, 3, 4, 5], [7, -1, 8], [-1], [9]])
    assert last_known(hist, 3).tolist() == [[3, 4, 5], [-1, 7, 8], [-1, -1, -1], [-1, -1, 9]]
    assert last_known(hist, 10).tolist() == [[1, 2, 3, 4, 5], [-1, -1, -1, 7, 8], [-1] * 5, [-1, -1, -1, -1, 9]]
    assert history_matrix(hist).tolist() == [[1, 2, 3, 4, 5], [7, -1, 8, -1, -1], [-1] * 5, [9, -1, -1, -1, -1]]


def test_leave_one_out_contexts_keep_order_and_never_hold_the_target(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["u%d %s" % (u, " ".join(f"i{j}" for j in rng.permutation(30)[: rng.integers(3, 12)])) for u in range(40)]
    _, data = loo(tmp_path, "\n".join(lines) + "\n")
    seqs = {line.split()[0]: line.split()[1:] for line in lines}  # no repeats within a sequence
    index = data.vocab.index
    for split, drop in (("valid", 2), ("test", 1)):
        ex = LeaveOneOut(split, n=4).examples(data)
        assert len(ex.targets) == 40 and ex.notes["targets_in_history"] == 0
        for row, user in enumerate(data.set_names(split)):
            seq = seqs[user]
            known = [index[i] for i in seq[:len(seq) - drop] if i in index]
            ctx = [i for i in ex.contexts[row] if i >= 0]
            assert ctx == known[-4:]  # the most recent 4 known ids, oldest first
            assert ex.targets[row] == index.get(seq[-drop], -1)
            assert ex.targets[row] not in ctx
            assert sorted(i for i in ex.exclude[row] if i >= 0) == sorted(known)  # the whole history excluded
    assert LeaveOneOut("test", n=4, exclude_history=False).examples(data).exclude.shape[1] == 0


def test_repeated_target_in_history_is_counted(tmp_path):
    _, data = loo(tmp_path)
    ex = LeaveOneOut("valid").examples(data)
    assert ex.notes["targets_in_history"] == 1  # u3: c a | c


def test_positions_bound_the_context(tmp_path):
    _, data = loo(tmp_path)
    positions = {"model": {"positions": 32}}
    assert protocol("leave-one-out").drawer(EvalConfig(context_len=50), positions).n == 31
    assert resolve("auto", data).drawer(EvalConfig(context_len=50), {}).n == 50  # "auto": the dataset's split
    assert resolve("auto", data) is LEAVE_ONE_OUT
    assert isinstance(resolve("sets", data).drawer(EvalConfig(), positions), SetHoldout)


# ---------------------------------------------------------------- metrics


def test_sequence_metrics_on_hand_computed_rankings():
    ranked = np.array([[5, 2, 9, 1, 0, 3, 4, 6, 7, 8],
                       [1, 4, 3, 0, 2, 5, 6, 7, 8, 9],
                       [7, 8, 6, 1, 2, 3, 4, 5, 9, 0],
                       [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]])
    targets = np.array([5, 3, 11, 7])  # ranks 1, 3, absent, 8
    ranks = target_ranks(ranked, targets)
    assert ranks.tolist() == [1, 3, 0, 8]
    m = sequence_summary(ranks)
    assert m["hr@1"] == pytest.approx(1 / 4) and m["hr@5"] == pytest.approx(2 / 4)
    assert m["hr@10"] == pytest.approx(3 / 4) and m["hr@20"] == pytest.approx(3 / 4)
    assert m["ndcg@5"] == pytest.approx((1 + 1 / 2) / 4)  # 1/log2(2), 1/log2(4)
    assert m["ndcg@10"] == pytest.approx((1 + 1 / 2 + 1 / np.log2(9)) / 4)
    assert m["ndcg@20"] == m["ndcg@10"]
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 8) / 4)
    assert hit_rate_at(ranks, 3) == pytest.approx(2 / 4)
    assert sequence_summary(np.zeros(0, int))["hr@10"] == 0.0
    assert target_ranks(np.array([[-1, -1]]), np.array([-1])).tolist() == [0]  # an unseen target: a miss


def test_baseline_exclusion_by_hand():
    # training counts: id 0 x4, 1 x3, 2 x2, 3 x1 -> popularity order 0, 1, 2, 3
    train = SetArray.from_lists([[0, 1, 2, 3], [0, 1, 2], [0, 1], [0]])
    pop = fit_baseline("popularity", train, 4)
    contexts = np.array([[-1, 2]])
    history = np.array([[0, 2]])  # the history is more than the context window
    assert pop.rank(contexts, history, 2).tolist() == [[1, 3]]
    assert pop.rank(contexts, np.zeros((1, 0), np.int64), 2).tolist() == [[0, 1]]
    # co-occurrence: cos(3, .) = 1/2, 1/sqrt(3), 1/sqrt(2) for 0, 1, 2; cos(0, .) = -, 3/sqrt(12), 2/sqrt(8)
    cooc = fit_baseline("cooccurrence", train, 4)
    ex = Examples(np.array([[0, 3]]), np.array([1]), np.array([0]), 0, np.zeros((1, 0), np.int64))
    newest = LEAVE_ONE_OUT.scored("cooccurrence", ex, EvalConfig(cooc_last=1))  # cooccurrence: the last ids only
    assert newest.tolist() == [[3]] and LEAVE_ONE_OUT.scored("popularity", ex, EvalConfig(cooc_last=1)) is ex.contexts
    assert cooc.rank(newest, ex.exclude, 1).tolist() == [[2]]  # from the newest id, 3
    assert cooc.rank(LEAVE_ONE_OUT.scored("cooccurrence", ex, EvalConfig(cooc_last=0)), ex.exclude, 1).tolist() == [[1]]
    # (0.866 + 0.577 > 0.707 * 2)


# ---------------------------------------------------------------- the CLI end to end


def test_cli_leave_one_out_end_to_end(tmp_path, capsys):
    rng = np.random.default_rng(1)
    lines = []
    for u in range(60):  # walks over 25 items, a few repeats, lengths 2..14
        start, steps = rng.integers(25), rng.integers(2, 15)
        lines.append(f"user{u} " + " ".join(f"item{(start + 3 * j + (j % 4 == 3)) % 25}" for j in range(steps)))
    (tmp_path / "seq.txt").write_text("\n".join(lines) + "\n")
    data, model = str(tmp_path / "data"), str(tmp_path / "model")
    assert main(["prepare", str(tmp_path / "seq.txt"), "--format", "lines", "--split", "leave-one-out",
                 "--out", data, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    short = sum(len(line.split()) - 1 < 3 for line in lines)
    assert summary["too_short_kept_for_training"] == short and summary["test"]["sets"] == 60 - short
    assert main(["train", "--preset", "none", data, "--out", model, "--steps", "2", "--positions", "32", "--d", "16", "--heads", "2",
                 "--d-ff", "32", "--layers", "1", "--alpha", "2", "--m", "2", "--batch-size", "8",
                 "--quiet", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["eval", model, data, "--protocol", "leave-one-out", "--split", "valid",
                 "--baselines", "popularity,cooccurrence", "--json", "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["examples"] == 60 - short
    assert r["protocol"]["split"] == "valid" and r["protocol"]["exclude_history"] is True
    assert r["protocol"]["n"] == 31 and r["protocol"]["model_positions"] == 32
    for method in (r, r["baselines"]["popularity"], r["baselines"]["cooccurrence"]):
        assert set(method) >= {"hr@1", "hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20", "mrr"}
        assert method["hr@10_lo"] <= method["hr@10"] <= method["hr@10_hi"]
        assert 0.0 <= method["hr@1"] <= method["hr@5"] <= method["hr@10"] <= method["hr@20"] <= 1.0
    assert main(["eval", model, data, "--split", "test", "--no-exclude-history", "--baselines", "popularity",
                 "--threads", "1"]) == 0  # --protocol auto: the dataset's split
    table = capsys.readouterr().out
    assert "hr@10" in table and "nothing excluded from the ranking" in table and "test targets" in table
    assert main(["eval", model, data, "--protocol", "sets", "--threads", "1"]) == 2  # the wrong protocol: an error
    assert "--protocol leave-one-out" in capsys.readouterr().err
    # --compare: a model with 16 positions (a shorter history of the same users), paired on the users' targets
    assert main(["train", "--preset", "none", data, "--out", model + "16", "--steps", "2", "--positions", "16", "--d", "16", "--heads", "2",
                 "--d-ff", "32", "--layers", "1", "--alpha", "2", "--m", "2", "--batch-size", "8", "--quiet",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["eval", model, data, "--split", "valid", "--baselines", "popularity", "--compare", model + "16",
                 "--compare", model, "--json", "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["compared"][model + "16"]["metrics"]["protocol"]["n"] == 15
    assert set(r["compared"][model]["paired"]) == {"hr@1", "hr@10", "hr@20", "mrr"}
    assert all(v == {"diff": 0.0, "lo": 0.0, "hi": 0.0} for v in r["compared"][model]["paired"].values())
    p = r["compared"][model + "16"]["paired"]["hr@10"]
    assert p["diff"] == pytest.approx(r["hr@10"] - r["compared"][model + "16"]["metrics"]["hr@10"])
    both = sb.compare(sb.load(model), {"16": sb.load(model + "16")}, sb.Dataset(data),
                      EvalConfig(split="valid", baselines=()), progress=False)
    assert both.to_dict()["compared"]["16"]["paired"] == r["compared"][model + "16"]["paired"]
    assert "users resampled" in both.report()


# ---------------------------------------------------------------- S3-Rec Beauty


def test_s3rec_beauty_split_sizes(tmp_path):
    path = shared_file("s3rec", "Beauty.txt")
    s = prepare(PrepareConfig(str(path), str(tmp_path / "beauty"), read=sb.ReadConfig(format="lines"),
                              split="leave-one-out"), progress=False)
    # S3-Rec's Beauty (5-core): 22,363 users, 198,502 interactions, 12,101 items; every user has >= 5
    assert s["sets"] == 22_363 and s["links"] == 198_502 and s["too_short_kept_for_training"] == 0
    assert s["valid"]["sets"] == s["test"]["sets"] == 22_363
    assert s["train"]["links"] == 198_502 - 2 * 22_363
    assert s["ids"] <= 12_101
    data = sb.Dataset(tmp_path / "beauty")
    first = path.read_text().split("\n", 1)[0].split()  # "1 1 2 3 4 5"
    assert data.set_names("test")[0] == first[0]
    assert strings(data, data.train[0]) == first[1:-2]
    assert strings(data, data.targets("valid")[:1]) == [first[-2] if first[-2] in data.vocab.index else None]
    assert data.history("test").lengths.sum() == 198_502 - 22_363


def test_model_ranking_with_another_exclusion(tiny_model, wiki_data):
    from superbloom.evaluation.protocols import make_examples

    model = sb.load(tiny_model)
    ex = make_examples(wiki_data.test, 8, 1, seed=0, max_sets=40)
    same = model.rank(ex.contexts, 10, exclude=ex.contexts)
    assert (same.ids == model.rank(ex.contexts, 10).ids).all()  # the context as exclusion: predictor.rank
    other = np.random.default_rng(0).integers(0, wiki_data.n_ids, (len(ex.contexts), 30))
    got = model.rank(ex.contexts, 10, exclude=other).ids.numpy()
    assert not (got[:, :, None] == other[:, None, :]).any()  # never an excluded id
    free = model.rank(ex.contexts, 10, exclude=np.zeros((len(ex.contexts), 0), np.int64)).ids.numpy()
    assert (free >= 0).all()  # nothing excluded: a full top-10 (context ids may appear)
