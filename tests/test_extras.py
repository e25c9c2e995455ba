"""Every path that needs an optional extra, with the extra missing (its package hidden from imports):
exit 2 with one line on stderr naming the extra and the commands that install it, from a clone and
from a wheel, before any work: no output file or folder touched (no new one written, and the files a
command updates in place, such as eval's MODEL/README.md and eval.json, byte for byte and time for time
as they were), no baseline fitted, nothing printed on stdout. The same check in the library
(sb.evaluate) before it ranks anything."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

import superbloom as sb
from superbloom._extras import EXTRAS, MissingExtra, install_commands
from superbloom.cli import main
from superbloom.evaluation.config import BASELINE_EXTRAS


@pytest.fixture(scope="module")
def inputs(tiny_model, wiki_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("extras")
    corpus = root / "corpus"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"doc{i}.txt").write_text("the cat and the dog " * 3 + ".\n")
    (root / "labels.tsv").write_text("".join(f"doc{i}\t{'a' if i % 2 else 'b'}\n" for i in range(6)))
    return {"model": str(tiny_model), "data": str(wiki_data.path), "corpus": str(corpus),
            "labels": str(root / "labels.tsv"), "links": str(sb.embedded_dataset())}


def snapshot(inputs: dict) -> dict:
    """Every file under the folders and files a command reads or updates in place (the model, whose card
    and eval.json `eval` rewrites; the dataset; the corpus and labels) -> its size, mtime and digest."""
    files = {}
    for root in map(Path, inputs.values()):
        for f in ([root] if root.is_file() else sorted(root.rglob("*"))):
            if f.is_file():
                st = f.stat()
                files[str(f)] = (st.st_size, st.st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
    return files


# (what, the packages hidden, the extra named, argv with {new} the output that must not appear)
GATED = [
    ("serve", ("fastapi", "uvicorn"), "serve", ["serve", "{model}", "--port", "0"]),
    ("serve --embed", ("fastapi",), "serve", ["serve", "{model}", "--embed", "{model}", "--port", "0"]),
    ("eval --baselines item2vec", ("gensim",), "baselines",
     ["eval", "{model}", "{data}", "--baselines", "popularity,cooccurrence,item2vec"]),
    ("eval --baselines als", ("implicit",), "baselines", ["eval", "{model}", "{data}", "--baselines", "ease,als"]),
    ("eval --baselines item2vec-untuned,als-untuned", ("gensim", "implicit"), "baselines",
     ["eval", "{model}", "{data}", "--baselines", "item2vec-untuned,als-untuned"]),
    ("eval --baselines sansa", ("sansa", "sksparse"), "sansa",
     ["eval", "{model}", "{data}", "--baselines", "popularity,sansa"]),
    ("eval --baselines sansa", ("sansa",), "sansa", ["eval", "{model}", "{data}", "--baselines", "popularity,sansa"]),
    ("prepare --memory-limit", ("duckdb",), "outofcore",
     ["prepare", "{links}", "--out", "{new}", "--memory-limit", "1GB"]),
    ("train --log-to tensorboard", ("tensorboard",), "track",
     ["train", "{data}", "--out", "{new}", "--steps", "2", "--log-to", "tensorboard:{new}-tb"]),
    ("train --log-to mlflow", ("mlflow",), "track",
     ["train", "{data}", "--out", "{new}", "--steps", "2", "--log-to", "mlflow:sqlite:///{new}.db"]),
    ("embed-train --log-to", ("tensorboard",), "track",
     ["embed-train", "{data}", "--out", "{new}", "--steps", "1", "--log-to", "tensorboard:{new}-tb"]),
    ("textclass-train --log-to", ("mlflow",), "track",
     ["textclass-train", "{corpus}", "--labels", "{labels}", "--out", "{new}", "--epochs", "1",
      "--log-to", "mlflow:sqlite:///{new}.db"]),
]


@pytest.mark.parametrize("what,hidden,extra,argv", GATED, ids=[g[0] for g in GATED])
def test_a_missing_extra_is_one_line_before_any_work(what, hidden, extra, argv, inputs, tmp_path, capsys,
                                                     monkeypatch):
    new = tmp_path / "out"
    words = [a.format(new=new, **inputs) for a in argv]
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    import superbloom.evaluation.protocols as protocols

    def no_fit(*a, **k):
        raise AssertionError("a baseline was fitted before the missing extra was reported")

    monkeypatch.setattr(protocols, "fit_baseline", no_fit)
    before = snapshot(inputs)
    assert main(words) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"the [{extra}] extra" in lines[0] and install_commands(extra) in lines[0], lines[0]
    assert f"pip install -e '.[{extra}]'" in lines[0] and f"pip install 'superbloom[{extra}]'" in lines[0]
    assert out == ""
    assert not list(tmp_path.iterdir()), f"{what}: wrote {list(tmp_path.iterdir())} before refusing"
    after = snapshot(inputs)
    assert after == before, f"{what}: touched {sorted(set(after.items()) ^ set(before.items()))} before refusing"


def test_every_extra_and_gated_baseline_is_in_the_table():
    """The table covers every extra the command line can ask for and every baseline behind one."""
    assert {g[2] for g in GATED} == set(EXTRAS)
    named = " ".join(" ".join(g[3]) for g in GATED)
    assert all(name in named for name in BASELINE_EXTRAS)


def test_the_library_checks_a_baseline_extra_before_ranking(tiny_predictor, wiki_data, monkeypatch):
    monkeypatch.setitem(sys.modules, "implicit", None)
    import superbloom.inference.rank as rank

    monkeypatch.setattr(rank, "rank_batch", lambda *a, **k: pytest.fail("ranked before the extra was checked"))
    with pytest.raises(MissingExtra, match=r"the als baseline .*\[baselines\] extra.*pip install -e"):
        sb.evaluate(tiny_predictor, wiki_data, sb.EvalConfig(baselines=("popularity", "als")), progress=False)


def test_mlflow_file_store_is_refused_before_the_run_with_the_way_out(inputs, tmp_path, capsys, monkeypatch):
    """MLflow 3 refuses a file store at its first record, minutes into a run: refused at once instead."""
    mlflow_version = pytest.importorskip("mlflow").__version__
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    argv = ["train", inputs["data"], "--out", str(tmp_path / "m"), "--steps", "2", "--log-to"]
    if int(mlflow_version.split(".")[0]) < 3:
        pytest.skip(f"MLflow {mlflow_version} accepts a file store")
    for uri in (str(tmp_path / "mlruns"), (tmp_path / "mlruns").as_uri()):
        assert main(argv + [f"mlflow:{uri}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "refuses a file store" in err[0] and "sqlite:///" in err[0], err
    assert not (tmp_path / "m").exists() and not (tmp_path / "mlruns").exists()


def test_the_install_tables_list_every_user_extra():
    """README.md's and docs/install.md's tables name every extra a command can ask for, and the README
    gives both commands for each."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = root.joinpath("README.md").read_text()
    install = root.joinpath("docs", "install.md").read_text()
    for extra in EXTRAS:
        assert f"| `{extra}` |" in readme and f"| `{extra}` |" in install, extra
        assert f"`pip install -e '.[{extra}]'`" in readme and f"`pip install 'superbloom[{extra}]'`" in readme
