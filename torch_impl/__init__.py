"""PyTorch implementations of the article's workloads (mirror image of `jax_impl` and `tf_impl`), on one device (a
trained model over several: torch_impl.ddp): one adapter per workload (torch_impl.adapters.adapter), a trained model's
holding its model functions and the one trainer (torch_impl.train). Each convention where PyTorch's defaults differ
from Keras's is set explicitly where it is used, with its reason."""

import sys

# Triton (PyTorch's GPU kernel compiler, a dependency of PyPI's torch) segfaults as it loads into a process that has
# loaded TensorFlow first (both bring their own LLVM; TF 2.21, triton 3.8, zen4): where TensorFlow is already there, it
# is made unimportable, which torch treats as absent (its CPU code and Inductor's C++ path do not use it). The
# harness's workers never mix the two; a test process or a user's script that imports tf_impl first does.
if "tensorflow" in sys.modules and "triton" not in sys.modules:
    sys.modules["triton"] = None

from parity.api import SURFACE
from torch_impl.adapters import adapter
from torch_impl.catalog import SETTINGS, settings, table, variants
from torch_impl.devices import (
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
from torch_impl.profile import trace, trace_ops

VARIANTS = table()  # every variant, as its adapters declare them (all importable by now)

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
