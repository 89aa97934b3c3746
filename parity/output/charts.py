"""The charts a run and a report write: throughput per row, validation accuracy per epoch, time per layer."""

from __future__ import annotations

import os
from pathlib import Path

from parity.common import frameworks
from parity.output.safe import text

# characters of a label (or a title) a chart shows: a longer one is cut (its layout time grows with its length)
LABEL, TITLE = 100, 300
LABELS = ("chart", LABEL)


def _save(fig, path: Path, dpi: int) -> bool:
    """Lay out, write beside `path` and rename into place (a crash leaves no half-written PNG); True."""
    import matplotlib.pyplot as plt

    if fig.get_layout_engine() is None:  # constrained figures (a title above their panels) lay themselves out
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def _throughput(r: dict) -> tuple[float, float, float, str]:
    """(median, low, high) throughput of a row from its median and quartiles, and the unit."""
    if r.get("images_per_s"):  # the CNN rows: images per call, from the row's own figures
        work, unit = r["images_per_s"] * r["median_s"], "images/s"
    else:
        work, unit = r["flops"] / 1e9, "GFLOP/s"
    q1, q3 = r.get("q1_s") or r["median_s"], r.get("q3_s") or r["median_s"]
    return work / r["median_s"], work / q3, work / q1, unit


def chart(rows: list[dict], path: Path, title: str = "") -> bool:
    """A PNG of each verified row's throughput (bar = median, whisker = IQR), one panel per workload.

    Returns False (and writes nothing) when matplotlib is missing or no row is verified.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # headless
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # a row with no work to divide by its time (no FLOPs, no images) has no throughput to draw
    ok = [r for r in rows if r["verified"] and r.get("median_s") and (r.get("images_per_s") or r.get("flops"))]
    workloads = list(dict.fromkeys(r["workload"] for r in ok))
    if not workloads:
        return False
    size = (9, 1.2 + 0.45 * len(ok) + 0.6 * len(workloads))
    # constrained: the figure's title above the first panel's, never over it
    fig, axes = plt.subplots(len(workloads), 1, figsize=size, squeeze=False, layout="constrained")
    colors = {k: frameworks.color(k) for k in frameworks.KEYS}
    for ax, wl in zip(axes[:, 0], workloads, strict=True):
        rs = [r for r in ok if r["workload"] == wl]
        vals = [_throughput(r) for r in rs]
        labels = [
            text(f"{r['framework']} {r['variant']} x{r['replicas']} ({r.get('device_kind') or r['device']})", *LABELS)
            for r in rs
        ]
        med = [v[0] for v in vals]
        err = [[max(v[0] - v[1], 0) for v in vals], [max(v[2] - v[0], 0) for v in vals]]
        bars = ax.barh(
            range(len(rs)), med, xerr=err, color=[colors.get(r["framework"], "tab:gray") for r in rs], capsize=3
        )
        for bar, r in zip(bars, rs, strict=True):  # bfloat16 rows hatched: the number formats apart at a glance
            if r.get("dtype") == "bfloat16":
                bar.set_hatch("//")
                bar.set_edgecolor("white")
        ax.set_yticks(range(len(rs)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(vals[0][3])
        ax.set_title(text(wl, "chart", LABEL), fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(text(title, "chart", TITLE), fontsize=10)
    return _save(fig, path, 110)


def history_chart(rows: list[dict], path: Path, title: str = "") -> bool:
    """A PNG of validation accuracy against epoch for every training row with a per-epoch history, every
    framework on one plot (colour: framework; line style: variant). False (nothing written) when there is none."""
    hist = [r for r in rows if r.get("history")]
    if not hist:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors, styles = {k: frameworks.color(k) for k in frameworks.KEYS}, ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    for r in hist:
        style = styles[seen.setdefault(f"{r['variant']}", len(seen)) % len(styles)]
        epochs = [h["epoch"] for h in r["history"]]
        label = f"{r['framework']} {r['variant']} x{r['replicas']}" + (f" seed {r['seed']}" if r.get("seed") else "")
        label = text(label, "chart", LABEL)
        ax.plot(
            epochs,
            [h["val_accuracy"] for h in r["history"]],
            style,
            marker="o",
            markersize=3,
            color=colors.get(r["framework"], "tab:gray"),
            label=label,
        )
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(text(title or "validation accuracy per epoch", "chart", TITLE), fontsize=10)
    return _save(fig, path, 110)


def layers_chart(doc: dict, path: Path) -> bool:
    """With --profile: a PNG per profiled group, each profiled framework's ms per layer and pass as grouped bars;
    False (nothing written) without matplotlib or without two profiled frameworks in a group."""
    from parity.output.tables import layer_groups

    groups = layer_groups(doc)
    if not groups:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1 + sum(0.3 * len(g.body) + 0.8 for g in groups)))
    for ax, g in zip([axes] if len(groups) == 1 else axes, groups, strict=True):
        labels = [text(f"{layer} {p}", "chart", LABEL) for layer, p, *_ in g.body]
        at, m = range(len(g.body)), len(g.frameworks)
        for k, fw in enumerate(g.frameworks):  # the bars of a line side by side, 0.8 of a line's height in all
            ms = [float(b[2 + k]) if b[2 + k] != "-" else 0.0 for b in g.body]
            at_k = [i + (k - (m - 1) / 2) * 0.8 / m for i in at]
            ax.barh(at_k, ms, height=0.8 / m, color=frameworks.color(fw), label=frameworks.short(fw))
        ax.set_yticks(list(at), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("ms")
        ax.set_title(text(g.title, "chart", TITLE), fontsize=8, loc="left")
        ax.legend(fontsize=7)
    return _save(fig, path, 100)
