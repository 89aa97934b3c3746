"""CNN parity checks: each framework against the float64 oracle and against each other one, from the arrays each
worker saved. A figure between two frameworks is named '<a>_vs_<b>' in the frameworks' table order ('tf_vs_jax')."""

from __future__ import annotations

import math

import numpy as np

from parity.api.cnn import CNN_BLOCKS as BLOCKS
from parity.api.cnn import CNN_TRAINABLE, CNN_WEIGHTS
from parity.common.float64 import errors
from parity.common.frameworks import pairs, short
from parity.common.references import References
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import gradient_scale
from parity.workloads.trained import checks as trained
from parity.workloads.trained.checks import row as _row

WEIGHT_NAMES = [w.name for w in CNN_WEIGHTS]
GRAD_NAMES = [w.name for w in CNN_TRAINABLE]


def forward(saved: dict[str, dict], ref: dict[str, np.ndarray], tol: float) -> list[dict]:
    """Per block: each framework vs the float64 oracle, and every pair of frameworks vs each other."""
    rows = []
    fws = sorted(saved)
    for b in BLOCKS:
        figs = {f"{fw}_vs_f64": errors(saved[fw][f"forward/{b}"], ref[b])["max_rel_err"] for fw in fws}
        for x, y in pairs(fws):
            figs[f"{x}_vs_{y}"] = errors(saved[x][f"forward/{b}"], saved[y][f"forward/{b}"])["max_rel_err"]
        rows.append(_row(f"forward {b}", figs, tol))
    return rows


# Max pooling's gradient jumps where a window's largest values tie: two frameworks whose forward passes differ by
# float32 rounding can break a near-tie differently and send that window's gradient elsewhere, moving a kernel
# gradient by 1e-3 though neither is wrong. So each framework is judged against float64 with the same subgradient
# (its own routing, saved by its loss_and_grads), and a difference between two frameworks is explained by the
# windows they route differently.
POOLS = ("pool1", "pool2", "pool3")
NEAR_TIE_ULPS = 4  # a window's two largest values this close (float32 ulps of the largest) are a near-tie


def _references(saved: dict[str, dict], fws: list[str], w: list[np.ndarray], x, y, refs: References) -> dict:
    """Each framework's float64 oracle under its own max-pool routing (from `refs`: parity.common.references); a
    routing another framework took too gets that framework's (the same inputs, the same reference)."""
    out: dict[str, tuple] = {}
    for fw in fws:
        routing = [saved[fw][f"routing/{k}"] for k in range(len(POOLS))]
        twin = next(
            (o for o in out if all(np.array_equal(a, saved[o][f"routing/{k}"]) for k, a in enumerate(routing))), None
        )
        out[fw] = out[twin] if twin else refs.get(cnn_oracle.cnn_loss_and_grads, w, x, y, routing)
    return out


def grads(
    saved: dict[str, dict],
    weights: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    tol: float,
    loss_tol: float,
    replicas: int = 1,
    references: References | None = None,
) -> list[dict]:
    """Loss and every parameter's gradient of one training batch, each framework against the float64
    oracle with that framework's own max-pool routing (see POOLS), and the frameworks against each other.
    A framework off float64 under its own routing is a FAIL that names it and the parameter. Each
    parameter's error is over its own scale (_per_parameter), so the verdict holds for any input.

    Args:
        saved: per framework, its saved 'loss', 'grad/NNN' and 'routing/K' arrays.
        weights, x, y: the weights (Keras order) and the batch both frameworks differentiated.
        tol, loss_tol: thresholds for gradients (relative to max |reference| per parameter) and the loss.
        references: the round's float64 references (parity.common.references), begun ahead where the run does so.
    """
    fws = sorted(saved)
    w = [np.asarray(a) for a in weights]
    refs = _references(saved, fws, w, x, y, references or References(False))
    # the float64 pooling inputs: under any framework's routing they differ only by a near-tie's gap
    pool_inputs = refs[fws[0]][2]["pool_inputs"]
    pools = [
        {"layer": name, **cnn_oracle.pool_window_stats(a, {fw: saved[fw][f"routing/{k}"] for fw in fws}, NEAR_TIE_ULPS)}
        for k, (name, a) in enumerate(zip(POOLS, pool_inputs, strict=True))
    ]
    per = _per_parameter(saved, refs, len(np.asarray(y)))
    figs = {
        k: max(p[k] for p in per.values())
        for k in per[GRAD_NAMES[0]]
        if not k.startswith("routing_alone") and k != "conditioning"
    }
    own = {fw: figs[f"{fw}_vs_f64"] for fw in fws}
    grads_row = {
        "check": "gradients (every parameter)",
        "replicas": replicas,
        "figures": figs,
        "max_rel_err": max(own.values()),
        "tolerance": tol,
        "passed": all(e <= tol for e in own.values()),
        "detail": _grads_verdict(per, pools, own, figs, tol),
        "per_parameter": per,
        "pooling": pools,
    }
    return [_loss_row(saved, refs, loss_tol, replicas), grads_row]


