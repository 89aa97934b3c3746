"""The GRU in JAX and Flax NNX, written out (Keras's reset_after GRU, its weights in Keras's layout): the adapter
parity's JAX implementation finds as its own module of the workload 'gru' and binds to its one trainer
(jax_impl.train), which calls the model's `logits` and this module's `train_with` and `compute_dtype`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jax_impl.catalog import variant as variant_record  # the variants every JAX adapter declares, this one's too
from jax_impl.devices import placement
from parity.api import Gradients, Prepared
from parity.api.variants import ONE, Variant
from parity_gru.spec import PIXEL_SCALE, GruArchitecture, check_gru_weights

WORKLOAD, TRAIN, INFER = "gru", "gru_train", "gru_infer"


@dataclass(frozen=True)
class GruOptions:
    """What jax_impl.train reads of a training variant: 'jit' on one device, one step a dispatch, float32."""

    parallel: str = "jit"
    steps_per_dispatch: int = 1
    mixed: bool = False
    prefetch: int = 0  # batches put on the device ahead of their steps; 0: the host's feed
    unroll: int | bool = 1  # lax.scan's unroll over the 28 steps


@dataclass(frozen=True)
class GruInferOptions:
    unroll: int | bool = 1


VARIANTS: tuple[Variant, ...] = (
    Variant("jit", TRAIN, ONE, rank=1, options=GruOptions()),
    Variant("jit+unroll", TRAIN, ONE, tuned=True, rank=0, options=GruOptions(unroll=True)),
    Variant("predict", INFER, ONE, rank=0, options=GruInferOptions()),
)


def gru_blocks(params: Sequence[jax.Array], x: jax.Array, unroll: int | bool = 1) -> dict[str, jax.Array]:
    """The forward pass on Keras-layout arrays (kernel, recurrent kernel, bias (2, 3U), dense kernel and bias)."""
    kernel, recurrent, bias, dk, db = params
    u = recurrent.shape[0]
    b = x.shape[0]
    dt = kernel.dtype  # float32; float64 in the float64 oracle's run (float64 below)
    xs = x.reshape(b, 28, 28).astype(dt) * jnp.asarray(PIXEL_SCALE, dt)
    with jax.named_scope("gru"):
        ax = jnp.einsum("btf,fg->btg", xs, kernel) + bias[0]  # every step's input product at once

        def step(h, a):
            ah = h @ recurrent + bias[1]  # reset_after: the recurrent bias inside r * (.), as Keras's and PyTorch's
            z = jax.nn.sigmoid(a[:, :u] + ah[:, :u])
            r = jax.nn.sigmoid(a[:, u : 2 * u] + ah[:, u : 2 * u])
            n = jnp.tanh(a[:, 2 * u :] + r * ah[:, 2 * u :])
            h = z * h + (1.0 - z) * n
            return h, None

        h, _ = jax.lax.scan(step, jnp.zeros((b, u), dt), ax.swapaxes(0, 1), unroll=unroll)
    with jax.named_scope("dense"):
        logits = h @ dk + db
    with jax.named_scope("probs"):
        return {"gru": h, "logits": logits, "probs": jax.nn.softmax(logits)}


class GRU(nnx.Module):
    """The GRU's parameters, each an nnx.Param in Keras's layout, initialised as Keras does."""

    def __init__(self, units: int, seed: int):
        self.arch = a = GruArchitecture(units)
        k = jax.random.split(jax.random.key(seed), 3)
        glorot = jax.nn.initializers.glorot_uniform()  # Keras's kernel initialiser (Flax's: lecun_normal)
        self.kernel = nnx.Param(glorot(k[0], (a.features, 3 * units)))
        self.recurrent_kernel = nnx.Param(jax.nn.initializers.orthogonal()(k[1], (units, 3 * units)))
        self.bias = nnx.Param(jnp.zeros((2, 3 * units)))
        self.dense_kernel = nnx.Param(glorot(k[2], (units, a.classes)))
        self.dense_bias = nnx.Param(jnp.zeros((a.classes,)))
        self.unroll = 1

    def params(self) -> list:
        return [self.kernel, self.recurrent_kernel, self.bias, self.dense_kernel, self.dense_bias]

    def blocks(self, x, train: bool = False, key=None) -> dict[str, jax.Array]:
        return gru_blocks([p.value for p in self.params()], x, self.unroll)

    def logits(self, x, train: bool = False, key=None) -> jax.Array:
        return self.blocks(x)["logits"]

    def __call__(self, x, train: bool = False, key=None) -> jax.Array:
        return self.blocks(x)["probs"]


MODEL = GRU


def build(units: int, seed: int = 0) -> GRU:
    return GRU(units, seed)


def mixed_precision(model: GRU) -> GRU:
    raise ValueError("the GRU example offers no bfloat16 variant")


def float64(model: GRU) -> GRU:
    """The model computing in float64, its weights widened exactly: the float64 oracle's run, in a process with JAX's
    x64 on (parity.workloads.trained.float64). Optional: only a framework that is a workload's float64 oracle has it."""
    for p in model.params():
        p.value = jnp.asarray(p.value, jnp.float64)
    return model


def train_with(model: GRU, o: GruOptions) -> tuple[str, str, bool]:
    """A variant's options on the model the trainer compiles; its recurrent kernel, no BatchNorm, a scan loop."""
    model.unroll = o.unroll
    return ("unrolled" if o.unroll is True else "lax.scan"), "none", o.unroll is not True


def compute_dtype(model: GRU) -> str:
    return "float32"


def get_weights(model: GRU) -> list[np.ndarray]:
    return [np.asarray(p.value) for p in model.params()]


def set_weights(model: GRU, weights: Sequence[np.ndarray]) -> None:
    check_gru_weights(weights, model.arch.units)
    for p, w in zip(model.params(), weights, strict=True):
        p.value = jnp.asarray(w)


def count_params(model: GRU) -> dict[str, int]:
    n = model.arch.params()
    return {"total": n, "trainable": n, "non_trainable": 0}


def forward_layers(model: GRU, x: np.ndarray) -> dict[str, np.ndarray]:
    out = jax.jit(gru_blocks)(get_weights(model), jnp.asarray(x, jnp.float32))
    return {k: np.asarray(v) for k, v in out.items()}


def _loss(params, x, y):
    logits = gru_blocks(params, x)["logits"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def loss_and_grads(model: GRU, x: np.ndarray, y: np.ndarray) -> Gradients:
    loss, grads = jax.jit(jax.value_and_grad(_loss))(get_weights(model), jnp.asarray(x, jnp.float32), jnp.asarray(y))
    return Gradients(float(loss), [np.asarray(g) for g in grads], [])


def prepare_inference(model: GRU, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    o = variant_record(INFER, variant, 1).options
    params = jax.device_put(get_weights(model), devices[0])
    x = jax.device_put(jnp.asarray(images, jnp.float32), devices[0])
    f = jax.jit(lambda p, x: gru_blocks(p, x, o.unroll)["probs"])
    return Prepared(
        lambda: f(params, x),
        lambda out: tuple(out.shape),
        lambda out, idx: np.asarray(out)[list(idx)],
        placement,
        lambda: (None, "XLA cost analysis: not counted (the time steps in a loop)"),
        kernel_path="lax.scan" if o.unroll is not True else "unrolled",
    )
