"""JAX / Flax NNX implementations of the article's workloads (mirror image of `tf_impl`)."""

from jax_impl.conv import conv_op, conv_variants, prepare_conv
from jax_impl.devices import (
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
