"""The test MLP's checks against float64: each forward block, one batch's loss and every parameter's gradient, each
framework against the oracle within the bound derived for these weights and inputs. Its trajectories and accuracy
are judged as every trained model's (parity.workloads.trained.trajectories, checks)."""

from __future__ import annotations

import numpy as np

from mlp_workload import oracle
from mlp_workload.spec import BLOCKS
from mlp_workload.tolerances import mlp_block_tolerances, mlp_grad_tolerance, mlp_loss_tolerance
from parity.common.float64 import errors
from parity.common.frameworks import ordered
from parity.workloads.trained.checks import row


def forward(saved: dict[str, dict], weights: list[np.ndarray], x: np.ndarray, device: str, precision: str) -> list:
    """Per block: each framework's saved output against the float64 oracle (max error over max |reference|)."""
    ref = oracle.mlp_forward(weights, x)
    tols = mlp_block_tolerances(weights, x, device, precision)
    return [
        row(
            f"forward {block}",
            {f"{fw}_vs_f64": errors(saved[fw][f"forward/{block}"], ref[block])["max_rel_err"] for fw in ordered(saved)},
            tols[block],
        )
        for block in BLOCKS
    ]


def grads(
    saved: dict[str, dict], weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str
) -> list[dict]:
    """One batch's loss relative to float64's, and every gradient's max error over its terms' scale (the worst
    parameter per framework; per_parameter holds every figure)."""
    bw = oracle.mlp_loss_and_grads(weights, x, y)
    hidden, batch = np.shape(weights[0])[1], len(x)
    fws = ordered(saved)
    loss = {f"{fw}_vs_f64": abs(float(saved[fw]["loss"]) - bw.loss) / abs(bw.loss) for fw in fws}
    names = oracle.named(weights)
    per = {
        name: {
            f"{fw}_vs_f64": float(np.max(np.abs(np.asarray(saved[fw][f"grad/{i:03d}"], np.float64) - g))) / scale
            for fw in fws
        }
        for i, (name, g, scale) in enumerate(zip(names, bw.grads, bw.term_scales, strict=True))
    }
    tol = mlp_grad_tolerance(hidden, batch, device, precision)
    figures = {f"{fw}_vs_f64": max(p[f"{fw}_vs_f64"] for p in per.values()) for fw in fws}
    out = row("gradients (every parameter)", figures, tol)
    out["per_parameter"] = per
    return [row("loss (one batch)", loss, mlp_loss_tolerance(hidden, batch, device, precision)), out]
