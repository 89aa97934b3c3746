"""`python -m parity.compare OLD.json NEW.json --fail-over 10%`: per-row time ratios; non-zero exit on a regression.

Rows are matched on what was measured (row kind, framework, variant, device kind, replicas, precision,
--quick, seed, and its sizes: a trained row's schedule and batch, an operation's shapes, which older files do not
record: their operation rows match only each other's). Each row's NEW/OLD is the ratio of its medians with a 95%
bootstrap interval from both files' raw times (each file's calls resampled on their own: two runs share no
rounds). A regression is a slowdown whose whole interval lies above 1 + the threshold, or a row verified in OLD
and invalid in NEW: exit 1. One median ratio over the threshold is not enough: a row whose interval reaches
below it is said as "slower, not shown beyond the threshold". Rows from files without raw times (schema 2),
or with fewer than 5 timed calls, are judged on the median ratio alone, and say so. The gate fails closed: rows
of OLD that NEW lacks (named) and parity checks that failed in NEW are exit 1 too. Unreadable files, a bad
threshold, no common rows, or common rows none of which is verified in OLD (nothing compared): exit 2.

The first line says whether the two files come from different machines (CPU family, model, stepping, flags,
cores, computed peak, accelerator) and which libraries differ. Across machines no slowdown is a regression: its
verdict says "across machines, not judged" and the exit is 2 (the gate cannot judge), unless --across-machines
judges them anyway. A row that became invalid is a regression on any machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parity.cli.argtypes import Parser
from parity.common.safe import text
from parity.common.signals import guarded
from parity.judging import summary
from parity.output.cells import grid, time_cell
from parity.output.files import ResultsError, load_results
from parity.output.machines import hardware_differences, machine_of, pair_line
from parity.record import rows

KEY = rows.KEY  # what was measured (parity.record.rows.Row's key fields): a row's sizes among them


MAX_FAIL_OVER = 100.0  # 10000%: a row 101 times slower; a larger threshold is a gate that cannot close


def threshold(text: str) -> float:
    """'10%' or '10' -> 0.10 (a percentage either way)."""
    t = text.strip().removesuffix("%")
    try:
        v = float(t) / 100
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage like 10% or 10, got {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    if not v <= MAX_FAIL_OVER:  # infinity (or near it) would switch the gate off
        raise argparse.ArgumentTypeError(f"must be at most {100 * MAX_FAIL_OVER:g}%, got {text!r}")
    return v + 0.0  # -0 is 0


key = rows.key


def verdict(q, fail_over: float, raw: bool, across: bool = False) -> str:
    """A row's verdict from its NEW/OLD ratio: on the interval where there is one, else on the median ratio.
    raw: both rows have raw times. across: the files come from different machines, so a slowdown is said, never
    judged a regression."""
    pct = f"{100 * abs(q.ratio - 1):.1f}%"
    slower = f"slower by {pct} across machines, not judged" if across else f"REGRESSION: {pct} slower"
    if q.low is None:
        n = min(q.calls)
        why = f"{n} timed call{'s' * (n != 1)}, too few for an interval" if raw else "a file without raw times"
        tail = f" (median ratio only: {why})"
        if q.ratio > 1 + fail_over:
            return slower + tail
        return (f"faster by {pct}" if q.ratio < 1 / (1 + fail_over) else "ok") + tail
    ci = f"(95% CI {q.low:.3f}-{q.high:.3f})"
    if q.low > 1 + fail_over:
        return f"{slower} {ci}"
    if q.high < 1 / (1 + fail_over):
        return f"faster by {pct} {ci}"
    if q.ratio > 1 + fail_over:
        return f"slower by {pct}, not shown beyond {100 * fail_over:g}% {ci}"
    return f"ok {ci}"


def compare(old: dict, new: dict, fail_over: float, across: bool = False) -> tuple[list[dict], bool]:
    """One line per row present in both; returns (lines, any regression). across: the files come from different
    machines: a slowdown is said, not judged (a row that became invalid still is)."""
    olds = {key(r): r for r in old["rows"]}
    lines, bad = [], False
    for r in new["rows"]:
        o = olds.get(key(r))
        if o is None:
            continue
        line = {
            "row": r,
            "old": o.get("median_s") if o["verified"] else None,
            "new": r.get("median_s") if r["verified"] else None,
            "ratio": None,
            "ci95": None,
        }
        if o["verified"] and not r["verified"]:
            line["verdict"] = f"REGRESSION: now invalid ({r.get('invalid_reason')})"
        elif not o["verified"]:
            line["verdict"] = "was invalid: not compared"
        else:
            q = summary.ratio(r, o, same_run=False)  # two runs share no rounds: each file's calls resampled apart
            line["ratio"], line["ci95"] = q.ratio, q.ci95
            line["verdict"] = verdict(q, fail_over, bool(r.get("times_s") and o.get("times_s")), across)
            if q.low is None and (o.get("noisy") or r.get("noisy")):
                line["verdict"] += " (noisy: IQR > 10% of median)"
        bad |= line["verdict"].startswith("REGRESSION")
        lines.append(line)
    return lines, bad


def main(argv: list[str] | None = None) -> int:
    ap = Parser(
        prog="python -m parity.compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("old", type=Path, help="the reference results.json")
    ap.add_argument("new", type=Path, help="the results.json to judge")
    ap.add_argument(
        "--fail-over",
        type=threshold,
        default=0.10,
        metavar="PCT",
        help="the slowdown threshold, e.g. 10%%: a row is a regression when the 95%% interval of NEW/OLD lies wholly "
        "above 1 + PCT (files without raw times: when the median ratio does) (default: 10%%)",
    )
    ap.add_argument(
        "--across-machines",
        action="store_true",
        help="judge slowdowns as regressions even when the two files come from different machines (by default "
        "they are said, not judged, and the exit is 2)",
    )
    args = ap.parse_args(argv)
    return guarded("parity.compare", lambda: _compare(args), "nothing compared")


def _compare(args) -> int:
    try:
        old, new = load_results(args.old), load_results(args.new)
    except ResultsError as e:
        print(text(f"error: {e}"), file=sys.stderr)
        return 2
    mo, mn = machine_of(old["env"]), machine_of(new["env"])
    across = bool(hardware_differences(mo, mn))
    lines, bad = compare(old, new, args.fail_over, across and not args.across_machines)
    nothing = _nothing_compared(lines)
    if nothing:
        print(text(f"error: {args.new} against {args.old}: {nothing}"), file=sys.stderr)
        return 2
    print(text(pair_line(mo, mn, ("OLD", "NEW"))))
    _print(lines, len(new["rows"]) - len(lines), args, across)
    failed = [f for f in (missing_rows(old, new), failed_checks(new)) if f]
    for f in failed:
        print(text(f"FAIL: {f} (exit 1)"))
    return 1 if bad or failed else 2 if across and not args.across_machines else 0


def _nothing_compared(lines: list[dict]) -> str | None:
    """Why the gate compared nothing (exit 2), or None: no common row, or none verified in OLD."""
    if not lines:
        return "no row of NEW matches a row of OLD (same kind, framework, variant, device kind, replicas, ...)"
    if any(ln["ratio"] is not None or ln["verdict"].startswith("REGRESSION") for ln in lines):
        return None
    return f"nothing compared: none of the {len(lines)} row(s) the two files share is verified in OLD"


SHOWN = 3  # rows or checks named in a failure's line; the rest are counted


def _named(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def row_name(r: dict) -> str:
    return f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}"


def missing_rows(old: dict, new: dict) -> str | None:
    """What NEW lacks of OLD's rows, in one line naming the first few, or None: a row the reference measured and
    NEW did not is a loss the gate must not pass over."""
    have = {key(r) for r in new["rows"]}
    gone = [row_name(r) for r in old["rows"] if key(r) not in have]
    if not gone:
        return None
    return f"{len(gone)} of OLD's {len(old['rows'])} rows are missing from NEW: {_named(gone)}"


def failed_checks(doc: dict) -> str | None:
    """NEW's parity checks that failed, in one line naming the first few, or None."""
    checks = doc.get("checks") or []
    bad = [c["check"] for c in checks if c["passed"] is False]
    if not bad:
        return None
    return f"{len(bad)} of NEW's {len(checks)} parity checks failed: {_named(bad)}"


