"""cli/checks.py: the bounds every numeric flag is held to, the thread cap, the memory estimate and its
refusal, and the refusal of endless inputs (issue 32, class 2). Hand-made inputs, no torch."""
import argparse
import math
import os

import pytest

from superbloom.cli import checks


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e300", "3.5e38", "abc", ""])
def test_floats_are_finite_float32(text):
    with pytest.raises(argparse.ArgumentTypeError):
        checks.bounded(float, 0.0)(text)


def test_ints_stop_at_int32_and_ranges_keep_their_messages():
    parse = checks.bounded(int, 1)
    assert parse(str(checks.INT32_MAX)) == checks.INT32_MAX
    with pytest.raises(argparse.ArgumentTypeError, match="<= 2,147,483,647"):
        parse(str(checks.INT32_MAX + 1))
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number >= 1, got 0"):
        parse("0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected a number > 0, got 0"):
        checks.LR("0")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number <= 100, got 1e300"):
        checks.LR("1e300")
    assert checks.CLIP("0") == 0.0 and checks.WEIGHT_DECAY("0.01") == 0.01
    assert math.isclose(checks.bounded(float, 0.0)("3.4e38"), 3.4e38)


def test_threads_are_capped_at_the_cores_with_a_warning(capsys):
    cores = checks.cores()
    assert checks.THREADS("0") == 0 and checks.THREADS(str(cores)) == cores
    assert checks.THREADS(str(cores + 9_999)) == cores
    assert "--threads" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentTypeError):
        checks.THREADS("1" * 20)


def test_memory_estimate_grows_with_each_flag_and_names_the_largest():
    base = dict(n_ids=1000, alpha=1, m=1, d=64, d_ff=256, layers=2, heads=4, batch=32, segment=32)
    parts = checks.memory_estimate(**base)
    assert parts["--d"] == 4 * 2 * (1000 * 64 + 2 * (4 * 64 * 64 + 2 * 64 * 256))  # weights + gradients
    for flag, change in [("--d", dict(d=128)), ("--batch-size", dict(batch=64)), ("--samples", dict(samples=10))]:
        assert sum(checks.memory_estimate(**{**base, **change}).values()) > sum(parts.values()), flag
    huge = checks.memory_estimate(**{**base, "samples": 100_000_000})
    with pytest.raises(ValueError, match=r"^--samples 100000000: train needs at least .* more than --memory-limit"):
        checks.refuse_over_memory(huge, 10**9, "train", {"--samples": 100_000_000})
    checks.refuse_over_memory(parts, 10**12, "train", {})  # fits: nothing raised


def test_sizes():
    assert checks.parse_size("4GB") == 4 * 10**9 and checks.parse_size("2GiB") == 2 * 2**30
    for bad in ("", "0", "-1GB", "4XB", "nanGB", "infGB"):
        with pytest.raises(ValueError):
            checks.parse_size(bad)


def test_devices_are_refused_files_and_pipes_pass(tmp_path):
    with pytest.raises(ValueError, match="/dev/zero: a device"):
        checks.regular_input("/dev/zero", "INPUT")
    (tmp_path / "f.txt").write_text("x")
    checks.regular_input(tmp_path / "f.txt")
    checks.regular_input(tmp_path)
    checks.regular_input(tmp_path / "missing")  # left to the reader's own message
    os.mkfifo(tmp_path / "pipe")
    checks.regular_input(tmp_path / "pipe")
