"""A run's first screen: the machine in one line, each framework's fastest per row kind, replica count and number format
with its ratio and 95% interval, and beside it the ratio out of the box (as the README's grid gives both), the verdict,
every failure in full, and where the files are. At most WIDTH columns and about 45 lines; the per-row table, every
check and the notes go to the results files (results.md) and, with --verbose, to stdout."""

from __future__ import annotations

from parity.common.frameworks import JAX, KERAS_JAX, over, short
from parity.common.safe import text
from parity.judging import settling, summary
from parity.output.cells import grid
from parity.output.machines import label, machine_of
from parity.output.tables import figure

WIDTH = 120  # the first screen's columns, at most (tests/test_screen.py)
LABEL = 13  # a variant's label on the first screen: its first word ('data_parallel') and MORE for its levers
MORE = "*"  # ASCII: a terminal that cannot print an ellipsis still prints the answer
FORMATS = {"float32": "f32", "bfloat16": "bf16"}
SAME = "~"  # a ratio out of the box whose 95% interval holds 1, marked as the README's grid marks it (grid.SAME)


def short_label(variant: str) -> str:
    """'jit*' for 'jit+bf16+pool+ynn+onednn+thp': the code path, and '*' where levers follow (each lever:
    docs/tuning.md; the full label: results.md)."""
    head, _, rest = variant.partition("+")
    head = head if len(head) <= LABEL else head[: LABEL - 2] + ".."
    return head + (MORE if rest else "")


def compact_time(s: float | None) -> str:
    """Three significant figures: '93.5 ms', '270 ms', '1.42 s'."""
    if s is None:
        return "-"
    ms = s * 1e3
    if float(f"{ms:.3g}") < 1000:  # 999.6 ms rounds to a second: '1 s', not '1e+03 ms'
        return f"{ms:.3g} ms" if ms >= 1 else f"{ms:.2f} ms"
    return f"{s:.3g} s" if s < 100 else f"{s:.0f} s"


