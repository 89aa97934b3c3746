"""The engine, in this process on fake frameworks (tests/fakeimpl.py): schedule, rows, judging, peaks, files.

No TensorFlow or JAX starts: each test runs in about a second. What only the real frameworks show stays in the
end-to-end tests (test_cli, test_owners, test_multiprocess)."""

import dataclasses
import json
import os

import pytest
from fakeimpl import FakeImpl, LocalWorker, fake_engine

from parity import api, compare
from parity.common.frameworks import JAX, TF
from parity.common.messages import WorkerBug
from parity.common.protocol import Called, Prepared, Rep, Result, Warm
from parity.engine import peaks, timing, workerproc
from parity.engine.config import Config
from parity.engine.schedule import run_suite
from parity.judging import roofline
from parity.output import files
from parity.record.rows import CSV_FIELDS, FIELDS

# A fixed peak of 1 GFLOP/s: a fake call of 0.1 s (the quick conv: 79 MFLOP) stays below it on any machine,
# a fake that returns at once (a computation the harness cannot see done) is far above it.
PEAK = roofline.Peak(
    "cpu", "fp32", 1e9, 1e9, "fixed for the tests", computed_flops=1e9, measured_flops=1e9, headroom=1.5
)


@pytest.fixture
def fakes(monkeypatch):
    """Workers are LocalWorkers on fakes (a dict to fill: framework -> configuration -> FakeImpl); the peak fixed.
    Time is a fake clock's (LocalWorker.CLOCK, time.perf_counter): a fake's call advances it, nothing sleeps."""
    table = {"tf": {"default": FakeImpl()}, "jax": {"default": FakeImpl()}}
    fake_engine(monkeypatch, PEAK, table)
    return table


def _run(tmp_path, **kw) -> dict:
    """The engine on the two fakes of `fakes` (a third framework's run: tests/test_n_frameworks.py)."""
    cfg = Config(
        **{
            "frameworks": (TF, JAX),
            "workloads": ("conv", "matmul"),
            "quick": True,
            "reps": 2,
            "budget_s": 0.0,
            "max_reps": 2,
            "warmup": 0,
            "progress": False,
            **kw,
        }
    )
    return run_suite(cfg, tmp_path)


def test_every_framework_variant_and_replica_count_makes_a_verified_row(fakes, tmp_path):
    res = _run(tmp_path, replicas=(1, 8))
    got = {(r["kind"], r["framework"], r["variant"], r["replicas"]) for r in res["rows"]}
    assert got == {
        (w, fw, v, n)
        for w in ("conv", "matmul")
        for fw in ("tf", "jax")
        for v, n in (("op", 1), ("op+tuned", 1), ("sharded", 8))
    }
    for r in res["rows"]:
        assert list(r) == list(FIELDS)  # the declared Row, nothing else
        assert r["verified"] and r["reps"] == 2 and r["median_s"] == pytest.approx(0.1), r  # the fake clock's
        assert r["xfw_max_rel_err"] == 0.0  # the same numbers in both fakes
        assert 0 < r["pct_peak"] <= 100 and r["tuned"] == (r["variant"] == "op+tuned")
    assert res["checks"] == [] and res["peak"]["source"] == "fixed for the tests"


def test_calls_are_interleaved_first_calls_apart(fakes, tmp_path, monkeypatch):
    workers = []
    monkeypatch.setattr(workerproc, "Worker", lambda *a, **k: workers.append(LocalWorker(*a, **k)) or workers[-1])
    _run(tmp_path, workloads=("conv",), replicas=(1,), tuned=False)
    cmds = [m.cmd for m in workers[0].asked]
    # variants, then the first call, then the timed reps (interleaved with the other framework's), two a turn right
    # after an untimed call of their own (an operation's calls back to back, as in a user's loop), then results
    assert cmds == ["variants", "prepare", "warm", "rep", "rep", "result"]
    assert [m.cmd for m in workers[1].asked] == cmds
    for w in workers:
        for i, m in enumerate(w.asked):
            if m.cmd == "rep":
                assert w.asked[i - 1] in (Warm(m.id), Rep(m.id))


def test_a_planted_error_is_invalid_and_names_the_oracle(fakes, tmp_path):
    fakes["jax"]["default"] = FakeImpl(error=1e-3)
    rows = _run(tmp_path, workloads=("conv",), replicas=(1,))["rows"]
    for r in rows:
        assert r["verified"] == (r["framework"] == "tf"), r
        assert r["xfw_max_rel_err"] is None  # against an invalid row: nothing to compare
    bad = next(r for r in rows if r["framework"] == "jax")
    assert bad["invalid_reason"] == "max_rel_err 0.001 vs the float64 oracle exceeds 1e-05", bad


