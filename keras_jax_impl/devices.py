"""Devices for Keras on JAX: JAX's own (jax_impl.devices: simulated CPU devices, presence checks, precision,
placement, memory), since Keras's JAX backend runs on JAX's runtime; and Keras's DataParallel distribution over
them."""

from __future__ import annotations

import keras

from jax_impl.devices import (  # noqa: F401 (re-exported: the same runtime)
    block,
    check_compiler,
    describe_devices,
    device_kind,
    list_devices,
    lowered_flops,
    memory_stats,
    placement,
    process_info,
    reset_memory_peak,
    set_precision,
    setup_devices,
    slowest,
)

_distributions: dict[tuple, keras.distribution.DataParallel] = {}


def distribution(devices) -> keras.distribution.DataParallel:
    """keras.distribution.DataParallel over `devices` (JAX devices; cached): a 1-D mesh named 'batch', every
    variable replicated, each input batch split along it."""
    key = tuple(devices)
    if key not in _distributions:
        names = [f"{d.platform}:{d.id}" for d in devices]
        _distributions[key] = keras.distribution.DataParallel(devices=names)
    return _distributions[key]
