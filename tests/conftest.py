"""Test session set-up: 8 simulated devices in both frameworks, float32 at highest precision.

The device counts must be fixed before either framework's runtime starts, so this runs first.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["JAX_NUM_CPU_DEVICES"] = "8"

import pytest  # noqa: E402

import jax_impl  # noqa: E402
import tf_impl  # noqa: E402

REPLICAS = 8
JAX_DEVICES = jax_impl.setup_devices("cpu", REPLICAS)
TF_DEVICES = tf_impl.setup_devices("cpu", REPLICAS)
# Correctness tests compare against float64: pin float32 (no TF32 / bf16 passes on any backend).
jax_impl.set_precision("highest")
tf_impl.set_precision("highest")

IMPLS = {"jax": (jax_impl, JAX_DEVICES), "tf": (tf_impl, TF_DEVICES)}


@pytest.fixture(params=sorted(IMPLS))
def impl(request):
    """(implementation module, its 8 CPU devices), once per framework."""
    return IMPLS[request.param]
