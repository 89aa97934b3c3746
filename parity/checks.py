"""CNN parity checks: TF vs JAX vs the float64 oracle, from the arrays each worker saved."""

from __future__ import annotations

import numpy as np

from parity.oracle import compare
from parity.workloads import CNN_BLOCKS as BLOCKS
from parity.workloads import CNN_LAYERS

_FIELDS = {"bn": ("gamma", "beta", "moving_mean", "moving_variance"), "conv": ("kernel", "bias"),
           "dense": ("kernel", "bias")}  # fmt: skip
WEIGHT_NAMES = [f"{layer}.{f}" for layer, kind in CNN_LAYERS for f in _FIELDS[kind]]
GRAD_NAMES = [n for n in WEIGHT_NAMES if "moving" not in n]


def _row(check: str, figures: dict[str, float], tol: float, replicas: int | None = None, detail: str = "") -> dict:
    worst = max(figures.values()) if figures else float("nan")
    return {"check": check, "replicas": replicas, "figures": figures, "max_rel_err": worst, "tolerance": tol,
            "passed": bool(worst <= tol), "detail": detail}  # fmt: skip


def forward(saved: dict[str, dict], ref: dict[str, np.ndarray], tol: float) -> list[dict]:
    """Per block: each framework vs the float64 oracle, and the frameworks vs each other."""
    rows = []
    fws = sorted(saved)
    for b in BLOCKS:
        figs = {f"{fw}_vs_f64": compare(saved[fw][f"forward/{b}"], ref[b])["max_rel_err"] for fw in fws}
        if len(fws) == 2:
            figs["tf_vs_jax"] = compare(saved["tf"][f"forward/{b}"], saved["jax"][f"forward/{b}"])["max_rel_err"]
        rows.append(_row(f"forward {b}", figs, tol))
    return rows


def grads(tf: dict, jx: dict, tol: float, replicas: int) -> list[dict]:
    """Loss and every parameter's gradient of one training batch (batch statistics, no dropout)."""
    loss = abs(float(tf["loss"]) - float(jx["loss"])) / abs(float(tf["loss"]))
    errs = [compare(jx[f"grad/{i:03d}"], tf[f"grad/{i:03d}"])["max_rel_err"] for i in range(len(GRAD_NAMES))]
    worst = int(np.argmax(errs))
    return [
        _row("loss (one batch)", {"tf_vs_jax": loss}, tol, replicas),
        _row("gradients (every parameter)", {"tf_vs_jax": max(errs)}, tol, replicas,
             f"worst: {GRAD_NAMES[worst]}"),
    ]  # fmt: skip


def trajectory(tf: dict, jx: dict, tf_variant: str, jax_variant: str, tols: dict, replicas: int) -> list[dict]:
    """The same dropout-free steps from the same weights: per-step loss and final parameters."""
    lt, lj = tf[f"traj/{tf_variant}/loss"], jx[f"traj/{jax_variant}/loss"]
    # Relative to the trajectory's largest loss, like every other figure here: per step, a loss that
    # falls to ~0.005 turns float32 rounding (amplified step by step, as TF with and without XLA
    # diverge from each other by 1e-2 per step) into large ratios of tiny numbers.
    loss = float(np.max(np.abs(lt - lj)) / np.max(np.abs(lt)))
    per_step = float(np.max(np.abs(lt - lj) / np.abs(lt)))
    n = len(WEIGHT_NAMES)
    wt = [tf[f"traj/{tf_variant}/w{i:03d}"].astype(np.float64) for i in range(n)]
    wj = [jx[f"traj/{jax_variant}/w{i:03d}"].astype(np.float64) for i in range(n)]
    trainable = [i for i, name in enumerate(WEIGHT_NAMES) if "moving" not in name]
    diff = np.sqrt(sum(np.sum((wt[i] - wj[i]) ** 2) for i in trainable))
    params = float(diff / np.sqrt(sum(np.sum(wt[i] ** 2) for i in trainable)))
    stats = max(compare(wj[i], wt[i])["max_rel_err"] for i in range(n) if i not in trainable)
    label = f"tf {tf_variant} vs jax {jax_variant}, {len(lt)} steps"
    return [
        _row(f"trajectory loss ({label})", {"tf_vs_jax": loss}, tols["trajectory_loss"], replicas,
             f"per-step relative, not judged: {per_step:.1e}"),
        _row(f"trajectory params, rel L2 ({label})", {"tf_vs_jax": params}, tols["trajectory_params"], replicas),
        _row(f"trajectory BN moving stats ({label})", {"tf_vs_jax": stats}, tols["trajectory_params"], replicas),
    ]


MIN_ACCURACY_STEPS = 100  # below this, test accuracy has not settled enough to compare frameworks


def accuracy(rows: list[dict], band: float) -> list[dict]:
    """After training with dropout on: each variant's test accuracy (mean over seeds), per replica count.

    The gap between the frameworks' means must be within `band`. Runs shorter than
    MIN_ACCURACY_STEPS are reported but not judged (passed is None).
    """
    out = []
    for r in sorted({row["replicas"] for row in rows}):
        mine = [row for row in rows if row["replicas"] == r and row.get("test_accuracy") is not None]
        if not mine:
            steps = min(row["spec"]["epochs"] * row["spec"]["steps_per_epoch"] for row in rows if row["replicas"] == r)
            out.append({"check": "test accuracy after training (dropout on)", "replicas": r, "figures": {},
                        "max_rel_err": None, "tolerance": band, "passed": None,
                        "detail": f"not evaluated: {steps} steps < {MIN_ACCURACY_STEPS}"})  # fmt: skip
            continue
        runs: dict[str, list[float]] = {}
        for row in mine:
            runs.setdefault(f"{row['framework']} {row['variant']}", []).append(row["test_accuracy"])
        acc = {k: float(np.mean(v)) for k, v in runs.items()}
        tf = [v for k, v in acc.items() if k.startswith("tf")]
        jx = [v for k, v in acc.items() if k.startswith("jax")]
        if not (tf and jx):
            continue
        gap = max(abs(a - b) for a in tf for b in jx)
        seeds = min(len(v) for v in runs.values())
        steps = min(row["spec"]["epochs"] * row["spec"]["steps_per_epoch"] for row in mine)
        judged = steps >= MIN_ACCURACY_STEPS
        detail = f"gap {gap:.4f}, mean over {seeds} seed(s)" + (
            "" if judged else f"; not judged: {steps} steps < {MIN_ACCURACY_STEPS}")
        out.append({"check": "test accuracy after training (dropout on)", "replicas": r, "figures": acc,
                    "per_seed": runs, "max_abs_gap": gap, "max_rel_err": None, "tolerance": band,
                    "passed": bool(gap <= band) if judged else None, "detail": detail})  # fmt: skip
    return out
