"""The CNN's tolerances, derived from the shared rounding model (parity.common.tolerances): the float32 bound
along the path through the network, each gradient's scale where its sum cancels, the mixed-precision runs'
bfloat16 bound, and the parity checks' tables. docs/numerics.md lists each with its basis."""

from __future__ import annotations

import math

from parity.api.cnn import CNN_CONVS, CNN_DENSE
from parity.common.tolerances import BF16_UNIT_ROUNDOFF, ROUNDING_LAMBDA, rounding_bound, tolerance

# Along the path from the input through the loss back to a parameter, the errors of successive reductions add
# to first order, so a gradient's error is bounded by LAMBDA * u * sum(sqrt(n)) over that path. The bound grows
# with the batch (BatchNorm statistics and weight gradients reduce over N x H x W).


def cnn_forward_reductions(batch: int) -> list[int]:
    """Lengths of the reductions from the images to the training loss (batch statistics)."""
    out = []
    for size, cin, _ in CNN_CONVS:
        out += [batch * size * size] * 2 + [25 * cin]  # BatchNorm mean and variance, then the conv
    return out + list(CNN_DENSE[:-1]) + [CNN_DENSE[-1], batch]  # dense layers, softmax's sum, the batch mean


def cnn_backward_reductions(batch: int) -> list[int]:
    """Lengths of the reductions on the longest backward path: the loss back to the first BatchNorm's
    scale, through every layer (each conv's input gradient, each BatchNorm's two backward means)."""
    out = [CNN_DENSE[-1], CNN_DENSE[1]]  # input gradients of dense2 and dense1
    for size, _, cout in reversed(CNN_CONVS):
        out += [25 * cout] + [batch * size * size] * 2
    return out[:-1] + [batch * CNN_CONVS[0][0] ** 2]  # bn1's gamma: one sum over the batch's pixels


def cnn_loss_tolerance(batch: int, device: str = "cpu", precision: str = "highest") -> float:
    """One batch's training loss against float64: the forward path's rounding bound (float32 runs)."""
    return max(rounding_bound(cnn_forward_reductions(batch)), _reduced(device, precision, "grads"))


def cnn_grad_tolerance(batch: int, device: str = "cpu", precision: str = "highest") -> float:
    """Every gradient against float64 (max error relative to max |reference|, per parameter): the bound
    of the longest path, which covers every shorter one (3.5e-4 at batch 64). Where the device
    multiplies in TF32 or bfloat16 ('default' on GPUs and TPUs), the reduced-precision table's figure."""
    path = cnn_forward_reductions(batch) + cnn_backward_reductions(batch)
    return max(rounding_bound(path), _reduced(device, precision, "grads"))


def cnn_grad_path_sqrt(batch: int) -> float:
    """sum(sqrt(n)) over the longest path's reductions: cnn_grad_tolerance's float32 figure over LAMBDA * u."""
    return sum(math.sqrt(n) for n in cnn_forward_reductions(batch) + cnn_backward_reductions(batch))


def gradient_scale(batch: int, n: int, abs_sum: float, rss: float, ref: float) -> float:
    """The scale a gradient's error is judged against: max |reference| where nothing cancels, more where the
    gradient's last reduction cancels (cnn_grad_tolerance times this scale is its error bound).

    A parameter's gradient is, last of all, a sum of `n` terms t (bn1.gamma sums 50,176 products). Its error
    has two parts. The last reduction's own rounding, in Higham & Mary's model, is at most LAMBDA * u * sqrt(n)
    * sum|t|: relative to sum|t| (`abs_sum`), not to the result, which cancellation may make 10^4 times smaller.
    The terms' errors from the rest of the path (LAMBDA * u * (S - sqrt(n)) of their scale, S = the path's sum
    of sqrt(n)) are independent per term and add like a random walk: relative to sqrt(sum t^2) (`rss`), or to
    max |reference| where that is larger. Returned: the bound's scale, S * scale = sqrt(n) * abs_sum +
    (S - sqrt(n)) * max(rss, ref), so scale >= ref, and scale == ref (the earlier model) for one term. The
    figures are maxima over the parameter's elements. Independent of any machine: the float64 oracle's terms.
    """
    s, root = cnn_grad_path_sqrt(batch), math.sqrt(n)
    return (root * abs_sum + max(s - root, 0.0) * max(rss, ref)) / s


