"""The article's conv op in Keras 3 on JAX (keras.ops.conv), on one device and under DataParallel's layout."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import keras
import numpy as np

from keras_jax_impl.catalog import op_variants
from keras_jax_impl.catalog import variant as variant_record
from keras_jax_impl.ops import prepare_op
from parity.api import Prepared
from parity.api.inputs import check_conv, check_operands


def _conv(x, w, stride: int, padding: str):
    # keras.ops.conv takes Keras's lower-case padding names; 'same' is TF's SAME (XLA's, as lax's)
    return keras.ops.conv(x, w, strides=stride, padding=padding.lower(), data_format="channels_last")


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> jax.Array:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns a jax.Array."""
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    return _conv(images, kernels, stride, padding)


WORKLOAD = "conv"  # an adapter (parity.api.adapters): an operation's
VARIANTS = op_variants(WORKLOAD)


def prepare(
    variant: str,
    images: np.ndarray,
    kernels: np.ndarray,
    devices: Sequence[jax.Device],
    stride: int = 2,
    padding: str = "SAME",
) -> Prepared:
    """Place the inputs on `devices` (batch split across them) and return the callable (the variant's options:
    keras_jax_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or a batch that does not divide by len(devices); operands that are not NumPy
            arrays of one real floating dtype, or shapes no conv computes (parity.api.inputs).
    """
    check_operands("conv", images=images, kernels=kernels)
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    v = variant_record("conv", variant, len(devices))
    return prepare_op(partial(_conv, stride=stride, padding=padding), v, images, kernels, devices)
