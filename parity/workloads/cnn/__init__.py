"""The Fashion-MNIST CNN workload: its spec (spec.py), its parent side (suite.py: data, shared initial weights,
parity rounds), its checks, its data (Fashion-MNIST, a synthetic stand-in, batch order), its worker-side cases and
untimed calls, and its float64 oracle; its tolerances are parity.common.tolerances'. The implementations' modules:
<impl>/cnn.py (its builder; JAX's Flax module), <impl>/models.py (the model functions), <impl>/train.py (the
trainer)."""

from __future__ import annotations

from parity.api.cnn import CNN_ARCHITECTURE, CNN_WEIGHTS
from parity.workloads.base import RowKind, Workload, accelerator_schedule, judged_by_checks, notebook_schedule
from parity.workloads.cnn import cases, suite
from parity.workloads.cnn.spec import CNN_CPU, CNN_FULL, CNN_QUICK
from parity.workloads.cnn.tolerances import cnn_tolerances

# The CNN's layers in order, as Keras names them (tf_impl/models.py; the JAX side's named scopes use the same names),
# and the loss: what --profile's ops are attributed to.
CNN_LAYERS = (
    *(n for b in (*CNN_ARCHITECTURE.convs, *CNN_ARCHITECTURE.dense) for n in b.names),
    *CNN_ARCHITECTURE.output.names,
    "loss",
)
assert {w.layer for w in CNN_WEIGHTS} <= set(CNN_LAYERS)


def cnn_forward_tolerance(device: str, precision: str, dtype: str) -> float:
    return cnn_tolerances(device, precision)["forward"]


WORKLOAD = Workload(
    "cnn",
    CNN_FULL,
    CNN_CPU,
    CNN_QUICK,
    (
        RowKind("cnn_train", cases.cnn_train_case, judged_by_checks, epochs=True, seeded=True),
        RowKind("cnn_infer", cases.cnn_infer_case, cnn_forward_tolerance),
    ),
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=suite,
    layers=CNN_LAYERS,
    calls={"warm": cases.cnn_warm, "init_weights": cases.cnn_init_weights, "parity": cases.cnn_parity},
    notebook=notebook_schedule(CNN_FULL),
    accelerator=accelerator_schedule(CNN_FULL),
    rank=1,
)
