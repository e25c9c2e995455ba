"""Progress bars (superbloom._log.progress_bar): redrawn at tqdm's pace on a terminal, at most every
REDIRECTED_INTERVAL seconds where stderr is a log file or a pipe, off when not asked for."""
import io
import sys

from superbloom._log import REDIRECTED_INTERVAL, progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_redirected_stderr_gets_a_bar_per_half_minute(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress_bar(range(3), desc="x", file=sys.stderr) as bar:
        assert bar.mininterval == REDIRECTED_INTERVAL == 30.0 and not bar.disable
        assert list(bar) == [0, 1, 2]
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress_bar(total=3, file=sys.stderr) as bar:
        assert bar.mininterval == 0.1  # tqdm's own default
    with progress_bar(total=3, mininterval=5.0, file=sys.stderr) as bar:
        assert bar.mininterval == 5.0


def test_progress_false_shows_nothing(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    with progress_bar(range(5), progress=False) as bar:
        assert bar.disable and list(bar) == list(range(5))
    assert out.getvalue() == ""
