"""Where the work runs: the device choice and the process group, one code path for 1 and N processes.

    --device auto    CUDA when torch sees a GPU, else the CPU (the default)
    --device cpu     always the CPU
    --device cuda    the GPU (cuda:N for a given one); an error when there is none

Under torchrun (WORLD_SIZE > 1) every rank takes its local GPU (cuda:LOCAL_RANK) with NCCL, or the
CPU with gloo (auto: also where a machine runs more processes than it has GPUs). Nothing happens at
import time: `init_distributed` is called by train().
Checkpoints are device-independent: tensors are saved from wherever they are and loaded onto the
device asked for (a GPU-trained model loads on a CPU machine). torch is imported inside the
functions, so the command line reads DEVICE_CHOICES without importing it.
"""
from __future__ import annotations

import atexit
import os
import re
from dataclasses import dataclass

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"


def resolve_device(name: str = "auto", local_rank: int | None = None, local_world: int = 1) -> torch.device:
    """The torch device `name` stands for (see the module docstring); local_rank picks the GPU of a rank,
    one of `local_world` processes on this machine: auto takes the CPU when they outnumber the GPUs."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() and local_world <= torch.cuda.device_count() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if not re.fullmatch(r"cuda(:\d+)?", name or ""):
        raise ValueError(f"device must be {DEVICE_CHOICES}, got {name!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device {name!r}: torch sees no CUDA GPU here; use --device cpu (or auto)")
    if name == "cuda" and local_rank is not None and local_world > torch.cuda.device_count():
        raise ValueError(f"device 'cuda': {local_world} processes on this machine but torch sees "
                         f"{torch.cuda.device_count()} CUDA GPU(s), one GPU per process; start at most "
                         f"{torch.cuda.device_count()} (torchrun --nproc_per_node) or use --device cpu (or auto)")
    if name == "cuda":
        return torch.device("cuda", local_rank if local_rank is not None else torch.cuda.current_device())
    index = int(name.split(":")[1])
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} CUDA GPU(s) here")
    return torch.device(name)


@dataclass(frozen=True)
class Dist:
    rank: int  # this process's rank (0 without torchrun)
    world: int  # number of processes
    device: torch.device  # where this rank's model, batches and decoding live

    @property
    def main(self) -> bool:
        return self.rank == 0


def set_threads(n: int) -> int:
    """torch's CPU threads for this process: n > 0 that many (clamped to the cores, with a warning), 0
    torch's default (left as it is) -> the count set. The one place that changes this process-wide
    setting; the command line calls it (cli/), the library never does."""
    import torch

    from .._bounds import threads

    n = threads(n)
    if n:
        torch.set_num_threads(n)
    return n


def init_distributed(device: str = "auto") -> Dist:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK, join the process group (NCCL on GPU, gloo on
    CPU) and choose this rank's device. Without torchrun: rank 0 of 1, no process group."""
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))  # torchrun's processes on this machine
    dev = resolve_device(device, local if world > 1 else None, local_world if world > 1 else 1)
    if world > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        atexit.register(_leave_group)  # gloo's threads left running at exit can abort the process
    return Dist(dist.get_rank() if world > 1 else 0, world, dev)


def _leave_group() -> None:
    """Destroy the process group before the interpreter exits (once, if still joined): a rank that
    exits with it alive may end in std::terminate ("terminate called without an active exception",
    exit -6) after its work is done, failing the torchrun run."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def finish(d: Dist) -> None:
    """Every rank waits here until all have finished (rank 0 writes last: its card, LATEST), then
    leaves the process group, so no rank exits while another still holds the group open."""
    if d.world == 1:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def all_gather(obj, d: Dist) -> list:
    """Every rank's `obj` (picklable Python data, not tensors), in rank order; [obj] for one process."""
    if d.world == 1:
        return [obj]
    import torch.distributed as dist

    out = [None] * d.world
    dist.all_gather_object(out, obj)
    return out


def any_rank(flag: bool, d: Dist) -> bool:
    """True on every rank if it is True on any (so that all ranks stop at the same step)."""
    if d.world == 1:
        return flag
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(flag)], device=d.device if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
