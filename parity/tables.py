"""The text a user reads: the speed table, the checks table, footnotes, and their Markdown form."""

from __future__ import annotations

from parity import summary
from parity.roofline import compiler_ratios
from parity.rows import COLUMNS


def fmt(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def time_cell(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s" if s < 100 else f"{s:.0f} s"


def bytes_cell(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def _first(r: dict) -> float | None:
    """The first call: an operation's compile_s, a training row's first epoch."""
    return r.get("first_epoch_s") if r.get("first_epoch_s") is not None else r.get("compile_s")


def _iqr(r: dict) -> str:
    if not r["verified"] or r["reps"] < 2:
        return "-"
    return time_cell(r["iqr_s"]) + (" !" if r.get("noisy") else "") + (" 2 modes" if r.get("modes") else "")


def _cells(r: dict) -> list[str]:
    """One row's figures in COLUMNS order from 'median' on; an invalid row shows none."""
    ok = r["verified"]
    return [
        time_cell(r["median_s"]) if ok else "INVALID",
        _iqr(r),
        time_cell(_first(r)) if ok else "-",
        fmt(r["gflops_per_s"], ".1f") if ok else "-",
        fmt(r.get("pct_peak"), ".1f") if ok else "-",
        (r.get("bound") or "-") if ok else "-",
        fmt(r.get("images_per_s"), ".1f") if ok else "-",
        bytes_cell(r.get("peak_memory_bytes")) if ok else "-",
        fmt(r["max_rel_err"], ".1e"),
        fmt(r.get("xfw_max_rel_err"), ".1e"),
    ]


def grid(header, body) -> str:
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(b) for b in body)])


def replicas_cell(r: dict) -> str:
    """'8', or '8 (2 proc)' for a multi-process row."""
    p = r.get("processes") or 1
    return f"{r['replicas']}" + (f" ({p} proc)" if p > 1 else "")


def table(rows: list[dict]) -> str:
    """The speed table; an invalid row shows its reason instead of figures."""
    body = [
        (
            r["workload"],
            r["framework"],
            r["variant"],
            r["device"],
            replicas_cell(r),
            r["precision"],
            *_cells(r),
            "yes" if r["verified"] else f"NO: {r['invalid_reason']}",
        )
        for r in rows
    ]
    return grid(COLUMNS, body)


SUMMARY_COLUMNS = ("workload", "replicas", "format", "TF best", "JAX best", "JAX/TF (95% CI)", "parity")


def _ratio_cell(jax: dict, tf: dict) -> str:
    q = summary.ratio(jax, tf)
    if q.low is None:
        return f"{q.ratio:.2f}x (" + ("no raw times" if not jax.get("times_s") else f"{min(q.calls)} calls") + ")"
    return f"{q.ratio:.2f}x ({q.low:.2f}-{q.high:.2f})" + (" no difference" if q.contains_one() else "")


def summary_body(doc: dict) -> list[tuple[str, ...]]:
    """One line per workload x replicas x format, in SUMMARY_COLUMNS order: the answer before the full table."""
    body = []
    for wl, n, dtype in summary.groups(doc["rows"]):
        tf, jax = (summary.best(doc["rows"], wl, n, dtype, fw) for fw in ("tf", "jax"))
        cells = [f"{b['variant']} {time_cell(b['median_s'])}" if b else "-" for b in (tf, jax)]
        shown = _ratio_cell(jax, tf) if tf and jax else "-"
        body.append((wl, str(n), dtype, *cells, shown, summary.verdict(doc, wl, n, dtype)))
    return body


def summary_table(doc: dict) -> str:
    """The summary and how its intervals were made."""
    body = summary_body(doc)
    if not body:
        return "no verified row: nothing to summarise"
    return grid(SUMMARY_COLUMNS, body) + "\n  * " + summary.interval_note(doc)


def _figure(k: str, v) -> str:
    return f"{k} {v:.2e}" if "_vs_" in k else f"{k} {v:.4f}"


CHECK_COLUMNS = ("parity check", "replicas", "figures", "tolerance", "result", "note")


