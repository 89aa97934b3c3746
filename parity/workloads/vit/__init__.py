"""The vision transformer workload, the article's question asked of attention: Fashion-MNIST cut into 4x4 patches,
pre-norm encoder blocks (multi-head self-attention, a GELU MLP), the tokens' mean and a dense layer, trained as the
CNN is. Its spec (spec.py), float64 oracle (oracle.py) and bounds (tolerances.py), and its TrainedModel (MODEL,
below): the parent side, worker side and checks are every such model's (parity.workloads.trained.model_suite,
model_cases, model_checks). The architecture is parity.api.vit; the implementations' modules: jax_impl/vit.py,
tf_impl/vit.py, keras_jax_impl/vit.py, keras_models/vit.py and torch_impl/vit.py."""

from __future__ import annotations

from parity.api.vit import architecture_of
from parity.common.tolerances import tolerance
from parity.workloads.base import Workload, accelerator_schedule, notebook_schedule
from parity.workloads.trained import model_cases
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_suite import ModelSuite
from parity.workloads.vit import oracle
from parity.workloads.vit.spec import VIT_CPU, VIT_FULL, VIT_QUICK, VitSpec
from parity.workloads.vit.tolerances import vit_block_tolerances, vit_bounds, vit_tolerances

# The layers in order, as Keras names them (the other sides' named scopes use the same names), and the loss: what
# --profile's ops are attributed to: the full size's (a shallower ViT's blocks are among them).
VIT_LAYERS = (*VIT_FULL.architecture.names, "loss")
WARM = {"dim": 8, "depth": 1, "heads": 2, "mlp": 16}  # the smallest ViT a framework's one-off set-up builds


def vit_infer_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's agreement table: the inference case replaces it by the bound derived for its own weights and
    images (parity.workloads.vit.tolerances.vit_block_tolerances' "probs"), which the row records."""
    return tolerance(device, precision, dtype)


def _tolerances(device: str, precision: str, dtype: str = "float32", spec: VitSpec | None = None) -> dict:
    return vit_tolerances(device, precision, dtype, VIT_FULL.depth if spec is None else spec.depth)


def _size(s: VitSpec) -> str:
    return f"width {s.dim}, {s.depth} blocks of {s.heads} heads, MLP {s.mlp}"


def _reading(s: VitSpec) -> str:
    a = s.architecture
    return f"each image cut into {a.tokens} patches of {a.patch}x{a.patch} pixels, {_size(s)}"


MODEL = TrainedModel(
    name="vit",
    full=VIT_FULL,
    fields=lambda s: {"dim": s.dim, "depth": s.depth, "heads": s.heads, "mlp": s.mlp},
    warm=WARM,
    sizes=lambda f: (f["dim"], f["depth"], f["heads"], f["mlp"]),
    weights_tag=lambda s: f"d{s.dim}x{s.depth}h{s.heads}m{s.mlp}",
    reading=_reading,
    size=_size,
    full_why="ViT-Tiny's width at half its depth",
    forward=oracle.forward,
    loss_and_grads=oracle.loss_and_grads,
    block_tolerances=vit_block_tolerances,
    bounds=vit_bounds,
    tolerances=_tolerances,
    architecture=architecture_of,
    grads_check="gradients (every parameter)",
    absolute_grads=True,  # the key bias's gradient, zero in exact arithmetic, judged on the scale of its terms
)

WORKLOAD = Workload(
    "vit",
    VIT_FULL,
    VIT_CPU,
    VIT_QUICK,
    model_cases.kinds(MODEL, vit_infer_tolerance),
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=ModelSuite(MODEL),
    layers=VIT_LAYERS,
    calls=model_cases.calls(MODEL),
    notebook=notebook_schedule(VIT_FULL),
    accelerator=accelerator_schedule(VIT_FULL),
    rank=3,
)
