"""TensorFlow / Keras implementations of the article's workloads (mirror image of `jax_impl`)."""

import os
import sys

# Before anything of this package loads TensorFlow (which loads Keras): a user's KERAS_BACKEND=jax must not change
# what tf_impl runs, and a Keras already loaded on another backend cannot be switched.
if "keras" in sys.modules and os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
    raise ImportError(
        f"tf_impl needs Keras on the TensorFlow backend, but keras is already loaded with "
        f"KERAS_BACKEND={os.environ['KERAS_BACKEND']}; import tf_impl first or unset KERAS_BACKEND"
    )
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: its C++ log noise

from parity.api import SURFACE  # noqa: E402
from tf_impl.adapters import adapter  # noqa: E402
from tf_impl.catalog import SETTINGS, settings, table, variants  # noqa: E402
from tf_impl.devices import (
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
from tf_impl.profile import trace, trace_ops  # noqa: E402

VARIANTS = table()  # every variant, as its adapters declare them (all importable by now)

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
