"""The row LSTM's spec: its full size (the tensorflow/tpu Shakespeare notebook's width and batch), the CPU's
default and --quick, and its FLOP and byte formulas (the architecture itself is parity.api.lstm, which every
implementation builds from). Why each size: docs/workloads.md, "The row LSTM"."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.lstm import LstmArchitecture
from parity.workloads.trained.spec import TrainedSpec


@dataclass(frozen=True)
class LstmSpec(TrainedSpec):
    """A training run of the row LSTM on Fashion-MNIST (global batch = per-replica batch x replicas; the Shakespeare
    notebook's 1024, and the CNN notebook's)."""

    units: int = 512  # per LSTM layer: the Shakespeare notebook's

    @property
    def architecture(self) -> LstmArchitecture:
        return LstmArchitecture(self.units)

    def step_flops(self) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward, the forward being the gates' products,
        2 * 4U * (inputs + U) per LSTM layer per time step, and the dense layer's (the backward pass computes
        two products per product, for the input gradient and the weight gradient; the gates' elementwise work
        and Adam's not counted)."""
        return 3 * self.global_batch * self.architecture.forward_flops()


# The full size (GPU/TPU default): the notebook's width and batch, and the CNN notebook's schedule.
LSTM_FULL = LstmSpec()
# The CPU's default: a quarter of the width (1/16 of the gates' products) at the CPU CNN's batch and schedule, so
# that a row ends in seconds on 2 cores; 5 timed epochs of 2 steps, as the CNN's (parity.judging.stats.MIN_CALLS).
LSTM_CPU = LstmSpec(units=128, global_batch=256, steps_per_epoch=2, epochs=6)
LSTM_QUICK = LstmSpec(units=32, global_batch=32, steps_per_epoch=2, epochs=2, train_size=2048, test_size=512)
