"""The notes under the tables: what '% peak' divides by, FLOP cross-checks, spread, memory, modes, and each
framework's fastest against its fastest out-of-the-box row."""

from __future__ import annotations

from parity.judging import settling, summary
from parity.judging.roofline import compiler_ratios
from parity.output.cells import time_cell

FLOPS_DISAGREE = 0.10  # compiler count vs formula: beyond this the row's GFLOP/s deserves a second look


def roofline_notes(doc: dict) -> list[str]:
    """What '% peak' and 'bound' divide by, FLOP cross-checks, and which rows were too noisy."""
    notes, peak = [], doc["env"].get("peak")
    if peak:
        m, c = peak.get("measured_flops"), peak.get("computed_flops")
        figs = [f"measured {m / 1e9:.1f} GFLOP/s" if m else None, f"computed {c / 1e9:.1f} GFLOP/s" if c else None]
        figs = ", ".join(f for f in figs if f) or (f"{peak['flops'] / 1e12:.1f} TFLOP/s" if peak["flops"] else "none")
        bw = f"; memory {peak['bandwidth'] / 1e9:.1f} GB/s" if peak.get("bandwidth") else ""
        notes.append(
            f"% peak: the necessary arithmetic per second (FLOPs without SAME padding's zeros) over the "
            f"larger {peak['number_format']} peak of the devices used ({peak['device_kind']}: {figs}{bw}; "
            f"{peak['source']}); bound: compute or memory, by the row's FLOP per minimum byte against the "
            f"peak's ridge point; a row above the peak shows no % and is named below, a row far above "
            f"it (x{peak.get('headroom', 1.0):g}) is marked invalid"
        )
    seen: dict[tuple, list[dict]] = {}
    for r in doc["rows"]:
        if r.get("compiler_flops") is not None and r.get("flops"):  # a count to cross-check a formula with
            seen.setdefault((r["kind"], r.get("compiler_flops_source")), []).append(r)
    for (kind, src), rs in seen.items():
        r = rs[0]
        c, f, u = r["compiler_flops"], r["flops"], r.get("flops_unpadded") or r["flops"]
        # a counter may or may not count the padding's zeros: each row is judged against the closer count
        bad = [
            x
            for x in rs
            if min(abs(q - 1) for q in compiler_ratios(x["compiler_flops"], x.get("flops"), x.get("flops_unpadded")))
            > FLOPS_DISAGREE
        ]
        names = ", ".join(f"{x['variant']} x{x['replicas']}" for x in bad)
        flag = f" DISAGREES by more than 10% in: {names}" if bad else f" ({len(rs)} row(s) counted, all within 10%)"
        notes.append(
            f"{kind} FLOPs per call: formula {f / 1e9:.4g} G ({u / 1e9:.4g} G without SAME padding's zeros), "
            f"{src} {c / 1e9:.4g} G ({c / f:.3f}x, {c / u:.3f}x){flag}"
        )
    above = [
        f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}: {r['above_peak']}"
        for r in doc["rows"]
        if r.get("above_peak")
    ]
    if above:
        notes.append("above the peak, no % shown: " + "; ".join(above))
    noisy = [f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}" for r in doc["rows"] if r.get("noisy")]
    if noisy:
        notes.append(
            f"! spread (IQR) above 10% of the median, the figure is not to be trusted to better than "
            f"that: {', '.join(noisy)}"
        )
    return notes


def _name(r: dict) -> str:
    return f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}"


def at_least(r: dict) -> bool:
    """Whether a row's peak memory is a lower bound: its field, or in files older than it, its source's words."""
    if r.get("peak_memory_at_least") is not None:
        return r["peak_memory_at_least"]
    return (r.get("peak_memory_source") or "").startswith("at least")


def memory_note(rows: list[dict]) -> list[str]:
    """Where the peak memory was read (parity.engine.memory), the rows whose figure is a lower bound, and every row
    whose peak is a measurement bug."""
    shown = [r for r in rows if r.get("peak_memory_bytes") is not None]
    low = [r for r in shown if at_least(r)]
    sources = sorted({r["peak_memory_source"].split("): ", 1)[-1] for r in shown})
    notes = (
        [
            "peak mem: what the row holds after its first call plus its largest rise during one later call, above "
            f"the worker's level before the row; compilation left out ({'; '.join(sources)})"
        ]
        if sources
        else []
    )
    for why in dict.fromkeys(r["peak_memory_source"].split("): ", 1)[0] for r in low):  # each reason once
        named = ", ".join(_name(r) for r in low if r["peak_memory_source"].startswith(why + "): "))
        notes.append(f">= peak mem: a lower bound, {why}): {named}")
    bugs = [
        f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}: {r['peak_memory_source']}"
        for r in rows
        if (r.get("peak_memory_source") or "").startswith("MEASUREMENT BUG")
    ]
    return notes + (["peak mem not shown: " + "; ".join(bugs)] if bugs else [])


