"""The test model (ln_workload) in JAX, its weights in Keras's layout; EPSILON a module attribute, so that a test
can build a model with another (the planted mismatch)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ln_workload import EPSILON, INFER, PIXEL_SCALE, TRAIN, WORKLOAD, LnArchitecture, initial  # noqa: F401

VARIANTS = ()  # no rows of its own: only its model functions are called


class LnMlp:
    def __init__(self, hidden: int, seed: int = 0, epsilon: float = EPSILON):
        self.arch, self.epsilon = LnArchitecture(hidden), epsilon
        self.params = [jnp.asarray(w) for w in initial(hidden, seed)]


MODEL = LnMlp


def build(hidden: int, seed: int = 0, epsilon: float = EPSILON) -> LnMlp:
    return LnMlp(hidden, seed, epsilon)


def float64(model: LnMlp) -> LnMlp:
    model.params = [jnp.asarray(p, jnp.float64) for p in model.params]
    return model


def get_weights(model: LnMlp) -> list[np.ndarray]:
    return [np.asarray(p) for p in model.params]


def set_weights(model: LnMlp, weights) -> None:
    model.params = [jnp.asarray(np.asarray(w, np.float32)) for w in weights]


def blocks(params, x, epsilon: float) -> dict:
    k1, b1, gamma, beta, k2, b2 = params
    dt = k1.dtype
    h = x.reshape(x.shape[0], -1).astype(dt) * jnp.asarray(PIXEL_SCALE, dt) @ k1 + b1
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    norm = (h - mean) * jax.lax.rsqrt(var + epsilon) * gamma + beta
    logits = jax.nn.gelu(norm, approximate=False) @ k2 + b2  # the exact form (erf), as PyTorch's default
    return {"dense1": h, "norm": norm, "logits": logits, "probs": jax.nn.softmax(logits)}


def forward_layers(model: LnMlp, x: np.ndarray) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in blocks(model.params, jnp.asarray(x), model.epsilon).items()}


def loss_and_grads(model: LnMlp, x: np.ndarray, y: np.ndarray):
    from parity.api import Gradients

    def loss(params):
        logits = blocks(params, jnp.asarray(x), model.epsilon)["logits"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(y)).mean()

    value, grads = jax.value_and_grad(loss)(model.params)
    return Gradients(float(value), [np.asarray(g) for g in grads], [])