def _loss_row(saved: dict, refs: dict, loss_tol: float, replicas: int) -> dict:
    """The one batch's loss: each framework against float64 (judged), and against each other."""
    fws = sorted(saved)
    figs = {f"{fw}_vs_f64": abs(float(saved[fw]["loss"]) - refs[fw][0]) / abs(refs[fw][0]) for fw in fws}
    for a, b in pairs(fws):
        figs[f"{a}_vs_{b}"] = abs(float(saved[a]["loss"]) - float(saved[b]["loss"])) / abs(float(saved[b]["loss"]))
    off = [fw for fw in fws if figs[f"{fw}_vs_f64"] > loss_tol]
    return {
        "check": "loss (one batch)",
        "replicas": replicas,
        "figures": figs,
        "max_rel_err": max(figs[f"{fw}_vs_f64"] for fw in fws),
        "tolerance": loss_tol,
        "passed": not off,
        "detail": "off float64: " + ", ".join(short(fw) for fw in off) if off else "",
    }


def _per_parameter(saved: dict, refs: dict, batch: int) -> dict[str, dict]:
    """Per parameter: each framework's error against float64 under its own routing, and per pair of frameworks
    their difference and routing's alone ('routing_alone'; 'routing_alone_<a>_vs_<b>' where there are several
    pairs), all over the parameter's scale; and that scale over max |reference| ('conditioning'; None for an
    all-zero gradient). The scale (tolerances.gradient_scale, from the oracle's terms) is max |reference| where
    the parameter's last sum does not cancel, more where it does."""
    fws = sorted(saved)
    scales = [
        max(grad_scale(batch, refs[fw][1][i], refs[fw][2]["terms"][i]) for fw in fws) for i in range(len(GRAD_NAMES))
    ]

    def rel(got: np.ndarray, ref: np.ndarray, i: int) -> float:
        return _relative(errors(got, ref)["max_abs_err"], scales[i])

    per = {}
    for i, name in enumerate(GRAD_NAMES):
        per[name] = {f"{fw}_vs_f64": rel(saved[fw][f"grad/{i:03d}"], refs[fw][1][i], i) for fw in fws}
        for a, b in pairs(fws):
            per[name][f"{a}_vs_{b}"] = rel(saved[a][f"grad/{i:03d}"], saved[b][f"grad/{i:03d}"], i)
            routing = "routing_alone" if len(fws) == 2 else f"routing_alone_{a}_vs_{b}"
            per[name][routing] = rel(refs[a][1][i], refs[b][1][i], i)
        ref_max = float(np.max(np.abs(refs[fws[0]][1][i])))
        per[name]["conditioning"] = scales[i] / ref_max if ref_max > 0 else None
    return per


def grad_scale(batch: int, ref: np.ndarray, terms: cnn_oracle.Terms) -> float:
    """The absolute scale a gradient's error is judged against (tolerances.gradient_scale, maxima per array)."""
    peak = float(np.max(np.abs(ref))) if ref.size else 0.0
    return gradient_scale(batch, terms.n, float(np.max(terms.abs_sum)), float(np.max(terms.rss)), peak)


def _relative(err: float, scale: float) -> float:
    """An absolute error over its scale; an error where the scale is 0 (every term 0) is infinitely off."""
    if scale > 0:
        return err / scale
    return 0.0 if err == 0 else float("inf")