def test_an_invalid_row_is_said_on_stderr_even_under_quiet(fakes, tmp_path, capsys, monkeypatch):
    """Exit 1 never unexplained: each invalid row and its reason on stderr (a full TMPDIR's OSError included)."""
    from parity import run

    fakes["jax"]["default"] = FakeImpl(error=1e-3)
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    argv = ["--quick", "--workload", "conv", "--replicas", "1", "--configs", "default", "--quiet"]
    assert run.main([*argv, "--framework", JAX, "--out", str(tmp_path / "out")]) == 1
    assert "invalid: conv jax op x1: max_rel_err 0.001 vs the float64 oracle exceeds 1e-05" in capsys.readouterr().err


def test_absent_data_ends_the_run_before_the_peak_is_measured(fakes, tmp_path, capsys, monkeypatch):
    """Bad input costs no measurement: the workloads' data is read before the CPU's peak (seconds of matrix
    products), and nothing is written."""
    from parity import run

    measured = []
    monkeypatch.setattr(peaks, "cpu_peak", lambda n: measured.append(n))
    out = tmp_path / "out"
    argv = ["--quick", "--workload", "cnn", "--data", "real", "--data-dir", str(tmp_path), "--out", str(out), "--quiet"]
    assert run.main(argv) == 2
    assert "Fashion-MNIST not found" in capsys.readouterr().err
    assert measured == [] and not (out / "results.json").exists()


@pytest.mark.parametrize("delay_s", [1e-6, 0.0])
def test_a_call_faster_than_the_peak_is_impossible(fakes, tmp_path, monkeypatch, delay_s):
    # a peak of 1 MFLOP/s: the quick conv's 76 MFLOP of necessary arithmetic would take 50 s at 1.5x it, so a
    # fake that returns a ready answer is impossible (the valid side: the tests above); a call that took no time
    # at all (a clock that did not move) is too, though no rate can be computed from it
    tiny = roofline.Peak("cpu", "fp32", 1e6, 1e9, "fixed", computed_flops=1e6, measured_flops=1e6, headroom=1.5)
    monkeypatch.setattr(peaks, "cpu_peak", lambda n: tiny)
    fakes["jax"]["default"] = FakeImpl(delay_s=delay_s)  # returns a ready answer: the computation cannot have run
    rows = _run(tmp_path, frameworks=("jax",), workloads=("conv",), replicas=(1,))["rows"]
    assert rows and all(not r["verified"] and "cannot have done the work" in r["invalid_reason"] for r in rows)


def test_tuned_configurations_get_workers_of_their_own(fakes, tmp_path):
    fakes["jax"]["default"] = FakeImpl(configs={"fast": {"XLA_FLAGS": "--fake"}})
    fakes["jax"]["fast"] = FakeImpl()
    rows = _run(tmp_path, workloads=("matmul",), replicas=(1,))["rows"]
    fast = [r for r in rows if r["variant"].endswith("+fast")]
    assert {r["variant"] for r in fast} == {"op+fast", "op+tuned+fast"}
    assert all(r["setting_env"] == {"XLA_FLAGS": "--fake"} and r["tuned"] for r in fast)


@pytest.mark.parametrize(
    "configs, formats, expected",
    [
        ("levers", {"fast": ("bfloat16",)}, set()),  # acts on bfloat16 only: no float32 variant of the fake with it
        ("levers", {"fast": ("float32",)}, {"op+fast", "op+tuned+fast"}),
        ("all", {"fast": ("bfloat16",)}, {"op+fast", "op+tuned+fast"}),  # every combination
    ],
)
def test_levers_runs_a_configuration_only_in_the_formats_it_acts_on(fakes, tmp_path, configs, formats, expected):
    fakes["jax"]["default"] = FakeImpl(configs={"fast": {"XLA_FLAGS": "--fake"}}, setting_formats=formats)
    fakes["jax"]["fast"] = FakeImpl(setting_formats=formats)
    res = _run(tmp_path, workloads=("matmul",), replicas=(1,), configs=configs)
    assert {r["variant"] for r in res["rows"] if r["variant"].endswith("+fast")} == expected
    assert ("--configs levers" in " ".join(res["notes"])) == (configs == "levers" and not expected)


def test_every_configuration_runs_each_workload_on_workers_of_its_own(fakes, tmp_path, monkeypatch):
    """Under levers (and all), where a dozen workers each keep their largest buffers, each workload gets fresh
    workers (Config.rounds); under best, one set of workers runs every workload. The same rows either way."""
    started = []

    class Counted(LocalWorker):
        def __init__(self, framework, *args, **kwargs):
            super().__init__(framework, *args, **kwargs)
            started.append(framework)

    monkeypatch.setattr(workerproc, "Worker", Counted)
    kinds = {}
    for configs, sets in (("best", 1), ("levers", 2), ("all", 2)):
        started.clear()
        (tmp_path / configs).mkdir()
        res = _run(tmp_path / configs, replicas=(1,), configs=configs)
        assert sorted(started) == sorted([TF, JAX] * sets), configs
        kinds[configs] = {(r["kind"], r["framework"], r["variant"]) for r in res["rows"]}
        assert {w for w, _, _ in kinds[configs]} == {"conv", "matmul"} and all(r["verified"] for r in res["rows"])
    assert kinds["best"] <= kinds["levers"] <= kinds["all"]


