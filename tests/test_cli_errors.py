"""Bad invocations of the command line (issue 10): each one exits 2 with a one-line message that names
the flag, file or field and what was expected. No traceback, no usage dump, nothing written."""
import re
import shutil

import pytest

from superbloom.cli import main

DATA, MODEL, OTHER = "{data}", "{model}", "{other}"

# (id, argv, words the message must contain)
CASES = [
    ("predict-k-0", ["predict", MODEL, "Jazz", "--k", "0"], ["argument -k/--k", "expected a number >= 1, got 0"]),
    ("predict-k-negative", ["predict", MODEL, "Jazz", "--k", "-3"], ["argument -k/--k", ">= 1, got -3"]),
    ("predict-k-text", ["predict", MODEL, "Jazz", "--k", "ten"], ["argument -k/--k", "expected an integer, got 'ten'"]),
    ("predict-beam-0", ["predict", MODEL, "Jazz", "--beam", "0"], ["argument --beam", ">= 1"]),
    ("predict-only-unknown", ["predict", MODEL, "Nope_1", "Nope_2"],
     ["none of the 2 ids is in the model's vocabulary", "Nope_1"]),
    ("predict-json-only-unknown", ["predict", MODEL, "Nope_1", "--json"], ["none of the 1 ids", "Nope_1"]),
    ("predict-no-model", ["predict", "{tmp}/missing", "Jazz"], ["missing"]),
    ("eval-depth-0", ["eval", MODEL, DATA, "--depth", "0"], ["argument --depth", ">= 1"]),
    ("eval-other-dataset", ["eval", MODEL, OTHER], ["vocabulary", "is not the model's"]),
    ("eval-targets-0", ["eval", MODEL, DATA, "--targets-per-set", "0"], ["argument --targets-per-set"]),
    ("train-batch-negative", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--batch-size", "-4"],
     ["argument --batch-size", "got -4"]),
    ("train-batch-0", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--batch-size", "0"],
     ["argument --batch-size", "got 0"]),
    ("train-steps-negative", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "-5"], ["argument --steps", "got -5"]),
    ("train-no-stop", ["train", "--preset", "none", DATA, "--out", "{tmp}/t"], ["set at least one of steps, epochs or time_budget"]),
    ("train-lr-nan", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--lr", "nan"],
     ["argument --lr", "finite number"]),
    ("train-lr-0", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--lr", "0"], ["argument --lr", "> 0"]),
    ("train-dropout-1", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--dropout", "1"],
     ["argument --dropout", "fraction in [0, 1)"]),
    ("train-heads-not-dividing", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--d", "30", "--heads", "4"],
     ["d=30 must be divisible by heads=4"]),
    ("train-setting-of-another-head", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--steps", "2", "--tree", "fano"],
     ["--tree is not a setting of the superbloom head"]),
    ("train-over-model", ["train", "--preset", "none", DATA, "--out", MODEL, "--steps", "2"], ["already holds a model", "--overwrite"]),
    ("train-out-is-file", ["train", "--preset", "none", DATA, "--out", "{tmp}/file.txt", "--steps", "2"], ["is a file"]),
    ("train-data-missing", ["train", "--preset", "none", "{tmp}/nodata", "--out", "{tmp}/t", "--steps", "2"],
     ["nodata is not a prepared dataset"]),
    ("train-resume-and-overwrite", ["train", "--preset", "none", DATA, "--out", MODEL, "--steps", "2", "--resume", "--overwrite"],
     ["--resume and --overwrite exclude each other"]),
    ("serve-port-too-big", ["serve", MODEL, "--port", "99999"], ["argument --port", "port number in [0, 65535]"]),
    ("expand-temperature-0", ["expand", MODEL, "Jazz", "--temperature", "0"], ["argument --temperature", "> 0"]),
    ("prepare-truncated-gz", ["prepare", "{tmp}/cut.tsv.gz", "--out", "{tmp}/d"],
     ["cut.tsv.gz", "truncated or corrupt gzip file"]),
    ("prepare-directory", ["prepare", "{tmp}", "--out", "{tmp}/d"], ["is a directory"]),
    ("prepare-binary", ["prepare", "{tmp}/blob.bin", "--out", "{tmp}/d"], ["blob.bin:1", "not a UTF-8 text file"]),
    ("prepare-out-is-file", ["prepare", "{tmp}/ok.tsv", "--out", "{tmp}/file.txt"], ["file.txt", "not a directory"]),
    ("prepare-test-fraction-1", ["prepare", "x.tsv", "--out", "{tmp}/d", "--test-fraction", "1"],
     ["argument --test-fraction", "fraction in [0, 1)"]),
    ("mistyped-flag", ["train", "--preset", "none", DATA, "--out", "{tmp}/t", "--stpes", "2"], ["unrecognized arguments: --stpes"]),
    ("unknown-command", ["trian"], ["invalid choice: 'trian'"]),
]


@pytest.fixture(scope="module")
def other_dataset(wiki_data, tmp_path_factory):
    """A dataset whose vocabulary differs from the model's: the same links, another split seed."""
    import superbloom as sb

    out = tmp_path_factory.mktemp("other") / "data"
    sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(out), seed=7), progress=False)
    return out


@pytest.mark.parametrize("argv,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_invocation_is_one_line_and_exit_2(argv, words, wiki_data, tiny_model, other_dataset, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("not a directory\n")
    (tmp_path / "ok.tsv").write_text("a\tb\na\tc\n")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 8)
    import superbloom as sb

    (tmp_path / "cut.tsv.gz").write_bytes(sb.embedded_dataset().read_bytes()[:300_000])  # cut in its first MB
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)  # a copy: nothing may change it, but a bug must not hurt other tests
    fill = {"data": str(wiki_data.path), "model": str(model), "other": str(other_dataset), "tmp": str(tmp_path)}
    argv = [a.format(**fill) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own checks
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    progress = re.compile(r"^[\w ]+: .*\[\d\d:\d\d")  # tqdm's bar from work done before the error
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and not progress.match(line)]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not (tmp_path / "t").exists() and not (tmp_path / "d").exists()  # nothing written
