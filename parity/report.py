"""`python -m parity.report`: merge result files from several machines into one table, with speedups."""

from __future__ import annotations

import sys
from pathlib import Path

from parity.cli.argtypes import Parser
from parity.common.safe import fence, text
from parity.common.signals import guarded
from parity.output import page
from parity.output.article import ARTICLE_ROWS
from parity.output.cells import fmt, grid, time_cell
from parity.output.charts import ratio_chart
from parity.output.files import (
    ResultsError,
    chart,
    check_outputs,
    csv_text,
    load_results,
    write_json,
    write_staged,
    write_text,
)
from parity.output.machines import label, machine_of, pair_line
from parity.workloads import WORKLOADS, row_kind, times_epochs


def machine(doc: dict) -> str:
    """A short label for the machine a results file came from: 'cpu, AMD EPYC (Zen 4), 2 cores'."""
    return label(machine_of(doc["env"]))


def _short(name: str) -> str:
    """A file's folder and name: 'zen4/cpu-default.json'."""
    return "/".join(Path(name).parts[-2:])


def sources(docs: list[tuple[str, dict]]) -> list[str]:
    """Each file's machine label; where two files' labels are alike, each of those also names its file."""
    labels = [machine(doc) for _, doc in docs]
    return [
        f"{lab} [{_short(name)}]" if labels.count(lab) > 1 else lab for lab, (name, _) in zip(labels, docs, strict=True)
    ]


def machine_lines(docs: list[tuple[str, dict]]) -> list[str]:
    """One line for each file after the first: how its machine differs from the first file's (unescaped)."""
    if len(docs) < 2:
        return []
    first, m0 = _short(docs[0][0]), machine_of(docs[0][1]["env"])
    return [
        f"{first} and {_short(name)}: {pair_line(m0, machine_of(doc['env']), (first, _short(name)))}"
        for name, doc in docs[1:]
    ]


def _time_metric(r: dict) -> tuple[float | None, bool]:
    """What the cross-device table compares, and whether it is an estimate: 5 notebook epochs for training (from the
    step time); for an operation, a call at the workload's full size (the article's conv, the 4096 matmul), a row run
    at another (the CPU's default) scaled by its FLOPs (each image's or block's work the same at either size); none
    from --quick's sizes."""
    if times_epochs(r["kind"]):
        return r.get("est_5_notebook_epochs_s"), True
    med, flops, size = r.get("median_s"), r.get("flops"), getattr(row_kind(r["kind"])[0].full, "flops", None)
    full = size() if size else None  # an operation's full size (a trained model's inference: as measured)
    if med is None or not flops or not full or flops == full:
        return med, False
    return (None, False) if r.get("quick") else (med * full / flops, True)  # --quick's sizes fit in caches


def merged_rows(docs: list[tuple[str, dict]], article: bool = True) -> list[dict]:
    """Every file's rows tagged with their source, then (optionally) the article's reference rows."""

    out = []
    for (name, doc), source in zip(docs, sources(docs), strict=True):
        for r in doc["rows"]:
            t, est = _time_metric(r) if r["verified"] else (None, False)
            out.append({**r, "source": source, "file": name, "reference": False, "time": t, "estimated": est})
    if article:
        for a in ARTICLE_ROWS:
            out.append(
                {
                    "kind": a["kind"],
                    "framework": "tf (2018)",
                    "variant": "article",
                    "device": a["device"],
                    "device_kind": a["device_kind"],
                    "replicas": "-",
                    "precision": "-",
                    "source": f"2018 article: {a['device_kind']}",
                    "reference": True,
                    "verified": a["invalid_reason"] is None,
                    "invalid_reason": a["invalid_reason"],
                    "time": a["time_s"],
                    "approx": a.get("approx"),
                    "median_s": None,
                }
            )
    return out


def parse_baseline(text: str) -> dict:
    """'device:framework:variant[:replicas]' or 'article:DEVICE' -> a row filter."""
    parts = text.split(":")
    if parts[0] == "article" and len(parts) == 2:
        return {"reference": True, "device": parts[1]}
    if len(parts) not in (3, 4) or not all(parts):
        raise ResultsError(
            f"--baseline {text!r}: expected device:framework:variant[:replicas] or article:DEVICE, "
            f"e.g. cpu:tf:function or article:cpu"
        )
    f = {"reference": False, "device": parts[0], "framework": parts[1], "variant": parts[2]}
    if len(parts) == 4:
        f["replicas"] = int(parts[3]) if parts[3].isdigit() else parts[3]
    return f


def add_speedups(rows: list[dict], baseline: dict | None) -> dict[str, dict]:
    """Speedup of every row over its row kind's baseline row (the first match; default: the first
    verified measured row of that kind). Returns {kind: baseline row}."""
    bases = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        cands = [r for r in rows if r["kind"] == kind and r["verified"] and r.get("time")]
        if baseline:
            cands = [r for r in cands if all(r.get(k) == v for k, v in baseline.items())]
        else:
            cands = [r for r in cands if not r["reference"]]
        if cands:
            bases[kind] = cands[0]
    for r in rows:
        b = bases.get(r["kind"])
        r["speedup"] = b["time"] / r["time"] if b and r["verified"] and r.get("time") else None
    return bases


