"""Max pooling's gradient alone, in JAX: JAX's own (Flax's `nnx.max_pool`, differentiated into select_and_scatter,
which XLA:CPU expands into a variadic reduce-window and a scatter) against `jax_impl.conv_grads.pool_elementwise` (the
'+pool' variants), at the CNN's three pooling shapes for a batch of 256: median of 10 jitted calls each, and whether
the two gradients are the same array.

    python benchmarks/pool_gradient.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for benchmarks.helpers

from benchmarks.helpers.timing import call_times  # noqa: E402
from jax_impl.conv_grads import pool_elementwise  # noqa: E402


def own(h: jax.Array, size: int = 2) -> jax.Array:
    """The CNN's max pooling as Flax computes it out of the box: `size` x `size` windows, stride `size`, VALID."""
    return nnx.max_pool(h, (size, size), strides=(size, size), padding="VALID")


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rng = np.random.default_rng(0)
    for shape in [(256, 28, 28, 64), (256, 14, 14, 128), (256, 7, 7, 256)]:
        x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
        g = jnp.asarray(rng.standard_normal((shape[0], shape[1] // 2, shape[2] // 2, shape[3]), dtype=np.float32))
        grads = {}
        for name, pool in (("own", own), ("elementwise", pool_elementwise)):
            f = jax.jit(lambda x, g, pool=pool: jax.vjp(pool, x)[1](g)[0])
            grads[name] = f(x, g).block_until_ready()
            # the call above was the first
            times = call_times(lambda f=f, x=x, g=g: f(x, g).block_until_ready(), 10, warmup=0)
            print(f"{shape} {name}: {1e3 * np.median(times):.1f} ms")
        print(f"  the same array: {bool(jnp.array_equal(grads['own'], grads['elementwise']))}")


if __name__ == "__main__":
    main()
