"""PyTorch's data parallelism (torch_impl.ddp): DistributedDataParallel over gloo, 2 processes on this machine, on tiny
batches. The CNN against JAX's shard_map trainer over 2 replicas (BatchNorm per replica, moving statistics averaged,
in both); the row LSTM (no BatchNorm) against PyTorch's own one-device step on the global batch."""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from frameworks_setup import JAX_DEVICES
from test_cnn import TOL, _saved, batch, trained_weights
from test_lstm_jax import BATCH, UNITS, images, random_weights

import jax_impl
import torch_impl
from parity.api.lstm import LstmArchitecture
from parity.workloads.cnn import checks
from parity.workloads.cnn.tolerances import cnn_loss_tolerance
from parity.workloads.lstm.tolerances import lstm_tolerances
from parity.workloads.trained.checks import trajectory

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = 2
DDP = torch_impl.setup_devices("cpu", REPLICAS)  # rank 0 here, rank 1 a process it starts (once, for every test)


@pytest.fixture(scope="module")
def weights():
    return trained_weights()


def test_the_variants_over_several_devices_are_ddps_for_trained_models_only():
    for kind in ("cnn_train", "lstm_train", "vit_train"):
        offered = torch_impl.variants(kind, REPLICAS)
        assert [(v.name, v.dtype) for v in offered] == [("ddp", "float32"), ("ddp+autocast", "bfloat16")], kind
        assert not any(v.multiprocess for v in offered), kind  # its own processes, never the launcher's
    assert torch_impl.variants("conv", REPLICAS) == torch_impl.variants("matmul", REPLICAS) == ()
    assert torch_impl.variants("cnn_infer", REPLICAS) == ()


def test_the_cnn_over_two_processes_is_jaxs_over_two_replicas(weights):
    x, y = batch(2, 16, seed=11)  # 8 images a replica
    ours, t = _saved(torch_impl, DDP, "ddp", weights, x, y)
    theirs, _ = _saved(jax_impl, JAX_DEVICES[:REPLICAS], "shard_map", weights, x, y)
    rows = checks.trajectory(ours, theirs, "ddp", "shard_map", TOL, REPLICAS, ("torch", "jax"))
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows  # the loss, the weights, the moving statistics
    # BatchNorm's batch statistics over each replica's 8 images, not the 16: the first step's loss is not the one
    # device's on the global batch (more than two float32 runs of one loss differ)
    one = torch_impl.adapter("cnn").build(0, dropout=False)
    torch_impl.adapter("cnn").set_weights(one, weights)
    l1 = torch_impl.adapter("cnn").loss_and_grads(one, x[0], y[0])[0]
    assert abs(ours["traj/ddp/loss"][0] - l1) / l1 > 2 * cnn_loss_tolerance(16)
    assert (
        t.batchnorm == "replica"
        and t.compute_dtype == "float32"
        and t.placement() == ["cpu:0 (rank 0)", "cpu:0 (rank 1)"]
    )


def _lstm(variant, devices, w, x, y):
    m = torch_impl.adapter("lstm").build(UNITS)
    torch_impl.adapter("lstm").set_weights(m, w)
    t = torch_impl.adapter("lstm").make_trainer(m, devices, variant)
    loss = np.asarray(t.steps(x, y))[:, 0]
    return {f"traj/{variant}/loss": loss} | {
        f"traj/{variant}/w{i:03d}": a for i, a in enumerate(torch_impl.adapter("lstm").get_weights(t.model()))
    }


def test_the_lstm_over_two_processes_is_the_one_device_step_on_the_global_batch():
    w, (x, y) = random_weights(), images(2 * BATCH, seed=4)
    x, y = x.reshape(2, BATCH, 28, 28, 1), y.reshape(2, BATCH)
    ours, one = _lstm("ddp", DDP, w, x, y), _lstm("eager", DDP[:1], w, x, y)
    tols, table = lstm_tolerances("cpu", "highest", "float32"), LstmArchitecture(UNITS).weights
    rows = trajectory(ours, one, "ddp", "eager", tols, REPLICAS, ("x2", "x1"), None, table)
    assert rows and all(r["passed"] for r in rows), rows


def test_each_trainer_keeps_its_own_replicas_on_the_same_processes(weights):
    x, y = batch(2, 16, seed=5)

    def trainer():
        m = torch_impl.adapter("cnn").build(0, dropout=False)
        torch_impl.adapter("cnn").set_weights(m, weights)
        return torch_impl.adapter("cnn").make_trainer(m, DDP, "ddp")

    a = trainer()
    first = a.steps(x[:1], y[:1])
    trainer().steps(x, y)  # another trainer steps its own copies on the same ranks in between
    second = a.steps(x[1:], y[1:])
    together = trainer().steps(x, y)
    np.testing.assert_array_equal(np.concatenate([first, second]), together)


def test_a_batch_that_does_not_split_over_the_processes_is_refused(weights):
    t = torch_impl.adapter("cnn").make_trainer(torch_impl.adapter("cnn").build(0, dropout=False), DDP, "ddp")
    x, y = batch(1, 16)
    with pytest.raises(ValueError, match="does not divide by 2 replicas"):
        t.steps(x[:, :15], y[:, :15])
    with pytest.raises(ValueError, match="unknown PyTorch cnn_train variant 'eager' for 2 replicas"):
        torch_impl.adapter("cnn").make_trainer(torch_impl.adapter("cnn").build(0), DDP, "eager")


LEAVE = """
import os, sys
import torch_impl
from torch_impl import ddp
model = torch_impl.adapter("cnn").build(0, dropout=False)
t = torch_impl.adapter("cnn").make_trainer(model, torch_impl.setup_devices("cpu", 2), "ddp")
print(" ".join(str(p.pid) for p in ddp._RANKS[0].procs), flush=True)
os._exit(0)  # as parity's worker leaves: no interpreter teardown, no atexit
"""


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_the_other_ranks_end_with_the_process_that_started_them(tmp_path):
    """A worker leaves by os._exit (and may be killed): its ranks, blocked on their inboxes, end with it."""
    said, log = tmp_path / "pids", tmp_path / "stderr"  # files, not pipes: a rank left behind would hold a pipe open
    with said.open("w") as out, log.open("w") as err:
        done = subprocess.run([sys.executable, "-c", LEAVE], stdout=out, stderr=err, timeout=300, cwd=ROOT)
    assert done.returncode == 0, log.read_text()[-2000:]
    (pid,) = map(int, said.read_text().split())
    deadline = time.monotonic() + 120  # a liveness bound, not a speed: an orphan would wait forever
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(pid)
