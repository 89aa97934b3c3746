"""A row's peak memory, measured in the worker around each call, outside the timed interval.

peak_memory_bytes = what the row holds after its first call (its inputs, weights, compiled programs and whatever
the framework keeps between calls, read above the worker's level before the row) + the largest rise of memory
during one of its later calls above the level just before that call (its output, its workspace): the steady
state, compilation left out. RowMemory says how. Both parts are differences, so the other cases a worker holds
alive while calls interleave do not count against this one.

On a CPU the memory is the worker's resident set (Linux): VmRSS now, and VmHWM, the kernel's high-water mark, reset
before each call by writing 5 to /proc/self/clear_refs. It sees every page the process touched, whichever
allocator took it; it misses memory reserved but never touched, and memory of other processes. Elsewhere, the
implementation's device memory statistics (bytes in use and the peak since its last reset, summed over this
process's devices): JAX's `memory_stats()`, TF's `get_memory_info` after `reset_memory_stats`. That path is
read on an H200 for JAX (docs/gpu.md), unverified for TF. Where a framework cannot reset its peak (JAX), a
call whose peak does not rise above the earlier one shows only the bytes in use with its output alive: the row's
figure is then a lower bound (its workspace not seen), said as "at least", never as the peak.
"""

from __future__ import annotations

import os
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str, status: Path = STATUS) -> int | None:
    try:
        for line in status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # the kernel writes kB
    except (OSError, ValueError, IndexError):
        return None
    return None


class HostMemory:
    """This process's resident set. `works` is False where /proc offers no resettable high-water mark."""

    source = "CPU: the worker's resident set high-water mark (VmHWM, reset per call via /proc/self/clear_refs)"

    def __init__(self, status: Path = STATUS, clear_refs: Path = CLEAR_REFS, tunables: str | None = None):
        self.status, self.clear_refs = status, clear_refs
        self.works = self.reset_peak() and self.now() is not None and self.peak() is not None
        # glibc with mmap off keeps every freed buffer resident for the next (jax_impl's '+heap'): a row reusing
        # pages an earlier row freed shows no rise for them, so its figure is a lower bound
        tunables = os.environ.get("GLIBC_TUNABLES", "") if tunables is None else tunables
        self.keeps_freed = "glibc.malloc.mmap_max=0" in tunables.split(":")

    def now(self) -> int | None:
        return _status_bytes("VmRSS", self.status)

    def peak(self) -> int | None:
        return _status_bytes("VmHWM", self.status)

    def reset_peak(self) -> bool:
        try:
            self.clear_refs.write_text("5")
            return True
        except OSError:
            return False


class DeviceMemory:
    """An accelerator's memory, from the implementation: memory_stats(devices) -> [{'in_use', 'peak'}] per device,
    reset_memory_peak(devices) -> whether the peak could be reset."""

    source = "accelerator: the framework's device memory statistics (bytes in use, and the peak since its reset)"

    def __init__(self, impl, devices):
        self.impl, self.devices = impl, devices
        self.works = bool(impl.memory_stats(devices))

    def _sum(self, key: str) -> int | None:
        stats = self.impl.memory_stats(self.devices)
        return sum(s[key] for s in stats) if stats else None

    def now(self) -> int | None:
        return self._sum("in_use")

    def peak(self) -> int | None:
        return self._sum("peak")

    def reset_peak(self) -> bool:
        return bool(self.impl.reset_memory_peak(self.devices))


def source_for(impl, devices, device: str):
    """Where this worker reads memory: the host's resident set on a CPU, the device's statistics elsewhere; None
    where neither works (the rows then hold no peak, and say why)."""
    src = HostMemory() if device == "cpu" else DeviceMemory(impl, devices)
    return src if src.works else None


