"""One writer per output, and readers that never see half of a swap.

- N processes write one output at once (prepare; train --overwrite over a finished model), repeated:
  exactly one finishes, every other exits 2 at once with one line naming the writer's pid, and the
  output left is complete (a live run's staging folder is never taken for a killed run's leftovers);
- a writer killed with SIGKILL holds no lock: the next writer runs (the kernel released it);
- a process writes new versions of a dataset and of a model into one folder, swap after swap, while this
  one loads them: every load is one whole version (arrays, vocabulary and weights that belong together).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.storage.guarded import LOCK, claim, lock_path
from superbloom.storage.loading import LoadError, version_of

TINY = ["--preset", "none", "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "16",
        "--eval-every", "0", "--quiet", "--threads", "1"]

# a superbloom command that starts its work only when the file argv[1] exists: all N at the same moment
AT_ONCE = """
import os, sys, time
from superbloom.cli import main
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
sys.exit(main(sys.argv[2:]))
"""

# a process holding the lock of an output (a writer part-way), until its stdin closes
HOLDER = """
import sys
from superbloom.storage.guarded import claim
target = claim(sys.argv[1], sys.argv[2], main=True)
print("ready", flush=True)
sys.stdin.read()
"""


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1")


def at_once(argv: list[str], n: int, tmp: Path) -> list[tuple[int, int, str]]:
    """n processes of `superbloom argv` started together -> [(pid, exit code, stderr)]."""
    go = tmp / "go"
    go.unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, "-c", AT_ONCE, str(go), *argv], cwd=tmp, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=_env()) for _ in range(n)]
    time.sleep(1.0)  # past their imports
    go.write_text("")
    return [(p.pid, p.wait(timeout=600), p.stderr.read()) for p in procs]


def _check_one_won(results, out: Path):
    """Exactly one exit 0; every other exit 2 with one line naming the winner's pid; no traceback."""
    won = [pid for pid, code, _ in results if code == 0]
    assert len(won) == 1, [(c, e[-300:]) for _, c, e in results]
    for pid, code, err in results:
        assert "Traceback" not in err, err
        if code != 0:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert code == 2 and len(lines) == 1, err
            assert f"is being written by another superbloom process (pid {won[0]}," in lines[0], lines[0]
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(out.name + ".")]  # no .new/.old/.partial
    assert not lock_path(out).exists()  # the winner removed its lock file


def test_many_writers_of_one_dataset_at_once(tmp_path):
    links = tmp_path / "links.tsv"
    links.write_text("".join(f"s{i // 5}\tid{(i * 7) % 1999}\n" for i in range(60_000)))
    out = tmp_path / "data"
    (tmp_path / "notes.txt").write_text("the user's file beside it")
    for round_ in range(2):
        results = at_once(["prepare", str(links), "--out", str(out), "--overwrite"], 3, tmp_path)
        _check_one_won(results, out)
        assert sb.Dataset(out).n_ids == 1999
    assert (tmp_path / "notes.txt").read_text() == "the user's file beside it"


def test_many_trainers_over_a_finished_model_at_once(wiki_data, tmp_path):
    """The case that lost a finished model: a second `train --overwrite` took the first one's live
    M.new for a killed run's leftovers and removed it. Now it is refused, and M is whole after each round."""
    out = tmp_path / "m"
    assert main(["train", str(wiki_data.path), "--out", str(out), "--steps", "2", *TINY]) == 0
    for round_ in range(2):
        results = at_once(["train", str(wiki_data.path), "--out", str(out), "--overwrite", "--steps", "40", *TINY],
                          3, tmp_path)
        _check_one_won(results, out)
        sb.load(out).predict(["Jazz"], k=3)
    assert json.loads((out / "config.json").read_text())["train"]["loop"]["steps"] == 40


