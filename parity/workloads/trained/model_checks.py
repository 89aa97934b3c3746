"""A trained model's checks against float64 (the row LSTM's, the ViT's; parity.workloads.trained.model): each block
of the forward pass, one batch's loss and every parameter's gradient, each framework against the oracle within the
bound derived for these very weights and inputs (the workload's tolerances.py), and every pair of frameworks within
the sum of their bounds. Its trajectories and accuracy are judged as every trained model's
(parity.workloads.trained.trajectories, checks)."""

from __future__ import annotations

import numpy as np

from parity.common.float64 import errors
from parity.common.frameworks import label, pairs, short
from parity.common.references import References
from parity.workloads.trained.model import TrainedModel


def _row(oracle: str, check: str, figures: dict[str, float], tol: float, judged: list[str], detail: str = "") -> dict:
    """A check's row; judged: the figures that decide it (each framework against float64); oracle: which float64
    oracle gave the reference (TrainedModel.oracle)."""
    return {
        "check": check,
        "oracle": oracle,
        "figures": figures,
        "max_rel_err": max(figures[k] for k in judged),
        "tolerance": tol,
        "passed": all(figures[k] <= tol for k in judged),
        "detail": detail,
    }


def forward(
    m: TrainedModel,
    saved: dict[str, dict],
    weights: list[np.ndarray],
    x: np.ndarray,
    device: str,
    precision: str,
    refs: References | None = None,
) -> list[dict]:
    """Per block (the architecture's blocks, the logits, the probabilities): each framework against the float64
    oracle, and every pair of frameworks, as max error relative to max |reference|. Each block's bound is derived
    for these weights and images; a pair of frameworks is held to twice it (each within it of float64). refs: the
    round's references (parity.common.references), where they may have been begun ahead."""
    refs = refs or References(False)
    ref = refs.get(m.oracle_forward, weights, x)
    tols = refs.get(m.block_tolerances, weights, x, device, precision)
    fws, rows = sorted(saved), []
    for block in m.architecture(weights).blocks.values():
        tol = tols[block]
        figs = {f"{fw}_vs_f64": errors(saved[fw][f"forward/{block}"], ref[block])["max_rel_err"] for fw in fws}
        judged = list(figs)
        for a, b in pairs(fws):
            figs[f"{a}_vs_{b}"] = errors(saved[a][f"forward/{block}"], saved[b][f"forward/{block}"])["max_rel_err"]
        apart = [f"{short(a)}-{short(b)}" for a, b in pairs(fws) if figs[f"{a}_vs_{b}"] > 2 * tol]
        detail = f"frameworks apart beyond twice the bound: {', '.join(apart)}" if apart else ""
        rows.append(_row(m.oracle, f"forward {block}", figs, tol, judged, detail))
    return _first_to_leave(rows, fws)


def _first_to_leave(rows: list[dict], fws: list[str]) -> list[dict]:
    """Each framework that fails a block, named once at the first block it fails, in the model's order: that row's
    detail opens with 'PyTorch leaves float64 at block dw1 (1.07 against a bound of 5.4e-05)', the rows after it say
    whose error they carry on. A row's `leaves` lists the frameworks that leave float64 there."""
    left: dict[str, str] = {}
    for r in rows:
        block = r["check"].removeprefix("forward ")
        new = [fw for fw in fws if fw not in left and r["figures"][f"{fw}_vs_f64"] > r["tolerance"]]
        said = [
            f"{label(fw)} leaves float64 at block {block} ({r['figures'][f'{fw}_vs_f64']:.3g} against a bound of "
            f"{r['tolerance']:.2g})"
            for fw in new
        ]
        carried = [
            f"{label(fw)} left at {left[fw]}"
            for fw in fws
            if fw in left and r["figures"][f"{fw}_vs_f64"] > r["tolerance"]
        ]
        r["detail"] = "; ".join(
            filter(
                None, [*said, ", ".join(carried) and f"after the block it left at: {', '.join(carried)}", r["detail"]]
            )
        )
        if new:
            r["leaves"] = new
        left.update({fw: block for fw in new})
    return rows


