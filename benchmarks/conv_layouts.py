"""Channels-last (NHWC) against channels-first (NCHW) for the full conv op, in plain JAX or TF (with and without XLA),
one framework per process.

    python benchmarks/conv_layouts.py jax      # XLA_FLAGS applies, e.g. the YNNPACK setting
    python benchmarks/conv_layouts.py tf

Inputs are transposed once, outside the timing; best of 3 synchronised calls after a first one.
A screen on a noisy machine, not a harness measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for benchmarks.helpers

from benchmarks.helpers.timing import call_times  # noqa: E402
from parity.workloads.conv import CONV_FULL  # noqa: E402


def best_of(f, n: int = 3) -> float:
    return min(call_times(f, n))


def jax_layouts(x, w, xc, wc) -> dict:
    import jax

    def conv(dims):
        return jax.jit(lambda a, b: jax.lax.conv_general_dilated(a, b, (2, 2), "SAME", dimension_numbers=dims))

    nhwc, nchw = conv(("NHWC", "HWIO", "NHWC")), conv(("NCHW", "OIHW", "NCHW"))
    a, b, ac, bc = (jax.device_put(v) for v in (x, w, xc, wc))
    got, ref = np.asarray(nchw(ac, bc)[-1]).transpose(1, 2, 0), np.asarray(nhwc(a, b)[-1])
    return {
        "flags": os.environ.get("XLA_FLAGS", ""),
        "nhwc_s": best_of(lambda: nhwc(a, b).block_until_ready()),
        "nchw_s": best_of(lambda: nchw(ac, bc).block_until_ready()),
        "nchw_vs_nhwc_max_rel": float(np.abs(got - ref).max() / np.abs(ref).max()),
    }


def tf_layouts(x, w, xc) -> dict:
    import tensorflow as tf

    a, b, ac = tf.constant(x), tf.constant(w), tf.constant(xc)
    out = {}
    for xla in (False, True):
        tag = "_xla" if xla else ""
        nhwc = tf.function(lambda p, q: tf.nn.conv2d(p, q, 2, "SAME"), jit_compile=xla)
        nchw = tf.function(lambda p, q: tf.nn.conv2d(p, q, 2, "SAME", data_format="NCHW"), jit_compile=xla)
        out[f"nhwc{tag}_s"] = best_of(lambda f=nhwc: f(a, b)[0, 0, 0].numpy())
        try:
            out[f"nchw{tag}_s"] = best_of(lambda f=nchw: f(ac, b)[0, 0, 0].numpy())
        except Exception as e:  # TF's own CPU kernels take NHWC only
            out[f"nchw{tag}_s"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][-110:]}"
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("framework", nargs="?", choices=("jax", "tf"), default="jax", help="(default: jax)")
    which = p.parse_args().framework
    x, w = CONV_FULL.inputs()
    xc, wc = np.ascontiguousarray(x.transpose(0, 3, 1, 2)), np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    res = jax_layouts(x, w, xc, wc) if which == "jax" else tf_layouts(x, w, xc)
    print(json.dumps({"framework": which, **res}))


if __name__ == "__main__":
    main()
