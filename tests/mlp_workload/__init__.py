"""A two-layer MLP, a trained workload of the tests' own (tests/test_new_workload.py): the proof that a trained
workload is one package plus one module per implementation, as docs/architecture.md's "A new workload" lists.
Fashion-MNIST's images (or their synthetic stand-in) flattened, a tanh hidden layer, a dense layer to the 10 classes.
Its spec (spec.py), parent side (suite.py), checks against its float64 oracle (checks.py, oracle.py, tolerances.py)
and worker-side cases (cases.py); its one implementation is the NumPy fake, tests/mlp_fake.py."""

from __future__ import annotations

from mlp_workload import cases, suite
from mlp_workload.spec import MLP_CPU, MLP_FULL, MLP_QUICK
from mlp_workload.tolerances import mlp_infer_tolerance
from parity.workloads.base import RowKind, Workload, judged_by_checks

MLP_LAYERS = ("flatten", "dense1", "dense2", "probs", "loss")  # --profile's per-layer attribution, in order

WORKLOAD = Workload(
    "mlp",
    MLP_FULL,
    MLP_CPU,
    MLP_QUICK,
    (
        RowKind("mlp_train", cases.mlp_train_case, judged_by_checks, epochs=True, seeded=True),
        RowKind("mlp_infer", cases.mlp_infer_case, mlp_infer_tolerance),
    ),
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=suite,
    layers=MLP_LAYERS,
    calls={"warm": cases.mlp_warm, "init_weights": cases.mlp_init_weights, "parity": cases.mlp_parity},
)
