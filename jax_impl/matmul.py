"""A large matrix product in JAX: the framework's ceiling on the machine, on one device and sharded along rows."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax_impl.catalog import op_variants
from jax_impl.catalog import variant as variant_record
from jax_impl.ops import prepare_op
from parity.api import Prepared
from parity.api.inputs import check_matmul, check_operands

WORKLOAD = "matmul"  # an adapter (parity.api.adapters): an operation's
VARIANTS = op_variants(WORKLOAD)


def prepare(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every one) and return the callable
    (the variant's options: jax_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices); operands that are not NumPy arrays
            of one real floating dtype, or matrices that do not multiply (parity.api.inputs).
    """
    check_operands("matmul", a=a, b=b)
    check_matmul(a, b)
    return prepare_op(jnp.matmul, variant_record("matmul", variant, len(devices)), a, b, devices)
