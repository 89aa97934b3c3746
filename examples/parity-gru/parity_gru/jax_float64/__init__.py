"""The GRU example judged by JAX in float64 instead of its NumPy oracle: the same workload, its record's oracle the
model run by its own JAX adapter with x64 enabled, in a child process (parity.workloads.trained.float64). Named on the
command line in place of the example (`--workload parity_gru.jax_float64`; its name is the example's, 'gru'). Its
adapter modules here are the example's own, one import each. Its bounds are the example's (bounds.py), which read the
scale of each gradient's terms from the example's float64 NumPy trace: the reference values are JAX's."""

from __future__ import annotations

import dataclasses

from parity.common.tolerances import tolerance
from parity.workloads.trained import model_cases
from parity.workloads.trained.float64 import FrameworkOracle
from parity.workloads.trained.model_suite import ModelSuite
from parity_gru import MODEL as NUMPY_MODEL
from parity_gru import WORKLOAD as NUMPY_WORKLOAD
from parity_gru.spec import units_of

MODEL = dataclasses.replace(
    NUMPY_MODEL,
    forward=None,  # no NumPy forward pass or gradients: the reference is JAX's float64 run of jax_impl.py's model
    loss_and_grads=None,
    float64=FrameworkOracle("jax", "gru", "parity_gru", sizes=lambda w: (units_of(w),)),
)

WORKLOAD = dataclasses.replace(
    NUMPY_WORKLOAD,
    kinds=model_cases.kinds(MODEL, tolerance),
    suite=ModelSuite(MODEL),
    calls=model_cases.calls(MODEL),
)
