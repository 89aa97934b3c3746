"""A large matrix product in JAX: the framework's ceiling on the machine, on one device and sharded along rows."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax_impl.ops import prepare_op
from parity.api import Prepared


def matmul_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the matmul over `replicas` devices."""
    return ("jit", "jit+bf16") if replicas == 1 else ("shard_map",)


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every one) and return the callable
    (variants: ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    return prepare_op(jnp.matmul, "matmul", matmul_variants(len(devices)), variant, a, b, devices)
