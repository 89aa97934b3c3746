"""The row LSTM's float64 oracle: the forward pass and backpropagation through time written out by hand, with
what the tolerances need of each step (the gates, the cell, the magnitudes each reduction sums)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parity.api.lstm import PIXEL_SCALE, LstmArchitecture, units_of
from parity.api.weights import by_name
from parity.workloads.trained.loss import cross_entropy


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the tanh form: no overflow of exp(-z) for large |z|


def named(weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Keras-order arrays by name ('lstm1.kernel', ...), in float64; units read off the weights."""
    return by_name(weights, LstmArchitecture(units_of(weights)).weights)


def rows(x: np.ndarray) -> np.ndarray:
    """(B, 28, 28, 1) raw pixels -> (B, steps, features) in [0, 1]: the model's reshape and Rescaling. Images of
    fewer rows, (B, T, 28, 1), run T steps (the tests' short sequences)."""
    x = np.asarray(x, np.float64)
    return x.reshape(x.shape[0], x.shape[1], -1) * PIXEL_SCALE


@dataclass
class Adjoint:
    """One layer's backpropagation through time: the loss's gradient for each step's hidden state and cell (all
    paths summed; B, T, U), for each gate pre-activation (B, T, 4U) and for each step's input (B, T, features)."""

    dh: np.ndarray
    dc: np.ndarray
    dz: np.ndarray
    dx: np.ndarray


@dataclass
class Layer:
    """One LSTM layer run over a sequence `x` (B, T, inputs), float64: its weights, its gates (B, T, U) in GATES
    order, and its cell c and hidden state h (B, T + 1, U) with the zero initial state at index 0."""

    x: np.ndarray
    kernel: np.ndarray
    recurrent: np.ndarray
    bias: np.ndarray
    i: np.ndarray
    f: np.ndarray
    g: np.ndarray
    o: np.ndarray
    c: np.ndarray
    h: np.ndarray

    @classmethod
    def run(cls, x: np.ndarray, kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray) -> Layer:
        b, steps, _ = x.shape
        u = recurrent.shape[0]
        xk = x @ kernel + bias
        c, h = np.zeros((b, steps + 1, u)), np.zeros((b, steps + 1, u))
        gates = np.zeros((4, b, steps, u))
        for t in range(steps):
            z = (xk[:, t] + h[:, t] @ recurrent).reshape(b, 4, u)
            i, f, g, o = sigmoid(z[:, 0]), sigmoid(z[:, 1]), np.tanh(z[:, 2]), sigmoid(z[:, 3])
            c[:, t + 1] = f * c[:, t] + i * g
            h[:, t + 1] = o * np.tanh(c[:, t + 1])
            gates[:, :, t] = i, f, g, o
        return cls(x, kernel, recurrent, bias, *gates, c, h)

    def backward(self, dh_out: np.ndarray) -> Adjoint:
        """Backpropagation through time from `dh_out` (B, T, U), the loss's gradient for each step's output."""
        b, steps, u = dh_out.shape
        dz = np.zeros((b, steps, 4 * u))
        dh, dc = np.zeros((b, steps, u)), np.zeros((b, steps, u))
        dh_next, dc_next = np.zeros((b, u)), np.zeros((b, u))
        for t in reversed(range(steps)):
            i, f, g, o = self.i[:, t], self.f[:, t], self.g[:, t], self.o[:, t]
            tc = np.tanh(self.c[:, t + 1])
            dh[:, t] = dh_out[:, t] + dh_next
            dc[:, t] = dh[:, t] * o * (1 - tc * tc) + dc_next
            d, dht = dc[:, t], dh[:, t]
            dz[:, t] = np.concatenate(
                [d * g * i * (1 - i), d * self.c[:, t] * f * (1 - f), d * i * (1 - g * g), dht * tc * o * (1 - o)],
                axis=1,
            )
            dc_next, dh_next = d * f, dz[:, t] @ self.recurrent.T
        return Adjoint(dh, dc, dz, dz @ self.kernel.T)

    def abs_z(self) -> np.ndarray:
        """Each gate pre-activation's sum of |terms| (B, T, 4U): |x| |kernel| + |h| |recurrent kernel| + |bias|, what
        its float32 reduction's rounding is relative to."""
        return (
            np.abs(self.x) @ np.abs(self.kernel) + np.abs(self.h[:, :-1]) @ np.abs(self.recurrent) + np.abs(self.bias)
        )

    def grads(self, dz: np.ndarray) -> list[np.ndarray]:
        """The kernel's, recurrent kernel's and bias's gradients from dz: sums over the batch and the steps."""
        u4 = dz.shape[-1]
        flat = dz.reshape(-1, u4)
        return [
            self.x.reshape(len(flat), -1).T @ flat,
            self.h[:, :-1].reshape(len(flat), -1).T @ flat,
            flat.sum(axis=0),
        ]