def _x(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def ratio_cell(num: dict, den: dict) -> str:
    """'1.34x (1.32-1.50)'; fewer than the calls an interval takes: '1.34x (3 calls)'."""
    q = summary.ratio(num, den)
    if q.low is None:
        return f"{_x(q.ratio)}x ({min(q.calls)} calls)"
    return f"{_x(q.ratio)}x ({_x(q.low)}-{_x(q.high)})"


def machine_line(env: dict) -> str:
    """'cpu, Intel(R) Xeon(R) Processor @ 2.80GHz (Ice Lake-SP), 2 cores; AVX-512, no AVX512_BF16, no AMX'."""
    m = machine_of(env)
    flags = (m.host or {}).get("flags") or {}
    said = []
    if flags:
        said.append("AVX-512" if flags.get("avx512f") else "AVX2" if flags.get("avx2") else "no AVX2")
        said.append("AVX512_BF16" if flags.get("avx512_bf16") else "no AVX512_BF16")
        said.append("AMX" if flags.get("amx_bf16") else "no AMX")
    return label(m) + (f"; {', '.join(said)}" if said else "")


def plain_ratio(rows: list[dict], kind: str, n: int, dtype: str, fw: str, ref: str) -> str | None:
    """`fw` over `ref` out of the box in one group: each one's fastest untuned row, as the README's grid gives it
    ('2.30x'; SAME marks a ratio whose 95% interval holds 1); None where a side has no untuned row (bfloat16 is a
    lever: no framework has one there)."""
    num, den = (summary.fastest(rows, kind, n, dtype, f, tuned=False) for f in (fw, ref))
    if num is None or den is None:
        return None
    q = summary.ratio(num, den)
    return f"{_x(q.ratio)}x" + (SAME if q.low is not None and q.contains_one() else "")


def fastest_lines(doc: dict, plain: bool = False) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and one line per row kind x replicas x number format: each framework's fastest row (short label and
    median) and each other framework's over the reference's (the first of the table with a row there); with `plain`,
    each ratio followed by the same out of the box ('1.12x (1.03-1.37) / 2.30x': plain_ratio) where both have one."""
    rows = doc["rows"]
    fws = summary.frameworks_in(rows)
    header = ("kind", "format", *(short(fw) for fw in fws), *(over(fw, fws[0]) for fw in fws[1:]))
    body = []
    for kind, n, dtype in summary.groups(rows):
        b = summary.fastest_rows(rows, kind, n, dtype)
        ref = next(iter(b))
        cells = [f"{short_label(b[fw]['variant'])} {compact_time(b[fw]['median_s'])}" if fw in b else "-" for fw in fws]
        said = "" if ref == fws[0] else f" /{short(ref)}"  # no row of the first framework here: over the next's
        ratios = []
        for fw in fws[1:]:
            if fw not in b or fw == ref:
                ratios.append("-")
                continue
            box = plain_ratio(rows, kind, n, dtype, fw, ref) if plain else None
            ratios.append(ratio_cell(b[fw], b[ref]) + (f" / {box}" if box else "") + said)
        body.append((f"{kind} x{n}", FORMATS.get(dtype, dtype), *cells, *ratios))
    return header, body


def holding_one(doc: dict) -> list[tuple[bool, ...]]:
    """For each of fastest_lines' lines, whether each ratio's 95% interval holds 1 (no difference measurable here)."""
    rows = doc["rows"]
    fws = summary.frameworks_in(rows)
    out = []
    for kind, n, dtype in summary.groups(rows):
        b = summary.fastest_rows(rows, kind, n, dtype)
        ref = next(iter(b))
        qs = [summary.ratio(b[fw], b[ref]) if fw in b and fw != ref else None for fw in fws[1:]]
        out.append(tuple(q is not None and q.low is not None and q.low <= 1 <= q.high for q in qs))
    return out


def verdict(doc: dict) -> str:
    """'verdict: 34 of 34 rows verified against float64; 120 checks passed, 0 failed, 2 not judged'."""
    rows, checks = doc["rows"], doc.get("checks") or []
    ok = sum(bool(r["verified"]) for r in rows)
    passed = sum(c["passed"] is True for c in checks)
    failed = sum(c["passed"] is False for c in checks)
    unjudged = len(checks) - passed - failed
    return (
        f"verdict: {ok} of {len(rows)} rows verified against float64; {passed} checks passed, {failed} failed, "
        f"{unjudged} not judged"
    )


def failures(doc: dict) -> list[str]:
    """Every invalid row and every failed check, in full."""
    out = [
        f"INVALID: {r['kind']} {r['framework']} {r['variant']} x{r['replicas']}: {r['invalid_reason']}"
        for r in doc["rows"]
        if not r["verified"]
    ]
    for c in doc.get("checks") or []:
        if c["passed"] is False:
            figs = ", ".join(figure(k, v) for k, v in c["figures"].items())
            detail = f"; {c['detail']}" if c.get("detail") else ""
            where = f" [{c['workload']} x{c.get('replicas') or '-'}]" if c.get("workload") else ""
            out.append(f"FAIL{where} {c['check']}: {figs} (tolerance {c['tolerance']:.2g}){detail}")
    return out


def _unsettled(comps: list[dict]) -> int:
    """How many comparisons' 95% intervals are wider than the settling rule's WIDTH of their ratio."""
    return sum(
        1
        for c in comps
        if c.get("ci95") and (w := settling.width(*c["ci95"], c["ratio"])) is not None and w > settling.WIDTH
    )


def not_measured(env: dict) -> list[str]:
    """What the run left out or measured on a stand-in: said on the first screen, not only in the files."""
    notes = [n.split("; ")[0] for n in env.get("notes", []) if "not run" in n or "SYNTHETIC" in n]
    by_reason: dict[str, list[str]] = {}  # the frameworks one reason leaves out, said in one line
    for s in env.get("skipped", []):
        by_reason.setdefault(s["reason"], []).append(s["framework"])
    return notes + [f"not run: {', '.join(fws)}: {reason}" for reason, fws in by_reason.items()]


def first_screen(doc: dict) -> str:
    """What a person reads first (about 45 lines at most; WIDTH columns but for a failure's or a note's text)."""
    env = doc["env"]
    fws = summary.frameworks_in(doc["rows"])
    out = [text(machine_line(env))]
    header, body = fastest_lines(doc, plain=True)
    if body:
        out += ["", *_fitted(header, body, len(fws), short(fws[0]))]
    else:
        out += ["", "no verified row: nothing to compare"]
    out += ["", text(verdict(doc))]
    out += [text(f) for f in failures(doc)]
    comps = doc.get("comparisons") or summary.comparisons(doc["rows"])
    if n := _unsettled(comps):
        out.append(f"{n} of {len(comps)} comparisons not settled to +-10% within the run's budget (results.md)")
    if any("+" in r["variant"] for r in doc["rows"]):
        out.append(
            f"{MORE}: a tuned configuration (levers added); its full label in results.md, each lever in docs/tuning.md"
        )
    out += same_runtime(doc["rows"])
    out += [text(n) for n in not_measured(env)]
    return "\n".join(out)


def _fitted(header: tuple[str, ...], body: list[tuple[str, ...]], n: int, ref: str) -> list[str]:
    """fastest_lines' table, each part under the lines that say how to read it: in one grid where it fits WIDTH, else in
    two (the times, then the ratios: three frameworks' times and two ratios, each at its fastest and out of the box,
    take about 140 columns)."""
    times_said = ["Each framework's fastest verified configuration: median per call, per epoch where it trains."]
    ratios_said = [
        f"x/{ref}: its fastest time over {ref}'s fastest, with a 95% interval (holding 1: no difference measurable);",
        f"then out of the box: each one's fastest untuned variant ({SAME}: no difference measurable; none in bfloat16, "
        "a lever).",
    ]
    if n == 1:  # no ratio to read
        return [*times_said, grid(header, body)]
    whole = grid(header, body)
    if max(map(len, whole.splitlines())) <= WIDTH:
        return [*times_said, *ratios_said, whole]
    keys = slice(0, 2)
    times, ratios = slice(2, 2 + n), slice(2 + n, None)
    return [
        *times_said,
        grid(header[keys] + header[times], [b[keys] + b[times] for b in body]),
        "",
        *ratios_said,
        grid(header[keys] + header[ratios], [b[keys] + b[ratios] for b in body]),
    ]


# Names JAX and Keras on JAX, not from the table: a footnote on two rows at once, JAX's runtime under Keras's code
def same_runtime(rows: list[dict]) -> list[str]:
    """A footnote where Keras on JAX's tuned rows ran with the process-wide settings JAX's did: the two frameworks'
    code then meets on one runtime (docs/keras-jax.md)."""

    def settings(fw: str) -> set:
        return {tuple(sorted(r["setting_env"].items())) for r in rows if r["framework"] == fw and r.get("setting_env")}

    if not settings(JAX) & settings(KERAS_JAX):
        return []
    return ["Keras-JAX's tuned rows run with JAX's runtime settings (XLA flags, huge pages): the same runtime as JAX's"]
