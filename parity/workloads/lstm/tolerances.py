"""The row LSTM's tolerances, derived from the shared rounding model (parity.common.tolerances) carried through the
recurrence with the cell's own quantities on the run's inputs (the float64 oracle's trace), the mixed-precision
runs' bfloat16 figures, and the parity checks' tables. docs/numerics.md, "The row LSTM", has the derivation.

The model, in standard deviations (sd) of each float32 error, first order:
- local: a reduction of n terms rounds with sd u·sqrt(n)·Σ|t| (the shared model's random walk, relative to its
  terms); an elementwise product or sum with sd u·|result|; a sigmoid, tanh, exp or log with sd ULPS·u (absolute:
  their outputs are at most 1 where it matters).
- carried: through the cell's own derivatives at the float64 point, step by step, forward and then backward through
  time. A combination Σ w_k e_k of independent errors (different units' mixed by a weight matrix, different
  samples', fresh roundings, a cell's carried error against what reaches it through the weights) has sd
  sqrt(Σ w_k² sd_k²); errors sharing a source (one unit's gates in its cell, its cell and output gate in h, a
  sample's steps in a gradient's sum) add their sd linearly, the worst case of any correlation.
- a gradient's last sum over batch x steps: its own rounding is relative to its terms, u·sqrt(B·T)·Σ|x||dz|, so a
  sum that cancels is judged on its terms' scale (as the CNN's gradient_scale) within the one figure per parameter.
- judged: an element's bound is LAMBDA·sd (three standard deviations, the shared model's), over max |reference|.
Every sd is computed per element on the run's inputs, so the bounds hold for any kernel that rounds each operation
once (any summation order or blocking: AVX2, AVX-512, AMX)."""

from __future__ import annotations

import math

import numpy as np

from parity.api.lstm import LstmArchitecture
from parity.common.tolerances import BF16_UNIT_ROUNDOFF, F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA, grad_sum_bound, tolerance
from parity.workloads.lstm.oracle import Adjoint, Backward, Layer, Trace, lstm_backward, lstm_trace

U = F32_UNIT_ROUNDOFF
ULPS = 4  # a float32 sigmoid, tanh, exp or log: within a few ulps in Eigen, XLA, oneDNN and SLEEF alike


def _sq(a: np.ndarray) -> np.ndarray:
    return a * a


def _matmul_sd(sd: np.ndarray, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The sd of a @ w's error where `a`'s elements have independent errors of sd `sd`: carried through w, and the
    product's own rounding (a reduction over w's rows)."""
    return np.sqrt(_sq(sd) @ _sq(w) + _sq(U * math.sqrt(w.shape[0]) * (np.abs(a) @ np.abs(w))))


class LayerErrors:
    """The sd of one layer's float32 forward errors, per element (B, T, U): its gates (i, f, g, o), its cell c_t,
    tanh(c_t) (tc) and its output h_t, carried step by step from `var_x`, the variance of each input's error."""

    def __init__(self, layer: Layer, var_x: np.ndarray):
        b, steps, u = layer.i.shape
        n = layer.kernel.shape[0] + u + 1  # inputs, hidden units and the bias: one sum per gate pre-activation
        k2, r2, act = _sq(layer.kernel), _sq(layer.recurrent), ULPS * U
        self.i, self.f, self.g, self.o, self.c, self.tc, self.h = (np.zeros((b, steps, u)) for _ in range(7))
        var_h, sd_c = np.zeros((b, u)), np.zeros((b, u))
        var_rounded = _sq(U * math.sqrt(n) * layer.abs_z()) + var_x @ k2
        for t in range(steps):
            z = np.sqrt(var_rounded[:, t] + var_h @ r2).reshape(b, 4, u)
            i, f, g, o = layer.i[:, t], layer.f[:, t], layer.g[:, t], layer.o[:, t]
            si, sf = i * (1 - i) * z[:, 0] + act, f * (1 - f) * z[:, 1] + act
            sg, so = (1 - g * g) * z[:, 2] + act, o * (1 - o) * z[:, 3] + act
            cp, c = layer.c[:, t], layer.c[:, t + 1]
            fresh = np.abs(cp) * sf + np.abs(g) * si + np.abs(i) * sg  # one unit's gates: linearly
            rounded = U * (np.abs(f * cp) + np.abs(i * g) + np.abs(c))
            sd_c = np.sqrt(_sq(f * sd_c) + _sq(fresh) + _sq(rounded))
            tc = np.tanh(c)
            stc = (1 - tc * tc) * sd_c + act
            sh = o * stc + np.abs(tc) * so + U * np.abs(layer.h[:, t + 1])
            var_h = _sq(sh)
            for name, v in zip("ifgo", (si, sf, sg, so), strict=True):
                getattr(self, name)[:, t] = v
            self.c[:, t], self.tc[:, t], self.h[:, t] = sd_c, stc, sh


