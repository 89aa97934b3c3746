"""The float64 oracle's child process dies with its run and within its --timeout (issue 107, B6;
parity.workloads.trained.child): a child out of time is killed with what it started, and so is one whose parent is
stopped (SIGINT, SIGTERM) or killed; a child that dies says the error it printed, not a warning after it; the child's
own command refuses a FIFO or a missing folder in one line, and an answer that is not float64. Tiny processes, no
framework imported (a few seconds on 2 cores)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from parity.workloads.trained import child, float64
from parity.workloads.trained.float64 import Float64Error, FrameworkOracle

ROOT = Path(__file__).resolve().parents[1]
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DEATHSIG is Linux's")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` is gone (or a zombie: dead, not yet reaped) within `within_s`."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def _pids(folder: Path, n: int, within_s: float = 20.0) -> list[int]:
    """The pids the hanging child and its own child wrote, once both did."""
    end = time.monotonic() + within_s
    while True:
        got = sorted(folder.glob("pid-*"))
        if len(got) == n and all(p.read_text() for p in got):
            return [int(p.read_text()) for p in got]
        if time.monotonic() > end:
            break
        time.sleep(0.05)
    pytest.fail(f"the child wrote {len(list(folder.glob('pid-*')))} of {n} pids")


def _hanging(tmp_path: Path) -> str:
    """A child that asks to die with its parent, starts a child of its own, writes both pids and hangs."""
    return textwrap.dedent(f"""
        import os, subprocess, sys, time
        from parity.workloads.trained import child
        child.die_with_parent()
        grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(tmp_path / "pid-0")!r}, "w").write(str(os.getpid()))
        open({str(tmp_path / "pid-1")!r}, "w").write(str(grand.pid))
        time.sleep(120)
    """)


def test_the_run_s_timeout_bounds_a_float64_run(monkeypatch):
    monkeypatch.delenv(child.TIMEOUT, raising=False)
    assert child.timeout(None) == child.DEFAULT_TIMEOUT_S and child.timeout(20) == 20
    monkeypatch.setenv(child.TIMEOUT, "40.0")  # parity.run's --timeout 40: a worker step's bound, the child's within
    assert child.timeout(None) == 30 and child.timeout(600) == 30 and child.timeout(5) == 5
    monkeypatch.setenv(child.TIMEOUT, "nan")
    assert child.timeout(None) == child.DEFAULT_TIMEOUT_S


def test_a_child_out_of_time_is_killed_with_what_it_started(tmp_path, monkeypatch):
    """The float64 run's child, its interpreter a script that hangs (as a plug-in's float64() that never returns)."""
    (tmp_path / "hang.py").write_text(_hanging(tmp_path))
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'hang.py'}\n")
    python.chmod(0o755)
    monkeypatch.setenv(float64.PYTHONS, json.dumps({"jax": str(python)}))
    monkeypatch.setenv(child.TIMEOUT, "4")  # 3 s of it the child's
    oracle = FrameworkOracle("jax", "hang", None, sizes=lambda w: ())
    t0 = time.monotonic()
    with pytest.raises(Float64Error, match=r"^the float64 run of 'hang' in JAX float64 \(x64\): no answer within 3 s"):
        oracle.forward([np.zeros(1, np.float32)], np.zeros((1, 28, 28, 1), np.float32))
    assert time.monotonic() - t0 < 30
    assert all(_gone(pid, 5) for pid in _pids(tmp_path, 2, 1))


def _parent(tmp_path: Path) -> subprocess.Popen:
    """A process that runs the hanging child as parity.run would (its signals handled), and waits for it."""
    code = textwrap.dedent(f"""
        import os, sys
        from parity.common import signals
        from parity.workloads.trained import child
        with signals.handled():
            child.run([sys.executable, "-c", {_hanging(tmp_path)!r}], dict(os.environ), 120)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)


