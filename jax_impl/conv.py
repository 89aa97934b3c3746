"""The article's conv op in JAX, on one device and data-parallel (pmap, shard_map)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jax_impl.devices import BFLOAT16_VARIANTS, gather_rows, lowered_flops, placement, put_global
from parity.api import Prepared, check_divisible


def _conv(x, w, stride: int, padding: str):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding=padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


_conv_jit = jax.jit(_conv, static_argnums=(2, 3))


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> jax.Array:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns a jax.Array."""
    return _conv_jit(images, kernels, stride, padding)


def _rows(out: jax.Array, idx: Sequence[int], per: int = 0, mesh=None) -> np.ndarray:
    """Global batch rows read from the device shards that hold them (no cross-device gather).

    per > 0 means pmap's layout, (devices, per, ...): global row i is out[i // per, i % per].
    In a multi-process run the rows are gathered from whichever process holds them (a collective:
    every process reads the same rows); pmap's per-process output is first seen as the global
    array over `mesh`.
    """
    if jax.process_count() > 1:
        if per and out.is_fully_addressable:
            out = multihost_utils.host_local_array_to_global_array(out, mesh, P("batch"))
        idx = np.asarray(idx)
        return gather_rows(out, (idx // per, idx % per) if per else (idx,))
    rows = []
    for i in idx:
        lead, rest = (i // per, (i % per,)) if per else (i, ())
        for shard in out.addressable_shards:
            start, stop, _ = shard.index[0].indices(out.shape[0])
            if start <= lead < stop:
                rows.append(np.asarray(shard.data[(lead - start, *rest)], np.float32))
                break
    return np.stack(rows)


def conv_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the conv over `replicas` devices."""
    return ("jit", "jit+bf16") if replicas == 1 else ("pmap", "shard_map")


def prepare_conv(
    variant: str,
    images: np.ndarray,
    kernels: np.ndarray,
    devices: Sequence[jax.Device],
    stride: int = 2,
    padding: str = "SAME",
) -> Prepared:
    """Place the inputs on `devices` (batch split across them) and return the callable.

    Raises:
        ValueError: unknown variant, or a batch that does not divide by len(devices).
    """
    n = len(devices)
    per = check_divisible(images.shape[0], n)
    conv = partial(_conv, stride=stride, padding=padding)
    if variant not in conv_variants(n):
        raise ValueError(f"unknown JAX conv variant {variant!r} for {n} replicas; have {conv_variants(n)}")
    if variant in ("jit", "jit+bf16"):
        # +bf16: bfloat16 images and kernels (cast once, beforehand), bfloat16 out, as Flax's dtype=bfloat16
        dtype = jnp.bfloat16 if variant in BFLOAT16_VARIANTS else images.dtype
        x, w = (jax.device_put(a.astype(dtype), devices[0]) for a in (images, kernels))
        f = jax.jit(conv)
        return Prepared(lambda: f(x, w), lambda o: tuple(o.shape), _rows, placement, lambda: lowered_flops(f, x, w))
    mesh = jax.make_mesh((n,), ("batch",), devices=devices)
    # Each process places only its own devices' blocks (all of them in a one-process run).
    w = put_global(kernels, NamedSharding(mesh, P()))
    if variant == "pmap":
        # pmap maps over a leading device axis: (n, per, H, W, C); JAX implements it with shard_map.
        # In a multi-process run it computes this process's devices' part and returns only that.
        x = put_global(images.reshape(n, per, *images.shape[1:]), NamedSharding(mesh, P("batch")))
        f = jax.pmap(conv, axis_name="batch", in_axes=(0, None), devices=devices)
        local = sum(d.process_index == jax.process_index() for d in devices)
        return Prepared(
            lambda: f(x, w),
            lambda o: (o.shape[0] * o.shape[1] * n // local, *o.shape[2:]),
            lambda o, idx: _rows(o, idx, per, mesh),
            placement,
            lambda: lowered_flops(f, x, w, devices=n),  # the cost of one device's program
        )
    x = put_global(images, NamedSharding(mesh, P("batch")))
    f = jax.jit(jax.shard_map(conv, mesh=mesh, in_specs=(P("batch"), P()), out_specs=P("batch")))
    return Prepared(lambda: f(x, w), lambda o: tuple(o.shape), _rows, placement,
                    lambda: lowered_flops(f, x, w, devices=n))  # fmt: skip
