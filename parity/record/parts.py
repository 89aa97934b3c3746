"""What a results file holds beside its rows (parity.record.rows.Row), as every reader reads it: its parity checks,
its comparisons, and the run's notes, skipped frameworks and command in its env. Each `*_problem` says in a few
words what makes its part unreadable, or None (parity.output.loading names the file); `judgeable` is the writer's
side, what a run's checks and rows become before they are said or written."""

from __future__ import annotations

import math

from parity.common.safe import text


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def bound_problem(v) -> str | None:
    """Why `v` can be neither a bound nor a figure (an error, an accuracy): it is not a finite number from zero;
    None where it can."""
    if _number(v) and math.isfinite(v) and v >= 0:
        return None
    return f"{text(repr(v), limit=40)} is not a finite number from zero"


def judgeable(checks: list[dict], rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The checks and rows as a results file may hold them, before they are said or written: a check whose tolerance
    or a figure is not a finite number from zero (a plug-in's bound of infinity would pass anything, a float64 answer
    of NaN nothing) fails, its detail opening with the cause; a row whose tolerance is not is not verified, naming it,
    and has none."""
    return [_judgeable(c) for c in checks], [_verifiable(r) for r in rows]


def _judgeable(c: dict) -> dict:
    """A check as judgeable says: a figure that is not a finite number is left out (JSON has none), and a failed
    check gives a tolerance (checks_problem), 0 in place of one that is not a finite number from zero."""
    tol, figs = c.get("tolerance"), c.get("figures", {})
    why = [] if isinstance(figs, dict) else [f"figures {text(repr(figs), limit=40)} are not an object"]
    figs = figs if isinstance(figs, dict) else {}
    kept = {k: v for k, v in figs.items() if _number(v) and math.isfinite(v)}
    why += [
        f"figure {k} {p}" + ("" if k in kept else " (left out)") for k, v in figs.items() if (p := bound_problem(v))
    ]
    if not why and (tol is None or bound_problem(tol) is None):
        return c
    ok_tol = tol is not None and bound_problem(tol) is None
    why = why if ok_tol else [f"tolerance {bound_problem(tol) if tol is not None else 'absent'} (shown as 0)", *why]
    detail = f"failed, not judgeable: {', '.join(why)}" + (f"; {c['detail']}" if c.get("detail") else "")
    return {**c, "figures": kept, "tolerance": tol if ok_tol else 0.0, "passed": False, "detail": detail}


def _verifiable(r: dict) -> dict:
    """A row as judgeable says: a tolerance that is not a finite number from zero verifies nothing."""
    if r.get("tolerance") is None or (p := bound_problem(r["tolerance"])) is None:
        return r
    why = f"its tolerance {p}: nothing is verified against it"
    return {**r, "verified": False, "invalid_reason": r.get("invalid_reason") or why, "tolerance": None}


def checks_problem(checks) -> str | None:
    """What makes a file's parity checks unreadable, or None: absent, or a list of objects each naming its check
    and saying whether it passed (true, false, or null where it was not judged), with what the readers show of it
    in its type wherever present: figures (an object of name -> number), tolerance (a number, or null), the
    workload and the detail (text), the replicas (from one, or null). A failed check must give its figures and
    tolerance: the readers say both."""
    if checks is None:
        return None
    if not isinstance(checks, list):
        return f"checks is {type(checks).__name__}, not a list"
    for i, c in enumerate(checks):
        if not isinstance(c, dict) or not isinstance(c.get("check"), str) or "passed" not in c:
            return f"check {i} is not an object with a 'check' name and 'passed'"
        if not (c["passed"] is None or isinstance(c["passed"], bool)):
            return f"check {i}: passed is {text(repr(c['passed']), limit=40)}, not true, false or null"
        figs = c.get("figures", {})
        if not (isinstance(figs, dict) and all(isinstance(k, str) and _number(v) for k, v in figs.items())):
            return f"check {i}: figures is {text(repr(figs), limit=40)}, not an object of name -> number"
        if c.get("tolerance") is not None and not (_number(c["tolerance"]) and c["tolerance"] >= 0):
            return f"check {i}: tolerance is {text(repr(c['tolerance']), limit=40)}, not a number from zero"
        if c["passed"] is False and ("figures" not in c or c.get("tolerance") is None):
            return f"check {i} failed, but it gives no {'figures' if 'figures' not in c else 'tolerance'}"
        for k in ("workload", "detail"):
            if c.get(k) is not None and not isinstance(c[k], str):
                return f"check {i}: {k} is {text(repr(c[k]), limit=40)}, not text"
        n = c.get("replicas")
        if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            return f"check {i}: replicas is {text(repr(n), limit=40)}, not a count from one"
    return None


def comparisons_problem(comps) -> str | None:
    """What makes a file's comparisons (parity.judging.summary.comparisons) unreadable, or None: absent, or a list
    of objects each with its ratio (a number above zero) and its 95% interval (two numbers, or null)."""
    if comps is None:
        return None
    if not isinstance(comps, list):
        return f"comparisons is {type(comps).__name__}, not a list"
    for i, c in enumerate(comps):
        if not isinstance(c, dict) or not (_number(c.get("ratio")) and c["ratio"] > 0):
            return f"comparison {i} is not an object with a ratio above zero"
        ci = c.get("ci95")
        if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(_number(v) for v in ci)):
            return f"comparison {i}: ci95 is {text(repr(ci), limit=40)}, not two numbers or null"
    return None


def said_problem(env: dict) -> str | None:
    """What makes the env's notes, skipped frameworks or command unreadable, or None: each absent, or of the type
    the readers show (a list of text; of objects naming a framework and a reason; of text)."""
    notes, skipped, argv = env.get("notes", []), env.get("skipped", []), env.get("argv", [])
    if not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        return f"notes is {text(repr(notes), limit=40)}, not a list of text"
    if not (
        isinstance(skipped, list)
        and all(
            isinstance(s, dict) and all(isinstance(s.get(k), str) for k in ("framework", "reason")) for s in skipped
        )
    ):
        return f"skipped is {text(repr(skipped), limit=40)}, not a list of objects with a framework and a reason"
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        return f"argv is {text(repr(argv), limit=40)}, not a list of text"
    return None
