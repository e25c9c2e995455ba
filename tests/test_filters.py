"""The same filters in the CLI, Python and HTTP: allow / deny (a file, or inline), include seen ids
(re-purchase), for predict, for similar items (`similar-ids`, POST /v1/similar-items) and for set
expansion (`expand`, POST /v1/expand: allow / deny); each interface answers what the library answers,
and the library's expansion adds, at each step, the best allowed id by exhaustive scoring."""
from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

import superbloom as sb
from superbloom.cli import main
from superbloom.heads.decode_config import DecodeConfig
from superbloom.inference.expand import ExpandConfig, expand
from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig


@pytest.fixture(scope="module")
def client(tiny_predictor):
    with TestClient(create_app(tiny_predictor, ServeConfig(max_k=50, max_list=500), access_log=False)) as c:
        yield c


def lists_of(model):
    s = model.vocab.strings
    return list(s[::10]), list(s[:30:2])


def test_similar_items_route_equals_the_library(client, tiny_predictor):
    model = tiny_predictor
    allow, deny = lists_of(model)
    for body, kw in [({}, {}), ({"allow": allow}, {"allow": allow}), ({"deny": deny}, {"deny": deny}),
                     ({"include_seen": True}, {"exclude_seen": False})]:
        r = client.post("/v1/similar-items", json={"ids": ["Jazz", "Paris"], "k": 6, **body})
        assert r.status_code == 200, r.text
        ref = model.similar_items(["Jazz", "Paris"], 6, **kw)
        out = r.json()["results"]
        assert [x["id"] for x in out] == ["Jazz", "Paris"]
        for q, row in enumerate(out):
            assert [x["id"] for x in row["similar"]] == [i for i, _ in ref.items(q)]
            assert [x["cosine"] for x in row["similar"]] == pytest.approx([c for _, c in ref.items(q)], abs=1e-6)
    assert out[0]["similar"][0]["id"] == "Jazz"  # include_seen: an id is its own nearest


def test_similar_items_route_refuses_bad_input_naming_the_field(client):
    for body, status, words in [({"ids": ["Jazz", "Not_A_Page"]}, 422, "ids.1: 'Not_A_Page' is not in"),
                                ({"ids": []}, 422, "ids"), ({"ids": ["Jazz"], "k": 0}, 422, "k"),
                                ({"ids": ["Jazz"], "k": 51}, 422, "k"),
                                ({"ids": ["Jazz"], "allow": ["Not_A_Page"]}, 422, "allow: none of the 1 ids"),
                                ({"ids": ["Jazz"], "allow": ["x"] * 501}, 422, "allow"),
                                ({"ids": ["Jazz"], "include_seen": "yes"}, 422, "include_seen"),
                                ({"ids": ["Jazz"], "nope": 1}, 422, "nope")]:
        r = client.post("/v1/similar-items", json=body)
        assert r.status_code == status and words in r.json()["message"], (body, r.text)


def test_predict_route_includes_seen_ids_on_request(client, tiny_predictor):
    ctx = ["Jazz", "Paris"]
    for include in (False, True):
        r = client.post("/v1/predict", json={"context": ctx, "k": 8, "exact": True, "include_seen": include,
                                             "deny": ["Copenhagen"]})
        assert r.status_code == 200, r.text
        ref = tiny_predictor.predict(ctx, 8, allow=None, deny=["Copenhagen"], exclude_seen=not include,
                                     decode=DecodeConfig(exact=True))
        assert [p["id"] for p in r.json()["predictions"]] == [i for i, _ in ref.items]
    full = tiny_predictor.predict(ctx, len(tiny_predictor.vocab), exclude_seen=False,
                                  decode=DecodeConfig(exhaustive=True))
    assert {"Jazz", "Paris"} <= {i for i, _ in full.items}  # with seen ids included, every id is ranked


def test_cli_similar_ids_filters_equal_the_library(tiny_model, tiny_predictor, tmp_path, capsys):
    model = tiny_predictor
    allow, deny = lists_of(model)
    allow_file = tmp_path / "allow.txt"
    allow_file.write_text("\n".join(allow[:-5]) + "\nno-such-id\n")
    argv = ["similar-ids", str(tiny_model), "Jazz", "Paris", "--k", "5", "--json"]
    for extra, kw in [([], {}),
                      (["--allow", str(allow_file), "--allow-ids", ",".join(allow[-5:])], {"allow": allow}),
                      (["--deny-ids", ",".join(deny)], {"deny": deny}),
                      (["--include-seen"], {"exclude_seen": False})]:
        assert main(argv + extra) == 0
        cap = capsys.readouterr()
        out = json.loads(cap.out)["results"]
        ref = model.similar_items(["Jazz", "Paris"], 5, **kw)
        for q, row in enumerate(out):
            assert [x["id"] for x in row["similar"]] == [i for i, _ in ref.items(q)]
        if "allow" in kw:
            assert "1 of the " in cap.err and "no-such-id" in cap.err
    assert main(["similar-ids", str(tiny_model), "Jazz", "--k", "3", "--json"]) == 0  # one id: a plain list
    assert [x["id"] for x in json.loads(capsys.readouterr().out)] == [i for i, _ in model.similar("Jazz", 3)]
    assert main(["similar-ids", str(tiny_model), "Jazz", "Not_A_Page"]) == 2
    assert "id 1: 'Not_A_Page' is not in the model's vocabulary" in capsys.readouterr().err
    assert main(["similar-ids", str(tiny_model), "Jazz", "--allow", str(tmp_path / "missing.txt")]) == 2
    assert "--allow" in capsys.readouterr().err


