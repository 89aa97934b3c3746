"""Training any trained model in PyTorch: the step (eager, or under torch.compile) and the Trainer on one device,
the DistributedTrainer over several (DDP over gloo: torch_impl.ddp), and make_trainer, which returns one for any of
them (mirror image of jax_impl.train)."""

from __future__ import annotations

import copy
import weakref
from functools import partial

import numpy as np
import torch

from parity.api import DeviceUnavailable, check_divisible
from parity.api.adapters import Trained
from parity.api.inputs import check_count, check_examples
from torch_impl import ddp
from torch_impl.adam import adam_state, keras_adam
from torch_impl.catalog import variant as variant_record
from torch_impl.devices import placement, step_done
from torch_impl.models import accuracy, computing, cross_entropy, images, labels
from torch_impl.ops import compiled, counted_flops

Model = torch.nn.Module  # what a trained adapter's `build` returns


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

    def __init__(
        self,
        adapter: Trained,
        model: Model,
        devices,
        variant: str,
        learning_rate: float,
        adam_epsilon: float,
        seed: int,
    ):
        o = self._describe(adapter, model, devices, variant)
        self._build(model, devices, o, learning_rate, adam_epsilon, seed)
        self._batch = None  # the last global batch trained on, which step_cost counts

    def _build(self, model: Model, devices, o, learning_rate: float, adam_epsilon: float, seed: int) -> None:
        """What trains and evaluates, with `o` the variant's options: a copy on the device (the model passed in keeps
        working at its own weights), its trainable parameters, Adam's state and the step."""
        self.compute = copy.deepcopy(model).to(self.device)
        self.code.train_with(self.compute, o)  # channels-last memory format where the variant says
        torch.manual_seed(seed)  # dropout masks: PyTorch's own RNG (never the same as JAX's or Keras's)
        self.params = [p for p in self.compute.parameters() if p.requires_grad]  # Keras's trainable weights
        self.state = adam_state(self.params)
        args = (self.compute, self.params, self.state, learning_rate, adam_epsilon, self.mixed)
        self._eager = partial(_train_step, *args)
        self._step = compiled(self._eager, o.compile, self.device)

    def _describe(self, adapter: Trained, model: Model, devices, variant: str):
        """What every trainer records of its model and variant (device, code, compute dtype, BatchNorm's scope, the
        recurrent kernel); returns the variant's options (torch_impl.catalog.TrainOptions)."""
        self.code = adapter.code
        o = variant_record(self.code.TRAIN, variant, len(devices)).options
        self.device, self.model_ = devices[0], model
        self.mixed = o.mixed or model.mixed  # autocast to bfloat16; parameters and Adam's slots stay float32
        self.compute_dtype = "bfloat16" if self.mixed else "float32"
        self.batchnorm, self.uncounted = self.code.BATCHNORM, self.code.UNCOUNTED
        self.kernel_path = self.code.kernel_path(self.mixed, o.compile)
        return o

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Nothing compiled ahead: eager steps compile nothing, and torch.compile compiles at its first call (False)."""
        return False

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn; returns (K, 2) float64 per-step [loss, accuracy]."""
        check_examples(x, y, 2)  # steps x batch images and their labels, before the framework sees them
        xs, ys = images(x, self.device), labels(y, self.device)
        out = []
        for xb, yb in zip(xs, ys, strict=True):
            self._batch = (xb, yb)
            out.append(self._step(xb, yb))
            step_done(self.device)  # a TPU's lazy graph cut at each step
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


class DistributedTrainer(Trainer):
    """Training over `len(devices)` replicas of the CPU by DDP over gloo, one process a replica, this one rank 0
    (torch_impl.ddp): rank 0's copy is what model(), evaluate() and step_cost() read, as the one-device Trainer's."""

    def _build(self, model: Model, devices, o, learning_rate: float, adam_epsilon: float, seed: int) -> None:
        """Every rank's copy built, this process's (rank 0) among them."""
        if self.device.type != "cpu":
            raise DeviceUnavailable(
                "PyTorch's data parallelism is wired on a CPU only (DDP over gloo): not over GPUs or TPUs"
            )
        self.world = len(devices)
        self.ranks = ddp.ranks(self.world)
        self.key = next(self.ranks.keys)
        shipped = copy.deepcopy(model)  # moved to shared memory as it is sent: never this process's own copy
        self.ranks.send("build", self.key, shipped, self.code.WORKLOAD, o, learning_rate, adam_epsilon, seed)
        with ddp.compute_threads(ddp.rank_threads(self.world)):
            self.replica = ddp.Replica(copy.deepcopy(model), self.code.WORKLOAD, o, learning_rate, adam_epsilon, seed)
        self.compute, self.params, self.state = self.replica.model, self.replica.params, self.replica.state
        weakref.finalize(self, self.ranks.send, "drop", self.key)

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn, each rank on its share; returns (K, 2) float64 per-step
        [loss, accuracy] of the global batches."""
        check_examples(x, y, 2)
        check_divisible(x.shape[1], self.world)
        xs, ys = ddp.shared(np.asarray(x), torch.float32), ddp.shared(np.asarray(y), torch.int64)
        self.ranks.send("steps", self.key, xs, ys)
        if self._batch is None:  # one global batch, for step_cost's count on one device
            self._batch = (images(x[0]), labels(y[0]))
        with ddp.compute_threads(ddp.rank_threads(self.world)):
            out = self.replica.steps(ddp.share(xs, 0, self.world), ddp.share(ys, 0, self.world))
        return out.to(torch.float64).numpy()

    def placement(self) -> list[str]:
        """The devices holding each rank's parameters, asked of every rank: ['cpu:0 (rank 0)', 'cpu:0 (rank 1)']."""
        self.ranks.send("placement", self.key)
        return self.replica.placement()


def make_trainer(
    adapter: Trained, model: Model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
) -> Trainer:
    """The one trainer, for a model of any trained adapter, on devices[0], or over len(devices) replicas by DDP over
    gloo (torch_impl.ddp) (the variants of its row kind, '<workload>_train'; the adapter has checked the rest). Raises
    ValueError for an unknown variant."""
    if len(devices) == 1:
        return Trainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)
    return DistributedTrainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)
