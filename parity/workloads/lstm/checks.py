"""The row LSTM's checks against float64: each block of the forward pass, one batch's loss and every parameter's
gradient by backpropagation through time, each framework against the oracle within the bound derived for these very
weights and inputs (parity.workloads.lstm.tolerances), and every pair of frameworks within the sum of their bounds.
Its trajectories and accuracy are judged as every trained model's (parity.workloads.trained.trajectories, checks)."""

from __future__ import annotations

import numpy as np

from parity.api.lstm import LstmArchitecture, units_of
from parity.common.float64 import errors
from parity.common.frameworks import pairs, short
from parity.workloads.lstm import oracle
from parity.workloads.lstm.tolerances import lstm_block_tolerances, lstm_bounds


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
    """Per block (lstm1's sequence, lstm2's last state, the logits, the probabilities): each framework against the
    float64 oracle, and every pair of frameworks, as max error relative to max |reference|. Each block's bound is
    derived for these weights and images; a pair of frameworks is held to twice it (each within it of float64)."""
    ref = oracle.lstm_forward(weights, x)
    tols = lstm_block_tolerances(weights, x, device, precision)
    fws, rows = sorted(saved), []
    for block in LstmArchitecture(units_of(weights)).blocks.values():
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
    """One batch's loss, and every parameter's gradient through time, each framework against float64.

    A gradient's error is max |got - float64| over max |float64| of that parameter, held to the parameter's own
    derived bound; the row's figures are the worst error as a fraction of its bound (tolerance 1), per framework
    and per pair (a pair against the sum of both bounds); per_parameter holds every figure."""
    loss, ref = oracle.lstm_loss_and_grads(weights, x, y)
    derived = lstm_bounds(weights, x, y, device, precision)  # one float64 trace for the loss's and every gradient's
    bounds, loss_tol = derived["grads"], derived["loss"]
    names = [w.name for w in LstmArchitecture(units_of(weights)).weights]
    fws = sorted(saved)
    figs = {f"{fw}_vs_f64": abs(float(saved[fw]["loss"]) - loss) / abs(loss) for fw in fws}
    judged = list(figs)
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = abs(float(saved[a]["loss"]) - float(saved[b]["loss"])) / abs(loss)
    rows = [_row("loss (one batch)", figs, loss_tol, judged)]

    def rel(got, want, i):  # over the parameter's float64 scale (an all-zero gradient: any error is infinitely off)
        err, scale = float(np.max(np.abs(np.asarray(got, np.float64) - want))), float(np.max(np.abs(ref[i])))
        return err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))

    per = {}
    for i, name in enumerate(names):
        g = {fw: saved[fw][f"grad/{i:03d}"] for fw in fws}
        per[name] = {"bound": bounds[i], **{f"{fw}_vs_f64": rel(g[fw], ref[i], i) for fw in fws}}
        per[name].update({f"{a}_vs_{b}": rel(g[a], g[b], i) for a, b in pairs(fws)})
    figs = {f"{fw}_vs_f64": max(p[f"{fw}_vs_f64"] / p["bound"] for p in per.values()) for fw in fws}
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = max(p[f"{a}_vs_{b}"] / (2 * p["bound"]) for p in per.values())
    worst = {fw: max(per, key=lambda n, fw=fw: per[n][f"{fw}_vs_f64"] / per[n]["bound"]) for fw in fws}
    detail = "error as a fraction of each parameter's derived bound; worst: " + ", ".join(
        f"{short(fw)} {worst[fw]} {per[worst[fw]][f'{fw}_vs_f64']:.1e} (bound {per[worst[fw]]['bound']:.1e})"
        for fw in fws
    )
    row = _row("gradients through time (every parameter)", figs, 1.0, [f"{fw}_vs_f64" for fw in fws], detail)
    row["per_parameter"] = per
    return [*rows, row]
