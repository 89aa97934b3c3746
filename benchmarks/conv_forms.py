"""The full-size conv (128 x 256 x 256 x 3 images, 256 kernels of 5 x 5 x 3, stride 2, SAME) in JAX three ways:
XLA's convolution, im2col patches (`conv_general_dilated_patches`) times the 75 x 256 kernel as one dot, and the
25 strided slices stacked on the channel axis times the kernel; median of 5 jitted calls after one, and each
form's largest difference from the convolution (first two images) over its largest value.

    python benchmarks/conv_forms.py
    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
        python benchmarks/conv_forms.py     # the `ynn+thp` worker's settings
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for benchmarks.helpers

from benchmarks.helpers.timing import call_times  # noqa: E402
from parity.workloads.conv import CONV_FULL  # noqa: E402

DN = ("NHWC", "HWIO", "NHWC")


def conv(x, k):
    return jax.lax.conv_general_dilated(x, k, (2, 2), "SAME", dimension_numbers=DN)


def patches(x, k):
    p = jax.lax.conv_general_dilated_patches(x, (5, 5), (2, 2), "SAME", dimension_numbers=DN)
    return p @ k.transpose(2, 0, 1, 3).reshape(75, 256)  # the patches' features come in (C, kh, kw) order


def shifts(x, k):
    xp = jnp.pad(x, ((0, 0), (1, 2), (1, 2), (0, 0)))  # TF's SAME for 256, 5, stride 2: one row before, two after
    cols = [xp[:, i : i + 255 : 2, j : j + 255 : 2, :] for i in range(5) for j in range(5)]
    return jnp.concatenate(cols, -1) @ k.reshape(75, 256)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    x, k = (jax.device_put(a) for a in CONV_FULL.inputs())
    ref = None
    for name, f in (("conv", conv), ("patches", patches), ("shifts", shifts)):
        f = jax.jit(f)
        out = f(x, k).block_until_ready()
        got = np.asarray(out[:2])
        ref = got if ref is None else ref
        diff = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        del out
        times = call_times(lambda f=f: f(x, k).block_until_ready(), 5, warmup=0)  # the call above was the first
        print(f"{name}: median {np.median(times) * 1e3:.0f} ms (min {min(times) * 1e3:.0f}), difference {diff:.1e}")


if __name__ == "__main__":
    main()
