"""What machine a benchmark ran on, and how results are written (JSON + a short markdown table)."""
from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path


def machine_info() -> dict:
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

    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def machine_line(info: dict) -> str:
    return (f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB RAM; "
            f"Python {info['python']}, torch {info['torch']} ({info['torch_threads']} threads); {info['date']}.")


def numpy_json(o):
    """json.dumps' `default` for NumPy values: a scalar as its Python number, an array as a list."""
    if getattr(o, "ndim", None) == 0 and hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_results(directory: Path, name: str, result: dict, markdown: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (directory / f"{name}.md").write_text("\n".join(markdown + [machine_line(result["machine"]), ""]))
