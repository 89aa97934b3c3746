"""Training any trained model in PyTorch on one device: Keras's Adam written out, the step (eager, or
under torch.compile), and the Trainer that make_trainer returns for any of them (mirror image of jax_impl.train)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import partial

import numpy as np
import torch

from parity.api.inputs import check_count, check_examples, check_training
from torch_impl.catalog import variant as variant_record
from torch_impl.devices import placement
from torch_impl.forward import accuracy, computing, cross_entropy, images, labels
from torch_impl.models import Model, code_of
from torch_impl.ops import compiled, counted_flops


def adam_state(params: Sequence[torch.Tensor]) -> dict:
    """Keras's Adam slots: each parameter's first and second moments at zero, and the step count."""
    zeros = [[torch.zeros_like(p, memory_format=torch.preserve_format) for p in params] for _ in range(2)]
    return {"m": zeros[0], "v": zeros[1], "t": torch.zeros((), dtype=torch.float32, device=params[0].device)}


@torch.no_grad()
def keras_adam(params, grads, state: dict, learning_rate: float, epsilon: float, b1: float = 0.9, b2: float = 0.999):
    """Keras 3's Adam update rule, in place: epsilon added to sqrt(v) before the bias correction is applied to the
    step (lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)). torch.optim.Adam adds it after (and at 1e-8),
    so the two differ slightly at every step; this is Keras's rule (jax_impl.train.keras_adam's)."""
    with torch.profiler.record_function("optimizer"):  # its ops under one scope, as jax_impl's and Keras's
        t = state["t"].add_(1)  # a tensor: under torch.compile the step count is data, not a recompiled constant
        alpha = learning_rate * torch.sqrt(1 - b2**t) / (1 - b1**t)
        # each line over every parameter at once (torch.optim's foreach form: a few ops a step, not a few a tensor)
        m, v = state["m"], state["v"]
        torch._foreach_add_(m, torch._foreach_mul(torch._foreach_sub(grads, m), 1 - b1))  # m += (g - m) (1 - b1)
        torch._foreach_add_(v, torch._foreach_mul(torch._foreach_sub(torch._foreach_mul(grads, grads), v), 1 - b2))
        denominator = torch._foreach_add(torch._foreach_sqrt(v), epsilon)
        torch._foreach_sub_(params, torch._foreach_div(torch._foreach_mul(m, alpha), denominator))


def _train_step(model, params, state, learning_rate, epsilon, mixed, x, y) -> torch.Tensor:
    """One training step: forward in training mode (under autocast where mixed), float32 loss, gradients, Keras's
    Adam; returns [loss, accuracy]."""
    with computing(mixed, x.device):
        logits = model.logits(x, train=True)
    loss = cross_entropy(logits, y)
    grads = torch.autograd.grad(loss, params)
    keras_adam(params, grads, state, learning_rate, epsilon)
    return torch.stack([loss.detach(), accuracy(logits.detach(), y)])


class Trainer:
    """Training of any trained model on one device, on a copy of the model passed in (written
    back to it by model(), as Keras's trainer trains its own copy and jax_impl's its own buffers): each step eager
    (PyTorch out of the box) or compiled by torch.compile (its first calls compile; Dynamo breaks the step's graph at
    torch.autograd.grad, so the forward pass with its AOTAutograd backward is one compiled piece, Adam's update
    another)."""

    steps_per_dispatch = 1  # one step a call in every variant
    loss_every = 1  # per-step figures are exact in every variant

    def __init__(self, model: Model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int):
        code = code_of(model)
        o = variant_record(code.TRAIN, variant, len(devices)).options  # torch_impl.catalog.TrainOptions
        self.device, self.code, self.model_ = devices[0], code, model
        # what trains and evaluates: a copy on the device (the model passed in keeps working at its own weights)
        self.compute = copy.deepcopy(model).to(self.device)
        self.mixed = o.mixed or model.mixed  # autocast to bfloat16; parameters and Adam's slots stay float32
        self.compute_dtype = "bfloat16" if self.mixed else "float32"
        self.batchnorm, self.uncounted = code.BATCHNORM, code.UNCOUNTED
        self.kernel_path = code.kernel_path(self.mixed, o.compile)
        code.train_with(self.compute, o)  # channels-last memory format where the variant says
        torch.manual_seed(seed)  # dropout masks: PyTorch's own RNG (never the same as JAX's or Keras's)
        self.params = [p for p in self.compute.parameters() if p.requires_grad]  # Keras's trainable weights
        self.state = adam_state(self.params)
        args = (self.compute, self.params, self.state, learning_rate, adam_epsilon, self.mixed)
        self._eager = partial(_train_step, *args)
        self._step = compiled(self._eager, o.compile)
        self._batch = None

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn; returns (K, 2) float64 per-step [loss, accuracy]."""
        check_examples(x, y, 2)  # steps x batch images and their labels, before the framework sees them
        xs, ys = images(x, self.device), labels(y, self.device)
        out = []
        for xb, yb in zip(xs, ys, strict=True):
            self._batch = (xb, yb)
            out.append(self._step(xb, yb))
        return torch.stack(out).to("cpu", torch.float64).numpy()

    def placement(self) -> list[str]:
        """Devices holding the parameters."""
        return placement(self.params)

    def step_cost(self) -> tuple[float | None, str]:
        """FLOPs of one training step's forward and backward passes by torch.utils.flop_counter (after at least one
        step; on a copy of the model, which the count trains)."""
        if self.uncounted:
            return None, self.uncounted
        if self._batch is None:
            return None, "torch.utils.flop_counter: no step run yet"
        model = copy.deepcopy(self.compute)
        params = [p for p in model.parameters() if p.requires_grad]
        step = partial(_train_step, model, params, adam_state(params), 0.0, 1.0, self.mixed)
        return counted_flops(step, *self._batch)

    def program_text(self) -> str | None:
        """None: PyTorch's profiled op names are its own (aten::...), with no compiled program to map them back."""
        return None

    def model(self) -> Model:
        """The trained model (the passed-in model, its weights and moving statistics updated in place)."""
        with torch.no_grad():
            for (_, src), (_, dst) in zip(self.code.slots(self.compute), self.code.slots(self.model_), strict=True):
                dst.copy_(src)
        return self.model_

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference loss and accuracy of the current weights on (x, y), in the trainer's compute dtype."""
        check_examples(x, y, 1)
        check_count("batch_size", batch_size)
        loss = acc = 0.0
        with torch.inference_mode(), computing(self.mixed, self.device):
            for s in range(0, len(x), batch_size):
                logits = self.compute.logits(images(x[s : s + batch_size], self.device), train=False)
                yb = labels(y[s : s + batch_size], self.device)
                loss += float(cross_entropy(logits, yb)) * len(yb)
                acc += float(accuracy(logits, yb)) * len(yb)
        return {"loss": loss / len(x), "accuracy": acc / len(x)}


def make_trainer(
    model: Model, devices, variant: str, learning_rate: float = 1e-3, adam_epsilon: float = 1e-7, seed: int = 0
) -> Trainer:
    """A trainer for `model`, any model build_* returned, on devices[0] (the variants of the model's row kind,
    '<workload>_train'; PyTorch offers none over several devices: torch_impl.catalog).

    Raises:
        ValueError: unknown variant; a learning rate or Adam epsilon not finite and above 0, a seed out of its bounds
            (parity.api.inputs.check_training).
    """
    seed = check_training(learning_rate, adam_epsilon, seed)
    return Trainer(model, devices, variant, learning_rate, adam_epsilon, seed)
