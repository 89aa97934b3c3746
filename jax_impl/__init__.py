"""JAX / Flax NNX implementations of the article's workloads (mirror image of `tf_impl`): one adapter per workload
(jax_impl.adapters.adapter), a trained model's holding its model functions and the one trainer (jax_impl.train)."""

from jax_impl.adapters import adapter
from jax_impl.catalog import SETTINGS, settings, table, variants
from jax_impl.devices import (
    block,
    check_compiler,
    describe_devices,
    device_kind,
    list_devices,
    memory_stats,
    placement,
    process_info,
    reset_memory_peak,
    set_precision,
    setup_devices,
    slowest,
)
from jax_impl.profile import trace, trace_ops
from parity.api import SURFACE

VARIANTS = table()  # every variant, as its adapters declare them (all importable by now)

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
