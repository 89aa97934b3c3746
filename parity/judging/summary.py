"""The answer first: per row kind x replicas x number format, each framework's fastest row, each other framework's
fastest over the reference's (the first of the frameworks' table present: TF's) with a 95% interval, and the parity
verdict; and the `comparisons` a results file keeps (each framework against the reference, and each tuned variant
against its own framework out of the box)."""

from __future__ import annotations

from parity.common import frameworks
from parity.judging import settling
from parity.judging.stats import MIN_CALLS, Ratio, median_ratio
from parity.workloads import row_kind


def is_tuned(r: dict) -> bool:
    """Not the framework out of the box (files older than the 'tuned' field: a '+' in the variant's name)."""
    return r["tuned"] if "tuned" in r else "+" in r["variant"]


def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["verified"] and r.get("median_s")]


def groups(rows: list[dict]) -> list[tuple[str, int, str]]:
    """(row kind, replicas, number format) of the verified rows, in the order they first appear."""
    return list(dict.fromkeys((r["kind"], r["replicas"], r.get("dtype") or "float32") for r in _ok(rows)))


def fastest(rows: list[dict], kind: str, n: int, dtype: str, fw: str, tuned: bool | None = None) -> dict | None:
    """`fw`'s fastest verified row in one group (of its out-of-the-box rows, or tuned ones, where `tuned` says):
    the framework at its fastest."""
    mine = [
        r
        for r in _ok(rows)
        if (r["kind"], r["replicas"], r.get("dtype") or "float32", r["framework"]) == (kind, n, dtype, fw)
        and (tuned is None or is_tuned(r) == tuned)
    ]
    return min(mine, key=lambda r: r["median_s"]) if mine else None


def frameworks_in(rows: list[dict]) -> list[str]:
    """The frameworks `rows` hold, in the table's order: the first is the reference the summary's columns divide by."""
    return frameworks.ordered(r["framework"] for r in rows)


def fastest_rows(rows: list[dict], kind: str, n: int, dtype: str) -> dict[str, dict]:
    """Each framework's fastest row in one group, in the table's order (those with none left out): the first is the
    group's reference."""
    found = {fw: fastest(rows, kind, n, dtype, fw) for fw in frameworks_in(rows)}
    return {fw: r for fw, r in found.items() if r}


def ratio(num: dict, den: dict, same_run: bool = True) -> Ratio:
    """num's median over den's; the interval from their raw times, paired by round where both rows ran in the same
    rounds of one run (`same_run`); a file without raw times gives the medians' ratio and no interval."""
    if num.get("times_s") and den.get("times_s"):
        rounds = (num.get("rounds"), den.get("rounds")) if same_run else (None, None)
        return median_ratio(num["times_s"], den["times_s"], *rounds)
    return Ratio(num["median_s"] / den["median_s"], None, None, False, (num.get("reps") or 0, den.get("reps") or 0))


def _side(r: dict) -> dict:
    return {"framework": r["framework"], "variant": r["variant"], "median_s": r["median_s"]}


def _entry(pair: str, kind: str, n: int, dtype: str, num: dict, den: dict, what: str) -> dict:
    q = ratio(num, den)
    return {
        "pair": pair,
        "kind": kind,
        "replicas": n,
        "dtype": dtype,
        "num": _side(num),
        "den": _side(den),
        "ratio": q.ratio,
        "ci95": q.ci95,
        "paired_rounds": q.paired,
        "calls": list(q.calls),
        "text": q.text(what),
    }


def pairs(rows: list[dict]) -> list[tuple[str, str, int, str, dict, dict, str]]:
    """The comparisons `rows` make, as (pair, row kind, replicas, dtype, num row, den row, what): per row kind x
    replicas x format, each framework's fastest row over the reference's, the first framework of the table with a row
    there (pair '<framework>_vs_<reference>': 'jax_vs_tf', what 'JAX/TF'), and over each framework it declares
    `versus` ('keras-jax_vs_jax'); and each tuned row over its framework's fastest out-of-the-box row at the same
    kind and replicas ('tuned_vs_default', the out-of-the-box row in float32 when the tuned one is bfloat16:
    what the tuning buys)."""
    out = []
    for kind, n, dtype in groups(rows):
        b = fastest_rows(rows, kind, n, dtype)
        out += [(f"{a}_vs_{d}", kind, n, dtype, b[a], b[d], frameworks.over(a, d)) for a, d in frameworks.ratios(b)]
    for r in _ok(rows):
        if is_tuned(r):
            base = fastest(rows, r["kind"], r["replicas"], "float32", r["framework"], tuned=False)
            if base:
                what = f"{r['variant']}/{base['variant']}"
                out.append(("tuned_vs_default", r["kind"], r["replicas"], r.get("dtype") or "float32", r, base, what))
    return out


def comparisons(rows: list[dict]) -> list[dict]:
    """The comparisons a results file keeps (pairs), each with its ratio and 95% interval."""
    return [_entry(*p) for p in pairs(rows)]