def _relative(names: list[str], g: list[dict], ref: list, bounds: list, fws: list[str]):
    """A gradient's error over max |float64| of that parameter, held to the parameter's own derived bound (an
    all-zero gradient: any error is infinitely off)."""

    def rel(got, want, i):
        err, scale = float(np.max(np.abs(np.asarray(got, np.float64) - want))), float(np.max(np.abs(ref[i])))
        return err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))

    per = {}
    for i, name in enumerate(names):
        per[name] = {"bound": bounds[i], **{f"{fw}_vs_f64": rel(g[i][fw], ref[i], i) for fw in fws}}
        per[name].update({f"{a}_vs_{b}": rel(g[i][a], g[i][b], i) for a, b in pairs(fws)})
    figs = {f"{fw}_vs_f64": max(p[f"{fw}_vs_f64"] / p["bound"] for p in per.values()) for fw in fws}
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = max(p[f"{a}_vs_{b}"] / (2 * p["bound"]) for p in per.values())
    worst = {fw: max(per, key=lambda n, fw=fw: per[n][f"{fw}_vs_f64"] / per[n]["bound"]) for fw in fws}
    return per, figs, worst


def _absolute(names: list[str], g: list[dict], ref: list, absolute: list, fws: list[str]):
    """A gradient's error over its derived bound as an absolute error, so a gradient zero in exact arithmetic and
    rounding noise on every side is judged on the scale of its terms; per_parameter's figures are each relative to
    the parameter's max |float64 gradient| (an all-zero gradient: absolute) beside its bound on that scale."""

    def err(got, want) -> float:
        return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))

    per, share = {}, {}
    for i, name in enumerate(names):
        scale = float(np.max(np.abs(ref[i])))
        e = {f"{fw}_vs_f64": err(g[i][fw], ref[i]) for fw in fws}
        e |= {f"{a}_vs_{b}": err(g[i][a], g[i][b]) for a, b in pairs(fws)}
        share[name] = {k: v / (absolute[i] * (2 if "_vs_f64" not in k else 1)) for k, v in e.items()}
        rel = scale if scale > 0 else 1.0
        per[name] = {"bound": absolute[i] / rel, **{k: v / rel for k, v in e.items()}}
    figs = {k: max(s[k] for s in share.values()) for k in next(iter(share.values()))}
    worst = {fw: max(share, key=lambda n, fw=fw: share[n][f"{fw}_vs_f64"]) for fw in fws}
    return per, figs, worst


def grads(
    m: TrainedModel,
    saved: dict[str, dict],
    weights: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    device: str,
    precision: str,
    refs: References | None = None,
) -> list[dict]:
    """One batch's loss, and every parameter's gradient, each framework against float64 (_relative or _absolute,
    as the workload's absolute_grads says); the row's figures are the worst error as a fraction of its bound
    (tolerance 1), per framework and per pair (a pair against the sum of both bounds); per_parameter holds every
    figure; refs: as forward's."""
    refs = refs or References(False)
    loss, ref = refs.get(m.oracle_loss_and_grads, weights, x, y)
    derived = refs.get(m.bounds, weights, x, y, device, precision)  # one float64 trace: the loss's, every gradient's
    names = [w.name for w in m.architecture(weights).weights]
    fws = sorted(saved)
    figs = {f"{fw}_vs_f64": abs(float(saved[fw]["loss"]) - loss) / abs(loss) for fw in fws}
    judged = list(figs)
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = abs(float(saved[a]["loss"]) - float(saved[b]["loss"])) / abs(loss)
    rows = [_row(m.oracle, "loss (one batch)", figs, derived["loss"], judged)]
    g = [{fw: saved[fw][f"grad/{i:03d}"] for fw in fws} for i in range(len(names))]
    if m.absolute_grads:
        per, figs, worst = _absolute(names, g, ref, derived["grad_abs"], fws)
    else:
        per, figs, worst = _relative(names, g, ref, derived["grads"], fws)
    detail = "error as a fraction of each parameter's derived bound; worst: " + ", ".join(
        f"{short(fw)} {worst[fw]} {per[worst[fw]][f'{fw}_vs_f64']:.1e} (bound {per[worst[fw]]['bound']:.1e})"
        for fw in fws
    )
    row = _row(m.oracle, m.grads_check, figs, 1.0, [f"{fw}_vs_f64" for fw in fws], detail)
    row["per_parameter"] = per
    return [*rows, row]
