"""Bulk and filtered recommendations on the tiny model: bulk predict (library, JSONL and Parquet
through the CLI) equals one-at-a-time predict; allow- and deny-lists in the library, the CLI and
HTTP; the list form of POST /v1/predict; similar() against brute force; vectors export round
trips; GET /v1/model discloses no file-system path."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from superbloom.cli import main
from superbloom.heads.beam import DecodeConfig
from superbloom.inference.bulk import bulk_predict, read_contexts
from superbloom.inference.vectors import load_vectors
from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig


def contexts_of(predictor, n=23, seed=0):
    """n contexts of 1-4 ids of the tiny model's vocabulary, row 5 with unknown ids only."""
    rng = np.random.default_rng(seed)
    strings = predictor.vocab.strings
    out = [[strings[i] for i in rng.choice(len(strings), rng.integers(1, 5), replace=False)] for _ in range(n)]
    out[5] = ["no-such-id-1", "no-such-id-2"]
    return out


def one_by_one(predictor, contexts, k, decode=DecodeConfig(), allow=None, deny=None):
    return [predictor.predict(c, k, decode, allow, deny) if predictor.vocab.lookup(c)[0].size else None
            for c in contexts]


def same(pred, ref):
    assert [i for i, _ in pred.items] == [i for i, _ in ref.items]
    assert np.allclose([s for _, s in pred.items], [s for _, s in ref.items], atol=1e-5)
    assert pred.exact == ref.exact and pred.beam == ref.beam


@pytest.mark.parametrize("decode", [DecodeConfig(), DecodeConfig(exact=True)], ids=["approx", "exact"])
def test_recommend_equals_predict_on_every_row(tiny_predictor, decode):
    contexts = contexts_of(tiny_predictor)
    allow = list(tiny_predictor.vocab.strings[::3])
    deny = list(tiny_predictor.vocab.strings[:40])
    for lists in [{}, {"allow": allow}, {"deny": deny}, {"allow": allow, "deny": deny}]:
        got = [p for batch in tiny_predictor.predict_batches(iter(contexts), 7, decode, batch_size=4, skip_empty=True,
                                                          **lists) for p in batch]
        refs = one_by_one(tiny_predictor, contexts, 7, decode, **lists)
        assert len(got) == len(contexts)
        for p, ref in zip(got, refs):
            if ref is None:  # no known id: an empty, non-exact answer
                assert p.items == [] and not p.exact and p.unknown == contexts[5]
            else:
                same(p, ref)
                ids = {i for i, _ in p.items}
                assert not ids & set(ref.context)
                if "allow" in lists:
                    assert ids <= set(allow)
                if "deny" in lists:
                    assert not ids & set(deny)
    with pytest.raises(ValueError, match="context 5: none of the 2 ids"):
        list(tiny_predictor.predict_batches(contexts, 7, batch_size=4))


def test_allow_list_is_exact_among_the_allowed(tiny_predictor):
    """An exact answer under an allow-list equals exhaustive scoring filtered to the allowed ids."""
    strings = tiny_predictor.vocab.strings
    allow = list(strings[1::7])
    ctx = [strings[3], strings[10]]
    got = tiny_predictor.predict(ctx, 8, DecodeConfig(exact=True), allow=allow)
    every = tiny_predictor.predict(ctx, len(strings), DecodeConfig(exhaustive=True))
    ref = [(i, s) for i, s in every.items if i in set(allow)][:8]
    assert got.exact and [i for i, _ in got.items] == [i for i, _ in ref]
    assert np.allclose([s for _, s in got.items], [s for _, s in ref], atol=1e-5)
    with pytest.raises(ValueError, match="allow: none of the 1 ids"):
        tiny_predictor.predict(ctx, 8, allow=["no-such-id"])


def write_inputs(tmp_path, contexts):
    jsonl = tmp_path / "contexts.jsonl"
    jsonl.write_text("".join(json.dumps({"context": c, **({"id": f"u{i}"} if i % 2 else {})}) + "\n"
                             for i, c in enumerate(contexts)))
    parquet = tmp_path / "contexts.parquet"
    pq.write_table(pa.table({"items": contexts, "user": [f"u{i}" for i in range(len(contexts))]}), parquet)
    return jsonl, parquet


