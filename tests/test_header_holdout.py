"""superbloom/header.py (a checked header line dropped before reading) and superbloom/holdout.py (a
validation dataset carved from a prepared dataset's training sets)."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

import superbloom as sb
from superbloom.data.header import strip_header
from superbloom.data.holdout import hold_out
from superbloom.data.readers import InputError

HEADER = "user\titem\trating"


@pytest.mark.parametrize("gz", [False, True])
def test_strip_header_drops_exactly_the_checked_line(tmp_path, gz):
    body = b"1\t10\t5\r\n1\t11\t3\n2\t10\t4\n"
    src = tmp_path / ("in.tsv.gz" if gz else "in.tsv")
    data = (HEADER + "\r\n").encode() + body  # a CRLF header still matches
    src.write_bytes(gzip.compress(data) if gz else data)
    info = strip_header(src, tmp_path / "out.tsv", HEADER)
    assert (tmp_path / "out.tsv").read_bytes() == body
    assert info == {"header_lines_dropped": 1, "header": HEADER}
    assert not (tmp_path / "out.tmp").exists()


def test_strip_header_refuses_another_first_line(tmp_path):
    src = tmp_path / "in.tsv"
    src.write_text("1\t10\t5\n")
    with pytest.raises(InputError, match=r"in.tsv: expected the header line .* found '1\\t10\\t5'"):
        strip_header(src, tmp_path / "out.tsv", HEADER)
    assert not (tmp_path / "out.tsv").exists() and not (tmp_path / "out.tmp").exists()


def test_stripped_file_prepares_like_the_same_links_without_header(tmp_path):
    src = tmp_path / "ratings.tsv"
    src.write_text(HEADER + "\n" + "".join(f"u{i % 7}\ti{i % 11}\t1\n" for i in range(60)))
    strip_header(src, tmp_path / "ratings_body.tsv", HEADER)
    summary = sb.prepare(sb.PrepareConfig(str(tmp_path / "ratings_body.tsv"), str(tmp_path / "d")), progress=False)
    assert summary["malformed_skipped"] == 0 and summary["ids"] == 11


def test_hold_out_partitions_the_training_sets(wiki_data, tmp_path):
    val = hold_out(wiki_data, tmp_path / "val", fraction=0.1, seed=1)
    n = len(wiki_data.train)
    assert len(val.train) + len(val.test) == n
    assert len(val.test) == round(0.1 * n)
    is_val = np.zeros(n, bool)
    is_val[np.random.default_rng(1).permutation(n)[: round(0.1 * n)]] = True
    for part, rows in ((val.train, np.flatnonzero(~is_val)), (val.test, np.flatnonzero(is_val))):
        assert [list(part[i]) for i in range(len(part))] == [list(wiki_data.train[r]) for r in rows]
    # counts from its own training part only: the held-out sets do not leak into popularity
    assert np.array_equal(val.counts, np.bincount(np.asarray(val.train.ids), minlength=wiki_data.n_ids))
    assert val.n_ids == wiki_data.n_ids and list(val.vocab.strings) == list(wiki_data.vocab.strings)
    assert val.meta["validation_of"] == wiki_data.path.name and val.meta["val_seed"] == 1
    again = hold_out(wiki_data, tmp_path / "val2", fraction=0.1, seed=1)
    assert np.array_equal(np.asarray(again.test.ids), np.asarray(val.test.ids))
    other = hold_out(wiki_data, tmp_path / "val3", fraction=0.1, seed=2)
    assert not np.array_equal(np.asarray(other.test.offsets), np.asarray(val.test.offsets))
