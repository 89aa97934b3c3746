"""What the trained models (torch_impl.cnn, torch_impl.lstm, torch_impl.vit) share around their forward pass (mirror
image of jax_impl.models): the compute context (autocast for mixed precision), the loss, outputs as NumPy, and the
prepared inference call."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F

from parity.api import Prepared
from torch_impl.devices import to_numpy
from torch_impl.ops import compiled, counted_flops, prepared

try:  # bfloat16 as NumPy holds it (JAX's and TF's outputs carry it too); float32 without it
    from ml_dtypes import bfloat16 as _np_bfloat16
except ImportError:  # pragma: no cover - installed with JAX and TensorFlow
    _np_bfloat16 = None


def computing(mixed: bool, device: torch.device | str = "cpu"):
    """The context a forward pass runs in: autocast to bfloat16 on the device (mixed precision: float32 parameters,
    bfloat16 products), or none (float32 throughout)."""
    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16) if mixed else nullcontext()


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean sparse cross-entropy of float32 logits and integer labels: the oracle's log-sum-exp form, which JAX's
    optax loss and TF's Keras (from the softmax's cached logits) compute too; no clipping of probabilities."""
    with torch.profiler.record_function("loss"):
        return F.cross_entropy(logits.float(), y)


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (logits.argmax(-1) == y).float().mean()


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A block's output as NumPy in its own dtype: float32, or bfloat16 (ml_dtypes, exact) under mixed precision."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16 and _np_bfloat16 is not None:
        return t.view(torch.int16).numpy().view(_np_bfloat16)
    return to_numpy(t)


def images(x: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """Images (integer pixels or floating point) as a float32 tensor on the device, NHWC as given."""
    return torch.as_tensor(np.asarray(x, np.float32), device=device)


def labels(y: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    return torch.as_tensor(np.asarray(y, np.int64), device=device)


def infer_blocks(model: torch.nn.Module, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference (moving statistics, no dropout): every block's output as NumPy, by the architecture's block names."""
    device = next(model.parameters()).device
    with torch.inference_mode(), computing(model.mixed, device):
        out = model.blocks(images(x, device), train=False)
    return {k: as_numpy(out[k]) for k in model.arch.blocks.values()}


def prepare(
    model: torch.nn.Module, x: np.ndarray, devices, compile_: bool, kernel_path: str | None, uncounted: str | None
) -> Prepared:
    """Softmax probabilities of images `x` on devices[0] (placed beforehand, the model moved there), eager under
    torch.inference_mode or compiled by torch.compile (its first calls compile). uncounted: why PyTorch's FLOP
    counter cannot count the model (None: it can)."""
    model.to(devices[0])
    xt = images(x, devices[0])
    mixed = model.mixed

    def probs(xt):
        with computing(mixed, devices[0]):
            return model.blocks(xt, train=False)["probs"]

    def cost():
        if uncounted:
            return None, uncounted
        with torch.inference_mode():
            return counted_flops(probs, xt)

    return prepared(compiled(probs, compile_, devices[0]), (xt,), cost, kernel_path)


def to_keras(t: torch.Tensor) -> np.ndarray:
    """A weight (or its gradient) in Keras's layout: a conv kernel OIHW -> HWIO, a dense or LSTM kernel (out, in) ->
    (in, out); vectors as they are. Always a copy: a vector's .numpy() would share the live parameter's memory."""
    t = t.detach()
    if t.dim() == 4:
        t = t.permute(2, 3, 1, 0)
    elif t.dim() == 2:
        t = t.T
    return to_numpy(t.contiguous().clone())


def to_torch(a: np.ndarray) -> torch.Tensor:
    """A weight in Keras's layout as PyTorch holds it (to_keras's inverse)."""
    t = torch.tensor(np.asarray(a))  # a copy: the caller's array may be read-only
    if t.dim() == 4:
        return t.permute(3, 2, 0, 1)
    return t.T if t.dim() == 2 else t
