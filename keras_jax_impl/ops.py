"""One two-operand operation (the conv, the matmul) as a Keras user calls it on the JAX backend: keras.ops,
eagerly, on one device or on inputs laid out by keras.distribution.DataParallel (each eager op then runs as one SPMD
program over the devices). The placing and reading both operations share."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import keras
import numpy as np

from jax_impl.devices import lowered_flops, placement
from jax_impl.ops import rows
from keras_jax_impl.devices import distribution
from parity.api import Prepared, check_divisible
from parity.api.variants import Variant


def prepare_op(op: Callable, v: Variant, x: np.ndarray, w: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """`op(x, w)` (keras.ops) with x's leading axis split across `devices` and w on every one, as the variant's
    options say (keras_jax_impl.catalog.OpOptions).

    Raises:
        ValueError: a leading axis that does not divide by len(devices).
    """
    check_divisible(x.shape[0], len(devices))
    dtype = jnp.bfloat16 if v.options.bfloat16 else x.dtype
    if v.options.parallel == "ops":
        a, b = (jax.device_put(m.astype(dtype), devices[0]) for m in (x, w))
    else:
        dp = distribution(devices)
        a = keras.distribution.distribute_tensor(x.astype(dtype), dp.get_data_layout(x.shape))
        b = keras.distribution.distribute_tensor(
            w.astype(dtype), keras.distribution.TensorLayout([None] * w.ndim, dp.device_mesh)
        )  # replicated
    # the FLOP count of the same op jitted (the eager op is one XLA program of it): on sharded inputs the lowered
    # program is the global one, before XLA partitions it, so its count is every device's already; lowered, not
    # compiled (no program text: Keras's eager op ran its own, and reading this one would compile it again)
    return Prepared(
        lambda: op(a, b),
        lambda o: tuple(o.shape),
        rows,
        placement,
        lambda: lowered_flops(jax.jit(op), a, b, text=False),
    )
