"""The CNN's three convolutions alone at batch 256, bare and with their bias add and ELU (as the model computes
them), in plain JAX or TensorFlow (no implementation's code), one framework per process: what showed YNNPACK's
elementwise fusions taking each convolution and its bias add away from oneDNN (docs/tuning.md, "Tried and not kept").
Medians of 15 calls after 3; under JAX also whether conv2's compiled program is oneDNN's convolution.

    python benchmarks/conv_bias_layers.py tf
    XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=dot,reduce --xla_cpu_experimental_onednn_custom_call=true" \\
        GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python benchmarks/conv_bias_layers.py jax
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

SHAPES = {"conv1": (256, 28, 28, 1, 64), "conv2": (256, 14, 14, 64, 128), "conv3": (256, 7, 7, 128, 256)}


def median_ms(f, args, block) -> float:
    for _ in range(3):
        block(f(*args))
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        block(f(*args))
        times.append(time.perf_counter() - t0)
    return round(float(np.median(times)) * 1e3, 2)


def jax_layers(rng) -> dict:
    import jax
    from jax import lax

    def make(bias: bool):
        def f(a, b, c):
            y = lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return jax.nn.elu(y + c) if bias else y

        return jax.jit(f)

    out = {}
    for name, (n, h, w, ci, co) in SHAPES.items():
        x = jax.device_put(rng.standard_normal((n, h, w, ci), dtype=np.float32))
        k = jax.device_put(rng.standard_normal((5, 5, ci, co), dtype=np.float32) * 0.05)
        c = jax.device_put(np.zeros(co, np.float32))
        for bias in (False, True):
            f = make(bias)
            out[name + "+bias+elu" * bias] = median_ms(f, (x, k, c), jax.block_until_ready)
            if bias:
                text = f.lower(x, k, c).compile().as_text()
                out[name + "+bias+elu oneDNN convs"] = text.count('custom_call_target="__onednn$convolution"')
    return out


def _first(out):
    return out[0, 0, 0, 0].numpy()  # one element, after the call has finished (as tf_impl.block)


def tf_layers(rng) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    out = {}
    for name, (n, h, w, ci, co) in SHAPES.items():
        x = tf.constant(rng.standard_normal((n, h, w, ci), dtype=np.float32))
        k = tf.constant(rng.standard_normal((5, 5, ci, co), dtype=np.float32) * 0.05)
        c = tf.zeros((co,))
        bare = tf.function(lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"))
        fused = tf.function(lambda a, b, cc: tf.nn.elu(tf.nn.bias_add(tf.nn.conv2d(a, b, 1, "SAME"), cc)))
        out[name] = median_ms(bare, (x, k), _first)
        out[name + "+bias+elu"] = median_ms(fused, (x, k, c), _first)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("framework", nargs="?", choices=("jax", "tf"), default="jax", help="(default: jax)")
    fw = p.parse_args().framework
    rng = np.random.default_rng(0)
    out = jax_layers(rng) if fw == "jax" else tf_layers(rng)
    print(json.dumps({"framework": fw, "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "ms": out}))


if __name__ == "__main__":
    main()
