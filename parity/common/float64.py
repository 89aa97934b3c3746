"""Float64 NumPy references: the judge that decides which framework is off when they disagree (the conv and the
error figures; the CNN's oracle is parity.workloads.cnn.oracle)."""

from __future__ import annotations

import math

import numpy as np

from parity.common.padding import same_pads


def conv2d(images: np.ndarray, kernels: np.ndarray, stride: int = 2, padding: str = "SAME") -> np.ndarray:
    """NHWC x HWIO convolution in float64 by im2col + matmul (in chunks: patches()), TF's SAME/VALID conventions.

    Args:
        images: (N, H, W, Cin) array.
        kernels: (Kh, Kw, Cin, Cout) array.
        stride: the same stride along height and width.
        padding: "SAME" or "VALID".
    Returns:
        (N, Ho, Wo, Cout) float64 array.
    """
    x = np.asarray(images, dtype=np.float64)
    w = np.asarray(kernels, dtype=np.float64)
    kh, kw, cin, cout = w.shape
    if x.shape[-1] != cin:
        raise ValueError(f"images have {x.shape[-1]} channels, kernels expect {cin}")
    if padding == "SAME":
        (pt, pb), (pl, pr) = same_pads(x.shape[1], kh, stride), same_pads(x.shape[2], kw, stride)
        x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    elif padding != "VALID":
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    out = [c @ w.reshape(kh * kw * cin, cout) for _, c in patches(x, kh, kw, stride)]
    shape = (x.shape[0], (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1, cout)
    return np.concatenate(out).reshape(shape) if out else np.zeros(shape)


PATCH_BYTES = 64 << 20  # the most one chunk of patches holds


def patches(x: np.ndarray, kh: int, kw: int, stride: int = 1):
    """im2col of padded NHWC images, a few images at a time: yields (the images' slice, their patches as rows of
    kh * kw * Cin values, (kh, kw, Cin) order). Chunks bound the patch array (kh * kw times the input: 640 MB for
    the CNN's input gradients at batch 64) and keep each matrix product large (many small ones stall a
    multi-threaded BLAS when other processes hold the cores; docs/workloads.md, "The float64 oracle's time")."""
    n, h, w, cin = x.shape
    ho, wo = (h - kh) // stride + 1, (w - kw) // stride + 1
    step = max(1, PATCH_BYTES // max(1, ho * wo * kh * kw * cin * 8))
    for s in range(0, n, step):
        win = np.lib.stride_tricks.sliding_window_view(x[s : s + step], (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
        yield slice(s, s + step), win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * cin)


def errors(got: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Max abs error and max abs error relative to max |ref| (shapes must match); infinite where `got` holds a
    value that is not finite. Every timed call's output is checked with it (a CPU conv's two oracle rows are 8.4
    million values): one float64 copy of `got`, worked in place, six passes where the whole-array expression made
    five arrays in eight (zen4: 25 ms instead of 50-80 for those rows), the same figures to the bit."""
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"shape {got.shape} does not match reference shape {ref.shape}")
    if not got.size:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    diff = got.astype(np.float64)  # a copy, whatever got's type
    np.subtract(diff, ref, out=diff)
    err = float(np.abs(diff, out=diff).max())
    if not math.isfinite(err) and not np.isfinite(got.astype(np.float64)).all():  # a finite one: every got is
        return {"max_abs_err": float("inf"), "max_rel_err": float("inf")}
    scale = max(float(ref.max()), -float(ref.min()))  # max |ref|, without an array of |ref|
    return {"max_abs_err": err, "max_rel_err": err / scale if scale > 0 else err}
