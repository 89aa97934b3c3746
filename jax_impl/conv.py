"""The article's conv op in JAX, on one device and data-parallel (pmap, shard_map)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jax_impl.catalog import op_variants
from jax_impl.catalog import variant as variant_record
from jax_impl.devices import lowered_flops, placement, put_global
from jax_impl.ops import prepare_op, rows
from parity.api import Prepared, check_divisible
from parity.api.inputs import check_conv, check_operands


def _conv(x, w, stride: int, padding: str):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding=padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


_conv_jit = jax.jit(_conv, static_argnums=(2, 3))


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> jax.Array:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns a jax.Array."""
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    return _conv_jit(images, kernels, stride, padding)


WORKLOAD = "conv"  # an adapter (parity.api.adapters): an operation's
VARIANTS = op_variants(WORKLOAD, pmap=True, layout=True)


def prepare(
    variant: str,
    images: np.ndarray,
    kernels: np.ndarray,
    devices: Sequence[jax.Device],
    stride: int = 2,
    padding: str = "SAME",
) -> Prepared:
    """Place the inputs on `devices` (batch split across them) and return the callable (the variant's options:
    jax_impl.catalog; 'jit' and 'shard_map': ops.prepare_op; 'pmap': pmap over a leading device axis).

    Raises:
        ValueError: unknown variant, or a batch that does not divide by len(devices); operands that are not NumPy
            arrays of one real floating dtype, or shapes no conv computes (parity.api.inputs).
    """
    check_operands("conv", images=images, kernels=kernels)
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    n = len(devices)
    v = variant_record("conv", variant, n)
    if v.options.parallel != "pmap":  # pmap: this module's own; the others: ops'
        return prepare_op(partial(_conv, stride=stride, padding=padding), v, images, kernels, devices)
    per = check_divisible(images.shape[0], n)
    # pmap maps over a leading device axis: (n, per, H, W, C); JAX implements it with shard_map. In a
    # multi-process run it computes this process's devices' part and returns only that.
    mesh = jax.make_mesh((n,), ("batch",), devices=devices)
    w = put_global(kernels, NamedSharding(mesh, P()))  # each process places only its own devices' blocks
    x = put_global(images.reshape(n, per, *images.shape[1:]), NamedSharding(mesh, P("batch")))
    f = jax.pmap(partial(_conv, stride=stride, padding=padding), axis_name="batch", in_axes=(0, None), devices=devices)
    local = sum(d.process_index == jax.process_index() for d in devices)
    return Prepared(
        lambda: f(x, w),
        lambda o: (o.shape[0] * o.shape[1] * n // local, *o.shape[2:]),
        lambda o, idx: rows(o, idx, per, mesh),
        placement,
        lambda: lowered_flops(f, x, w, devices=n),  # the cost of one device's program
    )
