"""The GRU in PyTorch: torch.nn.GRU (the same reset_after form as Keras's), its gates' rows reordered to Keras's
columns on the way in and out. The adapter parity's PyTorch implementation finds as its own module of the workload
'gru' and binds to its one trainer (torch_impl.train), which calls the model's `logits` and this module's
`train_with`, `kernel_path` and `slots`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from parity.api import Gradients, Prepared
from parity.api.variants import ONE, Variant
from parity_gru.spec import PIXEL_SCALE, GruArchitecture, check_gru_weights
from torch_impl.catalog import InferOptions, TrainOptions
from torch_impl.catalog import variant as variant_record
from torch_impl.devices import placement

WORKLOAD, TRAIN, INFER = "gru", "gru_train", "gru_infer"
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", TRAIN, ONE, rank=0, options=TrainOptions()),
    Variant("predict", INFER, ONE, rank=0, options=InferOptions()),
)
BATCHNORM = "none"
UNCOUNTED = "torch.utils.flop_counter: not counted (torch.nn.GRU's fused layer is no matmul it counts)"


class GRU(nn.Module):
    """Layer for layer the Keras model: the GRU's last hidden state, the dense layer's logits."""

    def __init__(self, units: int, seed: int):
        super().__init__()
        self.arch = a = GruArchitecture(units)
        g = torch.Generator().manual_seed(seed)
        self.gru = nn.GRU(a.features, units, batch_first=True)
        nn.init.xavier_uniform_(self.gru.weight_ih_l0, generator=g)  # Keras's glorot_uniform
        nn.init.orthogonal_(self.gru.weight_hh_l0, generator=g)  # Keras's Orthogonal
        nn.init.zeros_(self.gru.bias_ih_l0)  # Keras's zeros (torch's: uniform)
        nn.init.zeros_(self.gru.bias_hh_l0)
        self.dense = nn.Linear(units, a.classes)
        nn.init.xavier_uniform_(self.dense.weight, generator=g)
        nn.init.zeros_(self.dense.bias)
        self.mixed = False  # the trainer reads it: no bfloat16 copy here

    def blocks(self, x: torch.Tensor, train: bool = False) -> dict[str, torch.Tensor]:
        h = x.reshape(x.shape[0], self.arch.steps, self.arch.features) * PIXEL_SCALE
        _, last = self.gru(h)  # h_0 = 0
        logits = self.dense(last[0])
        return {"gru": last[0], "logits": logits, "probs": torch.softmax(logits, -1)}

    def logits(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.blocks(x, train)["logits"]


MODEL = GRU


def build(units: int, seed: int = 0) -> GRU:
    return GRU(units, seed)


def mixed_precision(model: GRU) -> GRU:
    raise ValueError("the GRU example offers no bfloat16 variant")


def float64(model: GRU) -> GRU:
    """The model computing in float64, its weights widened exactly: the float64 oracle's run (in a process of its own:
    parity.workloads.trained.float64). Optional: only a framework that is a workload's float64 oracle has it."""
    return model.double()


def train_with(model: GRU, o) -> None:
    """No training option acts on the model."""


def kernel_path(mixed: bool = False, compiled: bool = False) -> str:
    return "torch.nn.GRU"


def _order(u: int) -> np.ndarray:
    """Keras's gate columns z, r, h -> torch's rows r, z, n."""
    return np.concatenate([np.arange(u, 2 * u), np.arange(u), np.arange(2 * u, 3 * u)])


def slots(model: GRU):
    """(name, tensor) of every trained tensor, in the order get_weights gives their Keras arrays."""
    g = model.gru
    return [
        ("kernel", g.weight_ih_l0),
        ("recurrent_kernel", g.weight_hh_l0),
        ("bias_ih", g.bias_ih_l0),
        ("bias_hh", g.bias_hh_l0),
        ("dense.kernel", model.dense.weight),
        ("dense.bias", model.dense.bias),
    ]


def _to_keras(tensors: Sequence[torch.Tensor], u: int) -> list[np.ndarray]:
    k, r, bi, bh, dk, db = (t.detach().to("cpu").numpy() for t in tensors)  # float32, or float64's (float64)
    inv = np.argsort(_order(u))  # torch's rows back to Keras's columns
    return [k[inv].T.copy(), r[inv].T.copy(), np.stack([bi[inv], bh[inv]]), dk.T.copy(), db.copy()]


def get_weights(model: GRU) -> list[np.ndarray]:
    return _to_keras([t for _, t in slots(model)], model.arch.units)


def set_weights(model: GRU, weights: Sequence[np.ndarray]) -> None:
    check_gru_weights(weights, model.arch.units)
    k, r, b, dk, db = (np.asarray(w, np.float32) for w in weights)
    order = _order(model.arch.units)
    arrays = [k.T[order], r.T[order], b[0][order], b[1][order], dk.T, db]
    with torch.no_grad():
        for (_, t), a in zip(slots(model), arrays, strict=True):
            t.copy_(torch.from_numpy(np.ascontiguousarray(a)))


def count_params(model: GRU) -> dict[str, int]:
    n = model.arch.params()
    return {"total": n, "trainable": n, "non_trainable": 0}


def _images(x: np.ndarray, model: GRU) -> torch.Tensor:
    """The images on the model's device, in its weights' format (float32; float64's: float64)."""
    w = model.dense.weight
    return torch.as_tensor(np.asarray(x, np.float32), device=w.device).to(w.dtype)


def forward_layers(model: GRU, x: np.ndarray) -> dict[str, np.ndarray]:
    with torch.inference_mode():
        return {k: v.to("cpu").numpy() for k, v in model.blocks(_images(x, model)).items()}


def loss_and_grads(model: GRU, x: np.ndarray, y: np.ndarray) -> Gradients:
    tensors = [t for _, t in slots(model)]
    device = tensors[0].device
    logits = model.logits(_images(x, model), train=True)
    loss = nn.functional.cross_entropy(logits, torch.as_tensor(np.asarray(y), dtype=torch.long, device=device))
    grads = torch.autograd.grad(loss, tensors)
    return Gradients(float(loss.detach()), _to_keras(grads, model.arch.units), [])


def prepare_inference(model: GRU, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    variant_record(INFER, variant, 1)  # one of this adapter's variants, or ValueError
    model = model.to(devices[0])
    x = _images(images, model)

    def run():
        with torch.inference_mode():
            return model.blocks(x)["probs"]

    return Prepared(
        run,
        lambda out: tuple(out.shape),
        lambda out, idx: out[list(idx)].to("cpu").numpy(),
        placement,
        lambda: (None, UNCOUNTED),
        kernel_path=kernel_path(),
    )
