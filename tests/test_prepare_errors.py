"""`superbloom prepare` on bad input: exit code 2 and one line naming the file (and line), never a traceback,
never raw bytes on the terminal, and nothing written or deleted before the input is known to be readable."""
import gzip
import re
import zlib

import pytest

from superbloom.cli import main


def run_prepare(capsys, *args) -> str:
    """Run `superbloom prepare ARGS`, check the error contract, return the one error line."""
    code = main(["prepare", *map(str, args)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in re.split(r"[\r\n]+", err) if "error:" in line]  # the progress bar uses \r
    assert len(lines) == 1 and lines[0].startswith("superbloom prepare: error: "), err
    assert lines[0].isascii() and lines[0].isprintable(), repr(lines[0])  # no raw bytes, no escape sequences
    return lines[0]


def edges_text(n: int) -> bytes:
    return "".join(f"s{k // 5}\tid{(k * 7919) % 10007}\n" for k in range(n)).encode()


def complete_lines_before_damage(cut: bytes) -> int:
    """Reference: newlines in what zlib can inflate from a cut gzip stream."""
    return zlib.decompressobj(31).decompress(cut).count(b"\n")


@pytest.mark.parametrize("n_lines", [2_000, 200_000])  # damage inside the first MB / after it (mid-stream)
def test_truncated_gzip(tmp_path, capsys, n_lines):
    whole = gzip.compress(edges_text(n_lines), compresslevel=1)
    cut = whole[: len(whole) // 2]
    assert len(cut) < 1 << 20
    path = tmp_path / "links.tsv.gz"
    path.write_bytes(cut)
    msg = run_prepare(capsys, path, "--out", tmp_path / "d")
    read = complete_lines_before_damage(cut)
    assert 0 < read < n_lines
    assert f"{path}: truncated or corrupt gzip file" in msg
    assert f"{read:,} complete lines could be read before it" in msg
    assert not (tmp_path / "d" / "meta.json").exists()


def test_corrupt_gzip(tmp_path, capsys):
    data = bytearray(gzip.compress(edges_text(5_000)))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "links.tsv.gz"
    path.write_bytes(bytes(data))
    assert "truncated or corrupt gzip file" in run_prepare(capsys, path, "--out", tmp_path / "d")


def test_plain_text_named_gz(tmp_path, capsys):
    path = tmp_path / "links.tsv.gz"
    path.write_bytes(b"a\tb\n")
    msg = run_prepare(capsys, path, "--out", tmp_path / "d")
    assert f"{path}: not a gzip file although its name ends in .gz" in msg


def test_directory_as_input(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    msg = run_prepare(capsys, tmp_path / "in", "--out", tmp_path / "d")
    assert msg.endswith(f"{tmp_path / 'in'}: is a directory; expected a file in the edges format")
    assert not (tmp_path / "d").exists()  # nothing created for an input that cannot be read


@pytest.mark.parametrize("fmt", ["edges", "lines", "jsonl"])
def test_binary_file(tmp_path, capsys, fmt):
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x1b[31m\x00\x01\xff\xfe binary \x1b]0;title\x07\t\n" * 50)  # terminal escapes, NUL, bad UTF-8
    msg = run_prepare(capsys, path, "--format", fmt, "--out", tmp_path / "d")
    assert f"{path}:1: not a UTF-8 text file in the {fmt} format" in msg
    assert "\\x1b[31m" in msg  # an escaped excerpt at most


def test_binary_after_a_valid_first_megabyte(tmp_path, capsys):
    """The head check passes; Arrow fails mid-stream; the message still names the exact line."""
    good = edges_text(100_000)
    assert len(good) > 1 << 20
    path = tmp_path / "links.tsv"
    path.write_bytes(good + b"s1\tid\xff\xfe\n" + good[:1000])
    msg = run_prepare(capsys, path, "--out", tmp_path / "d")
    assert f"{path}:100001: not a UTF-8 text file in the edges format (invalid UTF-8 byte 0xff" in msg


def test_gzip_without_gz_name_and_parquet_as_text_get_a_hint(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "links.tsv"
    path.write_bytes(gzip.compress(b"a\tb\n"))
    msg = run_prepare(capsys, path, "--out", tmp_path / "d")
    assert "it looks gzip-compressed: give it a name ending in .gz" in msg
    pq.write_table(pa.table({"set": ["a"], "id": ["b"]}), path)
    assert "it looks like a Parquet file: use --format parquet" in run_prepare(capsys, path, "--out", tmp_path / "d")


def test_out_is_an_existing_file(tmp_path, capsys):
    (tmp_path / "in.tsv").write_text("a\tx\na\ty\n")
    out = tmp_path / "taken"
    out.write_text("precious")
    msg = run_prepare(capsys, tmp_path / "in.tsv", "--out", out)
    assert f"--out {out} is a file, not a directory" in msg
    assert out.read_text() == "precious"
    msg = run_prepare(capsys, tmp_path / "in.tsv", "--out", out / "sub")
    assert f"--out {out / 'sub'}: {out} is not a folder" in msg


def test_bad_input_leaves_an_existing_dataset_alone(tmp_path, capsys):
    (tmp_path / "in.tsv").write_text("".join(f"s{k}\tx{k % 3}\n" for k in range(30)))
    assert main(["prepare", str(tmp_path / "in.tsv"), "--out", str(tmp_path / "d")]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir()}
    (tmp_path / "bad.tsv.gz").write_bytes(gzip.compress(edges_text(1000))[:300])
    run_prepare(capsys, tmp_path / "bad.tsv.gz", "--out", tmp_path / "d", "--overwrite")
    assert {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir()} == before


def test_truncated_bz2(tmp_path, capsys):
    import bz2

    path = tmp_path / "links.tsv.bz2"
    path.write_bytes(bz2.compress(edges_text(50_000))[:20_000])
    msg = run_prepare(capsys, path, "--out", tmp_path / "d")
    assert f"{path}: truncated or corrupt bz2 file" in msg and "at least" in msg


def test_failed_prepare_leaves_an_earlier_dataset_intact(tmp_path, capsys):
    """prepare writes OUT.partial and swaps it in at the end: a failure part-way (here a gzip cut
    after 52K lines) leaves the earlier dataset in OUT loadable and no partial directory behind."""
    import superbloom as sb

    out = tmp_path / "data"
    good = tmp_path / "ok.tsv"
    good.write_text("a\tb\na\tc\nd\tb\nd\te\n")
    assert main(["prepare", str(good), "--out", str(out), "--test-fraction", "0"]) == 0
    before = sb.Dataset(out).meta["links"]
    cut = tmp_path / "cut.tsv.gz"
    cut.write_bytes(sb.embedded_dataset().read_bytes()[:300_000])
    assert main(["prepare", str(cut), "--out", str(out), "--overwrite"]) == 2
    assert "truncated or corrupt gzip" in capsys.readouterr().err
    assert sb.Dataset(out).meta["links"] == before and not (tmp_path / "data.partial").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    assert main(["prepare", str(good), "--out", str(tmp_path / "other")]) == 2
    assert "holds files that superbloom did not write" in capsys.readouterr().err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine\n"


def test_archives_and_other_binary_files_get_a_hint(tmp_path, capsys):
    """A tar (also gzipped, read through the .gz), a zip, a MATLAB file, bzip2 / xz / zstd data under a
    plain name: the error says what the file looks like and what to do, not only which byte is bad."""
    import bz2
    import io
    import lzma
    import tarfile
    import zipfile

    inner = tmp_path / "train.txt"
    inner.write_bytes(b"a\tb\n" * 10)
    with tarfile.open(tmp_path / "kg.tar.gz", "w:gz") as tar:
        tar.add(inner, arcname="train.txt")
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.write(inner, "train.txt")
    plain = {"kg.tar.gz": None, "links.zip": zipped.getvalue(),
             "trust.mat": b"MATLAB 5.0 MAT-file, Platform: PCWIN64" + b" " * 80 + b"\x00\x01IM",
             "links.bz": bz2.compress(b"a\tb\n"), "links.x": lzma.compress(b"a\tb\n")}
    hints = {"kg.tar.gz": "it looks like a tar archive: extract it (tar xf)", "links.zip": "a zip archive",
             "trust.mat": "a MATLAB .mat file", "links.bz": "name ending in .bz2", "links.x": "xz-compressed"}
    for name, data in plain.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        msg = run_prepare(capsys, tmp_path / name, "--out", tmp_path / "d")
        assert f"{tmp_path / name}:1: not a UTF-8 text file" in msg and hints[name] in msg, (name, msg)
        assert not (tmp_path / "d").exists()
