"""PyTorch's DDP ranks leave nothing behind however their run ends: no named POSIX semaphore (/dev/shm/sem.*), which
only multiprocessing's resource tracker would remove, and it dies with a killed process group."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
# rank 0 with one other rank, saying when both are up, then waiting to be killed
HOLD = """
import sys, time
from torch_impl import ddp
ranks = ddp.ranks(2)
print(" ".join(str(p.pid) for p in ranks.procs), flush=True)
time.sleep(300)
"""


def test_starting_the_ranks_makes_no_named_semaphore(monkeypatch):
    from multiprocessing import synchronize

    from torch_impl import ddp

    made = []
    real = synchronize.SemLock.__init__

    def counted(self, *a, **k):
        made.append(type(self).__name__)
        real(self, *a, **k)

    monkeypatch.setattr(synchronize.SemLock, "__init__", counted)
    try:
        ranks = ddp.ranks(2)
        assert [p.is_alive() for p in ranks.procs] == [True]
    finally:
        ddp.close_ranks()
    assert made == []  # a queue's locks are named semaphores that a SIGKILL of the run leaves in /dev/shm


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_a_killed_run_leaves_its_ranks_no_semaphore_and_no_process():
    before = {p.name for p in Path("/dev/shm").glob("sem.*")}
    run = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    try:
        (rank,) = map(int, run.stdout.readline().split())
        made = {p.name for p in Path("/dev/shm").glob("sem.*")} - before
        os.killpg(run.pid, signal.SIGKILL)  # the run, its rank and multiprocessing's resource tracker, at once
        run.wait(60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{rank}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p.name for p in Path("/dev/shm").glob("sem.*")} - before
    assert not made and not left, (made, left)
