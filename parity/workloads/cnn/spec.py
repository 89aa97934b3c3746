"""The CNN's spec: the notebook's training run, the CPU's shortened default and --quick, and its FLOP and byte
formulas (the architecture itself is parity.api.cnn, which both implementations build from)."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.cnn import CNN_CONVS, CNN_DENSE, CNN_PARAMS
from parity.common.padding import valid_taps
from parity.workloads.trained.spec import TrainedSpec


@dataclass(frozen=True)
class CnnSpec(TrainedSpec):
    """The notebook's Fashion-MNIST CNN training run (global batch = per-replica batch x replicas)."""

    def step_flops(self, padded: bool = True) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward (the backward pass computes two
        products per layer, for the input gradient and the weight gradient; conv and dense multiply-adds x 2
        only, BatchNorm/ELU/pooling/Adam's elementwise work not counted)."""
        return 3 * self.global_batch * cnn_forward_flops(padded)

    def params(self, trainable: bool = True) -> int:
        """The CNN's parameters: those Adam updates (`trainable`), else every weight, BatchNorm's statistics too."""
        return CNN_PARAMS["trainable" if trainable else "total"]


# The notebook's schedule (GPU/TPU default), the CPU default (shortened to finish in minutes on
# 2 cores; the output says so) and --quick.
CNN_FULL = CnnSpec()
# 5 timed epochs of 2 steps: a median, and a ratio's 95% interval needs 5 calls a side (parity.judging.stats.MIN_CALLS)
CNN_CPU = CnnSpec(global_batch=256, steps_per_epoch=2, epochs=6)
# --quick: the smallest schedule that runs every code path (a batch 2 and 8 replicas split, two epochs: the first
# apart, one timed); batch 32 x 2 steps, the least that does
CNN_QUICK = CnnSpec(global_batch=32, steps_per_epoch=2, epochs=2, train_size=2048, test_size=512)


def cnn_forward_flops(padded: bool = True) -> int:
    """Forward FLOPs of one image: conv and dense multiply-adds x 2 (BatchNorm, ELU, pooling not counted);
    padded=False leaves out the multiply-adds against SAME padding's zeros (31% of conv3's on 7x7 maps)."""
    taps = {s: (s * 5 if padded else valid_taps(s, 5, 1, "SAME")) for s, _, _ in CNN_CONVS}
    flops = sum(2 * taps[s] ** 2 * i * o for s, i, o in CNN_CONVS)
    return flops + 2 * sum(a * b for a, b in zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True))
