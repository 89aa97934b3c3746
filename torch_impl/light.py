"""The generic adapter of a light workload (parity.api.light) in PyTorch: a package's `torch_impl.py` holds only
`Model`, a `torch.nn.Module` built as `Model()` (under `torch.manual_seed(seed)`) whose `forward(x)` returns the
declared blocks as a dict. PyTorch's own layout both ways: x comes in NCHW, (batch, 1, 28, 28), raw 0-255, and each
4-D block goes back from NCHW to the shared NHWC (`LAYOUT = "NHWC"` in the module: neither is moved). Its weights are
`parameters()` in their order, each moved from PyTorch's layout to the shared one (a 4-D kernel (out, in, h, w) ->
(h, w, in, out), a 2-D one (out, in) -> (in, out)), or the module's `WEIGHTS`: parameter names in the shared order,
each optionally with its own axis permutation. `adapt` binds it to PyTorch's one trainer (torch_impl.train)."""

from __future__ import annotations

import types
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from parity.api import Gradients, Prepared
from parity.api.light import LIGHTS, LOGITS, PROBS, Light, check_shapes
from parity.api.variants import ONE, Variant
from torch_impl.catalog import InferOptions, TrainOptions, autocast_variant
from torch_impl.catalog import variant as variant_record
from torch_impl.models import prepare

PERMS = {4: (2, 3, 1, 0), 2: (1, 0)}  # PyTorch's layout -> the shared one, by a parameter's dimensions


