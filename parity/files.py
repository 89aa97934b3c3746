"""Result files: results.json, .csv, .md and the chart, written as a unit; and reading them back."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from parity import rows
from parity.environment import SCHEMA_VERSION
from parity.tables import markdown


def write_text(path: Path, text: str) -> None:
    """Write atomically: a crash never leaves a half-written results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path: Path, doc: dict) -> None:
    write_text(path, json.dumps(doc, indent=2) + "\n")


CSV_FIELDS = rows.CSV_FIELDS  # the fields tools most often want, in parity.rows.Row's order


def csv_text(rows: list[dict]) -> str:
    """The rows as CSV (one line per row, the fields tools most often want)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k) for k in CSV_FIELDS})
    return buf.getvalue()


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
    ok = [r for r in rows if r["verified"] and r.get("median_s")]
    workloads = list(dict.fromkeys(r["workload"] for r in ok))
    if not workloads:
        return False
    fig, axes = plt.subplots(len(workloads), 1, figsize=(9, 1.2 + 0.45 * len(ok) + 0.6 * len(workloads)), squeeze=False)
    colors = {"tf": "tab:orange", "jax": "tab:blue"}
    for ax, wl in zip(axes[:, 0], workloads, strict=True):
        rs = [r for r in ok if r["workload"] == wl]
        vals = [_throughput(r) for r in rs]
        labels = [
            f"{r['framework']} {r['variant']} x{r['replicas']} ({r.get('device_kind') or r['device']})" for r in rs
        ]
        med = [v[0] for v in vals]
        err = [[max(v[0] - v[1], 0) for v in vals], [max(v[2] - v[0], 0) for v in vals]]
        ax.barh(range(len(rs)), med, xerr=err, color=[colors.get(r["framework"], "tab:gray") for r in rs], capsize=3)
        ax.set_yticks(range(len(rs)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(vals[0][3])
        ax.set_title(wl, fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def history_chart(rows: list[dict], path: Path, title: str = "") -> bool:
    """A PNG of validation accuracy against epoch for every training row with a per-epoch history, TF and
    JAX on one plot (colour: framework; line style: variant). False (nothing written) when there is none."""
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
    colors, styles = {"tf": "tab:orange", "jax": "tab:blue"}, ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    for r in hist:
        style = styles[seen.setdefault(f"{r['variant']}", len(seen)) % len(styles)]
        epochs = [h["epoch"] for h in r["history"]]
        label = f"{r['framework']} {r['variant']} x{r['replicas']}" + (f" seed {r['seed']}" if r.get("seed") else "")
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
    ax.set_title(title or "validation accuracy per epoch", fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


RESULT_FILES = ("results.json", "results.csv", "results.md", "results.png", "results_history.png")


def check_out_dir(out: Path, names: tuple[str, ...] = RESULT_FILES) -> None:
    """Make sure results can be written to `out` before any work is done: it is (or can be made) a writable
    directory, and none of the files to be written is a directory. Raises OSError with one clear line."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OSError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".parity-probe-")
        probe.close()
    except OSError as e:
        raise OSError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    for name in names:
        if (out / name).is_dir():
            raise OSError(f"--out {out}: {name} there is a directory; results would not fit")


def write_all(doc: dict, out: Path) -> list[Path]:
    """results.json, .csv, .md, .png (when matplotlib is there and a row is verified) and results_history.png
    (when a training row was validated per epoch) under `out`, as a unit:
    every file is written to a staging folder first, so a failure leaves the previous run's files untouched,
    and a previous run's chart is removed when this run has none."""
    out = Path(out)
    check_out_dir(out)
    env = doc["env"]
    title = f"{env['device']} ({env.get('host_cpu', '')}), precision {env['precision']}"
    with tempfile.TemporaryDirectory(dir=out, prefix=".results-") as tmp:
        stage = Path(tmp)
        write_json(stage / "results.json", doc)
        write_text(stage / "results.csv", csv_text(doc["rows"]))
        write_text(stage / "results.md", markdown(doc))
        made = ["results.json", "results.csv", "results.md"]
        if chart(doc["rows"], stage / "results.png", title):
            made.append("results.png")
        if history_chart(doc["rows"], stage / "results_history.png", f"validation accuracy per epoch: {title}"):
            made.append("results_history.png")
        for name in ("results.png", "results_history.png"):
            if name not in made:
                (out / name).unlink(missing_ok=True)  # a stale chart must not sit beside this run's files
        for name in made:
            os.replace(stage / name, out / name)
    return [out / n for n in made]


