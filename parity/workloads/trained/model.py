"""What a trained model workload without dropout or BatchNorm (the row LSTM, the ViT) declares for the shared
parent side (model_suite.py), worker side (model_cases.py) and checks against float64 (model_checks.py): one
frozen record, its package's WORKLOAD built from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parity.workloads.trained.float64 import NUMPY, FrameworkOracle


@dataclass(frozen=True)
class TrainedModel:
    """name: the workload's (its rows' prefix, its files' and checks'). full: its full-size spec (the accuracy check
    judges from its schedule's length on, and the CPU's note names it). fields: a spec's size as the init-weights
    request's fields; warm: the smallest such fields a framework's one-off set-up builds; sizes(fields): the
    architecture's sizes as the adapter's build takes them, before the seed. weights_tag: the size in the weights
    file's name. reading: how an image is read and the size (the data's note); size: the size in the CPU note,
    full_why: why the full size is what it is. notebook: a row at the full size gets the notebook's epoch estimates.
    The float64 oracle, one of two: forward and loss_and_grads, the workload's own in NumPy; or float64, the same
    model run in float64 by a framework (parity.workloads.trained.float64); either is called through oracle_forward
    and oracle_loss_and_grads, and named in every check it judges (oracle). block_tolerances(w, x, device,
    precision), bounds(w, x, y, device, precision): its derived bounds; tolerances(device, precision, dtype, spec):
    the trajectory and accuracy thresholds; architecture: a weights list's architecture. absolute_grads: a gradient
    is judged as an absolute error against bounds' 'grad_abs' (else relative to its float64 scale against bounds'
    'grads'); grads_check: that check's name."""

    name: str
    full: Any
    fields: Callable[[Any], dict]
    warm: dict
    sizes: Callable[[dict], tuple]
    weights_tag: Callable[[Any], str]
    reading: Callable[[Any], str]
    size: Callable[[Any], str]
    full_why: str
    block_tolerances: Callable[..., dict]
    bounds: Callable[..., dict]
    tolerances: Callable[..., dict]
    architecture: Callable[[list], Any]
    grads_check: str
    absolute_grads: bool = False
    notebook: bool = False
    forward: Callable[..., dict] | None = None
    loss_and_grads: Callable[..., tuple] | None = None
    float64: FrameworkOracle | None = None

    def __post_init__(self) -> None:
        numpy = (self.forward is not None, self.loss_and_grads is not None)
        if numpy[0] != numpy[1] or all(numpy) == (self.float64 is not None):
            raise ValueError(
                f"{self.name}: a float64 oracle is forward and loss_and_grads (NumPy) or float64 (a framework's run), "
                "one of the two"
            )

    @property
    def oracle(self) -> str:
        """Which float64 oracle judges: 'NumPy float64' or the framework's ('JAX float64 (x64)')."""
        return self.float64.label if self.float64 else NUMPY

    def oracle_forward(self, weights: list, x, cache=None) -> dict:
        """Every block's output in float64, by block name, from the workload's oracle (cache: a folder a framework's
        float64 run keeps its answer in for other processes; parity.workloads.trained.float64)."""
        return self.float64.forward(weights, x, cache) if self.float64 else self.forward(weights, x)

    def oracle_loss_and_grads(self, weights: list, x, y) -> tuple:
        """One batch's mean cross-entropy and every parameter's gradient in float64, from the workload's oracle."""
        return (self.float64.loss_and_grads if self.float64 else self.loss_and_grads)(weights, x, y)

    @property
    def min_accuracy_steps(self) -> int:
        """Test accuracy is judged after the full schedule (the CNN notebook's 10 epochs of 100 steps), the length
        the accuracy band was set for; a shorter run's accuracies are reported, not judged (no moving statistics to
        settle, but after a few dozen steps its accuracy still swings with the batch order)."""
        return self.full.epochs * self.full.steps_per_epoch
