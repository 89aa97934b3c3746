"""What the models whose every variable is a parameter (the row LSTM, the ViT: no BatchNorm statistics, no max
pooling) share: their loss and gradients, and their inference program on a copy configured by the variant (mirror
image of torch_impl.forward, which holds what its models share)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jax_impl.cnn import cross_entropy
from jax_impl.devices import lowered_flops, placement
from parity.api import Gradients, Prepared


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
    )
