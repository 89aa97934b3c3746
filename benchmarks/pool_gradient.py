"""Max pooling's gradient alone, JAX's own (select_and_scatter, which XLA:CPU expands into a variadic reduce-window
and a scatter) against `jax_impl.cnn.pool_elementwise` (the '+pool' variants), at the CNN's three pooling shapes
for a batch of 256: median of 10 jitted calls each, and whether the two gradients are the same array.

    python benchmarks/pool_gradient.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jax_impl.cnn import _pool, pool_elementwise


def main() -> None:
    rng = np.random.default_rng(0)
    for shape in [(256, 28, 28, 64), (256, 14, 14, 128), (256, 7, 7, 256)]:
        x = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
        g = jnp.asarray(rng.standard_normal((shape[0], shape[1] // 2, shape[2] // 2, shape[3]), dtype=np.float32))
        grads = {}
        for name, pool in (("own", _pool), ("elementwise", pool_elementwise)):
            f = jax.jit(lambda x, g, pool=pool: jax.vjp(pool, x)[1](g)[0])
            grads[name] = f(x, g).block_until_ready()
            times = []
            for _ in range(10):
                t0 = time.perf_counter()
                f(x, g).block_until_ready()
                times.append(time.perf_counter() - t0)
            print(f"{shape} {name}: {1e3 * np.median(times):.1f} ms")
        print(f"  the same array: {bool(jnp.array_equal(grads['own'], grads['elementwise']))}")


if __name__ == "__main__":
    main()
