"""The three convolutions of one conv layer's training step (float32, or --dtype bfloat16), timed apart: forward,
the gradient for the kernel (weight gradient; for JAX with --chunks also summed over chunks of the batch, as the
'+wgrad' variants compute it) and the gradient for the input, at one of the CNN's conv layers' shapes (--layer; conv2:
256 x 14 x 14 x 64 in, 5 x 5 x 64 x 128 SAME, stride 1), in JAX (jax.vjp of lax.conv_general_dilated, as Flax's
Conv differentiates) or TensorFlow (Conv2D, Conv2DBackpropFilter, Conv2DBackpropInput: what Keras's Conv2D runs).
Prints one JSON line: the median of --calls calls of each, synchronised, after 3 warm-up calls, and for JAX how
many oneDNN custom calls each compiled program holds. The environment is the caller's (a JAX setting's XLA_FLAGS
and GLIBC_TUNABLES):

    XLA_FLAGS=... GLIBC_TUNABLES=... python benchmarks/conv_parts.py --framework jax --layer conv2 \\
        [--chunks 16 32] >> OUT.jsonl
    python benchmarks/conv_parts.py --framework tf --layer conv2 >> OUT.jsonl

(the commands behind the shipped figures: docs/results/layers/README.md)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.helpers.timing import call_times  # noqa: E402
from parity.api.cnn import CNN_ARCHITECTURE  # noqa: E402

BATCH = 256  # the CPU schedule's global batch


def _median_ms(call, calls: int) -> float:
    return round(1e3 * float(np.median(call_times(call, calls, warmup=3))), 1)


def _jax(x, k, g, calls: int, chunks: list[int], dtype: str) -> dict:
    import jax

    from jax_impl.conv_grads import conv, conv_chunked_kernel_grad

    parts = {
        "forward": (lambda x, k, g: conv(x, k)),
        "weight_grad": (lambda x, k, g: jax.vjp(lambda kk: conv(x, kk), k)[1](g)[0]),
        "input_grad": (lambda x, k, g: jax.vjp(lambda xx: conv(xx, k), x)[1](g)[0]),
    }
    for c in chunks:  # the '+wgrad' variants' kernel gradient: JAX's own summed over chunks of c images
        parts[f"weight_grad_chunks_of_{c}"] = lambda x, k, g, c=c: jax.vjp(
            lambda kk: conv_chunked_kernel_grad(x, kk, c), k
        )[1](g)[0]
    args = [jax.numpy.asarray(a, dtype) for a in (x, k, g)]
    out = {}
    for name, fn in parts.items():
        f = jax.jit(fn)
        onednn = f.lower(*args).compile().as_text().count("__onednn$")
        out[name] = {"ms": _median_ms(lambda f=f: f(*args).block_until_ready(), calls), "onednn_calls": onednn}
    return out


def _tf(x, k, g, calls: int, chunks: list[int], dtype: str) -> dict:  # (chunks: JAX only)
    import tensorflow as tf

    x, k, g = (tf.constant(a, dtype=dtype) for a in (x, k, g))
    one = [1, 1, 1, 1]
    parts = {
        "forward": tf.function(lambda: tf.nn.conv2d(x, k, 1, "SAME")),
        "weight_grad": tf.function(
            lambda: tf.raw_ops.Conv2DBackpropFilter(
                input=x, filter_sizes=list(k.shape), out_backprop=g, strides=one, padding="SAME"
            )
        ),
        "input_grad": tf.function(
            lambda: tf.raw_ops.Conv2DBackpropInput(
                input_sizes=list(x.shape), filter=k, out_backprop=g, strides=one, padding="SAME"
            )
        ),
    }
    return {name: {"ms": _median_ms(lambda f=f: f().numpy(), calls)} for name, f in parts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=("jax", "tf"), required=True)
    p.add_argument("--layer", choices=("conv1", "conv2", "conv3"), default="conv2")
    p.add_argument("--calls", type=int, default=15)
    p.add_argument(
        "--chunks", type=int, nargs="*", default=[], help="JAX: also the kernel gradient summed over chunks of N images"
    )
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="the operands' number format")
    args = p.parse_args()
    b = next(c for c in CNN_ARCHITECTURE.convs if c.names[1] == args.layer)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, b.size, b.size, b.channels), np.float32)
    k = (0.05 * rng.standard_normal((b.kernel, b.kernel, b.channels, b.filters))).astype(np.float32)
    g = rng.standard_normal((BATCH, b.size, b.size, b.filters), np.float32)
    parts = (_jax if args.framework == "jax" else _tf)(x, k, g, args.calls, args.chunks, args.dtype)
    env = {v: os.environ[v] for v in ("XLA_FLAGS", "GLIBC_TUNABLES") if v in os.environ}
    out = {"framework": args.framework, "layer": args.layer, "dtype": args.dtype, "env": env, "calls": args.calls}
    out["parts"] = parts
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
