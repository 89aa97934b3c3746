"""The in-process frameworks started for the tests that need them: 8 simulated CPU devices each for TF and JAX (PyTorch
has its one CPU device), float32 at highest precision.

The device counts must be fixed before either runtime starts, so importing this module is what first starts them
in a test process: tests that use a framework import their devices from here (`from frameworks_setup import
JAX_DEVICES`), the `impl` fixture imports it when first requested, and `conftest.py` imports it after collection
in any process whose test modules imported a framework. Engine tests never import it (nor any framework).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["JAX_NUM_CPU_DEVICES"] = "8"

import jax_impl  # noqa: E402
import tf_impl  # noqa: E402
import torch_impl  # noqa: E402
from parity.common.frameworks import JAX, TF, TORCH  # noqa: E402

REPLICAS = 8
JAX_DEVICES = jax_impl.setup_devices("cpu", REPLICAS)
TF_DEVICES = tf_impl.setup_devices("cpu", REPLICAS)
TORCH_DEVICES = torch_impl.setup_devices("cpu", 1)  # one device (DDP over 2 processes: test_torch_ddp.py)
# Correctness tests compare against float64: pin float32 (no TF32 / bf16 passes on any backend).
jax_impl.set_precision("highest")
tf_impl.set_precision("highest")
torch_impl.set_precision("highest")

IMPLS = {JAX: (jax_impl, JAX_DEVICES), TF: (tf_impl, TF_DEVICES), TORCH: (torch_impl, TORCH_DEVICES)}
