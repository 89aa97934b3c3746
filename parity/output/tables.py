"""The text a user reads: the speed table, the checks table, footnotes, and their Markdown form."""

from __future__ import annotations

from typing import NamedTuple

from parity.common import frameworks
from parity.common.frameworks import over, short
from parity.common.safe import text
from parity.judging import layers, summary
from parity.output.cells import bytes_cell, fmt, grid, md_table, time_cell
from parity.output.notes import (
    at_least,
    calls_rule,
    fastest_notes,
    kernel_note,
    memory_note,
    modes_note,
    notebook_notes,
    roofline_notes,
    stall_note,
)
from parity.record.rows import COLUMNS, columns
from parity.workloads import row_kind, times_epochs


def _first(r: dict) -> float | None:
    """The first call: an operation's compile_s, a training row's first epoch."""
    return r.get("first_epoch_s") if r.get("first_epoch_s") is not None else r.get("compile_s")


def _iqr(r: dict) -> str:
    if not r["verified"] or r["reps"] < 2:
        return "-"
    return time_cell(r["iqr_s"]) + (" !" if r.get("noisy") else "") + (" 2 modes" if r.get("modes") else "")


def _cells(r: dict, cols: tuple[str, ...] = COLUMNS) -> list[str]:
    """One row's figures in the order of `cols` (rows.columns) from 'median' on; an invalid row shows none."""
    ok = r["verified"]
    return [
        time_cell(r["median_s"]) if ok else "INVALID",
        _iqr(r),
        time_cell(_first(r)) if ok else "-",
        fmt(r["gflops_per_s"], ".1f") if ok else "-",
        fmt(r.get("pct_peak"), ".1f") if ok else "-",
        *([fmt(r.get("pct_attainable"), ".1f") if ok else "-"] if "% attain" in cols else []),
        (r.get("bound") or "-") if ok else "-",
        fmt(r.get("images_per_s"), ".1f") if ok else "-",
        (">=" * at_least(r) + bytes_cell(r.get("peak_memory_bytes"))) if ok else "-",
        fmt(r["max_rel_err"], ".1e"),
        fmt(r.get("xfw_max_rel_err"), ".1e"),
    ]


def replicas_cell(r: dict) -> str:
    """'8', or '8 (2 proc)' for a multi-process row."""
    p = r.get("processes") or 1
    return f"{r['replicas']}" + (f" ({p} proc)" if p > 1 else "")


def table(rows: list[dict]) -> str:
    """The speed table; an invalid row shows its reason instead of figures."""
    body = [
        (
            r["kind"],
            r["framework"],
            r["variant"],
            r["device"],
            replicas_cell(r),
            r["precision"],
            *_cells(r, columns(rows)),
            "yes" if r["verified"] else f"NO: {r['invalid_reason']}",
        )
        for r in rows
    ]
    return grid(columns(rows), body)


def summary_columns(doc: dict) -> tuple[str, ...]:
    """The summary's header: a fastest column per framework the rows hold, in the table's order ('TF fastest',
    'JAX fastest'), then a ratio column per framework after the first, over the first ('JAX/TF (95% CI)'), then one
    per pair a framework declares `versus` ('Keras-JAX/JAX')."""
    fws = summary.frameworks_in(doc["rows"])
    ratios = (f"{over(a, d)} (95% CI)" for a, d in frameworks.ratios(fws))
    return ("kind", "replicas", "format", *(f"{short(fw)} fastest" for fw in fws), *ratios, "parity")


def _ratio_cell(num: dict, den: dict) -> str:
    q = summary.ratio(num, den)
    if q.low is None:
        n = min(q.calls)
        return f"{q.ratio:.2f}x (" + ("no raw times" if not num.get("times_s") else f"{n} call{'s' * (n != 1)}") + ")"
    return f"{q.ratio:.2f}x ({q.low:.2f}-{q.high:.2f})" + (" no difference" if q.contains_one() else "")


