"""The one results writer of the benchmarks: what machine a run used (CPU, cores, memory, torch and
its threads, the load average, the date) and how results are written, `results/NAME.json` (the
machine-readable result) beside `results/NAME.md` (a short table for a person), each atomically so
that a killed run leaves the previous file whole.

A new result file is listed in `benchmarks/manifest.py` (the command that regenerates it, what it
shows); `python -m benchmarks.results_page` then rebuilds docs/results.md (benchmarks/README.md, top).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on a shared machine slows timed runs)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        return []


def machine_info() -> dict:
    """CPU model, cores, memory, Python, torch and its threads, the load average and the date, now."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        mem_kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem_gb = round(mem_kb / 1e6, 1)
    except (OSError, IndexError, ValueError):
        pass
    import torch

    info = {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "load_average": load_average()}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
    return info


def machine_line(info: dict) -> str:
    """One line for a markdown result: the machine, its load average (when recorded) and the date."""
    load = info.get("load_average")
    device = f", {info['device']}" if info.get("device") else ""
    return (f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB RAM{device}; "
            f"Python {info['python']}, torch {info['torch']} ({info['torch_threads']} threads)"
            + (f"; load average {' / '.join(map(str, load))} (1/5/15 min)" if load else "")
            + f"; {info['date']}.")


def numpy_json(o):
    """json.dumps' `default` for NumPy values: a scalar as its Python number, an array as a list."""
    if getattr(o, "ndim", None) == 0 and hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def command_line() -> str:
    """The command that is running, as one would type it (`python -m benchmarks.NAME ARGS` for a module)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    head = ["python", "-m", spec.name] if spec is not None and spec.name else ["python", sys.argv[0]]
    return shlex.join(head + sys.argv[1:])


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it: a kill leaves the old file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_results(directory: Path, name: str) -> dict | None:
    """The result a benchmark wrote as DIRECTORY/NAME.json before (for benchmarks that accumulate rows), or None."""
    path = Path(directory) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def write_results(directory: Path, name: str, result: dict, markdown: list[str] | None, *,
                  indent: int = 2, dumps=None, rewrite: bool = False) -> Path:
    """Write DIRECTORY/NAME.json and DIRECTORY/NAME.md (NAME may hold a sub-folder: "scale/e2e").

    `result` gets a "machine" entry (machine_info(), so the load average and the date) unless it
    has one, and a "command" entry (the command line that ran) unless it has one; the markdown lines
    get the machine line appended. `markdown` None: the JSON only (a page draws the table from it).
    `dumps` (result -> text) replaces json.dumps for a compact layout. `rewrite`: the result is an
    earlier run's, written again (a new table from its JSON): no machine or command of this moment is
    added. Returns the JSON path."""
    directory = Path(directory)
    if not rewrite:
        result = result if "machine" in result else dict(result, machine=machine_info())
        result = result if "command" in result else dict(result, command=command_line())
    path = directory / f"{name}.json"
    write_atomic(path, dumps(result) if dumps else json.dumps(result, indent=indent, default=numpy_json) + "\n")
    if markdown is None:
        return path
    info = result.get("machine") if isinstance(result.get("machine"), dict) else None
    tail = [machine_line(info)] if info and {"cpu", "cores", "date"} <= set(info) else []
    write_atomic(directory / f"{name}.md", "\n".join(list(markdown) + tail + [""]))
    return path