class RowMemory:
    """One row's peak memory. The worker builds each case and makes its first call before the next case is built,
    so what the row holds is read without the others: call built() once its case is built, settled() after its
    first call, and the Timer calls before_call() / after_call() around every call.

    peak = max(built, settled) + the largest later rise, above the worker's level before the row: a framework that
    keeps a freed output cached for the next call (TF's allocator) holds it in `settled`, one that frees it (XLA:CPU)
    shows it in each call's rise; neither is counted twice. The first call (compilation) counts only for a row with
    no other."""

    def __init__(self, source):
        self.src = source
        self.base = source.now()
        self.resident: int | None = None  # after building the case
        self.retained: int | None = None  # after its first call and the release of that call's output
        self.first: int | None = None  # the first call's rise
        self.later: int | None = None  # the largest later rise
        self.unknown = False  # a call whose rise could not be read
        self.at_least = False  # a call whose peak was not seen: its rise is the bytes in use with its output alive
        self._level = self._peak_before = None
        self._reset = False

    def _above_base(self) -> int | None:
        now = self.src.now()
        return max(0, now - self.base) if now is not None and self.base is not None else None

    def built(self) -> None:
        self.resident = self._above_base()

    def settled(self) -> None:
        self.retained = self._above_base()

    def before_call(self) -> None:
        self._reset = self.src.reset_peak()
        self._level, self._peak_before = self.src.now(), self.src.peak()

    def after_call(self) -> None:
        peak = self.src.peak()
        if peak is None or self._level is None:
            self.unknown = True
            return
        if not self._reset and self._peak_before is not None and peak <= self._peak_before:
            # a peak that cannot be reset and did not rise (JAX on a GPU, after a larger row or this row's own
            # compilation): the call's workspace is not seen, its output (alive now) is
            now = self.src.now()
            if now is None:
                self.unknown = True
                return
            self.at_least, peak = True, now
        rise = max(0, peak - self._level)
        if self.retained is None:
            self.first = max(self.first or 0, rise)
        else:
            self.later = max(self.later or 0, rise)

    def peak_bytes(self) -> int | None:
        """The steady state's peak: max(built, settled) + the largest later rise (compilation, in the first call, is
        left out: on a GPU its autotuning takes workspaces no later call needs); resident + the first call's rise
        only for a row with no later call. None when a part could not be read, or no call's rise was seen."""
        if self.unknown or self.resident is None:
            return None
        if self.retained is not None and self.later is not None:
            # what the row holds: at least what building it took (memory the worker frees meanwhile, an earlier
            # row's garbage, can lower the level read after the first call below it)
            return max(self.resident, self.retained) + self.later
        return None if self.first is None else self.resident + self.first


AT_LEAST = "at least (the peak cannot be reset and stayed above this row's calls: their outputs seen, not their "
AT_LEAST += "workspace): "
KEPT = "at least (malloc keeps freed memory resident, GLIBC_TUNABLES' mmap_max=0: pages an earlier row freed are "
KEPT += "reused unseen): "
AHEAD = "at least (built beside the worker's other rows and compiled ahead, parity.engine.ahead: what it "
AHEAD += "held before its first call is not counted): "


def figures(mem: RowMemory | None, src, output_bytes: int | None, ahead: bool = False) -> dict:
    """A row's peak memory and where it was read (`src`: the worker's memory source), or why there is none. A peak
    below the bytes of the row's own output is a measurement bug: said, never given as a figure. `ahead`: the row was
    built and compiled ahead, before its level was read (a lower bound)."""
    if src is None:
        return {"peak_memory_bytes": None, "peak_memory_source": "not measured: no memory statistics here"}
    peak = mem.peak_bytes() if mem else None
    if peak is None:
        return {"peak_memory_bytes": None, "peak_memory_source": "unknown: a call's rise could not be read"}
    if output_bytes and peak < output_bytes:
        return {
            "peak_memory_bytes": None,
            "peak_memory_source": f"MEASUREMENT BUG: {peak} bytes read, below the {output_bytes} of its own output "
            "(likely memory the framework's allocator already held for an earlier row: a process's high-water "
            "mark cannot see it)",
        }
    if mem.at_least or ahead or getattr(src, "keeps_freed", False):
        why = AT_LEAST if mem.at_least else AHEAD if ahead else KEPT
        return {"peak_memory_bytes": peak, "peak_memory_source": why + src.source, "peak_memory_at_least": True}
    return {"peak_memory_bytes": peak, "peak_memory_source": src.source}
