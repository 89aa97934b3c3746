"""The checks every trained workload shares: a trajectory of one trainer against another's (the same dropout-free
steps from the same weights), and the test accuracies of the frameworks after training. Each workload's own checks
(forward blocks, gradients against float64) are in its package."""

from __future__ import annotations

import numpy as np

from parity.common.float64 import errors
from parity.common.frameworks import pairs


def row(check: str, figures: dict[str, float], tol: float, replicas: int | None = None, detail: str = "") -> dict:
    """One check's record: its figures (by pair of frameworks or by name), the worst of them against `tol`."""
    worst = max(figures.values()) if figures else float("nan")
    return {
        "check": check,
        "replicas": replicas,
        "figures": figures,
        "max_rel_err": worst,
        "tolerance": tol,
        "passed": bool(worst <= tol),
        "detail": detail,
    }


def trajectory(
    a: dict,
    b: dict,
    va: str,
    vb: str,
    tols: dict,
    replicas: int,
    names: tuple[str, str],
    key: str | None,
    table: tuple,
) -> list[dict]:
    """The same dropout-free steps from the same weights: per-step loss and final parameters, of variant `va` in
    saved arrays `a` against `vb` in `b` (`names` label them: their frameworks, 'tf' and 'jax'; `key` names the
    figure, '<a>_vs_<b>' from `names` unless given; `table`: the model's weights in Keras's order (parity.api's
    CNN_WEIGHTS, LSTM_WEIGHTS); the moving statistics' row only where it has some)."""
    key = key or f"{names[0]}_vs_{names[1]}"
    la, lb = a[f"traj/{va}/loss"], b[f"traj/{vb}/loss"]
    every = max(int(a.get(f"traj/{va}/loss_every", 1)), int(b.get(f"traj/{vb}/loss_every", 1)))
    if every > 1:  # one side knows its loss only as each dispatch's mean: compare both at that grain
        la, lb = _block_means(la, every), _block_means(lb, every)
    # Relative to the trajectory's largest loss, like every other figure here: per step, a loss that
    # falls to ~0.005 turns float32 rounding (amplified step by step, as TF with and without XLA
    # diverge from each other by 1e-2 per step) into large ratios of tiny numbers.
    loss = float(np.max(np.abs(la - lb)) / np.max(np.abs(la)))
    per_step = float(np.max(np.abs(la - lb) / np.abs(la)))
    n = len(table)
    wa = [a[f"traj/{va}/w{i:03d}"].astype(np.float64) for i in range(n)]
    wb = [b[f"traj/{vb}/w{i:03d}"].astype(np.float64) for i in range(n)]
    trainable = [i for i, w in enumerate(table) if w.trainable]
    diff = np.sqrt(sum(np.sum((wa[i] - wb[i]) ** 2) for i in trainable))
    params = float(diff / np.sqrt(sum(np.sum(wa[i] ** 2) for i in trainable)))
    label = f"{names[0]} {va} vs {names[1]} {vb}, {len(a[f'traj/{va}/loss'])} steps"
    grain = f"; loss as the mean of each {every} steps (one dispatch)" if every > 1 else ""
    rows = [
        row(
            f"trajectory loss ({label})",
            {key: loss},
            tols["trajectory_loss"],
            replicas,
            f"per-step relative, not judged: {per_step:.1e}{grain}",
        ),
        row(f"trajectory params, rel L2 ({label})", {key: params}, tols["trajectory_params"], replicas),
    ]
    if len(trainable) < n:  # BatchNorm's moving statistics
        stats = max(errors(wb[i], wa[i])["max_rel_err"] for i in range(n) if i not in trainable)
        rows.append(row(f"trajectory BN moving stats ({label})", {key: stats}, tols["trajectory_params"], replicas))
    return rows


def _block_means(a: np.ndarray, every: int) -> np.ndarray:
    """Means of consecutive blocks of `every` steps (the last block may be shorter)."""
    return np.array([a[s : s + every].mean() for s in range(0, len(a), every)])


def _accuracy_runs(rows: list[dict]) -> tuple[dict[str, list[float]], dict[str, tuple[str, str]]]:
    """Test accuracies by 'framework variant' (one per seed), and each variant's (framework, number format)."""
    runs: dict[str, list[float]] = {}
    fmt = {}
    for row in rows:
        runs.setdefault(f"{row['framework']} {row['variant']}", []).append(row["test_accuracy"])
        fmt[f"{row['framework']} {row['variant']}"] = (row["framework"], row.get("dtype", "float32"))
    return runs, fmt


def accuracy(rows: list[dict], band: float, min_steps: int) -> list[dict]:
    """After training with dropout on: each variant's test accuracy (mean over seeds), per replica count.

    The gap between any two frameworks' means must be within `band`, and so must the gap between a mixed-precision
    ('+bf16') variant and its own framework's float32 ones. Runs shorter than min_steps are reported but
    not judged (passed is None).
    """
    out = []
    for r in sorted({row["replicas"] for row in rows}):
        mine = [row for row in rows if row["replicas"] == r and row.get("test_accuracy") is not None]
        check = {"check": "test accuracy after training (dropout on)", "replicas": r}
        check.update(max_rel_err=None, tolerance=band)
        if not mine:
            steps = min(row["spec"]["epochs"] * row["spec"]["steps_per_epoch"] for row in rows if row["replicas"] == r)
            detail = f"not evaluated: {steps} steps < {min_steps}"
            out.append({**check, "figures": {}, "passed": None, "detail": detail})
            continue
        runs, fmt = _accuracy_runs(mine)
        acc = {k: float(np.mean(v)) for k, v in runs.items()}
        fw_pairs = pairs(fw for fw, _ in fmt.values())
        if not fw_pairs:  # one framework: nothing to compare
            continue
        # every pair of frameworks in every number format, and each mixed-precision variant against its own
        # float32 ones
        compared = [(a, b) for x, y in fw_pairs for a in acc if fmt[a][0] == x for b in acc if fmt[b][0] == y]
        mixed = [a for a in acc if fmt[a][1] == "bfloat16"]
        compared += [(a, b) for a in mixed for b in acc if fmt[a][0] == fmt[b][0] and fmt[b][1] == "float32"]
        gap = max(abs(acc[a] - acc[b]) for a, b in compared)
        seeds = min(len(v) for v in runs.values())
        steps = min(row["spec"]["epochs"] * row["spec"]["steps_per_epoch"] for row in mine)
        judged = steps >= min_steps
        detail = f"gap {gap:.4f}, mean over {seeds} seed(s)"
        detail += "" if judged else f"; not judged: {steps} steps < {min_steps}"
        passed = bool(gap <= band) if judged else None
        out.append({**check, "figures": acc, "per_seed": runs, "max_abs_gap": gap, "passed": passed, "detail": detail})
    return out
