"""A device with one owner at a time (a TPU host), one interpreter per framework, and a variant the framework
refuses: on the CPU, with the harness's own logic judged, not the host's arithmetic."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from parity_cli import TINY, run_parity

from parity.api.variants import MANY, Variant
from parity.common.messages import HarnessError
from parity.common.protocol import GetResult, Prepare, Rep
from parity.engine import devicelock
from parity.engine.assemble import Case, make_row
from parity.engine.config import Config
from parity.engine.devicelock import lock_state
from parity.engine.workerproc import Worker
from parity.judging.judge import drift_note
from parity.record.rows import Row


def run(*args, timeout=900, env=None):
    return run_parity(*args, timeout=timeout, env=env)


def test_a_second_simultaneous_owner_is_refused(tmp_path):
    """What --exclusive enforces on a CPU, as libtpu does on a TPU host: started together, the second worker
    cannot have the device, and says which process has it."""
    lock = tmp_path / "device.lock"
    first = Worker("jax", "cpu", 1, "default", 120, lock=lock)
    try:
        assert first.recv(120)["status"] == "ready"
        second = Worker("tf", "cpu", 1, "default", 120, lock=lock)
        try:
            msg = second.recv(120)
        finally:
            second.close()
        assert msg["status"] == "unavailable"
        assert msg["error"] == (
            f"the cpu device is already in use by process {first.proc.pid} (lock {lock}): one owner at a time"
        )
    finally:
        first.close()
    third = Worker("tf", "cpu", 1, "default", 120, lock=lock)  # the owner ended: the device is free again
    try:
        assert third.recv(120)["status"] == "ready"
    finally:
        third.close()


def test_an_owner_started_early_imports_then_waits_for_the_device(tmp_path):
    """The next owner, started while another holds the device (Config.ahead's runs), does its imports and then waits
    for the lock, saying nothing; once the holder ends it takes the device and says hello."""
    lock = tmp_path / "device.lock"
    first = Worker("jax", "cpu", 1, "default", 120, lock=lock)
    try:
        assert first.recv(120)["status"] == "ready"
        waiting = Worker("jax", "cpu", 1, "default", 120, lock=lock, waits=True)
        try:
            deadline = time.monotonic() + 120
            while f"-> FLOCK  ADVISORY  WRITE {waiting.proc.pid} " not in Path("/proc/locks").read_text():
                assert time.monotonic() < deadline and waiting.proc.poll() is None, waiting.stderr_tail()
                time.sleep(0.2)
            assert waiting.lines.empty()  # blocked on the lock: no first words yet
            first.close()
            assert waiting.recv(120)["status"] == "ready" and lock.read_text() == str(waiting.proc.pid)
        finally:
            waiting.close()
    finally:
        first.close()


# One owner at a time end to end, with real frameworks: tests/test_cli.py (it shares its run with the CNN's).


def test_drift_note_names_rows_that_moved():
    first = [
        Row(kind="conv", framework="tf", variant="function", replicas=1, verified=True, median_s=1.0),
        Row(kind="cnn_train", framework="tf", variant="fit", replicas=1, seed=0, verified=True, median_s=2.0),
    ]
    again = [dataclasses.replace(first[0], median_s=1.02), dataclasses.replace(first[1], median_s=2.5)]
    note = drift_note("TensorFlow", first, again)
    assert note.startswith("one owner of the device at a time: TensorFlow's rows timed again at the end of its turn")
    assert "+2.0% to +25.0%" in note and "cnn_train tf fit x1 +25.0%" in note and "conv tf function" not in note
    assert first[0].drift == pytest.approx(0.02)


def _holder(path: Path) -> subprocess.Popen:
    """A live process that keeps `path` open, as libtpu keeps its lockfile."""
    p = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(path)!r}); print('open', flush=True); import time; time.sleep(120)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "open"
    return p


def test_a_live_libtpu_lockfile_stops_the_run_and_a_stale_one_is_left_alone_unsaid(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "libtpu_lockfile"
    monkeypatch.setattr(devicelock, "LIBTPU_LOCKFILE", lock)
    assert lock_state(lock, [])[0] == "free"
    lock.write_text("")
    holder = _holder(lock)
    try:
        state, say = lock_state(lock, [])
        assert state == "held" and f"process {holder.pid}" in say and "must not be removed" in say
        with pytest.raises(HarnessError, match=f"process {holder.pid}"):
            devicelock.check_libtpu_lock()
    finally:
        holder.kill()
        holder.wait()
    state, say = lock_state(lock, [])
    assert (state, say) == ("stale", "")
    devicelock.check_libtpu_lock()  # libtpu leaves it after a clean exit too: no warning on every TPU run
    assert capsys.readouterr().err == ""
    assert lock.exists()  # never removed


@pytest.fixture
def second_python(tmp_path):
    """Another interpreter path: a wrapper around this one, as a second environment's bin/python would be."""
    path = tmp_path / "env2" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


def test_each_framework_in_its_own_interpreter(tmp_path, second_python):
    out = tmp_path / "out"
    p = run(*TINY, "--python", f"jax={second_python}", "--out", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    env = json.loads((out / "results.json").read_text())["env"]
    assert env["pythons"] == {"jax": str(second_python)}
    for fw in ("tf", "jax"):  # each worker's own interpreter and versions, recorded
        assert env["frameworks"][fw]["python"].count(".") == 2 and env["frameworks"][fw]["versions"]


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda d: d / "nowhere" / "python", "is not an executable file"),
        (lambda d: Path("/bin/false"), "not a usable interpreter for the tf worker"),
    ],
)
def test_a_missing_or_broken_interpreter_is_one_clear_line(tmp_path, make, message):
    t0 = time.monotonic()
    p = run(
        "--quick", "--workload", "conv", "--python", f"tf={make(tmp_path)}", "--out", str(tmp_path / "o"), timeout=120
    )
    assert p.returncode == 2 and message in p.stderr.strip().splitlines()[-1] and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 60  # before any work
    assert not (tmp_path / "o" / "results.json").exists()


