"""A PyTorch DDP rank is bounded by what a training rank holds, not by an interpreter that only imported torch
(issue 107, B7): the issue's `--quick --workload lstm --framework torch --replicas 32` on a 23 GiB machine is refused
before any work, in one line with the arithmetic; a count that fits still runs."""

import pytest
from parity_cli import config, pretend_memory

from parity.common.messages import HarnessError


@pytest.fixture
def machine(monkeypatch):
    """The issue's machine: 23 GiB and no process limit, whatever this one is."""
    pretend_memory(monkeypatch, 23)


def test_ranks_that_a_training_rank_s_memory_does_not_fit_are_refused(machine):
    flags = ("--quick", "--workload", "lstm", "--framework", "torch", "--data", "synthetic")
    with pytest.raises(HarnessError, match=r"--replicas 32: PyTorch runs one process per replica .*23.0 GiB of memory"):
        config(*flags, "--replicas", "32")
    config(*flags, "--replicas", "1", "2", "4")  # fits