@dataclass
class Trace:
    """The whole forward pass, float64: both layers and the head."""

    weights: dict[str, np.ndarray]
    lstm1: Layer
    lstm2: Layer
    logits: np.ndarray
    probs: np.ndarray


def lstm_trace(weights: list[np.ndarray], x: np.ndarray) -> Trace:
    """The forward pass with every step's quantities kept (the tolerances read them)."""
    p = named(weights)
    l1 = Layer.run(rows(x), p["lstm1.kernel"], p["lstm1.recurrent_kernel"], p["lstm1.bias"])
    l2 = Layer.run(l1.h[:, 1:], p["lstm2.kernel"], p["lstm2.recurrent_kernel"], p["lstm2.bias"])
    logits = l2.h[:, -1] @ p["dense.kernel"] + p["dense.bias"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return Trace(p, l1, l2, logits, e / e.sum(-1, keepdims=True))


def lstm_forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Float64 inference pass of the row LSTM.

    Args:
        weights: the 8 arrays in Keras's get_weights() order (the width is read off them).
        x: (B, 28, 28, 1) raw pixels.
    Returns:
        Every block by name, float64: "lstm1" (B, 28, U) the first layer's sequence, "lstm2" (B, U) the second's
        last hidden state, "logits" (B, 10), "probs" (B, 10).
    """
    tr = lstm_trace(weights, x)
    return {"lstm1": tr.lstm1.h[:, 1:], "lstm2": tr.lstm2.h[:, -1], "logits": tr.logits, "probs": tr.probs}


@dataclass
class Backward:
    """Backpropagation through time of a Trace: the loss, the 8 gradients (Keras order), each layer's Adjoint and
    the gradient of the loss for the logits (dlogits) and for the second layer's last hidden state (dh2)."""

    loss: float
    grads: list[np.ndarray]
    lstm1: Adjoint
    lstm2: Adjoint
    dlogits: np.ndarray
    dh2: np.ndarray


def lstm_backward(tr: Trace, y: np.ndarray) -> Backward:
    """Mean sparse cross-entropy of the trace's logits against labels `y` (B,), and its gradients."""
    loss, d = cross_entropy(tr.logits, tr.probs, y)
    p, l1, l2 = tr.weights, tr.lstm1, tr.lstm2
    dh2 = d @ p["dense.kernel"].T
    dh_out = np.zeros(l2.h[:, 1:].shape)
    dh_out[:, -1] = dh2
    a2 = l2.backward(dh_out)
    a1 = l1.backward(a2.dx)
    dense = [l2.h[:, -1].T @ d, d.sum(axis=0)]
    return Backward(loss, l1.grads(a1.dz) + l2.grads(a2.dz) + dense, a1, a2, d, dh2)


def lstm_loss_and_grads(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Float64 loss and gradients of one batch, by backpropagation through time (no framework code).

    Args:
        weights: the 8 arrays in Keras's get_weights() order.
        x: (B, 28, 28, 1) raw pixels; y: (B,) integer labels.
    Returns:
        (mean sparse cross-entropy of the logits, the 8 gradients in Keras's trainable_weights order).
    """
    bw = lstm_backward(lstm_trace(weights, x), y)
    return bw.loss, bw.grads