def test_cli_predict_inline_filters_and_seen_ids(tiny_model, tiny_predictor, tmp_path, capsys):
    model = tiny_predictor
    allow, deny = lists_of(model)
    deny_file = tmp_path / "deny.txt"
    deny_file.write_text("\n".join(deny) + "\n")
    ctx = ["Jazz", "Paris"]
    for extra, kw in [(["--allow-ids", ",".join(allow)], {"allow": allow}),
                      (["--deny", str(deny_file)], {"deny": deny}),
                      (["--include-seen", "--allow-ids", "Jazz,Paris,Copenhagen"],
                       {"allow": ["Jazz", "Paris", "Copenhagen"], "exclude_seen": False})]:
        assert main(["predict", str(tiny_model), *ctx, "--k", "6", "--json", *extra]) == 0
        got = json.loads(capsys.readouterr().out)
        ref = model.predict(ctx, 6, **kw)
        assert [p["id"] for p in got["predictions"]] == [i for i, _ in ref.items]
    assert {p["id"] for p in got["predictions"]} == {"Jazz", "Paris", "Copenhagen"}
    assert main(["predict", str(tiny_model), *ctx, "--allow-ids", ","]) == 2
    assert "--allow-ids: no id given" in capsys.readouterr().err


@pytest.mark.parametrize("use_allow,use_deny", [(True, False), (False, True), (True, True)])
def test_expand_filters_add_the_best_allowed_id_by_exhaustive_scoring(tiny_predictor, use_allow, use_deny):
    model = tiny_predictor
    s, n = model.vocab.strings, len(model.vocab)
    rng = np.random.default_rng(7)
    allow = sorted(rng.choice(n, 300, replace=False).tolist()) if use_allow else None
    deny = rng.choice(n, 200, replace=False).tolist() if use_deny else []
    seed = [3, 10]
    out = expand(model, [s[i] for i in seed], ExpandConfig(steps=6, decode=DecodeConfig(exact=True)),
                 allow=None if allow is None else [s[i] for i in allow], deny=[s[i] for i in deny] or None)
    context = list(seed)
    for step in out.added:
        every = model.rank(np.asarray([context]), n, DecodeConfig(exhaustive=True), exclude=np.zeros((1, 0), np.int64))
        keep = [(i, x) for i, x in zip(every.ids[0].tolist(), every.scores[0].tolist())
                if i >= 0 and i not in context and i not in deny and (allow is None or i in allow)]
        got = model.vocab.get(step.id)
        assert step.exact and step.score == pytest.approx(keep[0][1], abs=1e-5)
        if sum(abs(x - keep[0][1]) <= 1e-5 for _, x in keep) == 1:  # not tied: the very id
            assert got == keep[0][0]
        assert got not in deny and (allow is None or got in allow)
        context.append(got)
    assert len(out.added) == 6


def test_expand_filters_bound_the_steps_and_refuse_an_empty_allow_list(tiny_predictor):
    model = tiny_predictor
    s = model.vocab.strings
    with pytest.raises(sb.ArgumentError, match=r"steps: at most 3 ids can be added to this seed \(the allowed ids"):
        expand(model, [s[0]], ExpandConfig(steps=4), allow=[s[0], s[1], s[2], s[3], s[4]], deny=[s[4]])
    assert len(expand(model, [s[0]], ExpandConfig(steps=3), allow=[s[1], s[2], s[3]]).added) == 3
    with pytest.raises(ValueError, match="allow: none of the 1 ids"):
        expand(model, [s[0]], ExpandConfig(steps=1), allow=["no-such-id"])


def test_expand_route_and_cli_filters_equal_the_library(client, tiny_model, tiny_predictor, tmp_path, capsys):
    model = tiny_predictor
    allow, deny = lists_of(model)
    deny_file = tmp_path / "deny.txt"
    deny_file.write_text("\n".join(deny) + "\n")
    for kw, flags in [({"allow": allow}, ["--allow-ids", ",".join(allow)]),
                      ({"deny": deny}, ["--deny", str(deny_file)]),
                      ({"allow": allow, "deny": deny}, ["--allow-ids", ",".join(allow), "--deny-ids", ",".join(deny)])]:
        ref = [a.id for a in expand(model, ["Jazz"], ExpandConfig(steps=4), **kw).added]
        assert set(ref) <= set(kw.get("allow", ref)) and not set(ref) & set(kw.get("deny", []))
        r = client.post("/v1/expand", json={"seed": ["Jazz"], "steps": 4, **kw})
        assert r.status_code == 200, r.text
        assert [a["id"] for a in r.json()["added"]] == ref
        assert main(["expand", str(tiny_model), "Jazz", "--add", "4", "--json", *flags]) == 0
        assert [a["id"] for a in json.loads(capsys.readouterr().out)["added"]] == ref
    r = client.post("/v1/expand", json={"seed": ["Jazz"], "steps": 2, "allow": ["no-such-id"]})
    assert r.status_code == 422 and "allow" in r.text
    assert main(["expand", str(tiny_model), "Jazz", "--deny", str(tmp_path / "missing.txt")]) == 2
    assert "--deny" in capsys.readouterr().err