def _check_cells(c: dict, unjudged: str) -> tuple[str, ...]:
    """One check's cells in CHECK_COLUMNS order; `unjudged` where it was reported but not judged."""
    figures = ", ".join(_figure(k, v) for k, v in c["figures"].items())
    result = {True: "PASS", False: "FAIL", None: unjudged}[c["passed"]]
    return (c["check"], str(c.get("replicas") or "-"), figures, f"{c['tolerance']:.2g}", result, c.get("detail", ""))


def checks_table(checks: list[dict]) -> str:
    """The CNN parity checks: figures, tolerance, pass/fail."""
    return grid(CHECK_COLUMNS, [_check_cells(c, "-") for c in checks])


def footnotes(doc: dict) -> str:
    env = doc["env"]
    calls = (
        f"{env['reps']} calls per row (fixed: a multi-process run)"
        if env.get("cluster")
        else f"at least {env['reps']} calls per row, more until {env.get('min_time_s', 0):g} s of timed calls (each "
        f"row's count is in the JSON)"
    )
    notes = [
        f"median/IQR: steady-state time per call, every call synchronised and its output checked; {calls}, "
        f"frameworks interleaved",
        "first call: tracing + compilation + one execution, kept out of the median",
        "err vs f64: max |out - oracle| / max |oracle| on the first and last batch rows (float64 NumPy oracle); "
        "err vs other: the same against the other framework's output",
    ]
    if any(r["workload"] == "cnn_train" for r in doc["rows"]):
        notes.append(
            "cnn_train: median/IQR per epoch after the first; first call = the first epoch (includes "
            "compilation); img/s = images per second of a steady-state epoch; err columns: see checks"
        )
    five = [r for r in doc["rows"] if r.get("est_5_notebook_epochs_s") is not None]
    if five:
        notes.append(
            "the article's comparison, 5 notebook epochs (500 steps at global batch 1024), extrapolated from "
            "each row's measured step time plus its first-epoch overhead: "
            + ", ".join(
                f"{r['framework']} {r['variant']} x{r['replicas']} {r['est_5_notebook_epochs_s']:.0f} s" for r in five
            )
            + " (article: TPU v2-8 ~40 s, K80 GPU over 2 minutes)"
        )
    notes += roofline_notes(doc) + modes_note(doc["rows"]) + best_notes(doc["rows"])
    notes += env.get("notes", [])
    for s in env.get("skipped", []):
        notes.append(f"not run: {s['framework']}: {s['reason']}")
    notes.append(
        f"host: {env['host_cpu']}, {env['host_cores']} cores; "
        + "; ".join(
            f"{fw} {' '.join(f'{k} {v}' for k, v in f['versions'].items())}" for fw, f in env["frameworks"].items()
        )
    )
    return "\n".join(f"  * {n}" for n in notes)


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
        if r.get("compiler_flops") is not None:
            seen.setdefault((r["workload"], r.get("compiler_flops_source")), []).append(r)
    for (wl, src), rs in seen.items():
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
            f"{wl} FLOPs per call: formula {f / 1e9:.4g} G ({u / 1e9:.4g} G without SAME padding's zeros), "
            f"{src} {c / 1e9:.4g} G ({c / f:.3f}x, {c / u:.3f}x){flag}"
        )
    above = [
        f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}: {r['above_peak']}"
        for r in doc["rows"]
        if r.get("above_peak")
    ]
    if above:
        notes.append("above the peak, no % shown: " + "; ".join(above))
    noisy = [f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}" for r in doc["rows"] if r.get("noisy")]
    if noisy:
        notes.append(
            f"! spread (IQR) above 10% of the median, the figure is not to be trusted to better than "
            f"that: {', '.join(noisy)}"
        )
    return notes


