"""The small ViT's spec: its full size, the CPU's default and --quick, and its FLOP and byte formulas (the
architecture itself is parity.api.vit, which every implementation builds from). Why each size:
docs/workloads.md, "The vision transformer"."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.vit import VitArchitecture
from parity.workloads.trained.spec import TrainedSpec


@dataclass(frozen=True)
class VitSpec(TrainedSpec):
    """A training run of the ViT on Fashion-MNIST (global batch = per-replica batch x replicas), with the CNN's
    optimiser (Adam), loss (cross-entropy) and schedule."""

    dim: int = 192  # ViT-Tiny's width and heads (Touvron et al., 2021), at half its depth
    depth: int = 6
    heads: int = 3
    mlp: int = 768  # 4 x dim, as every ViT

    @property
    def architecture(self) -> VitArchitecture:
        return VitArchitecture(self.dim, self.depth, self.heads, self.mlp)

    def step_flops(self) -> int:
        """Training FLOPs of one step: forward + backward = 3 x forward (the backward pass computes two products
        per product, for the input gradient and the weight gradient; LayerNorm, softmax, GELU and Adam's
        elementwise work not counted)."""
        return 3 * self.global_batch * self.architecture.forward_flops()


# The full size (GPU/TPU default): ViT-Tiny's width at 6 blocks, the CNN notebook's batch and schedule.
VIT_FULL = VitSpec()
# The CPU's default: width 64 in 4 heads of 16, 2 blocks, so that a step's products (49 tokens x 256 images = 12544
# rows by 64 to 256 columns) keep 2 cores busy while a row ends in seconds: 8.4 GFLOP a step, about the LSTM's; 5
# timed epochs of 2 steps, as the CNN's (parity.judging.stats.MIN_CALLS). Two blocks, not four: compiling (TF's
# tracing, XLA, Inductor) grows with the blocks and took most of the ViT's share of the default run at four.
VIT_CPU = VitSpec(dim=64, depth=2, heads=4, mlp=256, global_batch=256, steps_per_epoch=2, epochs=6)
VIT_QUICK = VitSpec(
    dim=32, depth=2, heads=2, mlp=64, global_batch=32, steps_per_epoch=2, epochs=2, train_size=2048, test_size=512
)