@pytest.mark.parametrize("configs", ["levers", "all"])
def test_levers_runs_a_configuration_without_the_dispatch_variants(fakes, tmp_path, configs):
    """A variant that tunes only the dispatch (JAX's '+scan') runs out of the box under levers, not again with each
    process-wide configuration; all runs every combination."""
    formats = {"fast": ("float32",)}
    for config in ("default", "fast"):
        fakes["jax"][config] = FakeImpl(
            configs={"fast": {"XLA_FLAGS": "--fake"}} if config == "default" else {},
            setting_formats=formats,
            dispatch_names=("op+tuned",),
        )
    res = _run(tmp_path, workloads=("matmul",), replicas=(1,), configs=configs)
    variants = {r["variant"] for r in res["rows"] if r["framework"] == "jax"}
    assert {"op", "op+tuned", "op+fast"} <= variants
    assert ("op+tuned+fast" in variants) == (configs == "all")
    assert ("several-steps-per-dispatch" in " ".join(res["notes"])) == (configs == "levers")


@pytest.mark.parametrize(
    "formats, best, expected",
    [
        # no configuration: the best-known variant runs in the default worker, beside the out-of-the-box one
        ({}, ("op+tuned",), {"op", "op+tuned"}),
        # a configuration for its format: the best-known variant runs there only, the default worker out of the box
        ({"fast": ("float32",)}, ("op+tuned",), {"op", "op+tuned+fast"}),
        ({"fast": ("float32",)}, ("op",), {"op", "op+fast"}),  # the best-known is the plain variant, with the setting
        # a configuration for another format: nothing of this one's runs there
        ({"fast": ("bfloat16",)}, ("op+tuned",), {"op", "op+tuned"}),
        ({}, (), {"op"}),  # no best-known variant: the framework out of the box
    ],
)
def test_best_times_each_framework_out_of_the_box_and_its_best_known_configuration(
    fakes, tmp_path, formats, best, expected
):
    configs = {"fast": {"XLA_FLAGS": "--fake"}} if formats else {}
    for config in ("default", *formats):
        fakes["jax"][config] = FakeImpl(
            configs=configs if config == "default" else {}, setting_formats=formats, best_names=best
        )
    res = _run(tmp_path, workloads=("matmul",), replicas=(1,), configs="best")
    assert {r["variant"] for r in res["rows"] if r["framework"] == "jax"} == expected
    assert {r["variant"] for r in res["rows"] if r["framework"] == "tf"} == {"op", "op+tuned"}  # its own BEST
    assert "--configs best" in " ".join(res["notes"])


@pytest.mark.parametrize("configs", ["best", "levers", "all"])
def test_a_configuration_with_no_format_under_best_starts_no_worker(fakes, tmp_path, monkeypatch, configs):
    """A configuration declared for no number format (JAX's 'thp' alone) is left to --configs all: under best and
    levers its worker is never started, so it costs no start-up."""
    from fakeimpl import LocalWorker

    started = []
    monkeypatch.setattr(LocalWorker, "ask_to_quit", lambda self, kill=False: started.append(self.setting))
    formats = {"alone": (), "fast": ("float32",)}
    configs_env = {"alone": {"GLIBC_TUNABLES": "x=1"}, "fast": {"XLA_FLAGS": "--fake"}}
    fakes["jax"]["default"] = FakeImpl(configs=configs_env, setting_formats=formats)
    fakes["jax"]["alone"] = FakeImpl(setting_formats=formats)
    fakes["jax"]["fast"] = FakeImpl(setting_formats=formats)
    rows = _run(tmp_path, workloads=("matmul",), replicas=(1,), configs=configs)["rows"]
    assert ("alone" in started) == (configs == "all")
    assert {r["variant"] for r in rows if r["variant"].endswith("+alone")} == (
        {"op+alone", "op+tuned+alone"} if configs == "all" else set()
    )
    fast = {"op+tuned+fast"} if configs == "best" else {"op+fast", "op+tuned+fast"}  # best: the best-ranked only
    assert {r["variant"] for r in rows if r["variant"].endswith("+fast")} == fast


def test_one_owner_at_a_time_times_each_owners_rows_again_at_its_end(fakes, tmp_path):
    res = _run(tmp_path, workloads=("conv",), replicas=(1,), exclusive=True, tuned=False)
    notes = [n for n in res["notes"] if n.startswith("one owner of the device at a time")]
    assert [n.split("'s rows")[0].rsplit(": ", 1)[1] for n in notes] == ["TensorFlow", "JAX"]  # one note an owner
    assert all("timed again at the end of its turn" in n and "between the first and the last" in n for n in notes)
    assert res["rows"] and all(r["drift"] is not None for r in res["rows"])  # every owner's, no owner started twice
    assert all(r["xfw_max_rel_err"] == 0.0 for r in res["rows"])  # outputs compared across owners