def summary_body(doc: dict) -> list[tuple[str, ...]]:
    """One line per row kind x replicas x format, in summary_columns order: the answer before the full table. A
    ratio divides by the group's reference (summary.fastest_rows): the first column's framework, or where that has no
    row in the group, the next that has one, named in the cell."""
    fws, body = summary.frameworks_in(doc["rows"]), []
    for kind, n, dtype in summary.groups(doc["rows"]):
        b = summary.fastest_rows(doc["rows"], kind, n, dtype)
        ref = next(iter(b))
        cells = [f"{b[fw]['variant']} {time_cell(b[fw]['median_s'])}" if fw in b else "-" for fw in fws]
        said = "" if ref == fws[0] else f", over {short(ref)}"
        ratios = [_ratio_cell(b[fw], b[ref]) + said if fw in b and fw != ref else "-" for fw in fws[1:]]
        versus = frameworks.ratios(fws)[len(fws) - 1 :]  # the pairs after each-over-the-reference
        ratios += [_ratio_cell(b[a], b[d]) if a in b and d in b else "-" for a, d in versus]
        body.append((kind, str(n), dtype, *cells, *ratios, summary.verdict(doc, kind, n, dtype)))
    return body


def summary_table(doc: dict) -> str:
    """The summary and how its intervals were made."""
    body = summary_body(doc)
    if not body:
        return "no verified row: nothing to summarise"
    most = [f"{g.title.split(',')[0]}: {g.said}" for g in layer_groups(doc)]  # with --profile
    notes = [n for n in (summary.interval_note(doc), summary.unsettled_note(doc)) if n]
    return "\n  * ".join([grid(summary_columns(doc), body), *map(text, notes), *map(text, most)])


class LayerGroup(NamedTuple):
    """One profiled group's per-layer table."""

    title: str
    frameworks: list[str]  # those whose fastest row was profiled, in the table's order: the first is the reference
    columns: tuple[str, ...]  # 'layer', 'pass', a 'TF ms' column per framework, a 'JAX/TF' column per other one
    body: list[tuple[str, ...]]  # one line per layer x pass, in `columns` order
    said: str  # where each framework loses most, and any profile that misses time


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.2f}"


def _coverage(b: dict, covered: dict, walled: bool) -> tuple[str, str]:
    """A layer table's coverage per framework's row (with the profiled call's time over the row's median, where
    the file has it), and what its figures are."""
    slower = {fw: f", the call {o:.2f}x the median" if (o := layers.overhead(r)) else "" for fw, r in b.items()}
    if walled:
        shown = {fw: f"{w:.0%} wall, {c:.0%} CPU" if w is not None else f"{c:.0%} CPU, no wall" for fw, (w, c) in
                 covered.items() if c is not None}  # fmt: skip
        cov = ", ".join(f"{fw} {r['variant']} {shown[fw]}{slower[fw]}" for fw, r in b.items() if fw in shown)
        what = "wall time, then CPU time summed over threads"
    else:  # older files
        cov = ", ".join(f"{fw} {r['variant']} {r['profile_coverage']:.0%}{slower[fw]}" for fw, r in b.items())
        what = "CPU time summed over threads: these profiles carry no op start times, so no wall time"
    if any(slower.values()):  # parity.judging.layers.overhead_out
        what += ", scaled from the profiled call to the row's median (the profiler's overhead out, in proportion)"
    return cov, what


