"""A GRU classifier as a parity workload that lives outside the harness (docs/your-workload.md): its spec
(spec.py), float64 oracle (oracle.py) and bounds (bounds.py), and below its TrainedModel record, from which the
harness's shared trained-model machinery (parity.workloads.trained: data, rounds, trajectories, checks) makes its
row kinds, untimed calls and parent side. Its adapters are the modules named as the implementation packages:
jax_impl.py (Flax NNX), torch_impl.py (PyTorch), keras_models.py (the Keras model, both Keras backends'),
tf_impl.py and keras_jax_impl.py (their variants). Found through its entry point, `gru = parity_gru`. The same
workload judged by JAX in float64 instead of its NumPy oracle: jax_float64 (`--workload parity_gru.jax_float64`)."""

from __future__ import annotations

from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_workload import workload
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

# Its row kinds, untimed calls and parent side from MODEL, its inference judged by the bound of its own weights; after
# the built-in workloads (rank 10)
WORKLOAD = workload(MODEL, GRU_CPU, GRU_QUICK, (*GruArchitecture(1).names, "loss"))
