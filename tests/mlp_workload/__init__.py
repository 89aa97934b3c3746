"""A two-layer MLP, a trained workload of the tests' own (tests/test_new_workload.py): the proof that a trained
workload is one package plus one module per implementation, as docs/architecture.md's "A new workload" lists, and that
it takes the trained road: its TrainedModel record (below) is all it adds to its spec (spec.py), float64 oracle
(oracle.py) and bounds (tolerances.py); its rows, untimed calls, parent side (shared weights, parity rounds,
trajectories) and checks are the shared trained-model machinery's (parity.workloads.trained: model_cases,
model_suite, model_checks). Fashion-MNIST's images (or their synthetic stand-in) flattened, a tanh hidden layer, a
dense layer to the 10 classes; its one implementation is the NumPy fake, tests/mlp_fake.py, through Trained."""

from __future__ import annotations

from mlp_workload.oracle import mlp_forward, mlp_loss_and_grads
from mlp_workload.spec import BLOCKS, MLP_CPU, MLP_FULL, MLP_QUICK, MlpArchitecture
from mlp_workload.tolerances import mlp_block_tolerances, mlp_bounds, mlp_infer_tolerance, mlp_tolerances
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_workload import workload

MLP_LAYERS = ("flatten", *BLOCKS, "loss")  # --profile's per-layer attribution, in order


def _loss_and_grads(weights, x, y) -> tuple:
    back = mlp_loss_and_grads(weights, x, y)
    return back.loss, back.grads


MODEL = TrainedModel(
    name="mlp",
    full=MLP_FULL,
    fields=lambda s: {"hidden": s.hidden},
    warm={"hidden": 4},
    sizes=lambda f: (f["hidden"],),
    weights_tag=lambda s: f"h{s.hidden}",
    reading=lambda s: f"each image flattened, {s.hidden} hidden units",
    size=lambda s: f"{s.hidden} hidden units",
    full_why="a size of the tests' own",
    forward=mlp_forward,
    loss_and_grads=_loss_and_grads,
    block_tolerances=mlp_block_tolerances,
    bounds=mlp_bounds,
    tolerances=mlp_tolerances,
    architecture=lambda w: MlpArchitecture(w[1].shape[0]),
    grads_check="gradients (every parameter)",
)

WORKLOAD = workload(MODEL, MLP_CPU, MLP_QUICK, MLP_LAYERS, infer_tolerance=mlp_infer_tolerance, rank=0, notebook=False)