def test_an_interpreter_without_the_framework_is_named(tmp_path, second_python):
    """The second environment lacks TensorFlow (hidden by a stand-in that fails to import): a clear error
    naming the interpreter, not a silent 'not run' note, because the user chose that interpreter for it."""
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow (a stand-in)')\n")
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    p = run(
        "--quick",
        "--workload",
        "conv",
        "--replicas",
        "1",
        "--python",
        f"tf={second_python}",
        "--out",
        str(tmp_path / "o"),
        env=env,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "tf is not installed for" in p.stderr and f"--python tf={second_python}" in p.stderr, p.stderr[-1500:]


def _case_of_cnn_train(monkeypatch, case) -> None:
    """The worker builds `case` for a cnn_train row (the workload's own record left as it is)."""
    from parity.engine import worker

    wl, kind = worker.row_kind("cnn_train")
    monkeypatch.setattr(worker, "row_kind", lambda name: (wl, dataclasses.replace(kind, case=case)))


def test_a_variant_the_framework_refuses_is_an_invalid_row_and_the_run_goes_on(monkeypatch):
    """As Keras's fit under TPUStrategy has failed on TPU VMs (keras#19448): the worker answers with the reason,
    its later requests for that row get answers, and the parent makes an INVALID row of it, never a crash."""
    from types import SimpleNamespace

    from parity.engine import worker
    from parity.workloads import row_kind
    from parity.workloads.cnn.spec import CNN_QUICK

    def refuses(impl, devices, kind, spec, variant, *a, **k):
        raise RuntimeError("NotFoundError: could not find registered platform with id 0x7f (fit under TPUStrategy)")

    _case_of_cnn_train(monkeypatch, refuses)
    # as serve() makes them
    args = SimpleNamespace(framework="tf", device="cpu", precision="default", memory=None, compiling=None)
    timers = {}
    req = Prepare("k", "cnn_train", "strategy", CNN_QUICK.to_dict())
    impl = SimpleNamespace(variants=lambda kind, n: (Variant("strategy", kind, MANY),))  # its one record
    got = worker.respond(impl, [], args, timers, req)
    assert got.compile_s is None and got.invalid.startswith("the framework failed: RuntimeError: NotFoundError")
    assert worker.respond(None, [], args, timers, Rep("k")).time is None
    res = worker.respond(None, [], args, timers, GetResult("k"))
    case = Case("tf", "strategy", 8, "k", "strategy", "float32", False)
    fake = SimpleNamespace(framework="tf", setting_env={})
    kind = row_kind("cnn_train")[1]
    row = make_row(Config(), kind, case, res, {}, fake, {"device_kind": "cpu"}, Path("/nonexistent"))
    assert row.verified is False and "NotFoundError" in row.invalid_reason and row.median_s is None


def test_a_bug_in_a_variant_is_still_a_bug(monkeypatch):
    """Only the framework's own failures become INVALID rows: a TypeError here is this code's, and ends the run
    with its traceback (exit 3) as before."""
    from types import SimpleNamespace

    from parity.engine import worker
    from parity.workloads.cnn.spec import CNN_QUICK

    _case_of_cnn_train(monkeypatch, lambda *a, **k: None + 1)
    req = Prepare("k", "cnn_train", "fit", CNN_QUICK.to_dict())
    impl = SimpleNamespace(variants=lambda kind, n: (Variant("fit", kind, MANY),))
    args = SimpleNamespace(framework="tf", device="cpu", precision="default", memory=None, compiling=None)
    got = worker.respond(impl, [], args, {}, req)
    assert got["bug"] and got["error"].startswith("TypeError") and "Traceback" in got["traceback"]


def test_a_worker_loads_no_module_its_framework_keeps_out_and_exits_at_once(tmp_path):
    """TF's worker never imports JAX (TF's lite converter would, wherever JAX is installed) nor matplotlib (Keras's
    pyplot import), and a single-process worker leaves on 'quit' without the interpreter's teardown. A stand-in
    implementation reports what its own imports of both did; both are installed here, so only the keep-out can stop
    them."""
    (tmp_path / "probe_impl.py").write_text(
        "kept = []\nfor name in ('jax', 'matplotlib.pyplot'):\n    try:\n        __import__(name)\n"
        "    except ImportError:\n        kept.append(name)\nraise ImportError('kept out: ' + ' '.join(kept))\n"
    )
    code = (
        "import dataclasses, sys\n"
        "from parity.common import frameworks\nfrom parity.engine import worker\n"
        "frameworks.TABLE['tf'] = dataclasses.replace(frameworks.TABLE['tf'], module='probe_impl')\n"
        "worker.main(['--framework', 'tf', '--device', 'cpu'])\n"
        "sys.exit(7)  # not reached: the worker leaves with os._exit(0)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code], input="", capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    hello = json.loads(p.stdout.splitlines()[0])
    assert hello["status"] == "missing" and hello["error"].endswith("(kept out: jax matplotlib.pyplot)"), hello
