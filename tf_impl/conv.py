"""The article's conv op in TensorFlow, on one device and data-parallel (tf.distribute)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from parity.api import Prepared
from parity.api.inputs import check_conv, check_operands
from tf_impl.catalog import op_variants
from tf_impl.catalog import variant as variant_record
from tf_impl.ops import prepare_op


def _conv(x, w, stride: int, padding: str):
    return tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding)


_conv_fn = tf.function(_conv)


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> tf.Tensor:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns a tf.Tensor."""
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    return _conv_fn(tf.convert_to_tensor(images), tf.convert_to_tensor(kernels), stride, padding)


WORKLOAD = "conv"  # an adapter (parity.api.adapters): an operation's
VARIANTS = op_variants(WORKLOAD)


def prepare(
    variant: str, images: np.ndarray, kernels: np.ndarray, devices: list[str], stride: int = 2, padding: str = "SAME"
) -> Prepared:
    """Place the inputs on `devices` (batch split across them) and return the callable (the variant's options:
    tf_impl.catalog; ops.prepare_op).

    Raises:
        ValueError: unknown variant, or a batch that does not divide by len(devices); operands that are not NumPy
            arrays of one real floating dtype, or shapes no conv computes (parity.api.inputs).
    """
    check_operands("conv", images=images, kernels=kernels)
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    v = variant_record("conv", variant, len(devices))
    return prepare_op(lambda a, b: _conv(a, b, stride, padding), "Conv2D", v, images, kernels, devices)
