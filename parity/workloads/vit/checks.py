"""The ViT's checks against float64: each block of the forward pass, one batch's loss and every parameter's gradient,
each framework against the oracle within the bound derived for these very weights and inputs
(parity.workloads.vit.tolerances), and every pair of frameworks within the sum of their bounds. Its trajectories and
accuracy are judged as every trained model's (parity.workloads.trained.trajectories, checks)."""

from __future__ import annotations

import numpy as np

from parity.api.vit import architecture_of
from parity.common.float64 import errors
from parity.common.frameworks import pairs, short
from parity.workloads.vit import oracle
from parity.workloads.vit.tolerances import vit_block_tolerances, vit_bounds


def _row(check: str, figures: dict[str, float], tol: float, judged: list[str], detail: str = "") -> dict:
    """A check's row; judged: the figures that decide it (each framework against float64)."""
    return {
        "check": check,
        "figures": figures,
        "max_rel_err": max(figures[k] for k in judged),
        "tolerance": tol,
        "passed": all(figures[k] <= tol for k in judged),
        "detail": detail,
    }


def forward(
    saved: dict[str, dict], weights: list[np.ndarray], x: np.ndarray, device: str, precision: str
) -> list[dict]:
    """Per block (the embedded tokens, each encoder block's output, the pooled features, the logits, the
    probabilities): each framework against the float64 oracle, and every pair of frameworks, as max error relative
    to max |reference|. Each block's bound is derived for these weights and images; a pair of frameworks is held to
    twice it (each within it of float64)."""
    ref = oracle.forward(weights, x)
    tols = vit_block_tolerances(weights, x, device, precision)
    fws, rows = sorted(saved), []
    for block in architecture_of(weights).blocks.values():
        tol = tols[block]
        figs = {f"{fw}_vs_f64": errors(saved[fw][f"forward/{block}"], ref[block])["max_rel_err"] for fw in fws}
        judged = list(figs)
        for a, b in pairs(fws):
            figs[f"{a}_vs_{b}"] = errors(saved[a][f"forward/{block}"], saved[b][f"forward/{block}"])["max_rel_err"]
        apart = [f"{short(a)}-{short(b)}" for a, b in pairs(fws) if figs[f"{a}_vs_{b}"] > 2 * tol]
        detail = f"frameworks apart beyond twice the bound: {', '.join(apart)}" if apart else ""
        rows.append(_row(f"forward {block}", figs, tol, judged, detail))
    return rows


def grads(
    saved: dict[str, dict], weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, device: str, precision: str
) -> list[dict]:
    """One batch's loss, and every parameter's gradient, each framework against float64.

    A gradient's error is max |got - float64| over its derived bound as an absolute error (vit_bounds' grad_abs),
    so the key bias's gradient, zero in exact arithmetic and rounding noise on every side, is judged on the scale of
    its terms; the row's figures are the worst such fraction (tolerance 1), per framework and per pair (a pair
    against the sum of both bounds); per_parameter holds every figure, each relative to the parameter's max
    |float64 gradient| beside its bound on that scale."""
    loss, ref = oracle.loss_and_grads(weights, x, y)
    derived = vit_bounds(weights, x, y, device, precision)  # one float64 trace for the loss's and every gradient's
    absolute, loss_tol = derived["grad_abs"], derived["loss"]
    names = [w.name for w in architecture_of(weights).weights]
    fws = sorted(saved)
    figs = {f"{fw}_vs_f64": abs(float(saved[fw]["loss"]) - loss) / abs(loss) for fw in fws}
    judged = list(figs)
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = abs(float(saved[a]["loss"]) - float(saved[b]["loss"])) / abs(loss)
    rows = [_row("loss (one batch)", figs, loss_tol, judged)]

    def err(got, want) -> float:
        return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))

    per, share = {}, {}
    for i, name in enumerate(names):
        g, scale = {fw: saved[fw][f"grad/{i:03d}"] for fw in fws}, float(np.max(np.abs(ref[i])))
        e = {f"{fw}_vs_f64": err(g[fw], ref[i]) for fw in fws} | {f"{a}_vs_{b}": err(g[a], g[b]) for a, b in pairs(fws)}
        share[name] = {k: v / (absolute[i] * (2 if "_vs_f64" not in k else 1)) for k, v in e.items()}
        rel = scale if scale > 0 else 1.0  # an all-zero gradient: its figures absolute
        per[name] = {"bound": absolute[i] / rel, **{k: v / rel for k, v in e.items()}}
    figs = {k: max(s[k] for s in share.values()) for k in next(iter(share.values()))}
    worst = {fw: max(share, key=lambda n, fw=fw: share[n][f"{fw}_vs_f64"]) for fw in fws}
    detail = "error as a fraction of each parameter's derived bound; worst: " + ", ".join(
        f"{short(fw)} {worst[fw]} {per[worst[fw]][f'{fw}_vs_f64']:.1e} (bound {per[worst[fw]]['bound']:.1e})"
        for fw in fws
    )
    row = _row("gradients (every parameter)", figs, 1.0, [f"{fw}_vs_f64" for fw in fws], detail)
    row["per_parameter"] = per
    return [*rows, row]
