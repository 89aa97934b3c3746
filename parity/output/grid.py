"""The README's compact answer, made from shipped results files: workloads at one device down, machine classes across;
each cell a framework's best over the reference framework's best, and the same out of the box beside it. The long
table (every replica count, every variant's label, the intervals) is parity.output.readme's, in docs/results.md.

A file's machine class is its folder's name, as for the long table. The README holds the grid between GRID_BEGIN and
GRID_END; GRID_BEGIN names the files, so `tests/test_readme.py` can make it again and fail where the two differ."""

from __future__ import annotations

import re
from pathlib import Path

from parity.common import frameworks
from parity.common.safe import text
from parity.judging import summary
from parity.output.cells import md_table
from parity.output.readme import class_files, marked, readme_main

COMMAND = "python -m parity.report --grid"
BEGIN = "<!-- results grid: {command} {files} -->"
END = "<!-- end of results grid -->"
_BEGIN = re.compile(r"<!-- results grid: python -m parity\.report --grid (?P<files>[^>]*?) -->")
ORDER = ("conv", "matmul", "cnn_train", "cnn_infer", "lstm_train", "lstm_infer")  # the article's first
SAME = "~"  # a ratio whose 95% interval holds 1: no difference measurable there


def _ratio(num: dict | None, den: dict | None) -> str:
    if num is None or den is None:
        return "-"
    q = summary.ratio(num, den)
    return f"{q.ratio:.2f}x" + (SAME if q.low is not None and q.contains_one() else "")


def cell(rows: list[dict], wl: str, dtype: str, fw: str, ref: str) -> str:
    """'1.18x / 2.80x': `fw`'s best over `ref`'s best at one device, then each out of the box ('-' where a side has
    no verified row); SAME marks a ratio whose interval holds 1."""
    best = _ratio(summary.best(rows, wl, 1, dtype, fw), summary.best(rows, wl, 1, dtype, ref))
    if best == "-":
        return "-"
    plain = _ratio(summary.best(rows, wl, 1, dtype, fw, False), summary.best(rows, wl, 1, dtype, ref, False))
    return best if plain == "-" else f"{best} / {plain}"


def grid(paths: list[Path]) -> str:
    """The README's grid for `paths` (one file per machine class, relative to the repository's root), markers
    included. Raises ResultsError as parity.output.readme.class_files."""
    docs = class_files(paths)
    fws = frameworks.ordered(r["framework"] for _, _, d in docs for r in d["rows"])
    ref, body = fws[0], []
    for wl in ORDER:
        for dtype in ("float32", "bfloat16"):
            for fw in fws[1:]:
                cells = [cell(d["rows"], wl, dtype, fw, ref) for _, _, d in docs]
                if any(c != "-" for c in cells):
                    fmt = "" if dtype == "float32" else " bfloat16"
                    body.append((f"{wl}{fmt}, {frameworks.over(fw, ref)}", *cells))
    body.append(("file, at commit", *(f"{p.stem} at {d['env'].get('git_commit', '?')}" for _, p, d in docs)))
    return "\n".join(
        [
            BEGIN.format(command=COMMAND, files=" ".join(text(p.as_posix(), "comment") for p in paths)),
            md_table(("one device", *(c for c, _, _ in docs)), body),
            END,
        ]
    )


def files_named(page: str) -> list[Path]:
    """The files a page's grid was made from. Raises ValueError where it holds none."""
    return marked(page, _BEGIN, END, f"results grid ('{COMMAND} FILES')")[0]


def shown(page: str) -> str:
    """The grid a page holds, markers included. Raises ValueError where it holds none."""
    return marked(page, _BEGIN, END, f"results grid ('{COMMAND} FILES')")[1]


def grid_main(args) -> int:
    """`python -m parity.report --grid FILES`: print the grid; a bad file is one line and exit 2."""
    return readme_main(args, grid, "--grid")
