"""results.html: one or more results files as one self-contained web page (no network: inline style and script,
charts as PNG data URIs). It holds the first screen's summary with its intervals and verdict, the ratio and
throughput charts, every row (a table sortable by a click on a heading; it reads the same without script), every
check (failures first), and the machine, versions and command of each file. Every string from a results file
goes through parity.common.safe's `text(..., "html")`."""

from __future__ import annotations

import base64
import shlex
import tempfile
from pathlib import Path
from typing import NamedTuple

from parity.common.frameworks import short
from parity.common.safe import text
from parity.judging import summary
from parity.output import screen
from parity.output.cells import fmt, time_cell
from parity.output.charts import chart, ratio_chart
from parity.output.machines import label, machine_of
from parity.output.tables import figure, replicas_cell

CHARTS = (  # (results file the run draws, caption): what the page shows of each
    (
        "results_ratios.png",
        "Fastest time over fastest time per row kind, with 95% intervals (below 1: the first is faster)",
    ),
    ("results.png", "Throughput of every verified row (bar: median, whisker: interquartile range)"),
)
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em 1.5em 3em;max-width:1250px;color:#1d1d1f}
h1{font-size:1.5em;margin:.4em 0 .2em}h2{font-size:1.2em;margin:1.6em 0 .4em;border-bottom:1px solid #ccc}
h3{font-size:1.05em;margin:1.2em 0 .3em}nav a{margin-right:1em}.muted{color:#555}.held{color:#999}
table{border-collapse:collapse;margin:.4em 0;font-size:13px}
th,td{border:1px solid #d5d5d5;padding:3px 5px;text-align:left;vertical-align:top}
th{background:#f0f0f3;position:sticky;top:0;white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even){background:#fafafa}tr.fail td{background:#fde8e8}tr.unjudged td{background:#fff7e0}
.verdict{font-weight:600;margin:.6em 0}.fail{color:#a40000}
figure{margin:.8em 0}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:13px;color:#555}pre{background:#f4f4f6;padding:.5em;overflow-x:auto;white-space:pre-wrap}
th[data-sortable]{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25b2"}
th[aria-sort=descending]::after{content:" \\25bc"}dt{font-weight:600;float:left;clear:left;width:9em}
dd{margin:0 0 .2em 10em}td.w{min-width:26em}td.k{white-space:nowrap}details{margin:.4em 0;font-size:13px}
"""
# Sorts a table by the heading clicked (again: the other way), on each cell's data-v (a number; empty: last) or its
# text; marks <body data-sort-ready> once every sortable table has its headings wired (tests/test_html_browser.py).
SCRIPT = """
(function () {
  function key(td) {
    var v = td.getAttribute("data-v");
    if (v === null) return td.textContent.trim().toLowerCase();
    return v === "" ? null : parseFloat(v);
  }
  function sort(table, col, th) {
    var asc = th.getAttribute("aria-sort") !== "ascending", body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === y) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : 1) * (asc ? 1 : -1);
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    rows.forEach(function (r) { body.appendChild(r); });
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.setAttribute("data-sortable", "");
      th.tabIndex = 0;
      th.addEventListener("click", function () { sort(table, col, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(table, col, th); });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll(".js-only"), function (e) { e.hidden = false; });
  document.body.setAttribute("data-sort-ready", String(tables.length));
})();
"""
# the page may fetch nothing: only its own inline style, script and data: images
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


class Shown(NamedTuple):
    """One results file as the page shows it."""

    name: str  # the file's name, as given
    doc: dict  # its contents (parity.output.loading.load_results)
    label: str  # its machine, as the page names it
    charts: tuple[tuple[str, bytes], ...]  # (caption, PNG) in CHARTS order

    @property
    def short(self) -> str:
        """The file's folder and name ('zen4/cpu-default.json'): its column in the tables of several files."""
        return "/".join(Path(self.name).parts[-2:])


def _t(v) -> str:
    return text(v, "html")


def read_charts(folder: Path) -> tuple[tuple[str, bytes], ...]:
    """The charts of CHARTS that `folder` holds (a run's staged files), as Shown.charts."""
    return tuple((cap, (folder / name).read_bytes()) for name, cap in CHARTS if (folder / name).is_file())


def draw_charts(doc: dict) -> tuple[tuple[str, bytes], ...]:
    """The charts of CHARTS drawn for `doc` (those it has: none without matplotlib), as Shown.charts."""
    title = label(machine_of(doc["env"]))
    with tempfile.TemporaryDirectory(prefix="parity-page-") as tmp:
        folder = Path(tmp)
        ratio_chart(doc, folder / CHARTS[0][0])
        chart(doc["rows"], folder / CHARTS[1][0], title)
        return read_charts(folder)


def shown(name: str, doc: dict, charts: tuple[tuple[str, bytes], ...], said: str | None = None) -> Shown:
    """`doc` as the page shows it; `said`: its machine's label (default: parity.output.machines.label)."""
    return Shown(name, doc, said or label(machine_of(doc["env"])), charts)


def _cell(v, key: float | None = None, numeric: bool = False, wide: bool = False) -> str:
    """A table cell: `v` escaped; `numeric` cells right-aligned and sorted on `key` (None: sorted last); `wide`
    ones kept from wrapping into a narrow column."""
    if not numeric:
        return f"<td{' class=w' * wide}>{_t(v)}</td>"
    return f'<td class="n" data-v="{"" if key is None else repr(float(key))}">{_t(v)}</td>'


def _summary_cells(line: tuple[str, ...], held: tuple[bool, ...]) -> list[str]:
    """A summary line's cells, each ratio whose interval holds 1 greyed (the ratios are the line's last cells)."""
    cells = [_cell(c) for c in line]
    start = len(line) - len(held)
    return [
        c.replace("<td>", '<td class="held">', 1) if i >= start and held[i - start] else c for i, c in enumerate(cells)
    ]


def _label(v) -> str:
    """A variant's cell: its label may break after each '+' ('jit+pool+wgrad+...' is long), nowhere else."""
    return f"<td>{_t(v).replace('+', '+<wbr>')}</td>"


def _file(s: Shown) -> str:
    """A row's or check's file, in the tables of several files: on one line."""
    return f'<td class="k">{_t(s.short)}</td>'


def _table(header, body: list[list[str]], sortable: bool = False, classes: list[str] | None = None) -> str:
    """An HTML table of `header` (escaped here) and `body`'s cells (made by _cell), one class per line."""
    head = "".join(f'<th scope="col">{_t(h)}</th>' for h in header)
    classes = classes or [""] * len(body)
    lines = "".join(
        f"<tr{f' class={c!r}' if c else ''}>{''.join(b)}</tr>\n" for b, c in zip(body, classes, strict=True)
    )
    opening = '<table class="sortable">' if sortable else "<table>"
    return f"{opening}<thead><tr>{head}</tr></thead>\n<tbody>\n{lines}</tbody></table>"


def summary_section(s: Shown) -> str:
    """The first screen (parity.output.screen): the machine, each framework's fastest per group with its ratios and
    95% intervals, the verdict, every failure, and its notes; how the intervals were made, folded."""
    doc = s.doc
    out = [f'<p class="muted">{_t(screen.machine_line(doc["env"]))}</p>']
    header, body = screen.fastest_lines(doc)
    if body:
        ref = short(summary.frameworks_in(doc["rows"])[0])
        out += [
            f"<p>Each framework's fastest verified configuration: median per call, per epoch where it trains; "
            f"x/{_t(ref)}: its time over {_t(ref)}'s, with a 95% interval (one that holds 1: no difference "
            f"measurable here, greyed). {_t(screen.MORE)}: a tuned configuration (its full label in the rows "
            "below).</p>",
            _table(
                header, [_summary_cells(line, held) for line, held in zip(body, screen.holding_one(doc), strict=True)]
            ),
        ]
    else:
        out.append("<p>No verified row: nothing to compare.</p>")
    out.append(f'<p class="verdict">{_t(screen.verdict(doc))}</p>')
    if fails := screen.failures(doc):
        out.append('<ul class="fail">' + "".join(f"<li>{_t(f)}</li>" for f in fails) + "</ul>")
    notes = screen.same_runtime(doc["rows"]) + screen.not_measured(doc["env"])
    if notes:
        out.append("<ul>" + "".join(f"<li>{_t(n)}</li>" for n in notes) + "</ul>")
    said = [n for n in (summary.interval_note(doc), summary.unsettled_note(doc)) if n]
    if said:
        items = "".join(f"<p>{_t(n)}.</p>" for n in said)
        out.append(f"<details><summary>How the intervals were made, and what is not settled</summary>{items}</details>")
    return "\n".join(out)


def charts_section(s: Shown) -> str:
    """Each chart as a PNG data URI, with its caption."""
    if not s.charts:
        return '<p class="muted">No chart: fewer than two frameworks with verified rows, or no matplotlib.</p>'
    figures = []
    for k, (cap, png) in enumerate(s.charts):
        img = f'<img alt="{_t(cap)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        fig = f"<figure>{img}<figcaption>{_t(cap)}</figcaption></figure>"
        # the ratios shown; the tall throughput chart folded, so that the rows come soon after
        figures.append(fig if k == 0 else f"<details><summary>{_t(cap)}</summary>{fig}</details>")
    return "\n".join(figures)


ROW_COLUMNS = ("kind", "framework", "variant", "replicas", "format", "median", "IQR", "first call", "GFLOP/s")
ROW_COLUMNS += ("% peak", "img/s", "err vs f64", "verified")


def _row_cells(r: dict) -> list[str]:
    ok = r["verified"]
    first = r.get("first_epoch_s") if r.get("first_epoch_s") is not None else r.get("compile_s")

    def num(v, shown: str):
        return _cell(shown if ok else "-", v if ok else None, numeric=True)

    return [
        _cell(r["kind"]),
        _cell(r["framework"]),
        _label(r["variant"]),
        _cell(replicas_cell(r), r["replicas"], numeric=True),
        _cell(r.get("dtype") or "float32"),
        _cell(time_cell(r["median_s"]) if ok else "INVALID", r["median_s"] if ok else None, numeric=True),
        num(r.get("iqr_s"), time_cell(r.get("iqr_s")) + (" !" if r.get("noisy") else "")),
        num(first, time_cell(first)),
        num(r.get("gflops_per_s"), fmt(r.get("gflops_per_s"), ".1f")),
        num(r.get("pct_peak"), fmt(r.get("pct_peak"), ".1f")),
        num(r.get("images_per_s"), fmt(r.get("images_per_s"), ".1f")),
        _cell(fmt(r.get("max_rel_err"), ".1e"), r.get("max_rel_err"), numeric=True),
        _cell("yes" if ok else f"no: {r.get('invalid_reason')}"),
    ]


def rows_section(files: list[Shown]) -> str:
    """Every row of every file, one sortable table (with a machine column when there are several files)."""
    many = len(files) > 1
    body, classes = [], []
    for s in files:
        for r in s.doc["rows"]:
            body.append([_file(s)] * many + _row_cells(r))
            classes.append("" if r["verified"] else "fail")
    hint = (
        '<p class="muted">Every row, each variant with its full label (its levers: docs/tuning.md); IQR "!": above '
        '10% of the median.<span class="js-only" hidden> Click a column heading to sort by it (again: the other '
        "way).</span></p>"
    )
    return hint + _table(("file",) * many + ROW_COLUMNS, body, sortable=True, classes=classes)


CHECK_COLUMNS = ("check", "workload", "replicas", "figures", "tolerance", "result", "note")
RESULTS = {False: ("FAIL", "fail"), None: ("not judged", "unjudged"), True: ("PASS", "")}


def checks_section(files: list[Shown]) -> str:
    """Every check of every file, failures first, then those not judged, then the passes (each file's order kept)."""
    found = [(s, c) for s in files for c in s.doc.get("checks") or []]
    if not found:
        return '<p class="muted">No parity check in the file.</p>'
    found.sort(key=lambda sc: list(RESULTS).index(sc[1]["passed"]))
    many = len(files) > 1
    body = [
        [_file(s)] * many
        + [
            _cell(c["check"]),
            _cell(c.get("workload") or "-"),
            _cell(c.get("replicas") or "-"),
            _cell(", ".join(figure(k, v) for k, v in (c.get("figures") or {}).items()), wide=True),
            _cell(fmt(c.get("tolerance"), ".2g"), c.get("tolerance"), numeric=True),
            _cell(RESULTS[c["passed"]][0]),
            _cell(c.get("detail") or ""),
        ]
        for s, c in found
    ]
    classes = [RESULTS[c["passed"]][1] for _, c in found]
    return _table(("file",) * many + CHECK_COLUMNS, body, sortable=True, classes=classes)


def machine_section(s: Shown) -> str:
    """The machine, the run's settings, its command, and each framework's versions."""
    env = s.doc["env"]
    facts = [
        ("machine", screen.machine_line(env)),
        ("CPU", f"{env.get('host_cpu') or 'unknown'}, {env.get('host_cores') or '?'} cores"),
        ("device", f"{env.get('device')}, precision {env.get('precision')}"),
        ("Python", f"{env.get('python') or '?'} on {env.get('platform') or '?'}"),
        ("when", f"{env.get('timestamp') or '?'}, commit {env.get('git_commit') or 'unknown'}"),
        ("file", s.name),
    ]
    dl = "".join(f"<dt>{_t(k)}</dt><dd>{_t(v)}</dd>" for k, v in facts)
    argv = env.get("argv")
    command = shlex.join(str(a) for a in argv) if isinstance(argv, list) else "not recorded"
    fws = [
        [
            _cell(fw),
            _cell(" ".join(f"{k} {v}" for k, v in (f.get("versions") or {}).items())),
            _cell(f.get("device_kind") or "-"),
        ]
        for fw, f in (env.get("frameworks") or {}).items()
    ]
    notes = "".join(f"<li>{_t(n)}</li>" for n in env.get("notes") or [])
    return (
        f"<dl>{dl}</dl><h3>Command</h3><pre><code>{_t(command)}</code></pre><h3>Versions</h3>"
        + _table(("framework", "versions", "device kind"), fws)
        + (f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "")
    )


def page(files: list[Shown]) -> str:
    """The whole page for `files` (one: a run's own page)."""
    many = len(files) > 1
    title = f"parity results: {len(files)} files" if many else f"parity results: {files[0].label}"

    def per_file(make) -> str:
        return "\n".join((f"<h3>{_t(s.short)}: {_t(s.label)}</h3>" if many else "") + make(s) for s in files)

    sections = (
        ("summary", "Summary", per_file(summary_section)),
        ("charts", "Charts", per_file(charts_section)),
        ("rows", "Rows", rows_section(files)),
        ("checks", "Parity checks", checks_section(files)),
        ("machine", "Machine, versions and command", per_file(machine_section)),
    )
    nav = "".join(f'<a href="#{k}">{h}</a>' for k, h, _ in sections)
    body = "\n".join(f'<section id="{k}"><h2>{h}</h2>\n{html}\n</section>' for k, h, html in sections)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_t(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><h1>{_t(title)}</h1><nav>{nav}</nav>\n{body}\n<script>{SCRIPT}</script></body></html>\n"
    )
