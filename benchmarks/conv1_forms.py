"""The CNN's first convolution (one input channel: 256 x 28 x 28 x 1 images, 64 kernels of 5 x 5, SAME) in JAX
three ways: XLA's convolution, im2col patches (`conv_general_dilated_patches`) times the 25 x 64 kernel, and the
25 shifted images stacked times the kernel; the forward pass (median of 30 jitted calls), the forward and backward
pass (median of 15), and each form's largest difference from the convolution over its largest value.

    python benchmarks/conv1_forms.py [bf16]
    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce python benchmarks/conv1_forms.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

DN = ("NHWC", "HWIO", "NHWC")


def conv(x, k):
    return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=DN)


def patches(x, k):
    p = jax.lax.conv_general_dilated_patches(x, (5, 5), (1, 1), "SAME", dimension_numbers=DN)
    return p @ k.reshape(25, 64)  # with one input channel the patches' features are in (kh, kw) order


def shifts(x, k):
    xp = jnp.pad(x[..., 0], ((0, 0), (2, 2), (2, 2)))
    return jnp.stack([xp[:, i : i + 28, j : j + 28] for i in range(5) for j in range(5)], -1) @ k.reshape(25, 64)


def _median_ms(f, *args, n: int) -> float:
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", nargs="?", choices=("bf16",), help="bf16: bfloat16 images and kernels (default: float32)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    dt = jnp.bfloat16 if args.format == "bf16" else jnp.float32
    x = jnp.asarray(rng.standard_normal((256, 28, 28, 1)), dt)
    k = jnp.asarray(rng.standard_normal((5, 5, 1, 64)) * 0.1, dt)
    ref = np.asarray(conv(x, k), np.float64)
    for name, f in (("conv", conv), ("patches", patches), ("shifts", shifts)):
        fwd = jax.jit(f)
        both = jax.jit(jax.grad(lambda x, k, f=f: jnp.sum(f(x, k).astype(jnp.float32) ** 2), argnums=(0, 1)))
        err = np.max(np.abs(np.asarray(fwd(x, k), np.float64) - ref)) / np.max(np.abs(ref))
        print(
            f"{name}: forward {_median_ms(fwd, x, k, n=30):.2f} ms, forward and backward "
            f"{_median_ms(both, x, k, n=15):.2f} ms, difference {err:.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