def test_cli_bulk_predict_equals_predict(tiny_model, tiny_predictor, tmp_path, capsys):
    contexts = contexts_of(tiny_predictor)
    jsonl, parquet = write_inputs(tmp_path, contexts)
    deny = tmp_path / "deny.txt"
    deny.write_text("\n".join(tiny_predictor.vocab.strings[:30]) + "\n\nno-such-id\n")
    refs = one_by_one(tiny_predictor, contexts, 5, deny=list(tiny_predictor.vocab.strings[:30]))
    for path, extra, keys in [(jsonl, [], [str(i) if i % 2 == 0 else f"u{i}" for i in range(len(contexts))]),
                              (parquet, ["--context-column", "items", "--key-column", "user"],
                               [f"u{i}" for i in range(len(contexts))])]:
        out = tmp_path / f"recs-{path.suffix[1:]}.parquet"
        assert main(["predict", str(tiny_model), "--input", str(path), "--out", str(out), "--k", "5",
                     "--batch-size", "4", "--deny", str(deny), *extra]) == 0
        err = capsys.readouterr().err
        assert "contexts/s" in err and "1 with no known id skipped" in err and "1 of the 31 ids of --deny" in err
        table = pq.read_table(out)
        assert table.schema.names == ["key", "rank", "id", "score", "exact"]
        rows = table.to_pylist()
        for key, ref in zip(keys, refs):
            mine = [r for r in rows if r["key"] == key]
            if ref is None:
                assert mine == []
                continue
            assert [r["rank"] for r in mine] == list(range(1, len(ref.items) + 1))
            assert [r["id"] for r in mine] == [i for i, _ in ref.items]
            assert np.allclose([r["score"] for r in mine], [s for _, s in ref.items], atol=1e-5)
            assert {r["exact"] for r in mine} == {ref.exact}