def layer_groups(doc: dict) -> list[LayerGroup]:
    """With --profile: per row kind x replicas x format where at least two frameworks' fastest rows were profiled,
    the layer x pass lines (ms per step, or per call) and a line naming where each framework loses most.

    Wall time first (each instant of the profiled call split among the ops running then: parity.judging.layers),
    then CPU time (the ops' durations summed over threads), the ratios and "loses most" on the wall figure. A file
    whose ops carry no start times (older ones) has no wall figure: its columns are the CPU time, and the title
    says so."""
    out = []
    for kind, n, dtype in summary.groups(doc["rows"]):
        b = {fw: r for fw, r in summary.fastest_rows(doc["rows"], kind, n, dtype).items() if r.get("layers")}
        if len(b) < 2:
            continue
        fws, names = list(b), row_kind(kind)[0].layers
        cpu, wall = layers.side_by_side(b, names), layers.side_by_side(b, names, "wall_s")
        covered = {fw: layers.coverage(r) for fw, r in b.items()}  # (wall, CPU)
        walled = [fw for fw in fws if covered[fw][0] is not None]
        lines = wall if walled else cpu
        figures = [(*w, c[2]) for w, c in zip(wall, cpu, strict=True)] if walled else [(*c, ()) for c in cpu]
        columns = ("layer", "pass", *(f"{short(fw)} {'wall ' if walled else ''}ms" for fw in fws),
                   *(f"{short(fw)} CPU ms" for fw in fws if walled), *(over(fw, fws[0]) for fw in fws[1:]))  # fmt: skip
        low = [fw for fw, (w, c) in covered.items() if (w if w is not None else c or 0) < COVERAGE_SAID]
        # read against the profiled call's own time (newer files): coverage there is what the trace holds
        blind = [fw for fw in low if layers.overhead(b[fw]) and (covered[fw][0] or covered[fw][1] or 0) < layers.BLIND]
        ok = [fw not in blind for fw in fws]
        body = [
            (layer, p, *map(_ms, s), *map(_ms, c))
            + tuple(f"{x / s[0]:.2f}" if s[0] and x and ok[0] and ok[k] else "-" for k, x in enumerate(s[1:], 1))
            for layer, p, s, c in figures
        ]
        cov, what = _coverage(b, covered, bool(walled))
        title = f"{kind} x{n} {dtype}, per {'step' if times_epochs(kind) else 'call'}, {what} (profile coverage: {cov})"
        most = layers.loses_most(lines, fws, blind)
        said = "; ".join(f"{fw} loses most in {ly} {p} (+{g * 1e3:.2f} ms)" for fw, (ly, p, g) in most.items())
        if walled and len(walled) < len(fws):
            said += f"; no wall time for {', '.join(fw for fw in fws if fw not in walled)} (no op start times)"
        if low:
            said += f"; coverage below {COVERAGE_SAID:.0%} for {', '.join(low)}: its profile misses time"
            said += f" (below {layers.BLIND:.0%}: no ratio)" if blind else ""
        idle = {fw: share for i, fw in enumerate(fws) if walled and (share := layers.idle_share(lines, i)) > IDLE_SAID}
        if idle:
            said += "; " + ", ".join(f"{fw} {share:.0%}" for fw, share in idle.items())
            said += f" of the {'step' if times_epochs(kind) else 'call'} with no traced op running (work on threads the"
            said += " profiler does not see): no layer can be named for it"
        out.append(LayerGroup(title, fws, columns, body, said.removeprefix("; ")))
    return out


COVERAGE_SAID = 0.8  # a profile that accounts for less of the row's median than this is said to miss time
IDLE_SAID = 0.25  # a wall table whose idle line holds more of a framework's step than this says so


def layer_tables(doc: dict) -> str:
    return "\n\n".join(f"{g.title}\n{grid(g.columns, g.body)}\n  * {g.said}" for g in layer_groups(doc))


def figure(k: str, v) -> str:
    """A check's figure: a difference between two sides in scientific notation, an accuracy with 4 decimals."""
    return f"{k} {v:.2e}" if "_vs_" in k else f"{k} {v:.4f}"


CHECK_COLUMNS = ("parity check", "replicas", "figures", "tolerance", "result", "note")


def _check_cells(c: dict, unjudged: str) -> tuple[str, ...]:
    """One check's cells in CHECK_COLUMNS order; `unjudged` where it was reported but not judged."""
    figures = ", ".join(figure(k, v) for k, v in c["figures"].items())
    result = {True: "PASS", False: "FAIL", None: unjudged}[c["passed"]]
    return (c["check"], str(c.get("replicas") or "-"), figures, f"{c['tolerance']:.2g}", result, c.get("detail", ""))


def checks_table(checks: list[dict]) -> str:
    """The CNN parity checks: figures, tolerance, pass/fail."""
    return grid(CHECK_COLUMNS, [_check_cells(c, "-") for c in checks])


