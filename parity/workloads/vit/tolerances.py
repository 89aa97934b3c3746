"""The ViT's tolerances, derived from the shared rounding model (parity.common.tolerances) carried through the
network with its own quantities on the run's inputs (the float64 oracle's trace), the mixed-precision runs' bfloat16
figures, and the parity checks' tables. The row LSTM's model (parity.workloads.lstm.tolerances) applied to LayerNorm,
attention and GELU; in standard deviations (sd) of each float32 error, first order:
- local: a reduction of n terms rounds with sd u·sqrt(n)·Σ|t|; an elementwise op with sd u·|result|; exp, erf and
  a reciprocal square root with ULPS·u. LayerNorm's variance as E[x²] - mean² (one pass: two passes err less).
- carried: through each op's derivatives at the float64 point. Errors a weight matrix or an attention product
  contracts add in quadrature (independent), as do a residual sum's x + f(x) (f's error is x's only through the
  diagonal of f's Jacobian, one of the D terms of each); a softmax's normalisation linearly (the worst case of any
  correlation); LayerNorm's Jacobian exactly, squared.
- a gradient's last sum over batch x tokens: a sample's tokens linearly, samples in quadrature, plus the sum's own
  rounding relative to its terms (so the key bias's, zero in exact arithmetic, is judged on its terms' scale).
- a gradient zero in exact arithmetic (a key bias's: its terms cancel whatever the forward computed) is rounding
  alone, judged absolutely: the float32 bound plus its products' operand roundings (TF32, a bfloat16 pass), never
  relative to its own scale, which is noise.
- judged: an element's bound is LAMBDA·sd (three standard deviations), over max |reference|."""

from __future__ import annotations

import math

import numpy as np

from parity.common.tolerances import (
    BF16_UNIT_ROUNDOFF,
    ROUNDING_LAMBDA,
    operand_roundoff,
    tolerance,
)
from parity.workloads.cnn.tolerances import CNN_TOLERANCES_REDUCED
from parity.workloads.vit import oracle as o
from parity.workloads.vit.errors import Errors, U, _sq, vit_grad_bounds
from parity.workloads.vit.spec import VIT_FULL


def _peak_ratio(sd_or_bound: np.ndarray, ref: np.ndarray, factor: float = 1.0) -> float:
    """factor · max(sd_or_bound) / max |ref| (an all-zero reference: 0 if no error is possible, else infinite)."""
    bound, peak = factor * float(np.max(sd_or_bound)), float(np.max(np.abs(ref))) if ref.size else 0.0
    return bound / peak if peak > 0 else (0.0 if bound == 0 else math.inf)


def _forward_bounds(tr: o.Trace, e: Errors) -> dict[str, float]:
    lam, blocks = ROUNDING_LAMBDA, zip(tr.arch.block_names, tr.blocks, e.blocks, strict=True)
    out = {"embed": _peak_ratio(e.embed, tr.embed, lam)}
    out.update({name: _peak_ratio(be.out, blk.out, lam) for name, blk, be in blocks})
    out.update(pool=_peak_ratio(e.pool, tr.pool, lam), logits=_peak_ratio(e.logits, tr.logits, lam))
    return {**out, "probs": _peak_ratio(e.probs, tr.probs, lam)}


def vit_forward_tolerances(weights: list[np.ndarray], x: np.ndarray) -> dict[str, float]:
    """Each forward block's float32 bound on these inputs: LAMBDA · (its largest element's error sd) / max |block|."""
    tr = o.vit_trace(weights, x)
    return _forward_bounds(tr, Errors(tr))


# Each term t of a product's output is a · b of two float32 operands, each rounded once to the products' unit
# roundoff u_op before it multiplies: |t (δa + δb)| <= 2 u_op |t|, with no λ (a worst case, not an sd).
OPERAND_ROUNDINGS = 2


def vanishing_terms(tr: o.Trace, bw: o.Backward) -> dict[int, np.ndarray]:
    """Each gradient zero in exact arithmetic, by its Keras index: its sum of |terms| per element (each block's key
    bias, Attention.key_bias_terms)."""
    index = {w.name: i for i, w in enumerate(tr.arch.weights)}
    items = zip(tr.arch.block_names, tr.blocks, bw.blocks, strict=True)
    return {index[f"{n}_attn.key_bias"]: blk.attn.key_bias_terms(adj.attn.ds) for n, blk, adj in items}