@LINUX
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_child_dies_with_its_parent_stopped_or_killed(tmp_path, sig):
    parent = _parent(tmp_path)
    try:
        pids = _pids(tmp_path, 2)
        parent.send_signal(sig)
        parent.wait(30)
        own = (
            pids[:1] if sig == signal.SIGKILL else pids
        )  # killed, the parent kills nothing: the kernel kills its child
        assert all(_gone(pid) for pid in own), (sig, pids)
    finally:
        parent.kill()
        parent.wait()
        for pid in _pids(tmp_path, 2, 0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_child_dies_with_its_run_though_its_parent_lives_on(tmp_path):
    """A worker the run's death left running (its float64 run's parent, here this process) keeps no child of it."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # the run, as a process
    env = {**os.environ, child.RUN: str(run.pid), child.PARENT: str(os.getpid())}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    code = "import time\nfrom parity.workloads.trained import child\nchild.die_with_parent()\nprint(flush=True)\n"
    orphan = subprocess.Popen([sys.executable, "-c", code + "time.sleep(120)"], env=env, stdout=subprocess.PIPE)
    try:
        orphan.stdout.readline()  # it watches the run now
        run.kill()
        run.wait()
        assert orphan.wait(10) == 1
    finally:
        orphan.kill(), run.kill()
        orphan.wait(), run.wait()


def test_a_child_that_dies_says_its_error_not_a_warning_after_it(tmp_path):
    err = "Traceback (most recent call last):\n  File x\nRuntimeError: the adapter's own\n"
    err += "/site/torch/_inductor.py:12: UserWarning: triton not found\n  warnings.warn(\n"
    assert child.why(1, err, tmp_path / "none.error") == "RuntimeError: the adapter's own (exit code 1)"
    assert (
        child.why(-9, "W1207 a log line\n", tmp_path / "none.error")
        == "it ended (killed by SIGKILL) without saying why"
    )
    (tmp_path / "said.error").write_text("its own line")
    assert child.why(1, err, tmp_path / "said.error") == "its own line"


def test_the_child_s_command_refuses_a_fifo_and_a_missing_folder_in_one_line(tmp_path, capsys):
    fifo = tmp_path / "in.npz"
    os.mkfifo(fifo)
    assert float64.main([str(fifo), str(tmp_path / "out.npz")]) == 2  # not blocked reading it
    assert capsys.readouterr().err == f"error: {fifo}: not a regular file\n"
    good = tmp_path / "good.npz"
    np.savez(good, meta=np.array("{}"))
    assert float64.main([str(good), str(tmp_path / "no" / "out.npz")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'no'}: no such folder for the answer\n"


class IntAdapter:
    """An adapter whose float64 model answers its forward blocks in int64."""

    model_code = SimpleNamespace(__name__="ints.jax_impl", float64=lambda m: m)

    def build(self, *sizes, seed=0):
        return None

    def set_weights(self, model, weights):
        pass

    def forward_layers(self, model, x):
        return {"logits": np.zeros((len(x), 10), np.int64)}


def test_an_answer_in_int64_is_refused_as_not_float64(monkeypatch):
    monkeypatch.setattr(float64, "_adapter", lambda meta: IntAdapter())
    meta = {"framework": "jax", "workload": "ints", "package": None, "sizes": []}
    with pytest.raises(Float64Error, match="ints.jax_impl's float64 model gave forward/logits in int64, not float64"):
        float64.run(meta, {"w000": np.zeros(1, np.float32), "x": np.zeros((2, 28, 28, 1), np.float32)})


def test_a_run_bounds_its_workers_and_float64_runs_by_its_timeout(monkeypatch, tmp_path):
    """parity.run's --timeout and process id in its environment while it runs (its workers inherit them), as they
    were after."""
    from parity import run
    from parity.common.messages import HarnessError

    seen = []

    def suite(cfg, tmp):
        seen.append((os.environ.get(child.TIMEOUT), os.environ.get(child.RUN)))
        raise HarnessError("stopped here")

    monkeypatch.setattr(run, "run_suite", suite)
    monkeypatch.delenv(child.TIMEOUT, raising=False)
    monkeypatch.delenv(child.RUN, raising=False)
    argv = ["--timeout", "30", "--workload", "conv", "--framework", "jax", "--out", str(tmp_path / "out"), "--quiet"]
    assert run.main(argv) == 2
    assert seen == [("30.0", str(os.getpid()))] and child.TIMEOUT not in os.environ and child.RUN not in os.environ