def _holding(path: Path, kind: str):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), kind], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_a_killed_writer_holds_no_lock(tmp_path, capsys):
    links = tmp_path / "links.tsv"
    links.write_text("".join(f"s{i // 3}\tid{i % 17}\n" for i in range(300)))
    out = tmp_path / "d"
    holder = _holding(out, "dataset")
    try:
        assert main(["prepare", str(links), "--out", str(out)]) == 2
        assert f"(pid {holder.pid}," in capsys.readouterr().err
        assert not out.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock_path(out).exists()  # left by the kill, no longer locked
    assert main(["prepare", str(links), "--out", str(out)]) == 0
    assert sb.Dataset(out).n_ids == 17 and not lock_path(out).exists()


def test_a_process_may_claim_its_own_output_again(tmp_path):
    first = claim(tmp_path / "o", "model")
    second = claim(tmp_path / "o", "model")  # shared: one lock file, held until both are done
    first.release()
    assert lock_path(tmp_path / "o").exists()
    second.release()
    assert not lock_path(tmp_path / "o").exists() and LOCK in lock_path(tmp_path / "o").name


# ---------------------------------------------------------------- readers beside a writer that swaps

SWAPPER = """
import shutil, sys, time
from pathlib import Path
from superbloom.storage.guarded import MARKER, claim
out, kind, seconds, pause, sources = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
end, n = time.time() + seconds, 0
while time.time() < end:
    target = claim(out, kind)
    work = target.stage()
    src = Path(sources[n % len(sources)])
    for entry in src.iterdir():
        if entry.name != MARKER:
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, work / entry.name)
    target.commit()
    target.release()
    n += 1
    time.sleep(pause * (0.5 + (n * 7919 % 10) / 10))  # a new version every so often, at uneven moments
print(n, flush=True)
"""


def swapping(out: Path, kind: str, seconds: float, pause: float, sources: list[Path]):
    """A process that writes the versions `sources` into `out` in turn, one swap every ~`pause` s."""
    shutil.copytree(sources[0], out)
    return subprocess.Popen([sys.executable, "-c", SWAPPER, str(out), kind, str(seconds), str(pause),
                             *map(str, sources)], stdout=subprocess.PIPE, text=True, env=_env())


def test_a_dataset_read_while_it_is_replaced_is_one_version(wiki_data, tmp_path):
    small = tmp_path / "small"
    (tmp_path / "small.tsv").write_text("".join(f"s{i // 3}\tid{i % 17}\n" for i in range(300)))
    sb.prepare(sb.PrepareConfig(str(tmp_path / "small.tsv"), str(small)), progress=False)
    out = tmp_path / "d"
    writer = swapping(out, "dataset", 6.0, 0.05, [wiki_data.path, small])
    reads = later = straddled = 0
    while writer.poll() is None:
        before = version_of(out)
        d = sb.Dataset(out)  # meta.json, the splits and the counts: one version
        straddled += version_of(out) != before
        n = d.n_ids
        assert n in (17, wiki_data.n_ids) and d.meta["ids"] == n
        assert int(np.asarray(d.train.ids).max()) < n and int(d.train.offsets[-1]) == len(d.train.ids)
        try:  # read later (lazily): of the version opened, or refused, never another version's
            assert len(d.vocab) == n
        except LoadError as e:
            assert "replaced by another run" in str(e)
            later += 1
        reads += 1
    swaps = int(writer.stdout.read())
    assert writer.returncode == 0 and swaps >= 10 and reads >= 10 and later < reads, (swaps, reads, later)
    assert straddled, "no read overlapped a swap: the test tested nothing"


def test_a_model_loaded_while_it_is_replaced_is_one_version(wiki_data, tiny_model, tmp_path):
    other = tmp_path / "other"
    assert main(["train", str(wiki_data.path), "--out", str(other), "--steps", "1", *TINY]) == 0
    out = tmp_path / "m"
    writer = swapping(out, "model", 8.0, 0.4, [tiny_model, other])
    loads = straddled = 0
    while writer.poll() is None:
        before = version_of(out)
        model = sb.load(out)  # config, hash maps, vocabulary and weights of one version (d=32 or d=16)
        straddled += version_of(out) != before
        assert model.predict(["Jazz"], k=3).items
        loads += 1
    swaps = int(writer.stdout.read())
    assert writer.returncode == 0 and swaps >= 5 and loads >= 5, (swaps, loads)
    assert straddled, "no load overlapped a swap: the test tested nothing"
