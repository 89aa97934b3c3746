"""The charts a run and a report write: throughput per row, the summary's ratios, validation accuracy per epoch,
time per layer."""

from __future__ import annotations

import os
from pathlib import Path

from parity.common import frameworks
from parity.common.safe import text
from parity.judging import summary
from parity.judging.stats import Ratio
from parity.output import machines

# characters of a label (or a title) a chart shows: a longer one is cut (its layout time grows with its length)
LABEL, TITLE = 100, 300
LABELS = ("chart", LABEL)


def save_figure(fig, path: Path, dpi: int) -> bool:
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
    """A PNG of each verified row's throughput (bar = median, whisker = IQR), one panel per row kind.

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
    kinds = list(dict.fromkeys(r["kind"] for r in ok))
    if not kinds:
        return False
    size = (9, 1.2 + 0.45 * len(ok) + 0.6 * len(kinds))
    # constrained: the figure's title above the first panel's, never over it
    fig, axes = plt.subplots(len(kinds), 1, figsize=size, squeeze=False, layout="constrained")
    colors = {k: frameworks.color(k) for k in frameworks.KEYS}
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        rs = [r for r in ok if r["kind"] == kind]
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
        ax.set_title(text(kind, "chart", LABEL), fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(text(title, "chart", TITLE), fontsize=10)
    return save_figure(fig, path, 110)


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
    return save_figure(fig, path, 110)


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
    return save_figure(fig, path, 100)


def _mark_bimodal(comps: list[dict], rows: list[dict]) -> None:
    """Each comparison's 'bimodal': a side's row has two modes (parity.judging.stats.modes)."""
    by = {(r["kind"], r["replicas"], r["framework"], r["variant"]): r for r in rows}
    for c in comps:
        sides = [by.get((c["kind"], c["replicas"], s["framework"], s["variant"])) for s in (c["num"], c["den"])]
        c["bimodal"] = any(r and r.get("modes") for r in sides)


def ratio_chart(doc: dict, path: Path) -> bool:
    """The summary as a PNG: per row kind (one panel each), each replica count and number format, every pair of
    frameworks' ratio of fastest times (parity.judging.summary.comparisons) as a point with its 95% interval, on a log
    scale around a line at 1; the machine in the title. False (nothing written) without matplotlib or without two
    frameworks to divide."""
    comps = [c for c in summary.comparisons(doc["rows"]) if c["pair"] != "tuned_vs_default"]
    if not comps:
        return False
    _mark_bimodal(comps, doc["rows"])
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    kinds = list(dict.fromkeys(c["kind"] for c in comps))
    panels = [sorted((c for c in comps if c["kind"] == kind), key=_ratio_order) for kind in kinds]
    size = (9, 1.6 + sum(0.3 * len(p) + 0.55 for p in panels))
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=size,
        squeeze=False,
        sharex=True,
        layout="constrained",
        gridspec_kw={"height_ratios": [len(p) for p in panels]},
    )
    for ax, kind, panel in zip(axes[:, 0], kinds, panels, strict=True):
        _ratio_panel(ax, panel)
        ax.set_title(text(kind, "chart", LABEL), fontsize=10, loc="left")
    ratio_axis(
        axes[-1, 0],
        "time ratio, first framework's fastest over the second's (log scale): left of 1 the first is faster",
    )
    env = doc["env"]
    fig.suptitle(
        text(
            f"Fastest time over fastest time, 95% intervals: {machines.label(machines.machine_of(env))}"
            + (f", commit {env['git_commit']}" if env.get("git_commit") else ""),
            "chart",
            TITLE,
        )
        + "\npoint: the first framework's colour, interval: the second's; filled: float32, open: bfloat16"
        + "\npale: no difference measurable (the interval holds 1, or too few calls); black rim: a side's times in"
        + " two modes; an arrow: beyond the range",
        fontsize=9,
    )
    return save_figure(fig, path, 110)


REACH = (
    6.0  # every ratio chart's fixed range, 1/REACH to REACH: charts read on one scale (beyond: an arrow at the edge)
)


def ratio_axis(ax, label: str) -> None:
    """The shared x axis of a ratio chart: log scale, the fixed range around 1, `label` saying which side is faster."""
    ax.set_xscale("log")
    ax.set_xlim(1 / REACH, REACH)
    ticks = [1 / 4, 1 / 2, 1 / 1.5, 1, 1.5, 2, 4]
    ax.set_xticks(ticks, [f"{t:.2g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(label)


def ratio_point(ax, q, y: float, color: str, edge: str, filled: bool = True, bimodal: bool = False) -> None:
    """One ratio (a parity.judging.stats.Ratio) with its interval: the point in `color`, the interval in `edge`;
    pale where the interval holds 1 (or there is none), a black rim where a side's times fall into two modes, an
    arrow at the edge where it lies beyond the range; `filled` False: an open point (bfloat16)."""
    x = min(max(q.ratio, 1 / REACH), REACH)
    err = None
    if q.low is not None:
        err = [[max(x - max(q.low, 1 / REACH), 0)], [max(min(q.high, REACH) - x, 0)]]
    marker = ">" if q.ratio > REACH else "<" if q.ratio < 1 / REACH else "o" if filled else "D"
    ax.errorbar(
        [x], [y], xerr=err, fmt=marker, color=color, ecolor=edge, capsize=3, markersize=6,
        markerfacecolor=color if filled else "white", markeredgecolor="black" if bimodal else color,
        markeredgewidth=1.6 if bimodal else 1.0, alpha=0.45 if q.low is None or q.contains_one() else 1,
        clip_on=marker not in "<>",  # an arrow at the edge shows whole
    )  # fmt: skip


def _ratio_order(c: dict) -> tuple:
    return (c["replicas"], c["dtype"] != "float32", c["dtype"])


def _ratio_panel(ax, panel: list[dict]) -> None:
    """One row kind's comparisons, one line each: the point, its interval, and the figures at the right."""
    labels, figures = [], []
    for y, c in enumerate(panel):
        ci = c["ci95"]
        q = Ratio(c["ratio"], *(ci or (None, None)), c.get("paired_rounds", False), tuple(c.get("calls") or (0, 0)))
        # the point in the first framework's colour, its interval in the second's: Keras-JAX/TF and Keras-JAX/JAX apart
        color = frameworks.color(c["num"]["framework"])
        ratio_point(ax, q, y, color, frameworks.color(c["den"]["framework"]), c["dtype"] == "float32", c["bimodal"])
        pair = frameworks.over(c["num"]["framework"], c["den"]["framework"])
        labels.append(text(f"{pair}  x{c['replicas']} {c['dtype']}", "chart", LABEL))
        figures.append(f"{c['ratio']:.2f} ({ci[0]:.2f}-{ci[1]:.2f})" if ci else f"{c['ratio']:.2f} (no interval)")
    ax.axvline(1, color="black", linewidth=1)
    ruled = len(panel) > len({_ratio_order(c) for c in panel})  # several pairs a group: a rule between groups
    for y in range(1, len(panel) if ruled else 0):
        if _ratio_order(panel[y]) != _ratio_order(panel[y - 1]):
            ax.axhline(y - 0.5, color="0.8", linewidth=0.8)
    ax.set_yticks(range(len(panel)), labels, fontsize=8)
    ax.set_ylim(len(panel) - 0.5, -0.5)
    right = ax.secondary_yaxis("right")
    right.set_yticks(range(len(panel)), figures, fontsize=8)
    right.tick_params(length=0)
    ax.grid(axis="x", alpha=0.3)