def test_a_bug_in_a_worker_ends_the_run_with_its_traceback(fakes, tmp_path):
    fakes["tf"]["default"] = FakeImpl(bug=True)
    with pytest.raises(WorkerBug, match="a planted bug") as e:
        _run(tmp_path, workloads=("conv",), replicas=(1,))
    assert "TypeError" in e.value.traceback


def test_a_batch_that_does_not_split_is_refused_before_anything_starts(fakes, tmp_path):
    from parity.common.messages import HarnessError

    with pytest.raises(HarnessError, match="does not divide by 3 replicas"):
        _run(tmp_path, workloads=("conv",), replicas=(3,))


def test_the_files_hold_the_declared_row_and_compare_reads_them(fakes, tmp_path):
    res = _run(tmp_path, workloads=("conv",), replicas=(1,))
    doc = {
        "env": {"schema_version": 2, "device": "cpu", "precision": "default", "frameworks": {}, "notes": []},
        "rows": res["rows"],
        "checks": res["checks"],
    }
    for out in ("a", "b"):
        files.write_json(tmp_path / f"{out}.json", doc)
    back = files.load_results(tmp_path / "a.json")
    assert back["rows"] == json.loads(json.dumps(res["rows"]))
    header = files.csv_text(res["rows"]).splitlines()[0].split(",")
    assert tuple(header) == CSV_FIELDS
    lines, bad = compare.compare(back, files.load_results(tmp_path / "b.json"), 0.10)
    assert len(lines) == len(res["rows"]) and not bad and all(ln["ratio"] == 1.0 for ln in lines)


def test_nothing_outside_the_call_enters_the_timed_interval(fakes, tmp_path, monkeypatch):
    # on a fake clock a call takes 0.1 s and its synchronisation 0.02 s; reading its output for verification takes
    # 1000 s: every recorded time must be exactly 0.12 s (the first call's too)
    clock = LocalWorker.CLOCK  # the fixture's
    for fw in fakes:
        fakes[fw]["default"] = FakeImpl(delay_s=0.1, block_s=0.02, verify_s=1000.0, clock=clock)
    rows = _run(tmp_path, workloads=("conv",), replicas=(1,), reps=5, max_reps=5, warmup=1)["rows"]
    assert rows and clock.now > 1000  # the verification did run, on the same clock
    for r in rows:
        assert r["verified"], r
        assert r["times_s"] == [pytest.approx(0.12, abs=1e-9)] * 5 and r["compile_s"] == pytest.approx(0.12)


def test_rows_keep_their_raw_times_and_rounds(fakes, tmp_path):
    rows = _run(tmp_path, workloads=("conv",), replicas=(1,), reps=3, max_reps=3)["rows"]
    for r in rows:
        assert len(r["times_s"]) == r["reps"] == 3 and r["rounds"] == [0, 1, 2]
        assert r["median_s"] == sorted(r["times_s"])[1] and r["min_s"] == min(r["times_s"])
    doc = {"env": {}, "rows": rows}
    from parity.judging import summary

    comps = summary.comparisons(rows)
    head = next(c for c in comps if c["pair"] == "jax_vs_tf")
    assert head["kind"] == "conv" and head["replicas"] == 1 and head["dtype"] == "float32"
    assert head["num"]["framework"] == "jax" and head["den"]["framework"] == "tf" and head["paired_rounds"] == 3
    assert head["ci95"] is None  # 3 calls: too few for a 95% interval, and said so
    assert "too few" in head["text"] and summary.verdict(doc, "conv", 1, "float32").startswith("PASS (")
    tuned = [c for c in comps if c["pair"] == "tuned_vs_default"]
    assert {(c["num"]["framework"], c["num"]["variant"], c["den"]["variant"]) for c in tuned} == {
        ("tf", "op+tuned", "op"),
        ("jax", "op+tuned", "op"),
    }


def test_releasing_the_output_is_part_of_the_call(fakes, tmp_path, monkeypatch):
    # a framework that frees its output at once (XLA:CPU unmaps it) pays that in every call of a user's loop
    clock = LocalWorker.CLOCK  # the fixture's

    class Output:  # advances the clock by 0.05 s when the last reference to it goes
        def __init__(self, value, placement):
            self.value, self.placement = value, placement

        def __del__(self):
            clock.advance(0.05)

    fake = FakeImpl(delay_s=0.1, verify_s=1000.0, clock=clock)
    prepared = fake._prepared

    def with_release(compute, devices):
        p = prepared(compute, devices)
        value = compute()
        return dataclasses.replace(
            p, run=lambda: (p.run(), Output(value, [f"cpu:{i}" for i in range(len(devices))]))[1]
        )

    monkeypatch.setattr(fake, "_prepared", with_release)
    fakes["jax"]["default"] = fake
    rows = _run(tmp_path, frameworks=("jax",), workloads=("conv",), replicas=(1,), reps=3, max_reps=3)["rows"]
    for r in rows:
        assert r["verified"], r
        assert r["times_s"] == [pytest.approx(0.15, abs=1e-9)] * 3


