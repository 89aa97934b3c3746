"""Judging: each row against the device's peak and its own spread, the re-measured owner's drift, and each
workload's parity checks and closing checks."""

from __future__ import annotations

import dataclasses

from parity.judging import roofline, stats
from parity.record.rows import Row

SPREAD_WARN = 0.10  # IQR / median above this: the machine was too noisy for the median to be trusted
DRIFT_NOTED = 0.10  # a re-measured row whose median moved more than this is named in the notes


def row_peak(row: Row, peak: roofline.Peak | None, here: bool = True) -> roofline.Peak | None:
    """The peak `row` is judged against, from its run's `peak`: a bfloat16 row's is the device's bfloat16 peak.
    here: the row ran on this machine (a CPU's bfloat16 peak is read from this CPU; elsewhere none is known)."""
    if peak and row.dtype == "bfloat16":
        return roofline.bf16_peak(row.device, row.device_kind, peak) if here or row.device != "cpu" else None
    return peak


def judge_row(row: Row, peak: roofline.Peak | None) -> None:
    """Roofline fields, the impossible-throughput guard, and the spread warning for one row."""
    peak = row_peak(row, peak)
    if peak:
        row.update(roofline.roofline(row, peak, row.replicas))
    else:
        row.impossible = roofline.impossible(row, None, row.replicas)
    if row.impossible:
        row.verified, row.invalid_reason = False, row.impossible
    m = stats.modes(row.times_s) if row.verified and row.times_s else None
    row.modes = dataclasses.asdict(m) if m else None
    med, iqr = row.median_s, row.iqr_s
    row.noisy = bool(med and iqr is not None and row.reps > 1 and iqr / med > SPREAD_WARN)
    row.compiler_flops_ratio, row.compiler_flops_ratio_unpadded = roofline.compiler_ratios(
        row.compiler_flops, row.flops, row.flops_unpadded
    )


def by_checks(rows: list[Row], checks: list[dict]) -> None:
    """A training row whose framework fails one of its workload's checks against float64 (a forward block, the
    loss, the gradients: a figure `<framework>_vs_f64` above the check's tolerance) is not verified, naming the
    first such check: the row timed a model that computes something else (in place)."""
    failed: dict[tuple[str, str], str] = {}
    for c in checks:
        for fw in {k.removesuffix("_vs_f64") for k in c.get("figures", {}) if k.endswith("_vs_f64")}:
            got, tol = c["figures"][f"{fw}_vs_f64"], c.get("tolerance")
            if c.get("passed") is False and got is not None and tol is not None and got > tol:
                failed.setdefault((c["workload"], fw), f"{c['check']}: {got:.3g} against a bound of {tol:.2g}")
    for row in rows:
        said = failed.get((row.kind.removesuffix("_train"), row.framework)) if row.kind.endswith("_train") else None
        if row.verified and said:
            row.verified, row.invalid_reason = False, f"its framework fails the check against float64, {said}"


def drift_note(owner: str, first: list[Row], again: list[Row]) -> str:
    """What an owner's rows did when timed again at its end (one owner of the device at a time); each first row gets
    its `drift`."""
    later = {r.key(): r for r in again}
    moved = []
    for r in first:
        a = later.get(r.key())
        if r.verified and a and a.verified and r.median_s and a.median_s:
            r.drift = a.median_s / r.median_s - 1
            moved.append((r.drift, f"{r.kind} {r.framework} {r.variant} x{r.replicas}"))
    text = f"one owner of the device at a time: {owner}'s rows timed again at the end of its turn; their medians moved "
    if not moved:
        return text + "(no verified row to compare)"
    lo, hi = min(d for d, _ in moved), max(d for d, _ in moved)
    big = [f"{what} {d:+.1%}" for d, what in moved if abs(d) > DRIFT_NOTED]
    return (
        text
        + f"{lo:+.1%} to {hi:+.1%} between the first and the last measurement (the table shows the first)"
        + (f"; more than {DRIFT_NOTED:.0%}, compare with care: " + ", ".join(big) if big else "")
    )


def parity_note(workload: str, replicas: int, seconds: float, who: list[str], hello: dict, ahead: bool = False) -> str:
    """How long a workload's parity arrays took, by whom, and how the workers compiled them where not as they
    compile the timed programs (each hello's check_compiler), and whether side by side (`ahead`: Config.ahead)."""
    how = sorted({h.get("check_compiler") for h in hello.values()} - {None, ""})
    compiled = f"; compiled at {', '.join(how)}" if how else ""
    compiled += (
        "; each worker's gradient and trajectory programs compiled side by side, while its rows' programs compiled"
        if ahead
        else ""
    )
    return f"{workload} parity x{replicas or 'all'}: its arrays took {seconds:.0f} s ({', '.join(who)}{compiled})"