class Errors:
    """The sd of every float32 forward error of a batch: both layers, the logits, the probabilities and each
    sample's loss (B,)."""

    def __init__(self, tr: Trace, y: np.ndarray | None = None):
        x = tr.lstm1.x
        self.lstm1 = LayerErrors(tr.lstm1, _sq(U * x))  # the pixels' scaling rounds once
        self.lstm2 = LayerErrors(tr.lstm2, _sq(self.lstm1.h))
        h2, wd, p = tr.lstm2.h[:, -1], tr.weights["dense.kernel"], tr.probs
        self.h2 = self.lstm2.h[:, -1]
        abs_logits = np.abs(h2) @ np.abs(wd) + np.abs(tr.weights["dense.bias"])
        self.logits = np.sqrt(_sq(self.h2) @ _sq(wd) + _sq(U * math.sqrt(h2.shape[1] + 1) * abs_logits))
        classes = p.shape[1]
        # softmax: exp(l - max) / sum; its Jacobian diag(p) - p p^T, then the shift, exp, sum and division roundings
        spread = np.abs(tr.logits - tr.logits.max(-1, keepdims=True))
        carried = p * (self.logits + (p * self.logits).sum(-1, keepdims=True))
        self.probs = carried + U * p * (spread + ULPS + math.sqrt(classes) + 1)
        self.loss, self.per_sample_loss = None, None
        if y is not None:  # L = lse - l_y: the logits' errors through p - onehot; exp and log, the sum, the max back
            y = np.asarray(y).astype(np.int64)
            top = tr.logits.max(-1)
            lse = top + np.log(np.exp(tr.logits - top[:, None]).sum(-1))
            self.per_sample_loss = lse - tr.logits[np.arange(len(y)), y]
            carried = (np.abs(p - np.eye(classes)[y]) * self.logits).sum(-1)
            own = U * (2 * ULPS + math.sqrt(classes) + 2 * np.abs(lse) + self.per_sample_loss)
            self.loss = carried + own


