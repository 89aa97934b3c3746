"""What a results file holds beside its rows (parity.record.rows.Row), as every reader reads it: its parity checks,
its comparisons, and the run's notes, skipped frameworks and command in its env. Each `*_problem` says in a few
words what makes its part unreadable, or None (parity.output.loading names the file)."""

from __future__ import annotations

from parity.common.safe import text


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
