"""What the flags ask for at once is bounded by the machine before any work (parity.cli.bounds), and what a
framework's entry point takes is bounded the same in every implementation (parity.api.inputs): one line, exit 2."""

import pytest
from parity_cli import GIB, config, pretend_memory, run_parity

from parity.cli import bounds
from parity.cli.flags import parser
from parity.common.messages import HarnessError


@pytest.fixture
def machine(monkeypatch):
    """A machine of 24 GiB and no process limit, whatever this one is."""
    pretend_memory(monkeypatch, 24)


# A1: a replica count bounded by what its processes need


def test_replicas_beyond_simulated_devices_are_refused_by_the_flag():
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--replicas", "60000"])
    assert e.value.code == 2


def test_pytorch_ranks_that_cannot_fit_in_memory_are_refused(machine):
    most = 24 * GIB // bounds.RANK_BYTES
    config("--framework", "torch", "--workload", "cnn", "--replicas", "1", "2", "--batch", "256")  # fits
    said = rf"--replicas {most + 1}: PyTorch runs one process per replica.*at most {most} \(24.0 GiB of memory"
    with pytest.raises(HarnessError, match=said):
        config("--framework", "torch", "--workload", "matmul", "--replicas", str(most + 1))
    config("--framework", "jax", "--workload", "matmul", "--replicas", str(most + 1))  # no process a replica there


def test_pytorch_ranks_beyond_the_process_limit_are_refused(machine, monkeypatch):
    monkeypatch.setattr(bounds, "process_limit", lambda: 8)
    with pytest.raises(HarnessError, match=r"at most 8 \(the process limit \(ulimit -u\) is 8"):
        config("--framework", "all", "--workload", "matmul", "--replicas", "16")


# A3: the flags' product, not each alone


def test_an_epoch_drawn_ahead_beyond_memory_is_refused_before_work(machine, monkeypatch):
    config("--framework", "torch", "--workload", "cnn", "--batch", "60000", "--steps-per-epoch", "10")
    said = r"cnn: an epoch of 400 steps x batch 60000 is drawn ahead in memory: 400 x 60000 x 784 pixels x 5 bytes = "
    with pytest.raises(HarnessError, match=said + r"87.6 GiB, more than this machine's 24.0 GiB"):
        config("--framework", "torch", "--workload", "cnn", "--batch", "60000", "--steps-per-epoch", "400")
    monkeypatch.setattr(bounds, "physical_memory", lambda: 4 * GIB)
    with pytest.raises(HarnessError, match=r"vit: an epoch of 10000 steps x batch 256 "):  # the preset's batch too
        config("--workload", "vit", "--steps-per-epoch", "10000")


def test_the_command_refuses_the_product_in_one_line_before_any_work(tmp_path):
    out = tmp_path / "out"
    p = run_parity("--workload", "cnn", "--framework", "torch", "--batch", "60000", "--steps-per-epoch", "10000",
                   "--epochs", "2", "--out", str(out), timeout=120)  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "is drawn ahead in memory" in p.stderr
    assert not out.exists() and not p.stdout
