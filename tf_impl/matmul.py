"""A large matrix product in TensorFlow: the framework's ceiling on the machine, on one device and under a strategy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from parity.api import Prepared
from tf_impl.ops import prepare_op


def matmul_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the matmul over `replicas` devices."""
    return ("function", "function+xla", "function+bf16") if replicas == 1 else ("strategy",)


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: list[str]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every replica) and return the callable
    (variants: ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    return prepare_op(tf.linalg.matmul, "MatMul", matmul_variants(len(devices)), variant, a, b, devices)
