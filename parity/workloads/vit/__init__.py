"""The vision transformer workload, the article's question asked of attention: Fashion-MNIST cut into 4x4 patches,
pre-norm encoder blocks (multi-head self-attention, a GELU MLP), the tokens' mean and a dense layer, trained as the
CNN is. Its spec (spec.py), float64 oracle (oracle.py) and bounds (tolerances.py), and its TrainedModel (MODEL,
below): the parent side, worker side and checks are every such model's (parity.workloads.trained.model_suite,
model_cases, model_checks). The architecture is parity.api.vit; the implementations' modules: jax_impl/vit.py,
tf_impl/vit.py, keras_jax_impl/vit.py, keras_models/vit.py and torch_impl/vit.py."""

from __future__ import annotations

from parity.api.vit import architecture_of
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_workload import workload
from parity.workloads.vit import oracle
from parity.workloads.vit.spec import VIT_CPU, VIT_FULL, VIT_QUICK, VitSpec
from parity.workloads.vit.tolerances import vit_block_tolerances, vit_bounds, vit_tolerances

# The layers in order, as Keras names them (the other sides' named scopes use the same names), and the loss: what
# --profile's ops are attributed to: the full size's (a shallower ViT's blocks are among them).
VIT_LAYERS = (*VIT_FULL.architecture.names, "loss")
WARM = {"dim": 8, "depth": 1, "heads": 2, "mlp": 16}  # the smallest ViT a framework's one-off set-up builds


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

WORKLOAD = workload(MODEL, VIT_CPU, VIT_QUICK, VIT_LAYERS, rank=3, accelerator=True)
