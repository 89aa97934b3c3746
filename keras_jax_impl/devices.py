"""Devices for Keras on JAX: Keras's DataParallel distribution over JAX's devices. The devices themselves (simulated
CPU devices, presence checks, precision, placement, memory) are JAX's own, jax_impl.devices, which the package's
surface and its modules import, since Keras's JAX backend runs on JAX's runtime."""

from __future__ import annotations

import keras

_distributions: dict[tuple, keras.distribution.DataParallel] = {}


def distribution(devices) -> keras.distribution.DataParallel:
    """keras.distribution.DataParallel over `devices` (JAX devices; cached): a 1-D mesh named 'batch', every
    variable replicated, each input batch split along it."""
    key = tuple(devices)
    if key not in _distributions:
        names = [f"{d.platform}:{d.id}" for d in devices]
        _distributions[key] = keras.distribution.DataParallel(devices=names)
    return _distributions[key]
