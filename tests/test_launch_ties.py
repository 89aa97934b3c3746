"""parity.launch's processes live no longer than the launcher: however it ends (SIGKILL, which nothing can catch,
or SIGHUP, a closed terminal), none of them goes on running, or writing results, without it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# a launched process: says its pid, then would write a file a minute later
SLEEPER = """
import os, sys, time
from pathlib import Path
folder = Path(sys.argv[1])
(folder / f"{os.getpid()}.pid").write_text("up")
time.sleep(60)
(folder / f"{os.getpid()}.outlived").write_text("wrote after the launcher ended")
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGHUP"])
def test_the_launched_processes_end_with_the_launcher(tmp_path, sig):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    launcher = subprocess.Popen(
        [sys.executable, "-m", "parity.launch", "--processes", "2", "--module", "sleeper", "--", str(tmp_path)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
            time.sleep(0.1)
        assert len(pids) == 2
        launcher.send_signal(getattr(signal, sig))
        launcher.wait(30)
        deadline = time.monotonic() + 20  # a liveness bound: untied, they would run a minute more
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_alive, pids)) and not list(tmp_path.glob("*.outlived"))
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