def test_a_full_disk_at_the_end_is_one_line_and_leaves_the_previous_results(fakes, tmp_path, capsys, monkeypatch):
    from parity import run

    out = tmp_path / "out"
    argv = ["--quick", "--workload", "conv", "--replicas", "1", "--configs", "default", "--out", str(out), "--quiet"]
    argv += ["--framework", JAX]  # one of the fakes
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)  # no matplotlib work: the engine's files only
    assert run.main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "write_text", full)
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_profile_traces_one_more_call_per_row_outside_the_timed_ones(fakes, tmp_path, monkeypatch):
    from parity import run

    out = tmp_path / "out"
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    argv = ["--quick", "--workload", "conv", "--replicas", "1", "--configs", "default", "--out", str(out), "--quiet"]
    argv += ["--framework", JAX]  # one of the fakes
    workers, traced, trace = [], [], FakeImpl.trace
    monkeypatch.setattr(workerproc, "Worker", lambda *a, **k: workers.append(LocalWorker(*a, **k)) or workers[-1])
    monkeypatch.setattr(FakeImpl, "trace", lambda self, d: traced.append(d) or trace(self, d))
    assert run.main([*argv, "--profile"]) == 0
    cmds = [m.cmd for m in workers[0].asked]
    assert cmds.index("profile") > max(i for i, c in enumerate(cmds) if c in ("rep", "result"))  # after its result
    rows = json.loads((out / "results.json").read_text())["rows"]
    for r in rows:
        assert r["profile_dir"] == f"profiles/{r['profile_dir'].split('/')[1]}"
        assert (out / r["profile_dir"] / "fake.trace").read_text() == "traced\n"
        assert r["reps"] == len(r["times_s"])  # the profiled call is no timed call
        # the profiled call's own time, taken as a timed call's (on the fake clock: the same as each timed one)
        assert r["profile_call_s"] == pytest.approx(r["median_s"]) and r["profile_call_s"] > 0
        assert r["layers"] == [{"layer": "conv", "pass": "forward", "seconds": 0.05, "share": 1.0}]  # its one op
        assert r["profile_coverage"] == pytest.approx(0.05 / r["profile_call_s"])
    # each row traced twice, the first call thrown away with its folder (a profiler's first traced call pays more)
    assert len(traced) == 2 * len(rows) and not any(os.path.exists(d) for d in traced[::2])
    assert run.main(argv) == 0  # without --profile: no trace folder, the rows say none, the old traces gone
    assert all(r["profile_dir"] is None for r in json.loads((out / "results.json").read_text())["rows"])
    assert not (out / "profiles").exists()


def test_a_trace_with_no_op_read_is_said_and_its_row_has_no_layers(fakes, tmp_path, monkeypatch, capsys):
    """A profiler that writes a trace this code reads no op from (JAX's on the TPU chip: docs/tpu.md): the run says
    so on its progress lines, and the row keeps its trace folder and no layer split."""
    from parity import run

    out = tmp_path / "out"
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    monkeypatch.setattr(workerproc, "Worker", LocalWorker)
    monkeypatch.setattr(FakeImpl, "trace_ops", lambda self, d, program=None: [])
    argv = ["--quick", "--workload", "conv", "--replicas", "1", "--configs", "default", "--framework", JAX]
    assert run.main([*argv, "--out", str(out), "--profile"]) == 0
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    assert row["profile_dir"] and row["layers"] is None and row["profile_coverage"] is None
    said = f"  traced to {row['profile_dir']}, but no op was read from the trace: the row has no layer split"
    assert said in capsys.readouterr().err


class BusyMachine:
    """A fake clock and a fake process CPU clock: the process's threads compute, one core's worth, until
    `busy_until` on the clock; sleeping advances the clock."""

    def __init__(self, busy_until: float):
        self.now, self.cpu, self.busy_until = 0.0, 0.0, busy_until

    def sleep(self, s: float) -> None:
        self.cpu += max(0.0, min(self.now + s, self.busy_until) - self.now)
        self.now += s

    def busy_after(self, **kw) -> float:
        return timing.busy_after(clock=lambda: self.now, cpu=lambda: self.cpu, sleep=self.sleep, **kw)


@pytest.mark.parametrize("busy_s", [0.0, 0.00005, 0.3, 0.30011])
def test_busy_after_finds_the_end_of_the_work_left_after_a_call(busy_s):
    poll = 0.0005
    got = BusyMachine(busy_s).busy_after(poll_s=poll)
    if busy_s < timing.IDLE_SHARE * poll:  # less than the idle share of one poll: idle
        assert got == 0.0
    else:
        assert busy_s <= got <= busy_s + poll + 1e-12