def test_bulk_input_errors_name_the_file_and_line(tiny_predictor, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": ["a"]}\n{"context": "a"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: field 'context' must be a list of string ids"):
        list(read_contexts(bad))
    bad.write_text('{"context": ["a"]}\n\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: not valid JSON"):
        list(read_contexts(bad))
    _, parquet = write_inputs(tmp_path, [["a"]])
    with pytest.raises(ValueError, match="no column 'context' .*--context-column"):
        bulk_predict(tiny_predictor, parquet, tmp_path / "out.parquet")
    with pytest.raises(ValueError, match="unknown contexts file type '.csv'"):
        list(read_contexts(tmp_path / "x.csv"))


def test_cli_allow_and_deny(tiny_model, tiny_predictor, tmp_path, capsys):
    strings = tiny_predictor.vocab.strings
    allow, deny = tmp_path / "allow.txt", tmp_path / "deny.txt"
    allow.write_text("\n".join(strings[::5]) + "\n")
    deny.write_text("\n".join(strings[::10]) + "\n")
    ctx = [strings[1], strings[2]]
    assert main(["predict", str(tiny_model), *ctx, "--k", "6", "--exact", "--allow", str(allow), "--deny", str(deny),
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = tiny_predictor.predict(ctx, 6, DecodeConfig(exact=True), allow=strings[::5], deny=strings[::10])
    assert [p["id"] for p in got["predictions"]] == [i for i, _ in ref.items]
    assert all(strings.index(p["id"]) % 5 == 0 and strings.index(p["id"]) % 10 for p in got["predictions"])
    assert got["exact"]
    assert main(["predict", str(tiny_model), "--input", str(allow)]) == 2  # --input needs --out
    assert "predict: give context ids, or --input FILE with --out FILE" in capsys.readouterr().err


@pytest.fixture(scope="module")
def client(tiny_predictor):
    with TestClient(create_app(tiny_predictor, ServeConfig(max_context=8, max_k=50, max_contexts=4))) as c:
        yield c


def test_http_list_of_contexts_and_candidate_lists(client, tiny_predictor):
    strings = tiny_predictor.vocab.strings
    contexts = [[strings[1], strings[2]], [strings[7]], [strings[30], "no-such-id"]]
    single = [client.post("/v1/predict", json={"context": c, "k": 5}).json() for c in contexts]
    r = client.post("/v1/predict", json={"context": contexts, "k": 5})
    assert r.status_code == 200 and len(r.json()) == len(single)
    for got, one in zip(r.json(), single):  # batched with each other: scores equal up to float rounding
        assert [p["id"] for p in got["predictions"]] == [p["id"] for p in one["predictions"]]
        assert np.allclose([p["score"] for p in got["predictions"]], [p["score"] for p in one["predictions"]],
                           atol=1e-5)
        assert {k: v for k, v in got.items() if k != "predictions"} == {k: v for k, v in one.items()
                                                                       if k != "predictions"}
    assert set(single[0]) == {"predictions", "exact", "beam", "context", "unknown", "repeated"}  # the single shape
    allow, deny = strings[::4], strings[::8]
    r = client.post("/v1/predict", json={"context": contexts, "k": 5, "exact": True, "allow": allow + ["nope"],
                                         "deny": deny})
    for c, ans in zip(contexts, r.json()):
        ref = tiny_predictor.predict(c, 5, DecodeConfig(exact=True), allow=allow, deny=deny)
        assert [p["id"] for p in ans["predictions"]] == [i for i, _ in ref.items] and ans["exact"]
        assert {p["id"] for p in ans["predictions"]} <= set(allow) - set(deny)
    bad = [({"context": contexts, "allow": ["nope"]}, "allow: none of the 1 ids"),
           ({"context": [[strings[1]], ["nope"]]}, "context.1: none of the 1 ids"),
           ({"context": [[strings[1]]] * 5}, "context: List should have at most 4 items"),
           ({"context": [[strings[1]], []]}, "context.1: List should have at least 1 item")]
    for body, message in bad:
        r = client.post("/v1/predict", json=body)
        assert r.status_code == 422 and message in r.json()["message"], r.json()


def test_model_info_discloses_no_path(client, tiny_model):
    info = client.get("/v1/model").json()
    text = json.dumps(info)
    assert str(tiny_model) not in text and str(tiny_model.parent) not in text and '"/' not in text
    assert info["train"]["out"] == "model" and info["train"]["data"] == "data"  # last components only
    assert info["n_ids"] > 0 and info["model"] and info["head"]


def test_similar_is_brute_force_cosine(tiny_predictor):
    vecs = tiny_predictor.item_vectors()
    strings = tiny_predictor.vocab.strings
    assert vecs.shape == (len(strings), tiny_predictor.model.encoder.cfg.d)
    # brute force: each id's m token rows, averaged, then cosine against every other id
    emb = tiny_predictor.model.encoder.embed.weight.detach().numpy()
    tokens = tiny_predictor.hashing.tokens(np.arange(len(strings)))
    ref_vecs = emb[tokens].mean(1)
    assert np.allclose(vecs, ref_vecs, atol=1e-6)
    unit = ref_vecs / np.linalg.norm(ref_vecs, axis=1, keepdims=True)
    for i in (0, 17, len(strings) - 1):
        cos = unit @ unit[i]
        cos[i] = -np.inf
        got = tiny_predictor.similar(strings[i], 6)
        assert np.allclose([c for _, c in got], np.sort(cos)[::-1][:6], atol=1e-5)
        assert [strings.index(j) for j, _ in got][:3] == np.argsort(-cos, kind="stable")[:3].tolist()
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        tiny_predictor.similar("no-such-id")


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_vectors_export_round_trip(tiny_model, tiny_predictor, tmp_path, suffix, capsys):
    out = tmp_path / f"vecs{suffix}"
    assert main(["vectors", str(tiny_model), "--out", str(out)]) == 0
    vecs, ids = load_vectors(out)
    assert np.array_equal(vecs, tiny_predictor.item_vectors())
    assert ids is None if suffix == ".npy" else ids == list(tiny_predictor.vocab.strings)
    assert main(["vectors", str(tiny_model), "--out", str(tmp_path / "v.csv")]) == 2
    assert "unknown vector file type '.csv'" in capsys.readouterr().err