class ResultsError(ValueError):
    """A results file that cannot be read as one of ours; the message names the file."""


# What every row of a results file must hold for report and compare to read it, and the fields that are numbers
# (or null) wherever present: both from parity.rows.Row. A verified row's median_s must also be a finite time
# above zero; NaN and Infinity are refused anywhere.
ROW_SCHEMA = {k: rows.SCHEMA[k] for k in rows.REQUIRED}
HISTORY_KEYS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy")  # one epoch of a row's history
ROW_NUMBERS = rows.NUMBERS


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number a results file may hold")


def load_results(path: Path) -> dict:
    """A results.json written by `parity.run`, checked against ROW_SCHEMA so that merging and comparing cannot
    misread it. Raises ResultsError naming the file, the row and the field."""
    try:
        doc = json.loads(Path(path).read_text(), parse_constant=_refuse_constant)
    except OSError as e:
        raise ResultsError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    except ValueError as e:  # NaN, Infinity, -Infinity
        raise ResultsError(f"{path}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("env"), dict) or not isinstance(doc.get("rows"), list):
        raise ResultsError(f"{path}: not a parity.run results file (no 'env' and 'rows')")
    version = doc["env"].get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version!r}; this tool reads up to {SCHEMA_VERSION}")
    for i, r in enumerate(doc["rows"]):
        why = _row_problem(r)
        if why:
            raise ResultsError(f"{path}: row {i}: {why}")
    return doc


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _raw_problem(r: dict) -> str | None:
    """What makes a row's raw times unusable (schema 3): times above zero, one round (an integer) per time."""
    times, rounds = r.get("times_s"), r.get("rounds")
    if times is not None and not (
        isinstance(times, list) and all(_number(t) and math.isfinite(t) and t > 0 for t in times)
    ):
        return "times_s is not a list of times above zero"
    if rounds is not None and not (
        isinstance(rounds, list)
        and all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in rounds)
        and len(rounds) == len(times or ())
    ):
        return "rounds is not one round number (an integer from 0) per timed call"
    return None


def _row_problem(r) -> str | None:
    """What makes a row unreadable, or None."""
    if not isinstance(r, dict):
        return f"not an object but {type(r).__name__}"
    missing = [k for k in ROW_SCHEMA if k not in r]
    if missing:
        return f"lacks {', '.join(missing)}"
    for k, types in ROW_SCHEMA.items():
        if not isinstance(r[k], types) or (isinstance(r[k], bool) and bool not in types):
            return f"{k} is {r[k]!r}, not {' or '.join(t.__name__ for t in types)}"
    for k in ROW_NUMBERS:
        if r.get(k) is not None and (not isinstance(r[k], (int, float)) or isinstance(r[k], bool)):
            return f"{k} is {r[k]!r}, not a number"
    hist = r.get("history")
    if hist is not None and not (
        isinstance(hist, list)
        and all(
            isinstance(h, dict)
            and all(isinstance(h.get(k), (int, float)) and not isinstance(h.get(k), bool) for k in HISTORY_KEYS)
            for h in hist
        )
    ):
        return f"history is not a list of epochs with {', '.join(HISTORY_KEYS)}"
    why = _raw_problem(r)
    if why:
        return why
    if r["verified"] and not (r["median_s"] is not None and r["median_s"] > 0):
        return f"verified, but its median_s is {r['median_s']!r}, not a time above zero"
    return None
