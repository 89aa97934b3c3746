"""A child process bound to its run (the float64 oracle's: parity.workloads.trained.float64): it dies with the
process that started it on every path, and within the run's --timeout. It runs in a session of its own, whose whole
process group is killed when its parent is stopped (Ctrl-C, SIGTERM), runs out of time or fails; on Linux the
kernel kills it when its parent dies (prctl's PR_SET_DEATHSIG: a worker the run stopped), which it asks for itself
at its start (die_with_parent), and it ends itself when the run does (a run killed by SIGKILL, its worker left
running)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# the run's --timeout, which parity.run sets for itself and its workers: it bounds a child as it bounds a worker step
TIMEOUT = "PARITY_TIMEOUT_S"
# A child's share of it: a child run inside a worker step (an inference row's float64 answer) runs out of time before
# the step does, so that its row is INVALID, saying so, rather than the worker stopped and the run ended
SHARE = 0.75
DEFAULT_TIMEOUT_S = 600.0  # where neither the run nor the caller bounds it
PARENT = "PARITY_CHILD_PARENT"  # the process that started the child, whose death it does not outlive
RUN = (
    "PARITY_RUN_PID"  # the run (parity.run sets it for itself and its workers), whose death it does not outlive either
)
# the line a Python process that died of an exception ends its traceback with ("KeyError: 'x'", "jaxlib...Error: ..")
RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)|^Fatal Python error")


def timeout(own: float | None) -> float:
    """A child's bound in seconds: the caller's (`own`) and SHARE of the run's (TIMEOUT), the lower;
    DEFAULT_TIMEOUT_S without either."""
    try:
        run_s = SHARE * float(os.environ.get(TIMEOUT) or "nan")
    except ValueError:
        run_s = float("nan")
    given = [t for t in (own, run_s) if t is not None and 0 < t < float("inf")]
    return min(given) if given else DEFAULT_TIMEOUT_S


def run(cmd: list[str], env: dict[str, str], timeout_s: float) -> tuple[int, str]:
    """`cmd` run to its end (its exit status and stderr), in a session of its own, told who its parent is (PARENT).
    Raises OSError where it cannot start, subprocess.TimeoutExpired past timeout_s; either way, and on
    KeyboardInterrupt or any other exception here, it is killed with its group before this returns or raises."""
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, PARENT: str(os.getpid())},
        start_new_session=True,
    )  # fmt: skip
    try:
        _, err = p.communicate(timeout=timeout_s)
    finally:
        _stop(p)
    return p.returncode, err


def _stop(p: subprocess.Popen) -> None:
    """The child, where it still runs, killed with its whole process group (what it started), and reaped."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        p.kill()
        p.communicate()


def why(code: int, err: str, error: Path) -> str:
    """Why a child gave no answer: its own line (the `error` file), else how it died and the exception it printed
    last (not a warning printed after it)."""
    if error.exists():
        return error.read_text()
    how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else None
    how = how or f"exit code {code}"
    raised = [line for line in (err or "").splitlines() if RAISED.match(line)]
    return f"{raised[-1]} ({how})" if raised else f"it ended ({how}) without saying why"


def die_with_parent() -> None:
    """In the child, first: on Linux, this process killed when its parent dies (the one that started it, PARENT, or
    an interpreter's wrapper between them), and gone at once where PARENT already has; and, where a run started that
    one (RUN: a worker of it), gone when the run is (a worker the run's death left running is not its business)."""
    parent, run = os.environ.get(PARENT, ""), os.environ.get(RUN, "")
    if sys.platform.startswith("linux") and parent.isdigit():
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_DEATHSIG
        if os.getppid() != int(parent) and not _alive(int(parent)):
            os._exit(1)
    if run.isdigit() and int(run) != os.getppid():
        threading.Thread(target=_watch, args=(int(run),), daemon=True).start()


def _watch(pid: int, every_s: float = 0.5) -> None:
    while _alive(pid):
        time.sleep(every_s)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, another user's
        pass
    return True
