"""A large matrix product in JAX: the framework's ceiling on the machine, on one device and sharded along rows."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax_impl.catalog import variant as variant_record
from jax_impl.ops import prepare_op
from parity.api import Prepared


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every one) and return the callable
    (the variant's options: jax_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    return prepare_op(jnp.matmul, variant_record("matmul", variant, len(devices)), a, b, devices)