def _reduced(device: str, precision: str, what: str) -> float:
    return 0.0 if tolerance(device, precision) <= 1e-4 else CNN_TOLERANCES_REDUCED[what]


# CNN parity tolerances, float32 (CPU, or 'highest' anywhere). Forward: max error relative to max
# |reference| per block. (Gradients: cnn_grad_tolerance above.) Trajectory: the largest per-step loss
# difference relative to the largest loss, and the relative L2 distance of all parameters after the
# steps (Adam's first steps amplify float32 rounding in parameters whose gradients are near zero, so
# per-element figures would mislead). The trajectory's figures are margins over measurement, not derived (no
# bound on many Adam steps follows from the arithmetic): docs/numerics.md, "Every tolerance, justified".
# Accuracy: absolute band between the frameworks' test accuracies after training with dropout.
CNN_TOLERANCES = {"forward": 1e-4, "trajectory_loss": 5e-3, "trajectory_params": 2e-2, "accuracy_band": 0.05}
# TF32 (GPU) and bfloat16 passes (TPU) at 'default' precision: looser, as for the conv.
CNN_TOLERANCES_REDUCED = {
    "forward": 3e-2,
    "grads": 5e-2,
    "trajectory_loss": 5e-2,
    "trajectory_params": 1e-1,
    "accuracy_band": 0.05,
}


def cnn_tolerances(device: str, precision: str, dtype: str = "float32") -> dict[str, float]:
    """CNN parity thresholds for this device and precision; dtype 'bfloat16': the mixed-precision ('+bf16') runs'."""
    if dtype == "bfloat16":
        return CNN_TOLERANCES_BF16
    return CNN_TOLERANCES if tolerance(device, precision) <= 1e-4 else CNN_TOLERANCES_REDUCED


# Mixed-precision training ('+bf16': bfloat16 compute, float32 parameters, accumulation and Adam). bfloat16 keeps
# 8 significant bits: one rounding moves a value by at most u = 2^-8 (3.9e-3) of itself. Products accumulate in
# float32 (a bfloat16 conv is one rounding of its output off float64: docs/numerics.md), so the error is not the
# reductions' (as in float32) but the roundings to bfloat16 between layers,
# BF16_FORWARD_ROUNDINGS of them from the images to the loss: the images; per conv block its BatchNorm output,
# kernel, conv output, bias sum and ELU output (5 x 3); dense1's kernel, product, bias sum and ELU (4); dense2's
# kernel, product and bias sum (3). Independent roundings add like a random walk: LAMBDA * u * sqrt(R) for one
# run against exact arithmetic, sqrt(2 R) for two runs rounding differently, 8e-2 of the loss: the trajectory's
# loss tolerance. The parameters and moving statistics sum the steps' differences: twice that (the measured
# figures are in docs/numerics.md). The accuracy band is float32's: after the notebook's 1,000 steps, the test
# accuracy's spread over seeds and frameworks, not rounding, decides it.
BF16_FORWARD_ROUNDINGS = 1 + 5 * len(CNN_CONVS) + 4 + 3


def bf16_loss_tolerance() -> float:
    """LAMBDA * u * sqrt(2 R): two mixed-precision runs' loss, relative to its scale (7.9e-2)."""
    return ROUNDING_LAMBDA * BF16_UNIT_ROUNDOFF * math.sqrt(2 * BF16_FORWARD_ROUNDINGS)


CNN_TOLERANCES_BF16 = {
    "trajectory_loss": bf16_loss_tolerance(),
    "trajectory_params": 2 * bf16_loss_tolerance(),
    "accuracy_band": 0.05,
}
