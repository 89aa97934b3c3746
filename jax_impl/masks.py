"""Dropout's keep masks as straight-line code: the same booleans as jax.random.bernoulli's, bit for bit ('+masks').

jax.random.bernoulli(key, p, shape) is uniform(key, shape) < p, its uniform the top 23 of 32 threefry-2x32 bits
(the two outputs XORed) of each element's flat index. On CPU, JAX lowers threefry-2x32 as a rolled loop of five
iterations, each a pass over the whole mask, so XLA:CPU fuses nothing across them (docs/tuning.md, "JAX variants",
`+masks`; docs/results/layers/README.md, "The dropout masks"). Here the same 20 rounds are
written out, as JAX lowers them on other backends, and the mask is held as a value of its own (an optimization barrier):
without it XLA:CPU fuses the 20 rounds into the backward pass too, where the pooling gradient recomputes them for each
element of the pooling input, and the step was slower (docs/tuning.md, "JAX variants", `+masks`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # threefry-2x32's, as jax._src.random.threefry2x32's
_PARITY = np.uint32(0x1BD11BDA)  # the key schedule's constant (Random123's SKEIN_KS_PARITY32)


def _rotl(x: jax.Array, d: int) -> jax.Array:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), elementwise over the counters x1, x2 under the key (k1,
    k2): JAX's threefry2x32 primitive, as straight-line code."""
    ks = (k1, k2, k1 ^ k2 ^ _PARITY)
    x = [x1 + ks[0], x2 + ks[1]]
    for i in range(5):  # five groups of four rounds, a key injection after each
        for r in _ROTATIONS[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = x[0] ^ _rotl(x[1], r)
        x = [x[0] + ks[(i + 1) % 3], x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)]
    return x[0], x[1]


def keep_mask(key: jax.Array, p: float, shape: tuple[int, ...]) -> jax.Array:
    """jax.random.bernoulli(key, p, shape), bit for bit, for a threefry-2x32 key (JAX's default) and a mask of
    under 2**32 elements, held apart from its consumers, with jax_enable_x64 off (JAX's default: with it on,
    bernoulli's p is a float64 and its uniform takes 64 bits). Raises ValueError otherwise."""
    if jax.config.jax_enable_x64:
        raise ValueError("'+masks' reproduces jax.random.bernoulli's float32 uniforms: turn jax_enable_x64 off")
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or str(jax.random.key_impl(key)) != "threefry2x32":
        raise ValueError(f"'+masks' reproduces threefry2x32 keys only (JAX's default PRNG); got {key.dtype}")
    size = int(np.prod(shape))
    if size >= 2**32:
        raise ValueError(f"'+masks' takes masks of under 2**32 elements; got {shape}")
    k = jax.random.key_data(key)
    # the counters: each element's flat index as a 64-bit number, high and low words (the high word is 0 here)
    index = jax.lax.iota(jnp.uint32, size).reshape(shape)
    hi, lo = threefry2x32(k[0], k[1], jnp.zeros_like(index), index)
    # uniform's float m * 2**-23 (m the top 23 bits) < float32(p)  <=>  m < float32(p) * 2**23, an exact product
    threshold = np.ceil(np.float64(np.float32(p)) * 2**23)
    return jax.lax.optimization_barrier(((hi ^ lo) >> np.uint32(9)) < np.uint32(threshold))
