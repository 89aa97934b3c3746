"""`python -m parity.launch`: start P processes of one multi-process run on this machine.

Each process is `python -m parity.run <args>` (or --module) with PARITY_COORDINATOR (a free loopback
port), PARITY_NUM_PROCESSES, PARITY_PROCESS_ID and PARITY_LOCAL_DEVICES set; JAX's runtime and
TensorFlow's workers take their ports from there (parity.api.cluster). Process 0's output is shown;
the others' is kept and shown when one fails. The launcher waits for all of them, forwards Ctrl-C
(SIGTERM and SIGHUP alike), and when one dies or the run outlives --timeout it stops every process
(and their children) and says which one failed and how. Their lives are tied to the launcher's: on
Linux each gets SIGTERM when the launcher ends, however it ends (SIGKILL included: the parent-death
signal), and stops its own workers as it would for Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

from parity.api.cluster import ENV, TF_PORT_OFFSET, free_port, port_free
from parity.cli.argtypes import Parser, seconds, whole

EXAMPLES = """examples:
  python -m parity.launch --processes 2 --devices-per-process 4 -- --device cpu --workload conv
  python -m parity.launch --processes 2 -- --framework tf --quick --out results/mp
  python -m parity.launch --processes 2 --module my_training_script -- --steps 10
"""
GRACE_S = 10.0  # after Ctrl-C or a failure: how long processes get to exit before they are killed
# Exit codes that mean "finished, but some result failed its check" rather than "broke down": the
# other processes are left to finish (parity.run: 1; 2 is a run that could not be done, 3 a crash).
FINISHED_WITH_FAILURES = {"parity.run": 1}


def max_processes() -> int:
    """The processes this machine can hold: each parity.run process and its framework workers take about 1 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 64
    return max(1, min(4096, total // 2**30))


def parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m parity.launch",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--processes",
        type=whole(1, max_processes(), "about 1 GiB of this machine's memory per process and its workers"),
        required=True,
        metavar="P",
        help=f"how many processes to start (1 to {max_processes()} here: each process and its workers take "
        "about 1 GiB)",
    )
    ap.add_argument(
        "--devices-per-process",
        type=whole(1, 1024, "simulated devices per process"),
        default=1,
        metavar="D",
        help="simulated CPU devices per process for JAX (TensorFlow's multi-worker strategy uses "
        "one CPU per worker whatever this says); GPUs and TPUs: every local one (default: 1)",
    )
    ap.add_argument(
        "--port",
        type=whole(1, 65535, "a TCP port"),
        help="coordinator port on 127.0.0.1; the run uses it and the next "
        f"{TF_PORT_OFFSET} + P ports (default: a free one)",
    )
    ap.add_argument(
        "--timeout",
        type=seconds(allow_zero=False),
        default=7200.0,
        metavar="S",
        help="stop every process when the run takes longer than S seconds (default: 7200)",
    )
    ap.add_argument("--module", default="parity.run", help="the Python module each process runs (default: parity.run)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="after --: the arguments of every process")
    return ap


def _stop(procs: list[subprocess.Popen], sig: int = signal.SIGTERM) -> None:
    """Signal every live process's group (its children too), then kill what is left after GRACE_S."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + GRACE_S
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:  # the group may hold children that outlived their parent
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()


def _tail(log, n: int = 20) -> str:
    log.flush()
    log.seek(0)
    lines = [ln for ln in log.read().splitlines() if ln.strip()]
    return "\n".join("    " + ln for ln in lines[-n:])


def _how(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when the thread that started it ends


def _tied_to_launcher():
    """A Popen preexec_fn that ties the child's life to this process's (Linux: SIGTERM when the starting thread
    ends, however it ends; a child whose launcher has already gone ends at once), or None where prctl is not."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl, launcher = ctypes.CDLL(None, use_errno=True).prctl, os.getpid()

    def tie() -> None:
        if prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0 or os.getppid() != launcher:
            os._exit(1)

    return tie


def _start(i: int, processes: int, devices: int, port: int, module: str, args: list[str], log) -> subprocess.Popen:
    """Process i of the run, told its place by environment variables (parity.api.cluster.ENV)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.update(
        {
            ENV["coordinator"]: f"127.0.0.1:{port}",
            ENV["num_processes"]: str(processes),
            ENV["process_id"]: str(i),
            ENV["local_devices"]: str(devices),
        }
    )
    out = {} if log is None else {"stdout": log, "stderr": subprocess.STDOUT}
    # own session: a signal to its group reaches the process's framework workers too; tied to the launcher's life
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], env=env, start_new_session=True, preexec_fn=_tied_to_launcher(), **out
    )


def _watch(procs: list, logs: list, module: str, timeout_s: float, start: float) -> int:
    """Wait for the processes: the first failure stops the others, as does the timeout. Returns the exit code."""
    processes = len(procs)
    finished = (0, FINISHED_WITH_FAILURES.get(module, 0))
    while True:
        codes = [p.poll() for p in procs]
        failed = [i for i, c in enumerate(codes) if c not in (None, *finished)]
        if failed:
            i = failed[0]
            _stop(procs)
            detail = f":\n{_tail(logs[i])}" if i else " (its output is above)"
            print(f"error: process {i} of {processes} {_how(codes[i])}; stopped the others{detail}", file=sys.stderr)
            return codes[i] if codes[i] > 0 else 1
        if all(c in finished for c in codes):
            bad = [i for i, c in enumerate(codes) if c]
            if bad:
                print(
                    f"process(es) {', '.join(map(str, bad))} finished with failed checks (exit {codes[bad[0]]})",
                    file=sys.stderr,
                )
            return codes[bad[0]] if bad else 0
        if time.monotonic() - start > timeout_s:
            hung = [i for i, c in enumerate(codes) if c is None]
            _stop(procs)
            print(
                f"error: process(es) {', '.join(map(str, hung))} still running after {timeout_s:.0f} s "
                f"(--timeout); stopped all",
                file=sys.stderr,
            )
            return 124
        time.sleep(0.2)


def launch(processes: int, devices: int, port: int | None, timeout_s: float, module: str, args: list[str]) -> int:
    """Run the processes; returns the exit code the launcher should end with."""
    if port is None:
        port = free_port(span=TF_PORT_OFFSET + processes)
    elif not port_free("127.0.0.1", port):
        print(f"error: coordinator port 127.0.0.1:{port} is already taken", file=sys.stderr)
        return 2
    procs, logs = [], []
    print(
        f"launching {processes} x python -m {module} {' '.join(args)} (coordinator 127.0.0.1:{port}, "
        f"{devices} device(s) per process)",
        file=sys.stderr,
        flush=True,
    )
    start = time.monotonic()
    try:
        for i in range(processes):
            logs.append(None if i == 0 else tempfile.TemporaryFile("w+"))  # process 0 writes to the terminal
            procs.append(_start(i, processes, devices, port, module, args, logs[i]))
        return _watch(procs, logs, module, timeout_s, start)
    except KeyboardInterrupt:
        print("interrupted: stopping every process", file=sys.stderr)
        _stop(procs, signal.SIGINT)
        return 130
    finally:
        _stop(procs)
        for log in logs[1:]:
            log.close()


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    return launch(a.processes, a.devices_per_process, a.port, a.timeout, a.module, args)


def _terminated(signum, frame):
    raise KeyboardInterrupt  # a SIGTERM or SIGHUP to the launcher stops the processes as Ctrl-C does


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)  # the terminal closed: as SIGTERM
    # A process started with SIGINT ignored (a background job of a non-interactive shell: CI runners, nohup
    # scripts) keeps it ignored, and Ctrl-C would never reach this loop: listen to it whatever we inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