def modes_note(rows: list[dict]) -> list[str]:
    """Rows whose times fell into two groups: both modes, since one median between them describes neither."""
    two = [
        f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}: {time_cell(m['low_s'])} "
        f"({m['low_n']} calls) and {time_cell(m['high_s'])} ({m['high_n']} calls)"
        for r in rows
        if (m := r.get("modes"))
    ]
    if not two:
        return []
    return [
        "2 modes: these rows' times fell into two groups far apart (parity.judging.stats.modes), and their median "
        "describes neither: " + "; ".join(two)
    ]


# What each trained workload's 5-notebook-epoch estimate is set beside: the figures of the notebook it comes from
NOTEBOOKS = {
    "cnn_train": "the article's comparison, 5 notebook epochs (500 steps at global batch 1024)",
    "lstm_train": "the Shakespeare notebook's size (2 LSTM layers of 512 units), 5 epochs of 100 steps at global "
    "batch 1024",
}
NOTEBOOK_FIGURES = {
    "cnn_train": "article: TPU v2-8 ~40 s, K80 GPU over 2 minutes",
    "lstm_train": "the notebook's TPU v2-8: 167-170 ms a step after its first epoch, on text sequences of 100 "
    "characters, not 28 image rows: a loose reference",
}


def notebook_notes(rows: list[dict]) -> list[str]:
    """Each trained workload's rows at its notebook's size: 5 notebook epochs, extrapolated from the row's measured
    step time plus its first-epoch overhead, beside that notebook's own figure."""
    out = []
    for kind, what in NOTEBOOKS.items():
        five = [r for r in rows if r["kind"] == kind and r.get("est_5_notebook_epochs_s") is not None]
        if five:
            said = ", ".join(
                f"{r['framework']} {r['variant']} x{r['replicas']} {r['est_5_notebook_epochs_s']:.0f} s" for r in five
            )
            out.append(f"{what}, extrapolated from each row's step time plus its first-epoch overhead: {said} "
                       f"({NOTEBOOK_FIGURES[kind]})")  # fmt: skip
    return out


def kernel_note(rows: list[dict]) -> list[str]:
    """Which kernel path each row reports (a recurrent layer's: a framework may choose among several silently,
    Keras's cuDNN path on a GPU; a lever's: a depthwise convolution written another way), grouped by path; worded
    for every model, not only the recurrent ones."""
    paths: dict[str, list[str]] = {}
    for r in rows:
        if r.get("kernel_path"):
            paths.setdefault(r["kernel_path"], []).append(f"{r['kind']} {r['framework']} {r['variant']}")
    if not paths:
        return []
    said = "; ".join(f"{p}: {', '.join(dict.fromkeys(names))}" for p, names in paths.items())
    return [f"kernel path each row reports (kernel_path): {said}"]


STALL = 20  # a timed call this many times the row's median: the process stood still (stopped, starved, swapped)


def stall_note(rows: list[dict]) -> list[str]:
    """Verified rows with a call far slower than their median (STALL): one call cannot move a median, nor the IQR,
    nor make two modes, so it is said here; the median stands, the machine was not the row's alone."""
    slow = [
        f"{_name(r)}: {time_cell(max(r['times_s']))}, {max(r['times_s']) / r['median_s']:.0f}x its median"
        for r in rows
        if r.get("verified") and r.get("times_s") and r.get("median_s") and max(r["times_s"]) > STALL * r["median_s"]
    ]
    if not slow:
        return []
    return [
        f"stalled: a timed call more than {STALL}x its row's median (the process stood still: stopped, starved or "
        f"swapped; the median stands, but the machine was not the run's alone): " + "; ".join(slow)
    ]


def fastest_notes(rows: list[dict]) -> list[str]:
    """Per row kind, replica count and number format: each framework's fastest row against its fastest
    out-of-the-box one, with the interval (the summary gives each framework's fastest over the reference's)."""
    notes = []
    for kind, n, dtype in summary.groups(rows):
        parts = []
        for fw in dict.fromkeys(r["framework"] for r in rows):
            b = summary.fastest(rows, kind, n, dtype, fw)
            if b is None:
                continue
            o = summary.fastest(rows, kind, n, "float32", fw, tuned=False)
            said = f"{fw} fastest {b['variant']} {time_cell(b['median_s'])}"
            if o is None or o is b:
                parts.append(said + (" (out of the box)" if o is b else ""))
            else:
                speedup = summary.ratio(o, b).text()
                parts.append(f"{said}: out of the box {o['variant']} {time_cell(o['median_s'])} takes {speedup}")
        notes.append(f"{kind} x{n}{'' if dtype == 'float32' else f' {dtype}'}: " + "; ".join(parts))
    return notes


def calls_rule(env: dict) -> str:
    """How many timed calls a row got, by the rule its file names (before the settling rule: min_time_s)."""
    if "budget_s" in env:
        return (
            f"at least {env['reps']} calls per row (a training row: its epochs after the first), more while the row or "
            f"a comparison it is in is not settled (a 95% interval within {settling.WIDTH:.0%} of its figure), until "
            f"{env['budget_s']:g} s of timed calls (each row's count is in the JSON; docs/statistics.md)"
        )
    return (
        f"at least {env['reps']} calls per row, more until {env.get('min_time_s', 0):g} s of timed calls (each "
        "row's count is in the JSON)"
    )