def _layer_dz_sd(layer: Layer, fe: LayerErrors, adj: Adjoint, sd_out: np.ndarray) -> np.ndarray:
    """The sd of the float32 error of every gate pre-activation's gradient dz (B, T, 4U), by backpropagation through
    time: carried from `sd_out` (the sd of each step's incoming gradient) and the next step, made by this step's
    roundings and by the forward errors `fe` of the gates and cells the step reads."""
    b, steps, u = layer.i.shape
    sd_dz = np.zeros((b, steps, 4 * u))
    sd_h, sd_c = np.zeros((b, u)), np.zeros((b, u))
    for t in reversed(range(steps)):
        i, f, g, o, cp = layer.i[:, t], layer.f[:, t], layer.g[:, t], layer.o[:, t], layer.c[:, t]
        tc, dh, dc = np.tanh(layer.c[:, t + 1]), adj.dh[:, t], adj.dc[:, t]
        si, sf, sg, so, stc = fe.i[:, t], fe.f[:, t], fe.g[:, t], fe.o[:, t], fe.tc[:, t]
        scp = fe.c[:, t - 1] if t else 0.0
        di, df, dg, do = i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o)
        s_dh = np.sqrt(_sq(sd_out[:, t]) + _sq(sd_h)) + U * np.abs(dh)
        s_q = (1 - tc * tc) * so + 2 * o * np.abs(tc) * stc  # o (1 - tc^2), read off the forward's errors
        s_dc = np.sqrt(_sq(o * (1 - tc * tc) * s_dh) + _sq(sd_c)) + np.abs(dh) * s_q + 2 * U * np.abs(dc)
        ad, adh, ag, acp, atc = np.abs(dc), np.abs(dh), np.abs(g), np.abs(cp), np.abs(tc)
        sd_dz[:, t] = np.concatenate(
            [
                s_dc * ag * di + ad * (sg * di + ag * np.abs(1 - 2 * i) * si),
                s_dc * acp * df + ad * (scp * df + acp * np.abs(1 - 2 * f) * sf),
                s_dc * i * dg + ad * (si * dg + 2 * i * ag * sg),
                s_dh * atc * do + adh * (stc * do + atc * np.abs(1 - 2 * o) * so),
            ],
            axis=1,
        ) + 4 * U * np.abs(adj.dz[:, t])
        sd_h = _matmul_sd(sd_dz[:, t], adj.dz[:, t], layer.recurrent.T)
        sd_c = f * s_dc + ad * sf + U * np.abs(dc * f)
    return sd_dz


def _layer_grad_bounds(layer: Layer, sd_x: np.ndarray, fe: LayerErrors, dz: np.ndarray, sd_dz: np.ndarray) -> list:
    ones = np.ones(dz.shape[:2] + (1,))
    return [
        grad_sum_bound(layer.x, sd_x, dz, sd_dz),
        grad_sum_bound(layer.h[:, :-1], np.concatenate([np.zeros_like(fe.h[:, :1]), fe.h[:, :-1]], axis=1), dz, sd_dz),
        grad_sum_bound(ones, np.zeros_like(ones), dz, sd_dz)[0],
    ]


def lstm_grad_bounds(tr: Trace, bw: Backward, e: Errors) -> list[np.ndarray]:
    """Each gradient's float32 bound per element (LAMBDA · sd), Keras order."""
    p, l1, l2 = tr.weights, tr.lstm1, tr.lstm2
    b = len(bw.dlogits)
    sd_d = e.probs / b + 2 * U * np.abs(bw.dlogits)  # (p - onehot) / B
    sd_dh2 = _matmul_sd(sd_d, bw.dlogits, p["dense.kernel"].T)
    sd_out = np.zeros(l2.h[:, 1:].shape)
    sd_out[:, -1] = sd_dh2
    sd_dz2 = _layer_dz_sd(l2, e.lstm2, bw.lstm2, sd_out)
    sd_dz1 = _layer_dz_sd(l1, e.lstm1, bw.lstm1, _matmul_sd(sd_dz2, bw.lstm2.dz, p["lstm2.kernel"].T))
    h2, d = l2.h[:, -1:], bw.dlogits[:, None]
    ones = np.ones((b, 1, 1))
    return [
        *_layer_grad_bounds(l1, U * l1.x, e.lstm1, bw.lstm1.dz, sd_dz1),
        *_layer_grad_bounds(l2, e.lstm1.h, e.lstm2, bw.lstm2.dz, sd_dz2),
        grad_sum_bound(h2, e.h2[:, None], d, sd_d[:, None]),
        grad_sum_bound(ones, np.zeros_like(ones), d, sd_d[:, None])[0],
    ]


