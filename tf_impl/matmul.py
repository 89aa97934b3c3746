"""A large matrix product in TensorFlow: the framework's ceiling on the machine, on one device and under a strategy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from parity.api import Prepared
from parity.api.inputs import check_matmul, check_operands
from tf_impl.catalog import op_variants
from tf_impl.catalog import variant as variant_record
from tf_impl.ops import prepare_op

WORKLOAD = "matmul"  # an adapter (parity.api.adapters): an operation's
VARIANTS = op_variants(WORKLOAD)


def prepare(variant: str, a: np.ndarray, b: np.ndarray, devices: list[str]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every replica) and return the callable
    (the variant's options: tf_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices); operands that are not NumPy arrays
            of one real floating dtype, or matrices that do not multiply (parity.api.inputs).
    """
    check_operands("matmul", a=a, b=b)
    check_matmul(a, b)
    v = variant_record("matmul", variant, len(devices))
    return prepare_op(tf.linalg.matmul, "MatMul", v, a, b, devices)
