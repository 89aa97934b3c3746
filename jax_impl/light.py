"""The generic adapter of a light workload (parity.api.light) in JAX: a package's `jax_impl.py` holds only `Model`,
an `nnx.Module` built as `Model(rngs)` whose `__call__(x)` returns the declared blocks as a dict (x: (batch, 28, 28,
1), raw 0-255, in its parameters' format); `adapt` makes the trained model's adapter from it, bound to JAX's one
trainer (jax_impl.train) as a written-out adapter is. Its weights are read by the declared names as attribute paths
(`conv.kernel`: model.conv.kernel), or by the module's `WEIGHTS` (paths in the shared order, each optionally with an
axis permutation from the model's layout to the shared one)."""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jax_impl.catalog import variant as variant_record
from jax_impl.devices import lowered_flops, placement
from parity.api import Gradients, Prepared
from parity.api.light import LIGHTS, LOGITS, PROBS, Light, check_shapes
from parity.api.variants import ONE, Variant


@dataclass(frozen=True)
class LightOptions:
    """What jax_impl.train reads of a training variant: one device, one step a dispatch; bfloat16 compute (mixed); the
    batches fed from the host (prefetch 0)."""

    parallel: str = "jit"
    steps_per_dispatch: int = 1
    mixed: bool = False
    prefetch: int = 0  # batches put on the device ahead of their steps (jax_impl.catalog.PREFETCH); 0: the host's feed
    shifts: bool = False  # each depthwise convolution as shifted products (depthwise_shifts)


@dataclass(frozen=True)
class LightInferOptions:
    shifts: bool = False  # as LightOptions'


def depthwise_shifts(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                     feature_group_count=1, precision=None, **kwargs):  # fmt: skip
    """jax.lax.conv_general_dilated for nnx.Conv, a depthwise convolution (NHWC, HWIO, one input channel a group)
    written as the sum of its kernel's shifted products: XLA:CPU runs a grouped convolution's gradient without its
    fast convolution path (docs/your-workload.md, "Speed"); the same terms, summed in the kernel's order. Any other
    convolution is lax's own."""
    c, (kh, kw, i, o) = lhs.shape[-1], rhs.shape
    nhwc = jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, ("NHWC", "HWIO", "NHWC"))
    dilated = any(d != 1 for d in (*(lhs_dilation or ()), *(rhs_dilation or ())))
    if lhs.ndim != 4 or feature_group_count != c or i != 1 or o != c or dilated or dimension_numbers != nhwc:
        return jax.lax.conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
            precision=precision, **kwargs,
        )  # fmt: skip
    pads = (
        jax.lax.padtype_to_pads(lhs.shape[1:3], (kh, kw), window_strides, padding)
        if isinstance(padding, str)
        else padding
    )
    x = jnp.pad(lhs, ((0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)))
    (sh, sw), oh, ow = (
        window_strides,
        (x.shape[1] - kh) // window_strides[0] + 1,
        (x.shape[2] - kw) // window_strides[1] + 1,
    )
    out = None
    for a in range(kh):
        for b in range(kw):
            term = x[:, a : a + (oh - 1) * sh + 1 : sh, b : b + (ow - 1) * sw + 1 : sw, :] * rhs[a, b, 0]
            out = term if out is None else out + term
    return out


def _convs(model) -> list:
    """The model's depthwise convolutions (nnx.Conv, as many groups as input channels, more than one)."""
    return [
        m for _, m in nnx.iter_graph(model) if isinstance(m, nnx.Conv) and 1 < m.feature_group_count == m.in_features
    ]


def _shifted(model, on: bool) -> str | None:
    """The model's depthwise convolutions as shifted products (on) or lax's; the kernel path a row reports."""
    for conv in _convs(model):
        conv.conv_general_dilated = depthwise_shifts if on else jax.lax.conv_general_dilated
    return "depthwise as shifted products" if on else None


class Wrapped(nnx.Module):
    """The user's model as the trainer takes it: `logits(x, train, key)`, its blocks with the softmax; `mixed`:
    computing in bfloat16 from float32 parameters (each cast where it is read, as Keras's mixed policy)."""

    def __init__(self, inner: nnx.Module, mixed: bool = False):
        self.inner, self.mixed = inner, mixed

    def blocks(self, x, train: bool = False, key=None) -> dict:
        inner = self.inner
        dtype = jax.tree.leaves(nnx.state(inner, nnx.Param))[0].dtype
        if self.mixed:
            graphdef, state = nnx.split(inner)
            inner = nnx.merge(graphdef, jax.tree.map(lambda a: a.astype(jnp.bfloat16), state))
            dtype = jnp.bfloat16
        out = dict(inner(jnp.asarray(x).astype(dtype)))
        out[PROBS] = jax.nn.softmax(out[LOGITS].astype(jnp.float32 if self.mixed else dtype))
        return out

    def logits(self, x, train: bool = False, key=None):
        return self.blocks(x, train, key)[LOGITS]


def _at(obj, path: str):
    """The array at a dotted attribute path of a module or a state ('conv.kernel'), its value unwrapped."""
    for part in path.split("."):
        obj = getattr(obj, part) if hasattr(obj, part) else obj[int(part) if part.isdigit() else part]
    return obj


