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


# errors()' pass: this many float64 values at a time, in one scratch buffer of 512 KiB reused chunk after chunk;
# a float64 copy of a whole output (67 MB for a CPU conv's two oracle rows) is fresh pages to fault in at every call
CHUNK = 1 << 16


def errors(got: np.ndarray, ref: np.ndarray, chunk: int = CHUNK) -> dict[str, float]:
    """Max abs error and max abs error relative to max |ref| (shapes must match); infinite where `got` holds a
    value that is not finite. Every timed call's output is checked with it (a CPU conv's two oracle rows are 8.4
    million values): `chunk` values at a time through one float64 scratch buffer, each chunk's maxima kept, the
    same figures to the bit as the whole-array expression (tests/test_verify.py)."""
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"shape {got.shape} does not match reference shape {ref.shape}")
    if not got.size:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    g, r = got.reshape(-1), ref.reshape(-1)
    buf = np.empty(min(chunk, g.size))
    n = -(-g.size // buf.size)
    top, high, low = np.empty(n), np.empty(n), np.empty(n)  # each chunk's max |got - ref|, max ref, min ref
    for k, s in enumerate(range(0, g.size, buf.size)):
        d, rc = buf[: min(buf.size, g.size - s)], r[s : s + buf.size]
        d[...] = g[s : s + buf.size]  # float64, exactly as astype makes it
        np.subtract(d, rc, out=d)
        top[k], high[k], low[k] = np.abs(d, out=d).max(), rc.max(), rc.min()
    err = float(top.max())  # a nan in any chunk is the max's, as over the whole array
    if not math.isfinite(err) and not np.isfinite(got).all():  # a finite one: every got is
        return {"max_abs_err": float("inf"), "max_rel_err": float("inf")}
    scale = max(float(high.max()), -float(low.min()))  # max |ref|, without an array of |ref|
    return {"max_abs_err": err, "max_rel_err": err / scale if scale > 0 else err}
