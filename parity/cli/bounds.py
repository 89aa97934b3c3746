"""A run's bounds that come from the machine, checked together before any work: what the flags ask for at once (their
product, not each alone) must fit in this machine's memory and process limit. Each refusal is one line naming the
flags, the figure they ask for, the machine's and the arithmetic between them."""

from __future__ import annotations

import math
import resource

from parity.api.cnn import CNN_ARCHITECTURE
from parity.api.inputs import physical_memory
from parity.common import frameworks
from parity.common.messages import HarnessError
from parity.workloads import WORKLOADS

# What a PyTorch DDP rank holds (torch_impl.ddp: a process each, an interpreter that imported torch, its copy of the
# model and of Adam's state, its share of each batch's activations): the memory of its own at its peak
# (/proc/<pid>/smaps_rollup's Pss_Anon; the libraries' pages are shared by every rank), the most over the built-in
# trained workloads at the CPU's default sizes and --quick's, rounded up. Measured, not derived: the figures and the
# command that measures them are in docs/pytorch.md ("What a rank holds"). A plug-in's rank is taken to hold no more.
RANK_BYTES = 768 * 2**20
# An epoch's batches are drawn ahead (parity.workloads.trained.data.batches): a uint8 stack of its images, then its
# float32 copy, both alive at once: 1 + 4 bytes a pixel
DRAWN_BYTES_PER_PIXEL = 1 + 4
GIB = 2**30


def process_limit() -> int | None:
    """This user's process limit (RLIMIT_NPROC's soft limit: tasks, threads included), None where unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    return None if soft == resource.RLIM_INFINITY else soft


def max_ranks() -> tuple[int, str]:
    """The most PyTorch DDP ranks this machine can hold, and the arithmetic: each is a process (a task at least,
    within the process limit) that holds RANK_BYTES (within physical memory)."""
    memory = physical_memory()
    by_memory = memory // RANK_BYTES
    why = f"{memory / GIB:.1f} GiB of memory / {RANK_BYTES / GIB:.2f} GiB a rank = {by_memory}"
    limit = process_limit()
    if limit is not None and limit < by_memory:
        return limit, f"the process limit (ulimit -u) is {limit}; {why}"
    return by_memory, why


def check_replicas(counts: tuple[int, ...], chosen: tuple[str, ...]) -> None:
    """Raise HarnessError where a replica count cannot fit: PyTorch runs one process per replica (DDP), each
    max_ranks() bounds."""
    if frameworks.TORCH not in chosen or not counts:
        return
    most, why = max_ranks()
    if max(counts) > most:
        raise HarnessError(
            f"--replicas {max(counts)}: PyTorch runs one process per replica (DDP), and this machine holds at most "
            f"{most} ({why}); choose fewer, or leave PyTorch out (--framework)"
        )


def check_epochs(cfg) -> None:
    """Raise HarnessError where a trained workload's epoch, drawn ahead in memory at once, cannot fit in this
    machine's memory: steps per epoch x global batch x pixels an image x DRAWN_BYTES_PER_PIXEL. Every workload whose
    rows train epochs, whether or not the command line may set its schedule (a plug-in's record need not offer it)."""
    memory, pixels = physical_memory(), math.prod(CNN_ARCHITECTURE.image)  # Fashion-MNIST's, every trained model's
    for wl in (wl for wl in cfg.workloads if any(k.epochs for k in WORKLOADS[wl].kinds)):  # an epoch drawn ahead
        w, s = WORKLOADS[wl], cfg.spec(wl)
        steps, batch = getattr(s, "steps_per_epoch", None), getattr(s, "global_batch", None)
        if not all(isinstance(v, int) for v in (steps, batch)):
            continue  # sizes that are not counts: the workload's own checks refuse them
        need = steps * batch * pixels * DRAWN_BYTES_PER_PIXEL
        if need > memory:
            raise HarnessError(
                f"{wl}: an epoch of {steps} steps x batch {batch} is drawn ahead in memory: {steps} x {batch} x "
                f"{pixels} pixels x {DRAWN_BYTES_PER_PIXEL} bytes = {need / GIB:.1f} GiB, more than this machine's "
                f"{memory / GIB:.1f} GiB; {_lower(w.options)}"
            )


def _lower(options: tuple[str, ...]) -> str:
    """How to draw less: the flags the workload takes, or its spec where it takes none."""
    flags = [f for f, o in (("--steps-per-epoch", "steps_per_epoch"), ("--batch", "global_batch")) if o in options]
    return f"lower {' or '.join(flags)}" if flags else "its spec sets both (no flag changes them): lower them there"