def vit_bounds(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str) -> dict:
    """The three checks' bounds from one float64 trace: "forward" (float, every block's), "loss" (float), "grads"
    (one per parameter, Keras order, relative to its max |float64 gradient|) and "grad_abs" (the same bounds as
    absolute errors: what the key bias's gradient, zero in exact arithmetic, is judged by, its operands' roundings
    added where the device's products round them)."""
    tr = o.vit_trace(weights, x)
    bw, e = o.vit_backward(tr, y), Errors(tr, y)
    b, loss = len(e.loss), float(np.mean(e.per_sample_loss))
    loss_sd = math.sqrt(float(np.sum(_sq(e.loss)))) / b + U * math.sqrt(b) * loss  # samples independent; the mean
    floor, bounds = _reduced(device, precision, "grads"), vit_grad_bounds(tr, bw, e)
    scales = [float(np.max(np.abs(g))) for g in bw.grads]
    # A vanishing gradient's terms cancel for whatever operands the forward computed, so the reduced table (relative to
    # a scale that is noise) does not apply: what remains is float32's bound and the operands' roundings in the last
    # product (dk = ds^T q), OPERAND_ROUNDINGS · u_op · Σ|t|; an error beyond it broke the cancellation.
    floors, u_op = [floor] * len(bounds), operand_roundoff(device, precision)
    for i, terms in vanishing_terms(tr, bw).items():
        bounds[i], floors[i] = bounds[i] + OPERAND_ROUNDINGS * u_op * terms, 0.0
    return {
        "forward": max(max(_forward_bounds(tr, e).values()), _reduced(device, precision, "forward")),
        "loss": max(ROUNDING_LAMBDA * loss_sd / abs(loss), _reduced(device, precision, "loss")),
        "grads": [max(_peak_ratio(bd, g), f) for bd, g, f in zip(bounds, bw.grads, floors, strict=True)],
        "grad_abs": [max(float(np.max(bd)), f * m) for bd, m, f in zip(bounds, scales, floors, strict=True)],
    }


def vit_block_tolerances(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> dict[str, float]:
    """Each forward block's bound on these inputs (vit_forward_tolerances), at least the reduced-precision figure
    where the device multiplies in TF32 or bfloat16: what each block is judged by."""
    floor = _reduced(device, precision, "forward")
    return {k: max(v, floor) for k, v in vit_forward_tolerances(weights, x).items()}


def vit_forward_tolerance(weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> float:
    """The largest of vit_block_tolerances: a bound every forward block's error is within."""
    return max(vit_block_tolerances(weights, x, device, precision).values())


# TF32 (GPU) and bfloat16 passes (TPU) at 'default' precision round every matrix product's inputs to 11 or 8
# significant bits, a perturbation of the weights the float32 model above does not describe: the CNN's table
# (mantissas, with margin; docs/numerics.md) applies, not derived, as for the row LSTM (its loss as its gradients).
VIT_TOLERANCES_REDUCED = {**CNN_TOLERANCES_REDUCED, "loss": CNN_TOLERANCES_REDUCED["grads"]}


def _reduced(device: str, precision: str, what: str) -> float:
    return 0.0 if tolerance(device, precision) <= 1e-4 else VIT_TOLERANCES_REDUCED[what]


# Trajectories in float32 (CPU, or 'highest' anywhere): the CNN's and the row LSTM's figures on their basis
# (docs/numerics.md, "Every tolerance, justified"): no bound on 20 Adam steps follows from the arithmetic, so a margin
# over measurement. Accuracy: the band between frameworks' test accuracies, statistical.
VIT_TOLERANCES = {"trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}

# Mixed precision ('+bf16': bfloat16 compute, float32 parameters, accumulation and Adam), derived as the CNN's: the
# roundings to bfloat16 (u = 2^-8) on the path from the images to the loss add like a random walk. The embedding:
# the scaled images, the patch kernel, its product, the bias sum, the position sum (5). Per block: LN1's output; the
# query kernel, product and bias sum; the scores; the softmax; the weighted values; the output kernel, product and
# bias sum; the residual sum; LN2's output; each MLP layer's kernel, product and bias sum (6); GELU; the residual sum
# (20). The head: the final LayerNorm's output, the mean, the dense kernel, product and bias sum (5).
BF16_EMBED_ROUNDINGS, BF16_BLOCK_ROUNDINGS, BF16_HEAD_ROUNDINGS = 5, 20, 5


def bf16_loss_tolerance(depth: int = VIT_FULL.depth) -> float:
    """LAMBDA · u · sqrt(2 R): two mixed-precision runs' loss, relative to its scale (as the CNN's), R the roundings
    to bfloat16 from the images to the loss of a ViT of `depth` blocks."""
    r = BF16_EMBED_ROUNDINGS + depth * BF16_BLOCK_ROUNDINGS + BF16_HEAD_ROUNDINGS
    return ROUNDING_LAMBDA * BF16_UNIT_ROUNDOFF * math.sqrt(2 * r)


def vit_tolerances(device: str, precision: str, dtype: str = "float32", depth: int = VIT_FULL.depth) -> dict:
    """The trajectory and accuracy thresholds for this device and precision; dtype 'bfloat16': the mixed-precision
    runs' (against each other and against their own float32 runs) for a ViT of `depth` blocks."""
    if dtype == "bfloat16":
        loss = bf16_loss_tolerance(depth)
        return {"trajectory_loss": loss, "trajectory_params": 2 * loss, "accuracy_band": 0.05}
    table = VIT_TOLERANCES_REDUCED if tolerance(device, precision) > 1e-4 else VIT_TOLERANCES
    return {k: table[k] for k in VIT_TOLERANCES}