def _peak_ratio(sd_or_bound: np.ndarray, ref: np.ndarray, factor: float = 1.0) -> float:
    """factor · max(sd_or_bound) / max |ref| (an all-zero reference: 0 if no error is possible, else infinite)."""
    bound, peak = factor * float(np.max(sd_or_bound)), float(np.max(np.abs(ref))) if ref.size else 0.0
    return bound / peak if peak > 0 else (0.0 if bound == 0 else math.inf)


def lstm_forward_tolerances(weights: list[np.ndarray], x: np.ndarray) -> dict[str, float]:
    """Each forward block's float32 bound on these inputs: LAMBDA · (its largest element's error sd) / max |block|."""
    tr = lstm_trace(weights, x)
    return _forward_bounds(tr, Errors(tr))


def _forward_bounds(tr: Trace, e: Errors) -> dict[str, float]:
    lam = ROUNDING_LAMBDA
    return {
        "lstm1": _peak_ratio(e.lstm1.h, tr.lstm1.h[:, 1:], lam),
        "lstm2": _peak_ratio(e.h2, tr.lstm2.h[:, -1], lam),
        "logits": _peak_ratio(e.logits, tr.logits, lam),
        "probs": _peak_ratio(e.probs, tr.probs, lam),
    }


def lstm_bounds(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str) -> dict:
    """The three checks' bounds from one float64 trace: "forward" (float, every block's), "loss" (float) and
    "grads" (one per parameter, Keras order), as lstm_forward_tolerance, lstm_loss_tolerance and
    lstm_grad_tolerances give them one by one."""
    tr = lstm_trace(weights, x)
    bw, e = lstm_backward(tr, y), Errors(tr, y)
    b, loss = len(e.loss), float(np.mean(e.per_sample_loss))
    loss_sd = math.sqrt(float(np.sum(_sq(e.loss)))) / b + U * math.sqrt(b) * loss  # samples independent; the mean
    grads = [_peak_ratio(bd, g) for bd, g in zip(lstm_grad_bounds(tr, bw, e), bw.grads, strict=True)]
    return {
        "forward": max(max(_forward_bounds(tr, e).values()), _reduced(device, precision, "forward")),
        "loss": max(ROUNDING_LAMBDA * loss_sd / abs(loss), _reduced(device, precision, "loss")),
        "grads": [max(g, _reduced(device, precision, "grads")) for g in grads],
    }


