"""Peak memory per row (parity.engine.memory): the arithmetic on fake /proc files and fake device statistics, and one
row of the engine whose calls touch a known amount of memory."""

import os
import threading

from parity.engine import memory


class FakeProc:
    """/proc/self/status and clear_refs as files: VmRSS and VmHWM set by the test, a reset recorded."""

    def __init__(self, tmp_path, rss_mb: int):
        self.status, self.clear = tmp_path / "status", tmp_path / "clear_refs"
        self.rss = self.hwm = rss_mb
        self.clear.write_text("")
        self.write()

    def write(self):
        self.status.write_text(f"Name:\tpython\nVmHWM:\t{self.hwm * 1024} kB\nVmRSS:\t{self.rss * 1024} kB\n")

    def reset_if_asked(self):
        if self.clear.read_text() == "5":
            self.hwm = self.rss
            self.clear.write_text("")
            self.write()

    def source(self):
        return memory.HostMemory(self.status, self.clear)

    def build(self, held_mb: int) -> memory.RowMemory:
        """A row's case built: its memory record begun, then `held_mb` more resident (inputs, weights, program)."""
        row = memory.RowMemory(self.source())
        self.rss += held_mb
        self.write()
        row.built()
        return row


def _call(proc, row, rise_mb, keep_mb=0):
    """A call: a peak `rise_mb` above the level before it, `keep_mb` of it still resident after."""
    row.before_call()
    proc.reset_if_asked()
    row._level = row.src.now()
    proc.hwm = proc.rss + rise_mb
    proc.rss += keep_mb
    proc.write()
    row.after_call()


def test_a_rows_peak_is_its_resident_state_plus_its_largest_call(tmp_path):
    proc = FakeProc(tmp_path, 1000)
    src = proc.source()
    assert src.works
    row = memory.RowMemory(src)
    proc.rss += 300  # building the case: inputs, weights, the compiled program
    proc.write()
    row.built()
    _call(proc, row, 2100)  # the first call: its output comes and goes (XLA:CPU frees it)
    row.settled()
    for rise in (2150, 2000):
        _call(proc, row, rise)
    assert row.peak_bytes() == (300 + 2150) * 2**20


def test_an_output_the_framework_keeps_for_the_next_call_counts_once(tmp_path):
    proc = FakeProc(tmp_path, 1000)
    row = proc.build(300)
    _call(proc, row, 2100, keep_mb=2100)  # TF's allocator keeps the freed output's memory for the next call
    row.settled()
    for _ in range(3):
        _call(proc, row, 0)  # later calls reuse it: no rise
    assert row.peak_bytes() == (300 + 2100) * 2**20


def test_memory_the_worker_frees_during_the_first_call_does_not_hide_the_rows_inputs(tmp_path):
    proc = FakeProc(tmp_path, 1000)
    row = proc.build(128)  # the inputs
    _call(proc, row, 64, keep_mb=-500)  # meanwhile an earlier row's garbage (500) goes back to the system
    row.settled()
    _call(proc, row, 64)
    assert row.peak_bytes() == (128 + 64) * 2**20  # not 0 + 64: the inputs are still held


def test_other_cases_alive_in_the_worker_do_not_count(tmp_path):
    proc = FakeProc(tmp_path, 1000)
    a = proc.build(100)
    _call(proc, a, 50)
    a.settled()
    b = proc.build(5000)  # a second case built later, and kept alive while a's calls run
    _call(proc, b, 700)
    b.settled()
    for _ in range(2):  # the timed calls, interleaved
        _call(proc, a, 50)
        _call(proc, b, 700)
    assert a.peak_bytes() == 150 * 2**20 and b.peak_bytes() == 5700 * 2**20


def test_a_peak_that_cannot_be_reset_and_does_not_rise_gives_a_lower_bound_said_as_such():

    class Device:  # JAX on an accelerator: peak_bytes_in_use never resets
        def __init__(self):
            self.in_use, self.peak = 100, 9000  # an earlier row set the peak

        def memory_stats(self, devices):
            return [{"in_use": self.in_use, "peak": self.peak}]

        def reset_memory_peak(self, devices):
            return False

    def call(row, peak, output):
        row.before_call()
        dev.peak = max(dev.peak, peak)
        dev.in_use += output  # the output, alive when the call's memory is read
        row.after_call()
        dev.in_use -= output

    dev = Device()
    src = memory.DeviceMemory(dev, ["gpu:0"])
    row = memory.RowMemory(src)
    dev.in_use = 300  # the row's inputs and program: 200 above the level before it
    row.built()
    call(row, 20000, 1000)  # the first call compiles (autotuning workspaces): the steady state leaves it out
    row.settled()
    call(row, 2000, 1000)  # the call's own peak (2,000) stays below the old one: its output is seen, not its workspace
    assert row.peak_bytes() == 200 + 1000 and row.at_least
    got = memory.figures(row, src, output_bytes=1000)
    assert got["peak_memory_bytes"] == 1200 and got["peak_memory_source"].startswith("at least")
    call(row, 25000, 1000)  # this call rose above it: seen, and larger
    assert row.peak_bytes() == 200 + (25000 - 300)

    fresh = memory.RowMemory(src)  # a row whose peak could not be read at all: unknown, never zero
    fresh.built()
    dev.memory_stats = lambda devices: None
    fresh.before_call()
    fresh.after_call()
    assert fresh.peak_bytes() is None


