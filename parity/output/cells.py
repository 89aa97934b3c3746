"""Cells and grids: how a figure is written in a table (terminal and Markdown)."""

from __future__ import annotations

from parity.common.safe import text


def fmt(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def time_cell(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s" if s < 100 else f"{s:.0f} s"


def bytes_cell(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def grid(header, body) -> str:
    """A terminal table; every cell shown as plain text on one line (parity.common.safe)."""
    header, body = [text(c) for c in header], [[text(c) for c in b] for b in body]
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(b) for b in body)])


def md_table(header, body) -> str:
    """A Markdown table; every cell escaped so that it stays one cell of plain text (parity.common.safe)."""
    header, body = [text(c, "markdown") for c in header], [[text(c, "markdown") for c in b] for b in body]
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(b) + " |" for b in body]
    )