class Wrapped(nn.Module):
    """The user's model as the trainer takes it: `logits(x, train)`, its blocks in the shared layout with the
    softmax; `mixed` as every PyTorch model carries it (autocast is the variant's)."""

    def __init__(self, inner: nn.Module, nchw: bool):
        super().__init__()
        self.inner, self.nchw, self.mixed = inner, nchw, False

    def blocks(self, x: torch.Tensor, train: bool = False) -> dict[str, torch.Tensor]:
        self.inner.train(train)
        x = x.to(next(self.inner.parameters()).dtype)
        out = dict(self.inner(x.permute(0, 3, 1, 2) if self.nchw else x))
        if self.nchw:
            out = {k: v.permute(0, 2, 3, 1) if v.dim() == 4 else v for k, v in out.items()}
        out[PROBS] = torch.softmax(out[LOGITS].float() if out[LOGITS].dtype == torch.bfloat16 else out[LOGITS], -1)
        return out

    def logits(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.blocks(x, train)[LOGITS]


class _Code:
    """The adapter's model functions for one light workload: its record and where each weight is read."""

    def __init__(self, user: types.ModuleType, light: Light):
        self.user, self.light = user, light
        self.nchw = getattr(user, "LAYOUT", "NCHW") == "NCHW"
        self.entries = getattr(user, "WEIGHTS", None)

    def slots(self, model: Wrapped) -> list[tuple[str, torch.Tensor, tuple | None]]:
        """(name, parameter, permutation to the shared layout) of every weight, in the shared order."""
        named = dict(model.inner.named_parameters())
        if self.entries is None:
            return [(n, p, PERMS.get(p.dim())) for n, p in named.items()]
        out = []
        for e in self.entries:
            n, perm = (e, None) if isinstance(e, str) else (e[0], tuple(e[1]))
            out.append((n, named[n], perm if not isinstance(e, str) else PERMS.get(named[n].dim())))
        return out

    def shared(self, model: Wrapped, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
        perms = [perm for _, _, perm in self.slots(model)]
        arrays = (t.detach().to("cpu").numpy() for t in tensors)
        return [np.ascontiguousarray(a if p is None else a.transpose(p)) for a, p in zip(arrays, perms, strict=True)]

    def build(self, seed: int = 0) -> Wrapped:
        torch.manual_seed(seed)
        return Wrapped(self.user.Model(), self.nchw)

    def get_weights(self, model: Wrapped) -> list[np.ndarray]:
        return self.shared(model, [p for _, p, _ in self.slots(model)])

    def set_weights(self, model: Wrapped, weights: Sequence[np.ndarray]) -> None:
        slots = self.slots(model)
        shapes = [tuple(p.shape[i] for i in perm) if perm else tuple(p.shape) for _, p, perm in slots]
        check_shapes(self.light, shapes, "PyTorch", [n for n, _, _ in slots])
        check_shapes(self.light, [np.shape(w) for w in weights], "the weights given to PyTorch")
        with torch.no_grad():
            for (_, p, perm), w in zip(slots, weights, strict=True):
                a = np.asarray(w) if perm is None else np.asarray(w).transpose(np.argsort(perm))
                p.copy_(torch.from_numpy(np.ascontiguousarray(a)))

    def images(self, model: Wrapped, x: np.ndarray) -> torch.Tensor:
        p = next(model.parameters())
        return torch.as_tensor(np.asarray(x, np.float32), device=p.device).to(p.dtype)

    def loss_and_grads(self, model: Wrapped, x: np.ndarray, y: np.ndarray) -> Gradients:
        params = [p for _, p, _ in self.slots(model)]
        logits = model.logits(self.images(model, x), train=False)
        labels = torch.as_tensor(np.asarray(y), dtype=torch.long, device=logits.device)
        loss = nn.functional.cross_entropy(logits, labels)
        return Gradients(float(loss.detach()), self.shared(model, torch.autograd.grad(loss, params)), [])

    def vjp(self, model: Wrapped, x: np.ndarray, ct: np.ndarray) -> list[np.ndarray]:
        """The logits' vector-Jacobian product with `ct` for every weight, in the shared order and layout."""
        params = [p for _, p, _ in self.slots(model)]
        logits = model.logits(self.images(model, x))
        grads = torch.autograd.grad(logits, params, grad_outputs=torch.as_tensor(ct).to(logits))
        return self.shared(model, grads)

    def forward_layers(self, model: Wrapped, x: np.ndarray) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            return {k: v.to("cpu").numpy() for k, v in model.blocks(self.images(model, x)).items()}

    def prepare_inference(self, model: Wrapped, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
        o = variant_record(f"{self.light.name}_infer", variant, 1).options
        return prepare(model, images, devices, o.compile, None, None)


def adapt(user: types.ModuleType, name: str) -> types.ModuleType:
    """The adapter module of the light workload `name` from the package's module `user` (its `Model`)."""
    code = _Code(user, LIGHTS[name])
    a = types.ModuleType(f"torch_impl.{name}", f"PyTorch's adapter of the light workload {name!r} ({user.__name__})")
    a.WORKLOAD, a.TRAIN, a.INFER, a.MODEL = name, f"{name}_train", f"{name}_infer", Wrapped
    a.VARIANTS = (
        Variant("eager", a.TRAIN, ONE, rank=1, options=TrainOptions()),
        Variant("compile", a.TRAIN, ONE, tuned=True, rank=0, options=TrainOptions(compile=True)),
        autocast_variant(a.TRAIN),
        Variant("predict", a.INFER, ONE, rank=1, options=InferOptions()),
        Variant("predict+compile", a.INFER, ONE, tuned=True, rank=0, options=InferOptions(compile=True)),
    )
    for f in ("build", "get_weights", "set_weights", "loss_and_grads", "vjp", "forward_layers", "prepare_inference"):
        setattr(a, f, getattr(code, f))
    a.slots = lambda model: [(n, p) for n, p, _ in code.slots(model)]
    a.count_params = lambda model: _counts(code.light)
    a.mixed_precision = lambda model: model  # the trainer's autocast is the variant's bfloat16
    a.float64 = lambda model: model.double()
    a.train_with = lambda model, o: None  # no training option acts on the model
    a.kernel_path = lambda mixed=False, compiled=False: None  # no recurrent layer
    a.BATCHNORM, a.UNCOUNTED = "none", None  # torch.utils.flop_counter counts its products
    return a


def _counts(light: Light) -> dict[str, int]:
    n = sum(int(np.prod(s)) for s in light.weights.values())
    return {"total": n, "trainable": n, "non_trainable": 0}