def test_no_statistics_means_no_source(tmp_path):
    class NoStats:
        def memory_stats(self, devices):
            return None

    assert memory.source_for(NoStats(), [], "gpu") is None
    missing = memory.HostMemory(tmp_path / "no-status", tmp_path / "no-dir" / "clear_refs")
    assert not missing.works


# Linux counts a process's resident pages per CPU (or per thread) and folds them into VmRSS/VmHWM in batches: a
# reading can lag by up to 64 pages per counter (TASK_RSS_EVENTS_THRESH; percpu_counter batches on 6.2+), so each
# of the two readings of a rise may be that far off.
RSS_SLACK = 2 * 64 * os.sysconf("SC_PAGE_SIZE") * max(os.cpu_count() or 1, threading.active_count())


def test_a_row_that_touches_memory_reports_at_least_that(tmp_path, monkeypatch):
    assert memory.HostMemory().works, "Linux 4.0+ offers /proc/self/clear_refs: the CPU's peak memory needs it"
    from fakeimpl import FakeImpl, fake_engine, quick_config

    from parity.engine.schedule import run_suite
    from parity.judging import roofline

    peak = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed", computed_flops=1e9, measured_flops=1e9, headroom=1.5)
    # the calls' 0.1 s on the fake clock; their memory is real: a workspace several times what the row holds without
    # it (its inputs and output), so that a figure which missed it fails
    fake_engine(monkeypatch, peak, {"jax": {"default": FakeImpl(delay_s=0.1, workspace_mb=64)}})
    cfg = quick_config(("jax",), ("conv",), 2, replicas=(1,))
    rows = run_suite(cfg, tmp_path)["rows"]
    for r in rows:  # each call maps 64 MB, writes every page and unmaps it
        said = {k: v for k, v in r.items() if "memory" in k}
        assert r["peak_memory_bytes"] >= 64 * 2**20 - RSS_SLACK, said
        assert "VmHWM" in r["peak_memory_source"]


def test_a_peak_below_the_rows_own_output_is_said_as_a_bug_never_a_figure():
    from types import SimpleNamespace

    class Stub:
        at_least = False

        def peak_bytes(self):
            return 10

    args = SimpleNamespace(memory=SimpleNamespace(source="test"))
    got = memory.figures(Stub(), args.memory, output_bytes=1000)
    assert got["peak_memory_bytes"] is None and got["peak_memory_source"].startswith("MEASUREMENT BUG")
    assert memory.figures(Stub(), args.memory, output_bytes=8)["peak_memory_bytes"] == 10


def test_a_heap_that_keeps_freed_memory_makes_every_figure_a_lower_bound(tmp_path):
    """With glibc's mmap off ('+heap'), a row can reuse pages an earlier row freed, which its resident set never
    shows rising: the figure is said to be a lower bound, for that reason, in the row and in the table's note."""

    from parity.output import notes

    proc = FakeProc(tmp_path, 1000)
    assert not memory.HostMemory(proc.status, proc.clear, tunables="glibc.malloc.hugetlb=1").keeps_freed
    kept = memory.HostMemory(proc.status, proc.clear, tunables="glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0")
    assert kept.keeps_freed
    row = memory.RowMemory(kept)
    row.built()
    _call(proc, row, 100)
    row.settled()
    _call(proc, row, 100)
    assert not row.at_least  # its calls were read: the reason is the heap's, not the peak's
    got = memory.figures(row, kept, output_bytes=10)
    assert got["peak_memory_bytes"] == 100 * 2**20 and got["peak_memory_source"] == memory.KEPT + kept.source
    assert got["peak_memory_at_least"]  # a field, not read off the words
    rows = [
        {"kind": "conv", "framework": "jax", "variant": v, "replicas": 1, "peak_memory_bytes": 1, **src}
        for v, src in (("a", got), ("b", {"peak_memory_source": memory.AT_LEAST + "x"}), ("c", got))
    ]
    low = [n for n in notes.memory_note(rows) if n.startswith(">=")]
    assert len(low) == 2 and low[0].endswith("conv jax a x1, conv jax c x1") and low[1].endswith("conv jax b x1")
    assert "mmap_max=0" in low[0] and "cannot be reset" in low[1]
