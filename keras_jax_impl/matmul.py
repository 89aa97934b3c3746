"""A large matrix product in Keras 3 on JAX (keras.ops.matmul): the ceiling, on one device and under DataParallel's
layout."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import keras
import numpy as np

from keras_jax_impl.catalog import variant as variant_record
from keras_jax_impl.ops import prepare_op
from parity.api import Prepared


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every one) and return the callable
    (the variant's options: keras_jax_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    return prepare_op(keras.ops.matmul, variant_record("matmul", variant, len(devices)), a, b, devices)