# origin: a row measured here, or the 2018 article's reference figure
CROSS_COLUMNS = ("kind", "machine", "framework", "variant", "replicas", "precision", "time", "GFLOP/s", "% peak")
CROSS_COLUMNS += ("speedup", "origin", "note")


def cross_table(rows: list[dict]) -> str:
    body = []
    for r in rows:
        t = r.get("time")
        shown = "-" if t is None else (f"{r['approx']} " if r.get("approx") else "") + time_cell(t)
        if r.get("estimated") and t is not None:
            shown += " (est.)"
        body.append(
            (
                r["kind"],
                r["source"],
                r["framework"],
                r["variant"],
                str(r["replicas"]),
                str(r.get("precision", "-")),
                shown if r["verified"] else f"INVALID ({shown})",
                fmt(r.get("gflops_per_s"), ".1f"),
                fmt(r.get("pct_peak"), ".1f"),
                fmt(r.get("speedup"), ".2f", "-") + ("x" if r.get("speedup") else ""),
                "reference" if r["reference"] else "measured",
                r.get("invalid_reason") or "",
            )
        )
    return grid(CROSS_COLUMNS, body)


HTML_HELP = "also write the files as one self-contained web page, as parity.run writes results.html (summary, charts, "
HTML_HELP += "rows, checks, machines: docs/results-format.md)"
MERGED_FILES = ("merged.json", "merged.csv", "merged.md", "merged.png")


def report_main(argv: list[str] | None = None) -> int:

    ap = Parser(
        prog="python -m parity.report",
        description="Merge results.json files from different machines (a CPU here, a GPU box, a TPU VM) into "
        "one table of framework x device, with speedups over a baseline row. Times are per call; "
        "cnn_train is compared on 5 notebook epochs (500 steps at batch 1024, extrapolated from "
        "measured step times), the article's unit.",
    )
    ap.add_argument("files", nargs="+", type=Path, help="results.json files written by python -m parity.run")
    ap.add_argument(
        "--baseline",
        help="the row speedups are relative to, per row kind: device:framework:variant"
        "[:replicas] (e.g. cpu:tf:function) or article:DEVICE (e.g. article:cpu); "
        "default: the first measured verified row of each kind",
    )
    ap.add_argument("--no-article", action="store_true", help="leave out the 2018 article's reference rows")
    ap.add_argument(
        "--workload",
        help="only this workload's rows, as parity.run names it (conv, cnn, matmul: every kind of row it has)",
    )
    ap.add_argument("--kind", help="only this kind of row (cnn_train, cnn_infer)")
    ap.add_argument("--out", type=Path, help="also write merged.json, merged.csv, merged.md and merged.png here")
    ap.add_argument(
        "--ratios",
        type=Path,
        metavar="PNG",
        help="also draw one results file's summary as a chart, to PNG: each row kind, replica count and number "
        "format's ratios of the frameworks' fastest times with their 95%% intervals (what parity.run writes as "
        "results_ratios.png); with --grid, the grid's classes in one chart (the README's)",
    )
    ap.add_argument("--html", type=Path, metavar="HTML", help=HTML_HELP)
    ap.add_argument(
        "--readme",
        action="store_true",
        help="print instead docs/results.md's results table (Markdown, one file per machine class: its folder's name)",
    )
    ap.add_argument(
        "--grid",
        action="store_true",
        help="print instead the README's compact grid (Markdown: row kinds at one device in float32 down, machine "
        "classes across, each framework's fastest and out-of-the-box ratio over TF's; one file per machine class)",
    )
    ap.add_argument("--bfloat16", action="store_true", help="with --grid: its bfloat16 rows (docs/results.md's)")
    args = ap.parse_args(argv)
    tables = args.readme or args.grid or args.bfloat16
    return guarded("parity.report", lambda: _readme(args) if tables else _report(args), "nothing written")


def _error(said) -> int:
    """`said` on stderr as one error line; 2, the exit status of a command that could not do what it was asked."""
    print(text(f"error: {said}"), file=sys.stderr)
    return 2


def _readme(args) -> int:
    from parity.output.grid import grid_main
    from parity.output.readme import readme_main

    if args.bfloat16 and (not args.grid or args.ratios):
        print("error: --bfloat16 goes with --grid alone (the chart, --ratios, is the float32 grid's)", file=sys.stderr)
        return 2
    flag = "--grid" if args.grid else "--readme"
    if args.html or (args.ratios and not args.grid):
        print(f"error: {flag} takes only results files, not {'--html' if args.html else '--ratios'}", file=sys.stderr)
        return 2
    try:  # the grid's chart (parity.output.grid draws it), checked as every output
        args.ratios = check_outputs(args.files, {"--ratios": args.ratios})["--ratios"]
    except OSError as e:
        return _error(e)
    return grid_main(args) if args.grid else readme_main(args)