def _cancelling(per: dict) -> str:
    """Which parameters' gradients cancel, so are judged on a scale above max |reference|."""
    k = {n: p["conditioning"] for n, p in per.items() if p["conditioning"] is None or p["conditioning"] > 2}
    if not k:
        return "errors relative to max |reference| (no gradient's sum cancels)"
    said = ", ".join(f"{n} x{c:,.0f}" if c is not None else f"{n} (all zero)" for n, c in k.items())
    return f"errors relative to max |reference|, or to the terms' scale where a sum cancels ({said})"


def _grads_verdict(per: dict, pools: list[dict], own: dict, figs: dict, tol: float) -> str:
    """The gradient check's finding in plain words: who is off and where, or what explains a difference."""
    off = [fw for fw, e in own.items() if e > tol]
    if off:
        return "; ".join(
            f"{short(fw)} is off float64 with its own max-pool routing: "
            + ", ".join(f"{n} {p[f'{fw}_vs_f64']:.1e}" for n, p in per.items() if p[f"{fw}_vs_f64"] > tol)
            + " (not explained by pooling ties)"
            for fw in off
        )
    windows = sum(p["windows"] for p in pools)
    ties = sum(p["near_ties"] for p in pools)
    ties_said = f"{ties:,} of {windows:,} pooling windows are near-ties (within {NEAR_TIE_ULPS} float32 ulps)"
    agree = " and ".join(f"{short(fw)} {e:.1e}" for fw, e in own.items())
    apart = [(a, b) for a, b in pairs(own) if figs[f"{a}_vs_{b}"] > tol]
    if not apart:
        worst = max(per, key=lambda n: max(v for k, v in per[n].items() if k.endswith("_f64")))
        return f"against float64 with its own routing: {agree} (worst: {worst}); {ties_said}; {_cancelling(per)}"
    return "; ".join(_routed_apart(a, b, per, pools, figs[f"{a}_vs_{b}"], agree, ties_said) for a, b in apart)


def _routed_apart(a: str, b: str, per: dict, pools: list[dict], cross: float, agree: str, ties_said: str) -> str:
    """Why frameworks `a` and `b`, each within float64 under its own routing, differ by `cross`: the windows they
    route differently (oracle.pool_window_stats' count for the pair), or none."""
    routed = f"routed_differently_{'_'.join(sorted((a, b)))}"
    n = sum(p.get(routed, 0) for p in pools)
    if not n:
        return (
            f"{short(a)} and {short(b)} differ by {cross:.1e}, within the sum of their own errors against float64 "
            f"({agree}); {ties_said}, none routed differently"
        )
    where = ", ".join(f"{p['layer']}: {p[routed]}" for p in pools if p.get(routed))
    worst = max(per, key=lambda k: per[k][f"{a}_vs_{b}"])
    windows, ties = sum(p["windows"] for p in pools), sum(p["near_ties"] for p in pools)
    return (
        f"{short(a)} and {short(b)} differ by {cross:.1e} ({worst}) because they route {n:,} of {windows:,} pooling "
        f"windows differently ({where}; near-ties within {NEAR_TIE_ULPS} float32 ulps: {ties:,}); with its own "
        f"routing each agrees with float64: {agree}"
    )


# Test accuracy is judged only once BatchNorm's moving statistics (momentum 0.99, what inference normalises with)
# keep under 1% of their initial values (mean 0, variance 1, against raw pixels' ~73 and ~8000): 0.99^n <= 0.01,
# n >= 459. Before that a model's test accuracy swings with how its layers react to mis-normalised inputs (the
# figures, shorter and longer, are in docs/numerics.md). The notebook's schedule, 1,000 steps, is judged.
BN_MOMENTUM = 0.99
MIN_ACCURACY_STEPS = math.ceil(math.log(0.01) / math.log(BN_MOMENTUM))


def trajectory(
    a: dict, b: dict, va: str, vb: str, tols: dict, replicas: int, names=("a", "b"), key: str | None = None
) -> list[dict]:
    """The CNN's trajectory check: parity.workloads.trained.checks.trajectory over the CNN's weights."""
    return trained.trajectory(a, b, va, vb, tols, replicas, names, key, CNN_WEIGHTS)


def accuracy(rows: list[dict], band: float, min_steps: int = MIN_ACCURACY_STEPS) -> list[dict]:
    """The CNN's accuracy check: parity.workloads.trained.checks.accuracy, judged once BatchNorm has settled."""
    return trained.accuracy(rows, band, min_steps)