def footnotes(doc: dict) -> str:
    env = doc["env"]
    calls = f"{env['reps']} calls per row (fixed: a multi-process run)" if env.get("cluster") else calls_rule(env)
    many = len(summary.frameworks_in(doc["rows"])) > 2
    other = "every other framework's output, the largest" if many else "the other framework's output"
    notes = [
        f"median/IQR: steady-state time per call, every call synchronised and its output checked; {calls}, "
        f"frameworks interleaved",
        "first call: tracing + compilation + one execution, kept out of the median",
        "err vs f64: max |out - oracle| / max |oracle| on the first and last batch rows (float64 NumPy oracle); "
        f"err vs other: the same against {other}",
    ]
    for kind in dict.fromkeys(r["kind"] for r in doc["rows"] if times_epochs(r["kind"])):
        notes.append(
            f"{kind}: median/IQR per epoch after the first; first call = the first epoch (includes "
            "compilation); img/s = images per second of a steady-state epoch; err columns: see checks"
        )
    notes += notebook_notes(doc["rows"])
    notes += roofline_notes(doc) + memory_note(doc["rows"]) + modes_note(doc["rows"]) + stall_note(doc["rows"])
    notes += kernel_note(doc["rows"])
    notes += fastest_notes(doc["rows"])
    notes += env.get("notes", [])
    for s in env.get("skipped", []):
        notes.append(f"not run: {s['framework']}: {s['reason']}")
    notes.append(
        f"host: {env['host_cpu']}, {env['host_cores']} cores{_host_memory(env)}; "
        + "; ".join(
            f"{fw} {' '.join(f'{k} {v}' for k, v in f['versions'].items())}" for fw, f in env["frameworks"].items()
        )
    )
    return "\n".join(f"  * {text(n)}" for n in notes)


def _host_memory(env: dict) -> str:
    """What the host's memory does to a framework that maps its buffers afresh: THP mode, free page reporting."""
    mode = env.get("transparent_hugepages")
    said = f", transparent huge pages '{mode}'" if mode else ""
    if env.get("free_page_reporting"):
        said += ", free page reporting on (freed memory goes back to the VM's host)"
    return said


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


def markdown(doc: dict) -> str:
    """The speed table, the parity checks and the environment as Markdown (for docs/ and reviews)."""
    env = doc["env"]
    rows = [
        (
            r["kind"],
            r["framework"],
            r["variant"],
            replicas_cell(r),
            r["precision"],
            *_cells(r, columns(doc["rows"])),
            "yes" if r["verified"] else f"no: {r['invalid_reason']}",
        )
        for r in doc["rows"]
    ]
    out = []
    if body := summary_body(doc):
        notes = [n for n in (summary.interval_note(doc), summary.unsettled_note(doc)) if n]
        out += [md_table(summary_columns(doc), body), "", *(x for n in notes for x in (text(n + ".", "markdown"), ""))]
    out += [md_table(columns(doc["rows"])[:3] + columns(doc["rows"])[4:], rows)]
    if doc.get("checks"):
        out += ["", md_table(CHECK_COLUMNS, [_check_cells(c, "not judged") for c in doc["checks"]])]
    header, body = history_rows(doc["rows"])
    if body:
        out += ["", HISTORY_CAPTION, "", md_table(header, body)]
    for g in layer_groups(doc):
        title, said = text(f"Per layer: {g.title}.", "markdown"), text(g.said + ".", "markdown")
        out += ["", title, "", md_table(g.columns, g.body), "", said]
    fw = "; ".join(
        f"{k}: {' '.join(f'{n} {v}' for n, v in f['versions'].items())} ({f['device_kind']})"
        for k, f in env["frameworks"].items()
    )
    host = f"host {env['host_cpu']} ({env['host_cores']} cores{_host_memory(env)}), Python {env['python']}, "
    out += [
        "",
        f"Device `{text(env['device'], 'code')}`, precision `{text(env['precision'], 'code')}`, "
        + text(f"{host}{env['timestamp']}, commit {env['git_commit']}.", "markdown"),
        text(f"Frameworks: {fw}.", "markdown"),
    ]
    rows_said = memory_note(doc["rows"]) + modes_note(doc["rows"]) + stall_note(doc["rows"]) + kernel_note(doc["rows"])
    notes = roofline_notes(doc) + rows_said + fastest_notes(doc["rows"]) + env.get("notes", [])
    out += [text(f"Note: {n}", "markdown") for n in notes]
    out += [text(f"Not run: {s['framework']}: {s['reason']}", "markdown") for s in env.get("skipped", [])]
    return "\n".join(out) + "\n"


# ---- result files from several machines -------------------------------------------------------