def _oracle_verdict(rows: list[dict]) -> str:
    """Rows judged each against the float64 oracle (conv, matmul, inference): PASS when every one's output is
    within its tolerance."""
    judged = [r for r in rows if r.get("tolerance") is not None]
    if not judged:
        return "not judged"
    off = [r for r in judged if r.get("max_rel_err") is None or r["max_rel_err"] > r["tolerance"]]
    return f"FAIL ({len(off)} of {len(judged)} rows vs float64)" if off else f"PASS ({len(judged)} rows vs float64)"


def _checks_verdict(checks: list[dict]) -> str:
    judged = [c for c in checks if c.get("passed") is not None]
    if not judged:
        return f"not judged ({len(checks)} checks)" if checks else "not judged"
    failed = [c for c in judged if not c["passed"]]
    extra = f", {len(checks) - len(judged)} not judged" if len(judged) < len(checks) else ""
    if failed:
        return f"FAIL ({len(failed)} of {len(judged)} checks{extra})"
    return f"PASS ({len(judged)} checks{extra})"


def _workload_of(kind: str) -> str:
    """The workload a row kind belongs to, in the list as it is now (a kind no workload has: its own name)."""
    try:
        return row_kind(kind)[0].name
    except KeyError:
        return kind


def verdict(doc: dict, kind: str, n: int, dtype: str) -> str:
    """The parity verdict behind a group: its workload's parity checks at this replica count where the workload
    has checks (the CNN), else its rows against the float64 oracle."""
    workload = _workload_of(kind)
    checks = [c for c in doc.get("checks") or [] if c.get("workload") == workload and c.get("replicas") in (n, None)]
    if checks:
        return _checks_verdict(checks)
    rows = [r for r in doc["rows"] if (r["kind"], r["replicas"], r.get("dtype") or "float32") == (kind, n, dtype)]
    return _oracle_verdict(rows)


def interval_note(doc: dict) -> str:
    """How the summary's intervals were made; '' where it shows one framework (no ratio)."""
    ref, *others = frameworks_in(doc["rows"]) or [None]
    if not others:
        return ""
    comps = comparisons(doc["rows"])
    paired = sum(bool(c["paired_rounds"]) for c in comps)
    pairs = frameworks.ratios([ref, *others])
    heads = ", ".join(f"{frameworks.over(a, d)} (95% CI)" for a, d in pairs)
    said = (
        f"the fastest {frameworks.short(others[0])} row's median over the fastest {frameworks.short(ref)} row's"
        if len(others) == 1
        else f"each framework's fastest row's median over the fastest {frameworks.short(ref)} row's (in a group "
        f"without one, over the fastest row of the first framework of the table that has one, and said)"
        + "".join(f", and {frameworks.short(a)}'s over {frameworks.short(d)}'s" for a, d in pairs[len(others) :])
    )
    return (
        f"{heads}: {said}, with a 95% percentile-bootstrap interval "
        f"({paired} of {len(comps)} comparisons paired on the interleaving rounds both rows ran in, each row's "
        "other calls resampled on their own; "
        f"fewer than {MIN_CALLS} timed calls on a side: no interval); an interval that holds 1 is no difference "
        "measurable here"
    )


def unsettled_note(doc: dict) -> str:
    """What the run could not settle within its budget (parity.judging.settling): the comparisons whose 95% interval
    spans more than WIDTH of the ratio, and the verified rows whose median's interval does; '' where all settled
    (or the file keeps no raw times)."""
    comps = [
        f"{c['kind']} x{c['replicas']} {c['dtype']} {c['text'].split(' (')[0]} "
        f"({c['ci95'][0]:.2f}-{c['ci95'][1]:.2f}, {c['calls'][0]} and {c['calls'][1]} calls)"
        for c in doc.get("comparisons") or comparisons(doc["rows"])
        if c.get("ci95") and (w := settling.width(*c["ci95"], c["ratio"])) is not None and w > settling.WIDTH
    ]
    rows = [
        f"{r['kind']} {frameworks.short(r['framework'])} {r['variant']} x{r['replicas']} (+-{w / 2:.0%}, "
        f"{len(r['times_s'])} calls)"
        for r in _ok(doc["rows"])
        if r.get("times_s")
        and (w := settling.row_width(settling.Timed(tuple(r["times_s"]), ()))) is not None
        and w > settling.WIDTH
    ]
    if not comps and not rows:
        return ""
    said = f"not settled within the run's budget (a 95% interval wider than {settling.WIDTH:.0%} of its figure)"
    return "; ".join(
        [f"{said}: {len(comps)} comparison{'s' * (len(comps) != 1)}" + (": " + ", ".join(comps) if comps else "")]
        + ([f"{len(rows)} row{'s' * (len(rows) != 1)}: " + ", ".join(rows)] if rows else [])
    )