def best_notes(rows: list[dict]) -> list[str]:
    """Per workload, replica count and number format: each framework's best row against its best out-of-the-box
    one, with the interval (the summary gives the best JAX over the best TF)."""
    notes = []
    for wl, n, dtype in summary.groups(rows):
        parts = []
        for fw in dict.fromkeys(r["framework"] for r in rows):
            b = summary.best(rows, wl, n, dtype, fw)
            if b is None:
                continue
            o = summary.best(rows, wl, n, "float32", fw, tuned=False)
            said = f"{fw} best {b['variant']} {time_cell(b['median_s'])}"
            if o is None or o is b:
                parts.append(said + (" (out of the box)" if o is b else ""))
            else:
                speedup = summary.ratio(o, b).text()
                parts.append(f"{said}: out of the box {o['variant']} {time_cell(o['median_s'])} takes {speedup}")
        notes.append(f"{wl} x{n}{'' if dtype == 'float32' else f' {dtype}'}: " + "; ".join(parts))
    return notes


def modes_note(rows: list[dict]) -> list[str]:
    """Rows whose times fell into two groups: both modes, since one median between them describes neither."""
    two = [
        f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}: {time_cell(m['low_s'])} "
        f"({m['low_n']} calls) and {time_cell(m['high_s'])} ({m['high_n']} calls)"
        for r in rows
        if (m := r.get("modes"))
    ]
    if not two:
        return []
    return [
        "2 modes: these rows' times fell into two groups far apart (parity.stats.modes), and their median "
        "describes neither: " + "; ".join(two)
    ]


def history_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Per-epoch validation of every training row that has a history: header and body, one line per row,
    a cell per epoch 'val_accuracy (val_loss)'. Empty when no row was validated per epoch."""
    hist = [r for r in rows if r.get("history")]
    if not hist:
        return [], []
    epochs = max(len(r["history"]) for r in hist)
    header = ["training row", *(f"epoch {e + 1}" for e in range(epochs))]
    body = [
        [
            f"{r['framework']} {r['variant']} x{r['replicas']}" + (f" seed {r['seed']}" if r.get("seed") else ""),
            *(f"{h['val_accuracy']:.4f} ({h['val_loss']:.3f})" for h in r["history"]),
            *([""] * (epochs - len(r["history"]))),
        ]
        for r in hist
    ]
    return header, body


HISTORY_CAPTION = (
    "Validation accuracy (loss) on the test set after each epoch, outside the timed interval; "
    "epoch 1 includes compilation and is not timed."
)


def history_table(rows: list[dict]) -> str:
    header, body = history_rows(rows)
    return grid(header, body) if body else ""


def _md(header, body) -> str:
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(b) + " |" for b in body]
    )


def markdown(doc: dict) -> str:
    """The speed table, the parity checks and the environment as Markdown (for docs/ and reviews)."""
    env = doc["env"]
    rows = [
        (
            r["workload"],
            r["framework"],
            r["variant"],
            replicas_cell(r),
            r["precision"],
            *_cells(r),
            "yes" if r["verified"] else f"no: {r['invalid_reason']}",
        )
        for r in doc["rows"]
    ]
    out = []
    if body := summary_body(doc):
        out += [_md(SUMMARY_COLUMNS, body), "", summary.interval_note(doc) + ".", ""]
    out += [_md(COLUMNS[:3] + COLUMNS[4:], rows)]
    if doc.get("checks"):
        out += [
            "",
            _md(CHECK_COLUMNS, [_check_cells(c, "not judged") for c in doc["checks"]]),
        ]
    header, body = history_rows(doc["rows"])
    if body:
        out += ["", HISTORY_CAPTION, "", _md(header, body)]
    fw = "; ".join(
        f"{k}: {' '.join(f'{n} {v}' for n, v in f['versions'].items())} ({f['device_kind']})"
        for k, f in env["frameworks"].items()
    )
    out += [
        "",
        f"Device `{env['device']}`, precision `{env['precision']}`, host {env['host_cpu']} "
        f"({env['host_cores']} cores), Python {env['python']}, {env['timestamp']}, commit {env['git_commit']}.",
        f"Frameworks: {fw}.",
    ]
    notes = roofline_notes(doc) + modes_note(doc["rows"]) + best_notes(doc["rows"]) + env.get("notes", [])
    out += [f"Note: {n}" for n in notes]
    out += [f"Not run: {s['framework']}: {s['reason']}" for s in env.get("skipped", [])]
    return "\n".join(out) + "\n"


# ---- result files from several machines -------------------------------------------------------