class _Code:
    """The adapter's model functions for one light workload: its record and where each weight is read."""

    def __init__(self, user: types.ModuleType, light: Light):
        self.user, self.light = user, light
        entries = getattr(user, "WEIGHTS", tuple(light.weights))
        self.paths = [(e, None) if isinstance(e, str) else (e[0], tuple(e[1])) for e in entries]

    def read(self, tree) -> list:
        return [_value(_at(tree, p), perm) for p, perm in self.paths]

    def build(self, seed: int = 0) -> Wrapped:
        return Wrapped(self.user.Model(nnx.Rngs(seed)))

    def get_weights(self, model: Wrapped) -> list[np.ndarray]:
        return [np.asarray(w) for w in self.read(model.inner)]

    def set_weights(self, model: Wrapped, weights: Sequence[np.ndarray]) -> None:
        check_shapes(self.light, [np.shape(w) for w in self.read(model.inner)], "JAX", [p for p, _ in self.paths])
        check_shapes(self.light, [np.shape(w) for w in weights], "the weights given to JAX")
        for (p, perm), w in zip(self.paths, weights, strict=True):
            var, value = _at(model.inner, p), jnp.asarray(w, _dtype(model))
            var.value = value if perm is None else jnp.transpose(value, np.argsort(perm))

    def loss_and_grads(self, model: Wrapped, x: np.ndarray, y: np.ndarray) -> Gradients:
        def loss(m):
            logits = m.logits(jnp.asarray(x, _dtype(m)))
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), jnp.asarray(y)[:, None], 1))

        value, grads = nnx.value_and_grad(loss)(model)
        return Gradients(float(value), [np.asarray(g) for g in self.read(grads["inner"])], [])

    def vjp(self, model: Wrapped, x: np.ndarray, ct: np.ndarray) -> list[np.ndarray]:
        """The logits' vector-Jacobian product with `ct` for every weight, in the shared order and layout."""
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        _, pull = jax.vjp(lambda p: nnx.merge(graphdef, p, rest).logits(jnp.asarray(x, _dtype(model))), params)
        return [np.asarray(g) for g in self.read(pull(jnp.asarray(ct, _dtype(model)))[0]["inner"])]

    def prepare_inference(self, model: Wrapped, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
        o = variant_record(f"{self.light.name}_infer", variant, 1).options  # one of this adapter's, or ValueError
        path = _shifted(model, o.shifts)
        graphdef, state = nnx.split(model)
        state = jax.device_put(state, devices[0])
        x = jax.device_put(jnp.asarray(images, jnp.float32), devices[0])
        f = jax.jit(lambda s, x: nnx.merge(graphdef, s).blocks(x)[PROBS])
        return Prepared(
            lambda: f(state, x),
            lambda out: tuple(out.shape),
            lambda out, idx: np.asarray(out)[list(idx)],
            placement,
            lambda: lowered_flops(f, state, x),
            kernel_path=path,
        )


def adapt(user: types.ModuleType, name: str) -> types.ModuleType:
    """The adapter module of the light workload `name` from the package's module `user` (its `Model`)."""
    code = _Code(user, LIGHTS[name])
    a = types.ModuleType(f"jax_impl.{name}", f"JAX's adapter of the light workload {name!r} ({user.__name__})")
    a.WORKLOAD, a.TRAIN, a.INFER, a.MODEL = name, f"{name}_train", f"{name}_infer", Wrapped
    bf16 = LightOptions(mixed=True)
    a.VARIANTS = (
        Variant("jit", a.TRAIN, ONE, rank=1, options=LightOptions()),
        Variant("jit+bf16", a.TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="jit", options=bf16),
        Variant("predict", a.INFER, ONE, rank=1, options=LightInferOptions()),
    )
    if _convs(nnx.eval_shape(lambda: user.Model(nnx.Rngs(0)))):  # a depthwise convolution: its lever too
        a.VARIANTS += (
            Variant("jit+shifts", a.TRAIN, ONE, tuned=True, rank=0, options=LightOptions(shifts=True)),
            Variant("predict+shifts", a.INFER, ONE, tuned=True, rank=0, options=LightInferOptions(shifts=True)),
        )
    for f in ("build", "get_weights", "set_weights", "loss_and_grads", "vjp", "prepare_inference"):
        setattr(a, f, getattr(code, f))
    a.count_params = lambda model: _counts(code.light)
    a.forward_layers = lambda model, x: {k: np.asarray(v) for k, v in _forward(model, np.asarray(x)).items()}
    a.mixed_precision = lambda model: Wrapped(model.inner, mixed=True)
    a.float64 = _float64
    a.train_with = lambda model, o: (_shifted(model, o.shifts), "none", False)  # no BatchNorm, no time loop
    a.compute_dtype = lambda model: "bfloat16" if model.mixed else "float32"
    return a


def _value(var, perm):
    value = var.value if hasattr(var, "value") else var
    return value if perm is None else jnp.transpose(value, perm)


def _dtype(model):
    return jax.tree.leaves(nnx.state(model, nnx.Param))[0].dtype


def _counts(light: Light) -> dict[str, int]:
    n = sum(int(np.prod(s)) for s in light.weights.values())
    return {"total": n, "trainable": n, "non_trainable": 0}


@nnx.jit
def _forward(model, x):
    return model.blocks(x)


def _float64(model: Wrapped) -> Wrapped:
    """The model computing in float64 (its parameters widened exactly; its input cast to their format): the float64
    oracle's run, in a process with JAX's x64 on."""
    for _, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Param):
            var.value = jnp.asarray(var.value, jnp.float64)
    return model