def test_busy_after_stops_at_its_limit_when_the_threads_never_rest():
    assert BusyMachine(float("inf")).busy_after(poll_s=0.0005, limit_s=0.1) == pytest.approx(0.1)


def test_the_work_a_framework_leaves_after_a_call_is_part_of_its_time(fakes, tmp_path, monkeypatch):
    """A framework's threads may compute on after its call has returned and its output is gone (a JAX bfloat16
    conv's execution thread did, standalone): on a fake clock, 0.25 s of such work is in the row's time, and said."""
    clock = LocalWorker.CLOCK  # the fixture's

    def busy_after():
        clock.advance(0.25)
        return 0.25

    monkeypatch.setattr(timing, "busy_after", busy_after)
    for fw in ("tf", "jax"):
        fakes[fw]["default"] = FakeImpl(delay_s=0.1, clock=clock)
    rows = _run(tmp_path, workloads=("matmul",), replicas=(1,))["rows"]
    assert rows
    for r in rows:
        assert r["times_s"] == pytest.approx([0.35] * len(r["times_s"])), r["times_s"]
        assert r["busy_after_s"] == pytest.approx(0.25)


@pytest.mark.parametrize("fails", [False, True], ids=["finished", "failed"])
def test_workers_are_all_asked_to_quit_before_any_is_waited_for(fails):
    """So that their interpreters exit side by side; a failed or interrupted round kills them instead."""
    from parity.engine.workerproc import with_workers

    calls = []

    class Quitting:
        def __init__(self, name):
            self.name = name

        def ask_to_quit(self, kill=False):
            calls.append(("ask", self.name, kill))

        def wait_quit(self, timeout_s=10):
            calls.append(("wait", self.name))

    def work():
        if fails:
            raise KeyboardInterrupt
        return 7

    workers = {"a": Quitting("a"), "b": Quitting("b")}
    if fails:
        with pytest.raises(KeyboardInterrupt):
            with_workers(workers, work)
    else:
        assert with_workers(workers, work) == 7
    assert calls == [("ask", "a", fails), ("ask", "b", fails), ("wait", "a"), ("wait", "b")]


class _Recorder:
    """A worker that answers every request at once and records it: (command, case id)."""

    def __init__(self, log):
        self.framework, self.log, self.pending = "jax", log, []

    def ask(self, req):
        self.log.append((req.cmd, req.id))
        return Prepared(1.0, None) if req.cmd == "prepare" else Called(1.0, None)

    def send(self, req):
        self.pending.append(req.id)

    def answer(self):
        self.pending.pop(0)
        return Result(None, median_s=1.0)


@pytest.mark.parametrize("epochs", [False, True])
def test_training_epochs_run_back_to_back_and_operations_interleave(monkeypatch, tmp_path, epochs):
    """A training row's epochs follow its first epoch at once, one row at a time (as a user's fit(epochs=N)), each
    in rounds of its own; an operation's timed calls are interleaved across rows, two a turn after an untimed call."""
    from types import SimpleNamespace

    from parity.engine import ahead, schedule
    from parity.engine.assemble import Case
    from parity.workloads import RowKind

    calls = []
    worker = _Recorder(calls)
    todo = [Case("jax", v, 1, v, v, "float32", False) for v in ("a", "b")]
    monkeypatch.setattr(ahead, "cases", lambda *a: todo)
    monkeypatch.setattr(schedule, "make_row", lambda cfg, kind, c, res, more, *a: {"id": c.key, **more})
    kind = RowKind("k", lambda *a: None, lambda *a: None, epochs=epochs)
    spec = SimpleNamespace(epochs=3, seed=0, to_dict=dict)
    cfg = Config(progress=False, reps=2, budget_s=0.0, max_reps=2, warmup=0, workloads=())
    monkeypatch.setattr(Config, "spec", lambda self, wl: spec)
    run = SimpleNamespace(suites={}, said={}, ctxs={}, next_round=0)
    rnd = schedule.Round(cfg, run, 1, tmp_path, {"jax": worker}, {"jax": {"replicas": 1}})
    rows = schedule._run_kind(rnd, "k", kind)
    assert ("back to back" in " ".join(run.said.values())) == epochs  # the run's notes say so
    if epochs:
        assert calls == [("prepare", "a"), ("rep", "a"), ("rep", "a"), ("prepare", "b"), ("rep", "b"), ("rep", "b")]
        assert [r["rounds"] for r in rows] == [[0, 1], [2, 3]]  # no round in common: never paired
        again = schedule._run_kind(rnd, "k", kind, seed_offset=1)  # --seeds: the next seed's rows, rounds of their own
        assert [r["rounds"] for r in again] == [[4, 5], [6, 7]]
    else:
        assert calls == [("prepare", "a"), ("prepare", "b")] + [
            (cmd, c) for c in ("a", "b") for cmd in ("warm", "rep", "rep")
        ]  # one turn each: an untimed call, then both timed calls, each a round
        assert [r["rounds"] for r in rows] == [[0, 1], [0, 1]]


