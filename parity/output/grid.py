"""The README's compact answer, made from shipped results files: row kinds at one device in float32 down, machine
classes across; each cell a framework's fastest over the reference framework's fastest, and the same out of the box
beside it. The same grid in bfloat16 (`--bfloat16`) is docs/results.md's, beside the long table (every replica count,
every variant's label, the intervals: parity.output.readme's).

A file's machine class is its folder's name, as for the long table. A page holds a grid between BEGIN and END; BEGIN
names the command and its files, so `tests/test_readme.py` can make it again and fail where the two differ."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from parity.common import frameworks
from parity.common.safe import text
from parity.judging import summary
from parity.output.cells import md_table
from parity.output.files import ResultsError, check_out_dir
from parity.output.readme import class_files, marked, readme_main
from parity.workloads import WORKLOADS

COMMAND = "python -m parity.report --grid"
BFLOAT16 = "--bfloat16"  # the flag that makes the bfloat16 grid
BEGIN = "<!-- results grid: {command} {files} -->"
END = "<!-- end of results grid -->"
_BEGIN = re.compile(r"<!-- results grid: python -m parity\.report --grid (?:--bfloat16 )?(?P<files>[^>]*?) -->")
_FORMAT = re.compile(r"<!-- results grid: python -m parity\.report --grid --bfloat16 ")
# the row kinds in the grid's order: the operations first (the article's conv, then the matmul), then each trained
# workload's kinds in the list's order (the CNN, the LSTM, ...)
ORDER = tuple(k.name for w in sorted(WORKLOADS.values(), key=lambda w: w.suite is not None) for k in w.kinds)
SAME = "~"  # a ratio whose 95% interval holds 1: no difference measurable there


def _ratio(num: dict | None, den: dict | None) -> str:
    if num is None or den is None:
        return "-"
    q = summary.ratio(num, den)
    return f"{q.ratio:.2f}x" + (SAME if q.low is not None and q.contains_one() else "")


def cell(rows: list[dict], kind: str, dtype: str, fw: str, ref: str) -> str:
    """'1.18x / 2.80x': `fw`'s fastest over `ref`'s fastest at one device, then each out of the box ('-' where a side
    has no verified row); SAME marks a ratio whose interval holds 1."""
    fastest = _ratio(summary.fastest(rows, kind, 1, dtype, fw), summary.fastest(rows, kind, 1, dtype, ref))
    if fastest == "-":
        return "-"
    plain = _ratio(summary.fastest(rows, kind, 1, dtype, fw, False), summary.fastest(rows, kind, 1, dtype, ref, False))
    return fastest if plain == "-" else f"{fastest} / {plain}"


def grid(paths: list[Path], dtype: str = "float32") -> str:
    """The grid in `dtype` (float32: the README's; bfloat16: docs/results.md's) for `paths` (one file per machine
    class, relative to the repository's root), markers included; a row where no class has a cell is left out.
    Raises ResultsError as parity.output.readme.class_files."""
    docs = class_files(paths)
    fws = frameworks.ordered(r["framework"] for _, _, d in docs for r in d["rows"])
    ref, body = fws[0], []
    for kind in ORDER:
        for fw in fws[1:]:
            cells = [cell(d["rows"], kind, dtype, fw, ref) for _, _, d in docs]
            if any(c != "-" for c in cells):
                body.append((f"{kind}, {frameworks.over(fw, ref)}", *cells))
    body.append(("file, at commit", *(f"{p.stem} at {d['env'].get('git_commit', '?')}" for _, p, d in docs)))
    command = COMMAND if dtype == "float32" else f"{COMMAND} {BFLOAT16}"
    return "\n".join(
        [
            BEGIN.format(command=command, files=" ".join(text(p.as_posix(), "comment") for p in paths)),
            md_table((f"one device, {dtype}", *(c for c, _, _ in docs)), body),
            END,
        ]
    )


def chart(paths: list[Path], png: Path) -> bool:
    """The grid as one chart across classes: per row kind at one device in float32 (one panel each), each class a
    line, each framework's fastest over the reference's fastest as a point with its 95% interval, on one fixed log scale
    around 1. False (nothing written) without matplotlib. Raises ResultsError as grid()."""
    docs = class_files(paths)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from parity.output.charts import ratio_axis, ratio_point, save_figure

    fws = frameworks.ordered(r["framework"] for _, _, d in docs for r in d["rows"])
    ref, others = fws[0], fws[1:]
    fig, axes = plt.subplots(len(ORDER), 1, figsize=(9, 1.2 + 0.32 * len(docs) * len(ORDER)), sharex=True,
                             layout="constrained")  # fmt: skip
    for ax, kind in zip(axes, ORDER, strict=True):
        for y, (_, _, d) in enumerate(docs):
            for k, fw in enumerate(others):
                num, den = (summary.fastest(d["rows"], kind, 1, "float32", f) for f in (fw, ref))
                if num and den:
                    bimodal = bool(num.get("modes") or den.get("modes"))
                    off = (k - (len(others) - 1) / 2) * 0.25
                    q = summary.ratio(num, den)
                    ratio_point(ax, q, y + off, frameworks.color(fw), frameworks.color(ref), bimodal=bimodal)
        ax.axvline(1, color="black", linewidth=1)
        ax.set_yticks(range(len(docs)), [c for c, _, _ in docs], fontsize=8)
        ax.set_ylim(len(docs) - 0.5, -0.5)
        ax.set_title(f"{kind}, one device, float32", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    ratio_axis(
        axes[-1],
        f"fastest time over {frameworks.label(ref)}'s fastest (log scale): "
        f"left of 1 faster than {frameworks.short(ref)}",
    )
    pairs = ", ".join(f"{frameworks.over(fw, ref)} {frameworks.color(fw).removeprefix('tab:')}" for fw in others)
    fig.suptitle(
        f"Each framework's fastest over {frameworks.short(ref)}'s fastest, by CPU class: {pairs}; each 95% interval in "
        f"{frameworks.short(ref)}'s {frameworks.color(ref).removeprefix('tab:')}\n"
        "pale: no difference measurable; black rim: a side's times in two modes; an arrow: beyond the range",
        fontsize=9,
    )
    return save_figure(fig, png, 110)


def files_named(page: str) -> list[Path]:
    """The files a page's grid was made from. Raises ValueError where it holds none."""
    return marked(page, _BEGIN, END, f"results grid ('{COMMAND} FILES')")[0]


def dtype_named(page: str) -> str:
    """The number format of a page's grid, read off its command: 'bfloat16' where it has --bfloat16."""
    return "bfloat16" if _FORMAT.search(page) else "float32"


def shown(page: str) -> str:
    """The grid a page holds, markers included. Raises ValueError where it holds none."""
    return marked(page, _BEGIN, END, f"results grid ('{COMMAND} FILES')")[1]


def grid_main(args) -> int:
    """`python -m parity.report --grid FILES [--ratios PNG]`: print the grid (and draw it); a bad file, or a PNG
    that cannot be written, is one line and exit 2."""
    if args.ratios:
        try:
            check_out_dir(args.ratios.parent, (args.ratios.name,))
        except (ResultsError, OSError) as e:
            print(text(f"error: {e}"), file=sys.stderr)
            return 2
    status = readme_main(args, lambda paths: grid(paths, "bfloat16" if args.bfloat16 else "float32"), "--grid")
    if status or not args.ratios:
        return status
    try:
        drawn = chart(args.files, args.ratios)
    except OSError as e:
        print(text(f"error: cannot write {args.ratios}: {e.strerror or e}"), file=sys.stderr)
        return 2
    if not drawn:
        print("error: --ratios needs matplotlib (pip install matplotlib)", file=sys.stderr)
        return 2
    print(text(f"wrote {args.ratios}"))
    return 0
