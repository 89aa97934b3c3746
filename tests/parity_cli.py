"""`python -m parity.run` as the end-to-end tests start it: in a subprocess, writing where the test says.

A run that names no --out would write to `results/` in the working directory: the checkout's, shared by every test
process of the suite, whose lock refuses a second run there (one test failed for another's run). So each run that
names none gets a fresh folder of its own."""

import subprocess
import sys
import tempfile

# The smallest run through every framework's real worker: the quick matmul at one device, two timed calls a row
TINY = ("--quick", "--workload", "matmul", "--replicas", "1", "--reps", "2", "--budget", "0", "--configs", "default")


def with_out(args) -> list[str]:
    """`args` with `--out` a fresh folder where they name none."""
    args = list(args)
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", tempfile.mkdtemp(prefix="parity-test-out-")]
    return args


def run_parity(*args, timeout: float = 600, env=None) -> subprocess.CompletedProcess:
    """`python -m parity.run ARGS` (with_out), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "parity.run", *with_out(args)], capture_output=True, text=True, timeout=timeout, env=env
    )


GIB = 2**30


def config(*argv: str):
    """The Config that `python -m parity.run ARGV` would run, parsed and bounded as its command line, here."""
    from parity.cli.flags import parser
    from parity.run import config as run_config

    return run_config(parser().parse_args(list(argv)), list(argv))


def pretend_memory(monkeypatch, gib: int) -> None:
    """parity.cli.bounds reads this machine as one of `gib` GiB and no process limit, whatever this one is."""
    from parity.cli import bounds

    monkeypatch.setattr(bounds, "physical_memory", lambda: gib * GIB)
    monkeypatch.setattr(bounds, "process_limit", lambda: None)
