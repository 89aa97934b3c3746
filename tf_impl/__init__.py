"""TensorFlow / Keras implementations of the article's workloads (mirror image of `jax_impl`)."""

from tf_impl.conv import conv_op, conv_variants, prepare_conv
from tf_impl.devices import (
    FRAMEWORK,
    block,
    describe_devices,
    device_kind,
    list_devices,
    placement,
    set_precision,
    setup_devices,
)

__all__ = [
    "FRAMEWORK",
    "block",
    "conv_op",
    "conv_variants",
    "describe_devices",
    "device_kind",
    "list_devices",
    "placement",
    "prepare_conv",
    "set_precision",
    "setup_devices",
]
