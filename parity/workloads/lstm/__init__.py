"""The row LSTM workload, the article's next question (RNNs): Fashion-MNIST read one image row per time step, two
stacked LSTM layers, trained as the CNN is. Its spec (spec.py), float64 oracle through time (oracle.py) and bounds
(tolerances.py), and its TrainedModel (MODEL, below): the parent side, worker side and checks are every such model's
(parity.workloads.trained.model_suite, model_cases, model_checks). The implementations' modules: jax_impl/lstm.py,
tf_impl/lstm.py, keras_jax_impl/lstm.py, keras_models/lstm.py and torch_impl/lstm.py."""

from __future__ import annotations

from parity.api.lstm import LstmArchitecture, units_of
from parity.workloads.lstm import oracle
from parity.workloads.lstm.spec import LSTM_CPU, LSTM_FULL, LSTM_QUICK, LstmSpec
from parity.workloads.lstm.tolerances import lstm_block_tolerances, lstm_bounds, lstm_tolerances
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_workload import workload

# The layers in order, as Keras names them (the JAX side's named scopes use the same names), and the loss: what
# --profile's ops are attributed to.
LSTM_LAYERS = (*LstmArchitecture(1).names, "loss")


def _tolerances(device: str, precision: str, dtype: str = "float32", spec: LstmSpec | None = None) -> dict:
    return lstm_tolerances(device, precision, dtype)


MODEL = TrainedModel(
    name="lstm",
    full=LSTM_FULL,
    fields=lambda s: {"units": s.units},
    warm={"units": 4},
    sizes=lambda f: (f["units"],),
    weights_tag=lambda s: f"u{s.units}",
    reading=lambda s: f"each image read row by row (28 steps of 28 pixels), {s.units} units a layer",
    size=lambda s: f"{s.units} units",
    full_why="the Shakespeare notebook's width and batch",
    forward=oracle.lstm_forward,
    loss_and_grads=oracle.lstm_loss_and_grads,
    block_tolerances=lstm_block_tolerances,
    bounds=lstm_bounds,
    tolerances=_tolerances,
    architecture=lambda w: LstmArchitecture(units_of(w)),
    grads_check="gradients through time (every parameter)",
    notebook=True,  # the Shakespeare notebook's epochs estimated at its width
)

WORKLOAD = workload(MODEL, LSTM_CPU, LSTM_QUICK, LSTM_LAYERS, rank=2, accelerator=True)
