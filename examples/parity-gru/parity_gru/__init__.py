"""A GRU classifier as a parity workload that lives outside the harness (docs/your-workload.md): its spec
(spec.py), float64 oracle (oracle.py) and bounds (bounds.py), and below its TrainedModel record, from which the
harness's shared trained-model machinery (parity.workloads.trained: data, rounds, trajectories, checks) makes its
row kinds, untimed calls and parent side. Its adapters are the modules named as the implementation packages:
jax_impl.py (Flax NNX), torch_impl.py (PyTorch), keras_models.py (the Keras model, both Keras backends'),
tf_impl.py and keras_jax_impl.py (their variants). Found through its entry point, `gru = parity_gru`. The same
workload judged by JAX in float64 instead of its NumPy oracle: jax_float64 (`--workload parity_gru.jax_float64`)."""

from __future__ import annotations

from parity.common.tolerances import tolerance
from parity.workloads.base import Workload, notebook_schedule
from parity.workloads.trained import model_cases
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_suite import ModelSuite
from parity_gru import bounds, oracle
from parity_gru.spec import GRU_CPU, GRU_FULL, GRU_QUICK, GruArchitecture, units_of

MODEL = TrainedModel(
    name="gru",
    full=GRU_FULL,
    fields=lambda s: {"units": s.units},
    warm={"units": 4},
    sizes=lambda f: (f["units"],),
    weights_tag=lambda s: f"u{s.units}",
    reading=lambda s: f"each image read row by row (28 steps of 28 pixels), a GRU of {s.units} units",
    size=lambda s: f"{s.units} units",
    full_why="the row LSTM's batch and schedule",
    forward=oracle.forward,
    loss_and_grads=oracle.loss_and_grads,
    block_tolerances=bounds.block_tolerances,
    bounds=bounds.bounds,
    tolerances=bounds.tolerances,
    architecture=lambda w: GruArchitecture(units_of(w)),
    grads_check="gradients through time (every parameter)",
)

WORKLOAD = Workload(
    "gru",
    GRU_FULL,
    GRU_CPU,
    GRU_QUICK,
    model_cases.kinds(MODEL, tolerance),  # inference: the device's table, replaced by the bound of its own weights
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=ModelSuite(MODEL),
    layers=(*GruArchitecture(1).names, "loss"),
    calls=model_cases.calls(MODEL),
    notebook=notebook_schedule(GRU_FULL),
    rank=10,  # after the built-in workloads
)
