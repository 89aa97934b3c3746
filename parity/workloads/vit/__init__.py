"""The vision transformer workload, the article's question asked of attention: Fashion-MNIST cut into 4x4 patches,
pre-norm encoder blocks (multi-head self-attention, a GELU MLP), the tokens' mean and a dense layer, trained as the
CNN is. Its spec (spec.py), parent side (suite.py), checks against its float64 oracle (checks.py, oracle.py,
tolerances.py) and worker-side cases (cases.py). The architecture is parity.api.vit; the implementations' modules:
jax_impl/vit.py, tf_impl/vit.py, keras_jax_impl/vit.py, keras_models/vit.py and torch_impl/vit.py."""

from __future__ import annotations

from parity.common.tolerances import tolerance
from parity.workloads.base import RowKind, Workload, judged_by_checks
from parity.workloads.vit import cases, suite
from parity.workloads.vit.spec import VIT_CPU, VIT_FULL, VIT_QUICK

# The layers in order, as Keras names them (the other sides' named scopes use the same names), and the loss: what
# --profile's ops are attributed to: the full size's (a shallower ViT's blocks are among them).
VIT_LAYERS = (*VIT_FULL.architecture.names, "loss")


def vit_infer_tolerance(device: str, precision: str, dtype: str) -> float:
    """The device's agreement table: the inference case replaces it by the bound derived for its own weights and
    images (parity.workloads.vit.tolerances.vit_block_tolerances' "probs"), which the row records."""
    return tolerance(device, precision, dtype)


WORKLOAD = Workload(
    "vit",
    VIT_FULL,
    VIT_CPU,
    VIT_QUICK,
    (
        RowKind("vit_train", cases.vit_train_case, judged_by_checks, epochs=True, seeded=True),
        RowKind("vit_infer", cases.vit_infer_case, vit_infer_tolerance),
    ),
    options=("global_batch", "epochs", "steps_per_epoch"),
    suite=suite,
    layers=VIT_LAYERS,
    calls={"warm": cases.vit_warm, "init_weights": cases.vit_init_weights, "parity": cases.vit_parity},
)