def _selected(args) -> set[str] | None:
    """The row kinds --workload (each kind of that workload) and --kind select; None where neither is given.
    Raises ResultsError where --workload is given a row kind."""
    w, kinds = args.workload, {k.name for x in WORKLOADS.values() for k in x.kinds}
    if w is not None and w not in WORKLOADS and w in kinds:
        raise ResultsError(f"{w} is a row kind, not a workload: --kind {w}")
    out = {k.name for k in WORKLOADS[w].kinds} if w in WORKLOADS else kinds if w is None else {w}
    return None if w is None and args.kind is None else out & ({args.kind} if args.kind else out)


def _report(args) -> int:
    try:
        baseline = parse_baseline(args.baseline) if args.baseline is not None else None
        docs = [(str(p), load_results(p)) for p in args.files]
        for i, (name, doc) in enumerate(docs):
            if (twice := next((n for n, d in docs[:i] if d == doc), None)) is not None:
                raise ResultsError(f"{name} holds the same results as {twice}: each would be counted twice")
        named = check_outputs(args.files, {"--html": args.html, "--ratios": args.ratios}, args.out, MERGED_FILES)
        args.html, args.ratios = named["--html"], named["--ratios"]
        if args.ratios and len(docs) != 1:
            raise ResultsError(f"--ratios draws one file's summary; {len(docs)} files were given")
        kinds = _selected(args)
    except (ResultsError, OSError) as e:
        return _error(e)
    rows = [r for r in merged_rows(docs, article=not args.no_article) if kinds is None or r["kind"] in kinds]
    if not rows and kinds is not None:
        said = " and ".join(
            f"{f} {v!r}" for f, v in (("workload", args.workload), ("kind", args.kind)) if v is not None
        )
        return _error(f"no rows of {said} in the files")
    bases = add_speedups(rows, baseline)
    if baseline and not bases:
        return _error(f"no verified row matches --baseline {args.baseline}")
    print(cross_table(rows))
    for kind, b in bases.items():
        what = b["source"] if b["reference"] else f"{b['source']} {b['framework']} {b['variant']} x{b['replicas']}"
        print(text(f"  * {kind} baseline: {what}"))
    for kind in dict.fromkeys(r["kind"] for r in rows):
        if kind not in bases:
            verified = any(r["kind"] == kind and r.get("verified") for r in rows)
            why = f"no verified row matches --baseline {args.baseline}" if baseline else "no verified row"
            if verified and not baseline:  # a time to compare: 5 notebook epochs, or a call at the full size
                why = "no verified row at a size it compares at (5 notebook epochs, or a call at the full size)"
            print(text(f"  * {kind}: {why}: no speedups"))
    for line in machine_lines(docs):
        print(text(f"  * {line}"))
    if not args.no_article:
        print("  * reference rows are the 2018 article's own figures, not measured here")
    if args.ratios and (status := _write_ratios(args.ratios, docs[0][1])):
        return status
    if args.html and (status := _write_html(args.html, docs)):
        return status
    return _write_merged(args.out, docs, rows) if args.out else 0


def _write_ratios(path: Path, doc: dict) -> int:
    """The summary's chart of one file at `path`; 2 (one line) where it cannot be drawn or written."""
    try:
        drawn = ratio_chart(doc, path)
    except OSError as e:
        return _error(f"cannot write {path}: {e.strerror or e}")
    if not drawn:
        return _error(f"{path}: no ratio to draw (fewer than two frameworks with verified rows, or no matplotlib)")
    print(text(f"wrote {path}"))
    return 0


def _write_html(path: Path, docs: list[tuple[str, dict]]) -> int:
    """The files' page at `path`, written as a unit (files.write_staged); 2 (one line) where it cannot be."""
    shown = [
        page.shown(n, doc, page.draw_charts(doc), said) for (n, doc), said in zip(docs, sources(docs), strict=True)
    ]
    try:
        write_staged(path.parent, {path.name: lambda p: write_text(p, page.page(shown))}, (path.name,))
    except OSError as e:
        return _error(e)
    print(text(f"wrote {path}"))
    return 0


def _write_merged(out, docs: list, rows: list[dict]) -> int:
    """The merged files, as a unit; 2 (one line) where they cannot be written."""
    measured = [r for r in rows if not r["reference"]]
    try:
        made = write_staged(
            out,
            {
                "merged.json": lambda p: write_json(p, {"files": [n for n, _ in docs], "rows": rows}),
                "merged.csv": lambda p: write_text(p, csv_text(measured)),
                "merged.md": lambda p: write_text(p, fence(cross_table(rows))),
                "merged.png": lambda p: chart(measured, p, "merged results"),
            },
            MERGED_FILES,
        )
    except OSError as e:
        return _error(e)
    print(text(f"wrote {', '.join(p.name for p in made)} in {out}"))
    return 0


if __name__ == "__main__":
    sys.exit(report_main())