def _print(lines: list[dict], unmatched: int, args, across: bool) -> None:
    """The comparison table, the rows left unmatched, and the verdict lines."""
    body = [
        (
            ln["row"]["kind"],
            ln["row"]["framework"],
            ln["row"]["variant"],
            str(ln["row"]["replicas"]),
            time_cell(ln["old"]),
            time_cell(ln["new"]),
            "-" if ln["ratio"] is None else f"{ln['ratio']:.3f}",
            ln["verdict"],
        )
        for ln in lines
    ]
    print(grid(("kind", "framework", "variant", "replicas", "old", "new", "new/old", "verdict"), body))
    if unmatched:
        print(text(f"  * {unmatched} row(s) of {args.new} have no counterpart in {args.old}"))
    pct = f"{100 * args.fail_over:g}%"
    n_bad = sum(ln["verdict"].startswith("REGRESSION") for ln in lines)
    where = " across different machines (--across-machines)" if across and args.across_machines else ""
    unjudged = across and not args.across_machines
    if n_bad or not unjudged:
        print(f"{n_bad} regression(s) beyond {pct}{where}" if n_bad else f"no regression beyond {pct}{where}")
    if unjudged:
        n = sum("across machines, not judged" in ln["verdict"] for ln in lines)
        print(
            f"ACROSS MACHINES: the files come from different machines, so the gate judges no slowdown ({n} row(s) "
            f"slower beyond {pct}, not judged); compare runs of one machine class, or give --across-machines to "
            "judge them anyway (exit 2)"
        )


if __name__ == "__main__":
    sys.exit(main())
