"""A light workload (parity.api.light: a model on one page) as a trained workload: its spec, its TrainedModel record
judged by a framework's float64 run of the user's own model, and the bounds derived from that run (docs/numerics.md,
"Bounds derived from the float64 run").

The bounds. For a network of sums of products and piecewise-linear steps (convolutions, dense layers, ReLU,
pooling), float32's error in any block is at most the rounding model's error per sum times the block's absolute
scale: the same network run in float64 on |weights| and |images| (every term counted positive, every ReLU open).
Each layer's sums are off by LAMBDA * u * sqrt(n) of their terms (n: the kernel's fan-in, read off the weight table;
the pooling's positions at most the image's), plus, where the device rounds the operands (bfloat16 on a TPU), that
rounding of both; the errors of successive layers add. A gradient's terms are the backward pass in absolute values:
the float64 run's vector-Jacobian product on |weights| and |images| with |dL/dlogits| as the cotangent; its error,
the forward and backward walks plus its own sum over the batch and every position. Where a model holds steps that
are not piecewise-linear (sigmoid, tanh, softmax inside, normalisation), the absolute run is no bound: such a model
gives its own bound functions (the full road, docs/your-workload.md)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import KW_ONLY, dataclass

import numpy as np

from parity.api.light import IMAGE, LIGHTS, LOGITS, PROBS, Light
from parity.common import frameworks
from parity.common.tolerances import F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA, operand_roundoff, tolerance
from parity.workloads.base import Workload
from parity.workloads.trained import model_workload
from parity.workloads.trained.float64 import FrameworkOracle
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.spec import TrainedSpec

ULPS = 4  # an elementwise step (ReLU's compare, a bias add, exp, log): within a few ulps in every framework's kernels
ORACLES = (frameworks.JAX, frameworks.TORCH)  # the frameworks whose generic adapter offers a float64 run
# Trajectories (20 Adam steps) and accuracy: the thresholds every trained model uses (docs/numerics.md)
TOLERANCES = {"trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}
REDUCED = {"trajectory_loss": 5e-2, "trajectory_params": 1e-1, "accuracy_band": 0.05}


@dataclass(frozen=True)
class LightArchitecture:
    """What the harness reads of a light model: its layers, blocks by the layer that puts each out, weight table."""

    light: Light

    @property
    def names(self) -> tuple[str, ...]:
        return self.light.block_names

    @property
    def blocks(self) -> dict[str, str]:
        return {b: b for b in self.light.block_names}

    @property
    def weights(self):
        return self.light.table

    def params(self) -> int:
        return sum(math.prod(s) for s in self.light.weights.values())

    def forward_flops(self) -> None:
        """Not declared: the FLOPs of a row are the framework's count (XLA's cost analysis, PyTorch's counter)."""
        return None


@dataclass(frozen=True)
class LightSpec(TrainedSpec):
    """A training run of a light workload on Fashion-MNIST (its record found by `workload`, in LIGHTS)."""

    workload: str
    _: KW_ONLY  # the CPU default's schedule in place of the full one's (TrainedSpec's)
    global_batch: int = 256
    steps_per_epoch: int = 2
    epochs: int = 6

    @property
    def architecture(self) -> LightArchitecture:
        return LightArchitecture(LIGHTS[self.workload])

    def step_flops(self) -> None:
        """Not declared: the framework's count stands (a row's compiler FLOPs)."""
        return None


def _spec(light: Light, size) -> LightSpec:
    s = size
    return LightSpec(
        light.name, global_batch=s.batch, steps_per_epoch=s.steps, epochs=s.epochs, train_size=s.train, test_size=s.test
    )


def _floor(device: str, precision: str) -> float:
    """The device's agreement table where it multiplies in fewer bits than float32, else nothing."""
    t = tolerance(device, precision)
    return t if t > 1e-4 else 0.0


def _walk(light: Light, device: str, precision: str) -> float:
    """The forward pass's error relative to a block's absolute scale: every layer's sums and operands, added."""
    u, op = ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF, operand_roundoff(device, precision)
    sums = [*light.fan_ins(), IMAGE[0] * IMAGE[1]]  # every kernel's sums, and a pooling's over the image at most
    return sum(u * math.sqrt(n) + 2 * op for n in sums) + ULPS * F32_UNIT_ROUNDOFF * len(light.blocks)


def _peak(a) -> float:
    return float(np.max(np.abs(a)))


