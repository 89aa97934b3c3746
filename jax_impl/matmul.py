"""A large matrix product in JAX: the framework's ceiling on the machine, on one device and sharded along rows."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jax_impl.conv import _rows
from jax_impl.devices import BFLOAT16_VARIANTS, lowered_flops, placement, put_global
from parity.api import Prepared, check_divisible


def _matmul(a, b):
    return jnp.matmul(a, b)


def matmul_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the matmul over `replicas` devices."""
    return ("jit", "jit+bf16") if replicas == 1 else ("shard_map",)


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every one) and return the callable.

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    n = len(devices)
    check_divisible(a.shape[0], n)
    if variant not in matmul_variants(n):
        raise ValueError(f"unknown JAX matmul variant {variant!r} for {n} replicas; have {matmul_variants(n)}")
    if n == 1:
        # +bf16: bfloat16 operands (cast once, beforehand) and product, as Flax's dtype=bfloat16
        dtype = jnp.bfloat16 if variant in BFLOAT16_VARIANTS else a.dtype
        x, w = (jax.device_put(m.astype(dtype), devices[0]) for m in (a, b))
        f = jax.jit(_matmul)
        return Prepared(lambda: f(x, w), lambda o: tuple(o.shape), _rows, placement, lambda: lowered_flops(f, x, w))
    mesh = jax.make_mesh((n,), ("batch",), devices=devices)
    x = put_global(a, NamedSharding(mesh, P("batch")))  # each process places only its own devices' rows
    w = put_global(b, NamedSharding(mesh, P()))
    f = jax.jit(jax.shard_map(_matmul, mesh=mesh, in_specs=(P("batch"), P()), out_specs=P("batch")))
    return Prepared(lambda: f(x, w), lambda o: tuple(o.shape), _rows, placement,
                    lambda: lowered_flops(f, x, w, devices=n))  # fmt: skip