def test_a_round_is_judged_while_the_next_rounds_workers_start(fakes, tmp_path, monkeypatch):
    """Its workers gone and the CPU's peak measured again first; the last round after every worker is gone."""
    from parity.engine import peaks, schedule

    events = []
    started = LocalWorker.__init__

    def spawn(self, framework, device, replicas, *a, **k):
        events.append(("start", framework, replicas))
        started(self, framework, device, replicas, *a, **k)

    monkeypatch.setattr(LocalWorker, "__init__", spawn)
    monkeypatch.setattr(LocalWorker, "wait_quit", lambda self, timeout_s=10: events.append(("gone", self.framework)))
    monkeypatch.setattr(peaks, "after_round", lambda cfg, peak: events.append(("peak",)) or peak)
    monkeypatch.setattr(schedule, "_judge_parity", lambda rnd: rnd and events.append(("judge", rnd.replicas)))
    _run(tmp_path, workloads=("conv",), replicas=(1, 8))
    assert events == [
        ("start", "tf", 1), ("start", "jax", 1), ("gone", "tf"), ("gone", "jax"), ("peak",),
        ("start", "tf", 8), ("start", "jax", 8), ("judge", 1), ("gone", "tf"), ("gone", "jax"), ("peak",),
        ("judge", 8),
    ]  # fmt: skip


def test_workers_starting_are_stopped_when_the_work_beside_them_fails(fakes, monkeypatch):
    from parity.engine.workerproc import start_workers

    killed = []
    monkeypatch.setattr(LocalWorker, "ask_to_quit", lambda self, kill=False: killed.append((self.framework, kill)))

    def fails():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start_workers(Config(frameworks=(TF, JAX), workloads=("conv",), quick=True, progress=False), 1, meanwhile=fails)
    assert killed == [("tf", True), ("jax", True)]


@pytest.mark.parametrize("configs", ["best", "levers"])
def test_best_runs_for_each_format_the_first_of_the_preferred_configurations(fakes, tmp_path, configs):
    """Two settings offered act on float32: best times the float32 rows under the best-ranked setting offered
    (the one preferred but not offered is passed over), levers under each."""
    formats = {"absent": ("float32",), "slow": ("float32",), "fast": ("float32",), "half": ("bfloat16",)}
    offered = {k: {"XLA_FLAGS": f"--{k}"} for k in ("slow", "fast", "half")}
    order = ("absent", "fast", "slow", "half")
    fakes["jax"]["default"] = FakeImpl(configs=offered, setting_formats=formats, setting_order=order)
    for k in offered:
        fakes["jax"][k] = FakeImpl(setting_formats=formats, setting_order=order)
    rows = _run(tmp_path, workloads=("matmul",), replicas=(1,), configs=configs)["rows"]
    ran = {r["variant"].rsplit("+", 1)[1] for r in rows if r["framework"] == "jax" and "+" in r["variant"]}
    assert ran - {"tuned"} == ({"fast"} if configs == "best" else {"slow", "fast"})


def _user_loop(timed: list[float], reps: int = 5) -> tuple[float, ...]:
    """A fake's per-call delays (no warm-up) so that its timed calls take `timed` in turn (cycled, 200 of them): the
    first call, then each turn's untimed call (as long as the turn's first timed call) and its timed calls, as many
    as the settling rule's turn holds (the schedule's order for an operation)."""
    from parity.engine.repetitions import OP_CALLS_PER_TURN
    from parity.judging.settling import Rule

    rule, out, made = Rule(reps, per_visit=OP_CALLS_PER_TURN), [timed[0]], 0
    while made < 200:
        turn = [timed[(made + j) % len(timed)] for j in range(rule.visit(made))]
        out += [turn[0], *turn]
        made += len(turn)
    return tuple(out)


def _settle(fakes, tmp_path, monkeypatch, jax_timed: list[float], budget_s: float = 20.0) -> dict:
    """The conv at 1 device with TF's calls steady at 0.1 s and JAX's taking `jax_timed` in turn (cycled), on a
    fake clock, at least 5 timed calls a row, more by the settling rule within `budget_s`."""
    clock = LocalWorker.CLOCK  # the fixture's
    fakes["tf"]["default"] = FakeImpl(delay_s=0.1, clock=clock)
    fakes["jax"]["default"] = FakeImpl(delays=_user_loop(jax_timed), clock=clock)
    res = _run(tmp_path, workloads=("conv",), replicas=(1,), reps=5, budget_s=budget_s, max_reps=200)
    return {(r["framework"], r["variant"]): r for r in res["rows"]}


def test_steady_rows_stop_at_their_minimum(fakes, tmp_path, monkeypatch):
    rows = _settle(fakes, tmp_path, monkeypatch, [0.2])
    assert {k: r["reps"] for k, r in rows.items()} == dict.fromkeys(rows, 5)
    assert all(r["rounds"] == rows["tf", "op"]["rounds"] for r in rows.values())  # one comparison: one set of rounds