@dataclass(frozen=True)
class Bounds:
    """The bound functions of one light workload (TrainedModel's block_tolerances, bounds, tolerances)."""

    light: Light
    oracle: FrameworkOracle

    def block_tolerances(self, weights: list, x, device: str, precision: str) -> dict[str, float]:
        """Each block's bound, relative to max |float64|: the walk times the absolute run's scale over the block's."""
        absolute = ([np.abs(w) for w in weights], np.abs(x), None, None)
        self.oracle.ahead([(weights, x, None, None), absolute])  # both in one float64 run
        ref, scale = self.oracle.forward(weights, x), self.oracle.forward(*absolute[:2])
        return self._blocks(ref, scale, device, precision)

    def _blocks(self, ref: dict, scale: dict, device: str, precision: str) -> dict[str, float]:
        walk, floor = _walk(self.light, device, precision), _floor(device, precision)
        out = {b: max(walk * _peak(scale[b]) / max(_peak(ref[b]), 1e-300), floor) for b in self.light.blocks}
        dz = out[LOGITS] * _peak(ref[LOGITS])  # softmax: each probability moves by at most half the logits' error
        out[PROBS] = max((0.5 * dz + ULPS * F32_UNIT_ROUNDOFF) / _peak(ref[PROBS]), floor)
        return out

    def bounds(self, weights: list, x, y, device: str, precision: str) -> dict:
        """The loss's bound relative to it, and each gradient's relative to its max |float64|: its terms' scale (the
        absolute backward pass) times the forward and backward walks plus its own sum over the batch and positions."""
        t = self.oracle.terms(weights, x, y)  # one float64 run: blocks, loss, gradients, the absolute ones
        ref = {b: t[f"forward/{b}"] for b in self.light.block_names}
        blocks = self._blocks(ref, {b: t[f"abs/{b}"] for b in self.light.block_names}, device, precision)
        walk, floor = _walk(self.light, device, precision), _floor(device, precision)
        own = ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * math.sqrt(len(y) * IMAGE[0] * IMAGE[1])
        out = []
        for i in range(len(weights)):
            g, terms = _peak(t[f"grad/{i:03d}"]), _peak(t[f"terms/{i:03d}"])
            out.append(max((2 * walk + own) * terms / g, floor) if g > 0 else math.inf)
        dz = blocks[LOGITS] * _peak(ref[LOGITS])
        loss = float(t["loss"])
        rel_loss = (2 * dz + ROUNDING_LAMBDA * F32_UNIT_ROUNDOFF * math.sqrt(len(y))) / max(abs(loss), 1e-3)
        return {"forward": blocks[LOGITS], "loss": max(rel_loss, floor), "grads": out}

    def tolerances(self, device: str, precision: str, dtype: str = "float32", spec=None) -> dict[str, float]:
        """The trajectory and accuracy thresholds every trained model uses (reduced where the device's products
        round their operands, or the variant computes in bfloat16)."""
        return dict(REDUCED if _floor(device, precision) or dtype == "bfloat16" else TOLERANCES)


MODELS: dict[str, TrainedModel] = {}  # by name: each light workload's record (parity.check.numerics judges from it)


def workload(light: Light, package: str, have: tuple[str, ...]) -> Workload:
    """The workload of `light`, whose adapters are `package`'s modules for the frameworks `have`; judged by the
    float64 run of its `oracle` (else the first of `have` that offers one)."""
    light = dataclasses.replace(light, package=package)  # the record every lookup of its name finds
    fw = light.oracle or next((f for f in ORACLES if f in have), None)
    if fw not in ORACLES or fw not in have:
        offered = ", ".join(frameworks.label(f) for f in ORACLES)
        raise ValueError(f"a float64 run of {light.name} needs a module for {offered}: it has none (oracle {fw!r})")
    oracle = FrameworkOracle(fw, light.name, package, sizes=lambda w: ())
    b = Bounds(light, oracle)
    model = MODELS[light.name] = _model(light, oracle, b)
    return model_workload.workload(
        model, _spec(light, light.cpu), _spec(light, light.quick), (*light.block_names, "loss")
    )


def _model(light: Light, oracle: FrameworkOracle, b: Bounds) -> TrainedModel:
    return TrainedModel(
        name=light.name,
        full=_spec(light, light.full),
        fields=lambda s: {},
        warm={},
        sizes=lambda f: (),
        weights_tag=lambda s: "light",
        reading=lambda s: "images (28, 28, 1) as raw 0-255 float32, the model as its package declares it",
        size=lambda s: "as declared",
        full_why="the package's full size",
        block_tolerances=b.block_tolerances,
        bounds=b.bounds,
        tolerances=b.tolerances,
        architecture=lambda w: LightArchitecture(LIGHTS[light.name]),
        grads_check="gradients (every parameter)",
        float64=oracle,
    )
