"""The GRU in float64 NumPy: the forward pass by block, and one batch's loss and every gradient by backpropagation
through time, written out. What every framework's float32 numbers are judged against. Each gradient comes with the
scale of the terms it sums (`terms`), which its bound is drawn from (parity_gru.bounds)."""

from __future__ import annotations

import numpy as np

from parity_gru.spec import PIXEL_SCALE, GruArchitecture, units_of

F64 = np.float64


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def trace(weights: list[np.ndarray], x: np.ndarray) -> dict:
    """The forward pass with what the backward pass reads: each step's input, state, gates and the candidate."""
    kernel, recurrent, bias, dk, db = (np.asarray(w, F64) for w in weights)
    arch = GruArchitecture(units_of(weights))
    u, b = arch.units, len(x)
    xs = np.asarray(x, F64).reshape(b, arch.steps, arch.features) * PIXEL_SCALE
    h, steps = np.zeros((b, u)), []
    for t in range(arch.steps):
        ax, ah = xs[:, t] @ kernel + bias[0], h @ recurrent + bias[1]  # reset_after: the recurrent bias inside r * (.)
        z = _sigmoid(ax[:, :u] + ah[:, :u])
        r = _sigmoid(ax[:, u : 2 * u] + ah[:, u : 2 * u])
        n = np.tanh(ax[:, 2 * u :] + r * ah[:, 2 * u :])
        steps.append((xs[:, t], h, ah, z, r, n))
        h = z * h + (1.0 - z) * n
    logits = h @ dk + db
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return {"steps": steps, "gru": h, "logits": logits, "probs": e / e.sum(-1, keepdims=True)}


def forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block's output in float64, by block name (GruArchitecture.blocks' values)."""
    tr = trace(weights, x)
    return {k: tr[k] for k in ("gru", "logits", "probs")}


def backward(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list, list]:
    """One batch's mean cross-entropy, every parameter's gradient (Keras's order) and, for each, the sum of the
    absolute values of the terms its gradient adds up (the scale its rounding error is bounded on)."""
    kernel, recurrent, bias, dk, db = (np.asarray(w, F64) for w in weights)
    tr, u = trace(weights, x), recurrent.shape[0]
    b = len(y)
    p = tr["probs"]
    loss = float(-np.mean(np.log(p[np.arange(b), y])))
    dlogits = p.copy()
    dlogits[np.arange(b), y] -= 1.0
    dlogits /= b
    h = tr["gru"]
    g = [np.zeros_like(kernel), np.zeros_like(recurrent), np.zeros_like(bias), h.T @ dlogits, dlogits.sum(0)]
    terms = [np.zeros_like(kernel), np.zeros_like(recurrent), np.zeros_like(bias)]
    terms += [np.abs(h).T @ np.abs(dlogits), np.abs(dlogits).sum(0)]
    dh = dlogits @ dk.T
    for xt, hp, ah, z, r, n in reversed(tr["steps"]):
        dz, dn = dh * (hp - n), dh * (1.0 - z)
        dpn = dn * (1.0 - n * n)
        dax = np.concatenate([dz * z * (1.0 - z), dpn * ah[:, 2 * u :] * r * (1.0 - r), dpn], axis=1)
        dah = np.concatenate([dax[:, : 2 * u], dpn * r], axis=1)
        g[0] += xt.T @ dax
        g[1] += hp.T @ dah
        g[2] += np.stack([dax.sum(0), dah.sum(0)])
        terms[0] += np.abs(xt).T @ np.abs(dax)
        terms[1] += np.abs(hp).T @ np.abs(dah)
        terms[2] += np.stack([np.abs(dax).sum(0), np.abs(dah).sum(0)])
        dh = dh * z + dah @ recurrent.T
    return loss, g, terms


def loss_and_grads(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """One batch's mean cross-entropy and every parameter's gradient, in Keras's order, in float64."""
    loss, g, _ = backward(weights, x, y)
    return loss, g