def lstm_block_tolerances(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> dict[str, float]:
    """Each forward block's bound on these inputs (lstm_forward_tolerances), at least the reduced-precision figure
    where the device multiplies in TF32 or bfloat16: what each block is judged by."""
    floor = _reduced(device, precision, "forward")
    return {k: max(v, floor) for k, v in lstm_forward_tolerances(weights, x).items()}


def lstm_forward_tolerance(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> float:
    """The bound of every forward block's error (max error relative to max |reference|, per block), for float32
    arithmetic on these inputs; where the device multiplies in TF32 or bfloat16, at least the reduced-precision
    figure."""
    return max(max(lstm_forward_tolerances(weights, x).values()), _reduced(device, precision, "forward"))


def lstm_loss_tolerance(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str) -> float:
    """The batch's mean loss against float64, relative to it: each sample's sd (the logits' errors through
    p - onehot, and the loss's own roundings), samples independent, and the mean's rounding."""
    return lstm_bounds(weights, x, y, device, precision)["loss"]


def lstm_grad_tolerances(
    weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str
) -> list[float]:
    """Each parameter's gradient against float64 (Keras order): the bound of its max error relative to its max
    |reference|, for float32 arithmetic on these inputs (where its sum cancels, the bound is its terms' scale, so
    above what the plain relative figure would be); where the device multiplies in TF32 or bfloat16, at least the
    reduced-precision figure."""
    return lstm_bounds(weights, x, y, device, precision)["grads"]


# TF32 (GPU) and bfloat16 passes (TPU) at 'default' precision round every matrix product's inputs to 11 or 8
# significant bits: a perturbation of the weights of up to u = 4.9e-4 (TF32) or 3.9e-3 (bfloat16) of each, the same
# at every step and sample, where the float32 model above assumes fresh independent roundings. The CNN's table
# (mantissas, with margin; docs/numerics.md) applies: not derived, as there.
LSTM_TOLERANCES_REDUCED = {
    "forward": 3e-2,
    "loss": 5e-2,
    "grads": 5e-2,
    "trajectory_loss": 5e-2,
    "trajectory_params": 1e-1,
    "accuracy_band": 0.05,
}


def _reduced(device: str, precision: str, what: str) -> float:
    return 0.0 if tolerance(device, precision) <= 1e-4 else LSTM_TOLERANCES_REDUCED[what]


# Trajectories in float32 (CPU, or 'highest' anywhere): the largest per-step loss difference relative to the largest
# loss, and the relative L2 distance of all parameters after the steps, as the CNN's checks measure them. The CNN's
# figures on the CNN's basis (docs/numerics.md, "Every tolerance, justified"): no bound on 20 Adam steps follows from
# the arithmetic (Adam's first steps move a weight by about lr whatever its gradient's size), so a margin over
# measurement. Accuracy: the band between frameworks' test accuracies, statistical.
LSTM_TOLERANCES = {"trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}

# Mixed precision ('+bf16': bfloat16 compute, float32 parameters and Adam). bfloat16 keeps 8 significant bits: one
# rounding moves a value by at most u = 2^-8 of itself, and accumulation stays float32, so the error is the
# roundings to bfloat16 between operations, as for the CNN. Per LSTM layer and step, on the path from the step's
# input to its state: the two products' outputs (x·kernel, h·recurrent kernel), their sum with the bias, the gate's
# activation, f·c and i·g, the cell's sum, tanh(c) and o·tanh(c): BF16_STEP_ROUNDINGS = 9. A rounding at step t
# reaches the last state through the cell's carry, scaled by the forget gates in between: in the random walk the
# steps count as sum over k of f^(2k) = 1 / (1 - f^2) (BF16_EFFECTIVE_STEPS, 2.1 at f = sigmoid(forget bias 1), where
# the trajectories start: Keras's initial weights). Plus the images, the four LSTM kernels (rounded once, used
# every step) and the dense layer's kernel, product and bias sum: R roundings from the images to the loss.
BF16_STEP_ROUNDINGS = 9
BF16_EFFECTIVE_STEPS = 1.0 / (1.0 - (1.0 / (1.0 + math.exp(-LstmArchitecture(1).forget_bias))) ** 2)
BF16_FORWARD_ROUNDINGS = 1 + 4 + 2 * BF16_STEP_ROUNDINGS * BF16_EFFECTIVE_STEPS + 3


def bf16_loss_tolerance() -> float:
    """LAMBDA · u · sqrt(2 R): two mixed-precision runs' loss, relative to its scale (as the CNN's)."""
    return ROUNDING_LAMBDA * BF16_UNIT_ROUNDOFF * math.sqrt(2 * BF16_FORWARD_ROUNDINGS)


LSTM_TOLERANCES_BF16 = {
    "trajectory_loss": bf16_loss_tolerance(),
    "trajectory_params": 2 * bf16_loss_tolerance(),
    "accuracy_band": 0.05,
}


def lstm_tolerances(device: str, precision: str, dtype: str = "float32") -> dict[str, float]:
    """The trajectory and accuracy thresholds for this device and precision; dtype 'bfloat16': the mixed-precision
    runs' (against each other and against their own float32 runs)."""
    if dtype == "bfloat16":
        return dict(LSTM_TOLERANCES_BF16)
    reduced = tolerance(device, precision) > 1e-4
    table = LSTM_TOLERANCES_REDUCED if reduced else LSTM_TOLERANCES
    return {k: table[k] for k in LSTM_TOLERANCES}