def test_a_noisy_row_gets_calls_until_settled_and_its_comparisons_rows_with_it(fakes, tmp_path, monkeypatch):
    noisy = [0.14, 0.26, 0.2, 0.12, 0.28, 0.2, 0.17, 0.23, 0.2, 0.19, 0.21, 0.2]
    rows = _settle(fakes, tmp_path, monkeypatch, noisy, budget_s=100.0)
    from parity.judging import settling, summary

    jax = rows["jax", "op"]
    assert jax["reps"] > 5 and settling.row_width(settling.Timed(tuple(jax["times_s"]), ())) <= settling.WIDTH
    # TF's steady row ran on beside it (their ratio was as unsettled as JAX's row), in the same rounds
    tf = rows["tf", "op"]
    assert tf["reps"] > 5 and set(jax["rounds"]) <= set(tf["rounds"]) | set(rows["tf", "op+tuned"]["rounds"])
    doc = {"rows": list(rows.values())}
    assert summary.unsettled_note(doc) == ""  # every row and comparison settled within the budget


def test_a_bimodal_row_spends_its_budget_and_the_summary_says_it_is_unsettled(fakes, tmp_path, monkeypatch):
    rows = _settle(fakes, tmp_path, monkeypatch, [0.5, 1.2, 0.5, 1.3, 0.5], budget_s=12.0)
    from parity.judging import summary

    jax = rows["jax", "op"]
    assert jax["reps"] > 5 and sum(jax["times_s"]) >= 12.0  # more calls, to the budget and no further
    assert sum(jax["times_s"][:-1]) < 12.0 and jax["modes"] is not None
    note = summary.unsettled_note({"rows": list(rows.values())})
    assert note.startswith("not settled within the run's budget") and "conv JAX op x1" in note
    assert "conv TF op x1" not in note  # the steady row is not said unsettled: only its comparison with JAX


def test_a_jax_compilation_cache_the_caller_set_is_said(fakes, tmp_path, monkeypatch):
    """JAX's first calls may load their programs from a cache the caller set: the run says so, and records it."""
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    for d in ("without", "with"):
        (tmp_path / d).mkdir()
    res = _run(tmp_path / "without", workloads=("matmul",), replicas=(1,))
    assert not any("JAX_COMPILATION_CACHE_DIR" in n for n in res["notes"])
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache"))
    res = _run(tmp_path / "with", workloads=("matmul",), replicas=(1,))
    assert any(n.startswith("JAX_COMPILATION_CACHE_DIR is set") for n in res["notes"])
    from parity.engine.environment import ENV_FLAGS, compilation_cache_notes

    assert "JAX_COMPILATION_CACHE_DIR" in ENV_FLAGS
    assert compilation_cache_notes(("tf",)) == []  # TensorFlow alone reads no JAX cache


def test_an_inductor_cache_the_caller_set_is_said(monkeypatch, tmp_path):
    """PyTorch's compiled first calls may load from an Inductor cache the caller set: the notes say so, for a run
    with PyTorch only."""
    from parity.engine.environment import ENV_FLAGS, compilation_cache_notes

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert compilation_cache_notes(("torch", "jax")) == []
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert compilation_cache_notes(("tf", "jax")) == []
    (note,) = compilation_cache_notes(("torch",))
    assert note.startswith(f"TORCHINDUCTOR_CACHE_DIR is set ({tmp_path})") and "not a compilation" in note
    assert "TORCHINDUCTOR_CACHE_DIR" in ENV_FLAGS


class OneChip(FakeImpl):
    """A fake with one 'tpu' chip (a stand-in device kind: the CPU machines have none)."""

    def setup_devices(self, device, replicas, cluster=None):
        return ["tpu:0"] if device == "tpu" else super().setup_devices(device, replicas, cluster)

    def list_devices(self):
        return ["tpu:0 fake chip"]


class NoChipPath(FakeImpl):
    """A fake with no code path for the stand-in device (PyTorch on a TPU)."""

    def setup_devices(self, device, replicas, cluster=None):
        if device == "tpu":
            raise api.DeviceNotOffered("no tpu code path (fake)")
        return super().setup_devices(device, replicas, cluster)


def test_one_chip_takes_one_round_though_the_last_owner_has_none(fakes, tmp_path):
    """An accelerator's default times one chip, then every chip: on one chip the second round would time the same
    rows again. One owner at a time, each owner's hello counts, not the last one's (here a framework with no chip)."""
    fakes["tf"]["default"], fakes["jax"]["default"] = OneChip(), NoChipPath()
    res = _run(tmp_path, device="tpu", workloads=("conv",), replicas=(), exclusive=True, tuned=False)
    assert {r["replicas"] for r in res["rows"]} == {1} and {r["framework"] for r in res["rows"]} == {"tf"}
    assert "one tpu chip: the x1 rows are every chip's (no second round)" in res["notes"]
