"""The row LSTM workload, the article's next question (RNNs): Fashion-MNIST read one image row per time step, two
stacked LSTM layers, trained as the CNN is. Its spec (spec.py), parent side (suite.py), checks against its float64
oracle through time (checks.py, oracle.py, tolerances.py) and worker-side cases (cases.py). The implementations'
modules: jax_impl/lstm.py, tf_impl/lstm.py, keras_jax_impl/lstm.py and keras_models/lstm.py."""

from __future__ import annotations

from parity.api.lstm import LstmArchitecture
from parity.common.tolerances import tolerance
from parity.workloads.base import RowKind, Workload, judged_by_checks
from parity.workloads.lstm import cases, suite
from parity.workloads.lstm.spec import LSTM_CPU, LSTM_FULL, LSTM_QUICK

# The layers in order, as Keras names them (the JAX side's named scopes use the same names), and the loss: what
# --profile's ops are attributed to.
LSTM_LAYERS = (*LstmArchitecture(1).names, "loss")


def lstm_infer_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's agreement table: the inference case replaces it by the bound derived for its own weights and
    images (parity.workloads.lstm.tolerances.lstm_forward_tolerance), which the row records."""
    return tolerance(device, precision, dtype)


WORKLOAD = Workload(
    "lstm",
    LSTM_FULL,
    LSTM_CPU,
    LSTM_QUICK,
    (
        RowKind("lstm_train", cases.lstm_train_case, judged_by_checks, epochs=True, seeded=True),
        RowKind("lstm_infer", cases.lstm_infer_case, lstm_infer_tolerance),
    ),
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=suite,
    layers=LSTM_LAYERS,
    calls={"warm": cases.lstm_warm, "init_weights": cases.lstm_init_weights, "parity": cases.lstm_parity},
)
