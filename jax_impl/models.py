"""What the trained models share (mirror image of torch_impl.models): the loss, inference's blocks and the label of a
cost XLA cannot count; and what the models whose every variable is a parameter (the row LSTM, the ViT: no BatchNorm
statistics, no max pooling) share besides: their weights in Keras's order, their loss and gradients, and their
inference program on a copy configured by the variant."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jax_impl.devices import lowered_flops, placement
from parity.api import Gradients, Prepared

# XLA's cost analysis counts a loop's body once, whatever its trip count: a program whose time steps run in a
# lax.scan loop (the LSTM's, unroll other than True) has no count
TIME_LOOP = "XLA cost analysis: not counted (the time steps in a loop)"


def abstract(build: Callable[[], nnx.Module]) -> nnx.Module:
    """The module build() makes, each variable its shape and dtype only (nnx.eval_shape: no initialiser compiled or
    run, where eagerly each compiles at its first use, seconds a model), for set_weights or nnx.update to fill; a
    model here holds no other state (a dropout key comes with each call)."""
    return nnx.eval_shape(build)


class Classifier(nnx.Module):
    """A trained model whose `blocks(x, train, key)` gives every block's output by name, its logits and softmax
    probabilities ("logits", "probs") among them."""

    def logits(self, x, train: bool = False, key=None) -> jax.Array:
        return self.blocks(x, train, key)["logits"]

    def __call__(self, x, train: bool = False, key=None) -> jax.Array:
        """Softmax probabilities, as the Keras model outputs."""
        return self.blocks(x, train, key)["probs"]


@nnx.jit
def infer_blocks(model, x):
    """Every block's output (inference), by block name: the model's own `blocks`."""
    return model.blocks(x, train=False)


def output_head(dense: nnx.Module, h, names: tuple[str, str]) -> dict:
    """The logits of `h` through the `dense` layer and their softmax, each in a named scope of its Keras layer's name
    (`names`), in float32 whatever the compute dtype: Keras's mixed-precision rule (the model's last Activation keeps
    a float32 policy), applied here by hand. A no-op in float32."""
    with jax.named_scope(names[0]):
        logits = dense(h).astype(jnp.float32)
    with jax.named_scope(names[1]):
        return {"logits": logits, "probs": jax.nn.softmax(logits)}


def cross_entropy(logits, y):
    """Mean sparse cross-entropy of the model's logits and integer labels (Keras's loss takes the softmax output
    instead, and computes it from the softmax's cached logits: the same quantity)."""
    with jax.named_scope("loss"):
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def param_weights(slots: Callable, model) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order (`slots`: the model's arrays in that order)."""
    return [np.asarray(v.value) for v in slots(model)]


def set_param_weights(slots: Callable, model, weights) -> None:
    """Load weights (checked by the caller) in Keras's order into `slots(model)`."""
    for v, w in zip(slots(model), weights, strict=True):
        v.value = jnp.asarray(w)


def param_count(model) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them: every weight trains."""
    n = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return {"total": n, "trainable": n, "non_trainable": 0}


def block_outputs(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block's output as NumPy, by block name (inference; the model's architecture names them)."""
    blocks = infer_blocks(model, jnp.asarray(x))
    return {k: np.asarray(blocks[k]) for k in model.arch.blocks.values()}


def param_loss_and_grads(model, x: np.ndarray, y: np.ndarray, slots: Callable) -> Gradients:
    """One batch's loss and gradients, grads in Keras's order (`slots`: the model's arrays in that order); no max
    pooling, so no routing. The model is not changed."""
    graphdef, params = nnx.split(model, nnx.Param)  # every variable of the model is a parameter
    loss, g = _loss_and_grads(graphdef, params, jnp.asarray(x), jnp.asarray(y))
    return Gradients(float(loss), [np.asarray(v.value) for v in slots(nnx.merge(graphdef, g))], [])


@partial(jax.jit, static_argnums=0)
def _loss_and_grads(graphdef, params, x, y):
    return jax.value_and_grad(lambda p: cross_entropy(nnx.merge(graphdef, p).logits(x, train=True), y))(params)


def prepared_inference(
    model, images: np.ndarray, devices, configure: Callable, cost: Callable | None = None, path: str | None = None
) -> Prepared:
    """Softmax probabilities of `images` on devices[0], inputs placed beforehand, by a copy of `model` that
    `configure(copy)` sets up as the variant asks (the model passed in keeps its own). cost: the FLOP count's
    callable where XLA's cost analysis cannot give it (None: XLA's count of the compiled program); path: the
    kernel its recurrent layers run (Prepared.kernel_path), None for a model without any."""
    copy = nnx.merge(*nnx.split(model))
    configure(copy)
    graphdef, state = nnx.split(copy)
    x = jax.device_put(jnp.asarray(images, jnp.float32), devices[0])
    state = jax.device_put(state, devices[0])
    f = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))
    return Prepared(
        lambda: f(state, x),
        lambda o: tuple(o.shape),
        lambda o, idx: np.asarray(o)[list(idx)],
        placement,
        cost or (lambda: lowered_flops(f, state, x)),
        lambda: f.lower(state, x).compile().as_text(),  # its HLO: a profile's ops back to the named scopes
        path,
        lambda: bool(f.lower(state, x).compile()),  # ahead: JAX keeps the program for the first call
    )
