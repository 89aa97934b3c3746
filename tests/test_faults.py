"""Faults injected into real runs: a worker killed, the run terminated, flags that cannot be honoured.

Each run is told to train for 1000 epochs, so it is still busy whatever this machine's speed when the
fault arrives; the test then waits for the run to end on its own."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from parity.common import frameworks


def _start(tmp_path: Path, *args) -> tuple[subprocess.Popen, str]:
    tag = uuid.uuid4().hex  # in every process of this run's environment: finds its workers
    env = dict(os.environ, PARITY_TEST_TAG=tag, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cmd = [
        sys.executable,
        "-m",
        "parity.run",
        "--device",
        "cpu",
        "--quick",
        "--workload",
        "cnn",
        "--replicas",
        "1",
        "--epochs",
        "1000",
        "--out",
        str(tmp_path / "out"),
        *args,
    ]
    return subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env), tag


def _wait_for(proc: subprocess.Popen, text: str) -> list[str]:
    """stderr lines until one contains `text` (the run's progress), or the run's end."""
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return seen
    pytest.fail(f"the run ended before {text!r}:\n{''.join(seen[-20:])}")


def _processes(tag: str) -> dict[int, str]:
    """pid -> command line of the live processes carrying this run's tag."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if f"PARITY_TEST_TAG={tag}".encode() in (d / "environ").read_bytes():
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "(zombie)" not in (d / "status").read_text():
                    found[int(d.name)] = cmd
        except OSError:
            continue
    return found


def _gone(tag: str, within_s: float = 30) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _processes(tag):
            return True
        time.sleep(0.5)
    return False


def test_a_killed_worker_is_named_with_its_signal(tmp_path):
    proc, tag = _start(tmp_path)
    _wait_for(proc, "first epoch (seed 0) TensorFlow")  # its 1000 epochs come first, one row at a time
    tf = [pid for pid, cmd in _processes(tag).items() if "parity.engine.worker" in cmd and "--framework tf" in cmd]
    assert len(tf) == 1
    os.kill(tf[0], signal.SIGKILL)
    err = proc.stderr.read()
    assert proc.wait(120) == 2
    assert "error: TensorFlow worker died (killed by SIGKILL)" in err and "Broken pipe" not in err
    assert _gone(tag)


def test_sigterm_stops_the_workers_and_leaves_no_files(tmp_path):
    proc, tag = _start(tmp_path)
    _wait_for(proc, "first epoch (seed 0) TensorFlow")
    assert sum("parity.engine.worker" in cmd for cmd in _processes(tag).values()) == len(frameworks.KEYS)
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read()
    assert proc.wait(120) == 143
    assert "terminated (SIGTERM)" in err
    assert _gone(tag)  # both workers stopped
    assert not list((tmp_path / "tmp").iterdir())  # the run's folder, the workers' logs and what they wrote
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--budget", "inf"), ("--min-time", "nan"), ("--timeout", "-1"), ("--timeout", "0"), ("--join-timeout", "0")],
)
def test_float_flags_are_refused_at_once_with_their_name(flag, value):
    p = subprocess.run(
        [sys.executable, "-m", "parity.run", "--quick", flag, value], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2
    named = "argument --budget/--min-time:" if flag in ("--budget", "--min-time") else f"argument {flag}:"
    assert named in p.stderr and "finite number" in p.stderr


def test_epochs_below_two_are_refused_with_the_reason():
    p = subprocess.run(
        [sys.executable, "-m", "parity.run", "--quick", "--epochs", "1"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2 and "argument --epochs: must be >= 2" in p.stderr


def test_a_replica_count_given_twice_is_measured_once():
    from parity import run

    assert run.config(run.parser().parse_args(["--replicas", "1", "8", "1"])).replicas == (1, 8)


def test_a_bug_inside_a_worker_is_exit_3_with_its_traceback():
    from parity.common.messages import HarnessError, WorkerBug
    from parity.common.protocol import Call
    from parity.engine.workerproc import Worker

    w = Worker("jax", "cpu", 1, "default", 120)
    try:
        assert w.recv(120)["status"] == "ready"
        with pytest.raises(WorkerBug) as e:
            w.ask(Call("cnn", "no_such_request"))  # a KeyError in the worker: its code, not the input
        assert "KeyError" in str(e.value) and "Traceback" in e.value.traceback
        w.proc.stdin.write('{"cmd": "no_such_command"}\n')  # no request of the protocol's, written by hand
        w.proc.stdin.flush()
        with pytest.raises(HarnessError, match="unknown command"):
            w.answer()  # answered, not a crash: the worker goes on
    finally:
        w.close()
