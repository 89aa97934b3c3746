"""Tables and result files: what the user reads and what other tools parse."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from parity.roofline import compiler_ratios

SCHEMA_VERSION = 1
ENV_FLAGS = (
    "XLA_FLAGS",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "TF_ENABLE_ONEDNN_OPTS",
    "KERAS_BACKEND",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "OMP_NUM_THREADS",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment(cfg, hello: dict, skipped: list[dict], argv: list[str]) -> dict:
    """Everything needed to read a result file from another machine."""
    return {
        "schema_version": SCHEMA_VERSION,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": argv,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host_cpu": cpu_model(),
        "host_cores": os.cpu_count(),
        "device": cfg.device,
        "precision": cfg.precision,
        "quick": cfg.quick,
        "reps": cfg.reps,
        "min_time_s": cfg.min_time_s,
        "max_reps": cfg.max_reps,
        "warmup": cfg.warmup,
        "cluster": None if cfg.cluster is None else {"coordinator": cfg.cluster.coordinator,
                                                     "num_processes": cfg.cluster.num_processes,
                                                     "local_devices": cfg.cluster.local_devices},  # fmt: skip
        "git_commit": git_commit(),
        "env_flags": {k: os.environ[k] for k in ENV_FLAGS if k in os.environ},
        "frameworks": {fw: {k: h.get(k) for k in ("versions", "device_kind", "devices", "env_flags")}
                       for fw, h in hello.items()},  # fmt: skip
        "skipped": skipped,
    }


def write_text(path: Path, text: str) -> None:
    """Write atomically: a crash never leaves a half-written results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path: Path, doc: dict) -> None:
    write_text(path, json.dumps(doc, indent=2) + "\n")


def _f(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _time(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s" if s < 100 else f"{s:.0f} s"


COLUMNS = ("workload", "framework", "variant", "device", "replicas", "precision", "median", "IQR", "compile",
           "GFLOP/s", "% peak", "bound", "img/s", "err vs f64", "err vs other", "verified")  # fmt: skip


def _iqr(r: dict) -> str:
    if not r["verified"] or r["reps"] < 2:
        return "-"
    return _time(r["iqr_s"]) + (" !" if r.get("noisy") else "")


def _cells(r: dict) -> list[str]:
    """One row's figures in COLUMNS order from 'median' on; an invalid row shows none."""
    ok = r["verified"]
    return [_time(r["median_s"]) if ok else "INVALID", _iqr(r), _time(r["compile_s"]) if ok else "-",
            _f(r["gflops_per_s"], ".1f") if ok else "-", _f(r.get("pct_peak"), ".1f") if ok else "-",
            (r.get("bound") or "-") if ok else "-", _f(r.get("images_per_s"), ".1f") if ok else "-",
            _f(r["max_rel_err"], ".1e"), _f(r.get("xfw_max_rel_err"), ".1e")]  # fmt: skip


def _grid(header, body) -> str:
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(b) for b in body)])


def replicas_cell(r: dict) -> str:
    """'8', or '8 (2 proc)' for a multi-process row."""
    p = r.get("processes") or 1
    return f"{r['replicas']}" + (f" ({p} proc)" if p > 1 else "")


def table(rows: list[dict]) -> str:
    """The speed table; an invalid row shows its reason instead of figures."""
    body = [(r["workload"], r["framework"], r["variant"], r["device"], replicas_cell(r), r["precision"],
             *_cells(r), "yes" if r["verified"] else f"NO: {r['invalid_reason']}") for r in rows]  # fmt: skip
    return _grid(COLUMNS, body)


def _figure(k: str, v) -> str:
    return f"{k} {v:.2e}" if "_vs_" in k else f"{k} {v:.4f}"


def checks_table(checks: list[dict]) -> str:
    """The CNN parity checks: figures, tolerance, pass/fail."""
    body = [
        (c["check"], str(c.get("replicas") or "-"), ", ".join(_figure(k, v) for k, v in c["figures"].items()),
         f"{c['tolerance']:.2g}", {True: "PASS", False: "FAIL", None: "-"}[c["passed"]], c.get("detail", ""))
        for c in checks
    ]  # fmt: skip
    return _grid(("parity check", "replicas", "figures", "tolerance", "result", "note"), body)


def footnotes(doc: dict) -> str:
    env = doc["env"]
    calls = (f"{env['reps']} calls per row (fixed: a multi-process run)" if env.get("cluster") else
             f"at least {env['reps']} calls per row, more until {env.get('min_time_s', 0):g} s of timed calls (each "
             f"row's count is in the JSON)")  # fmt: skip
    notes = [
        f"median/IQR: steady-state time per call, every call synchronised and its output checked; {calls}, "
        f"frameworks interleaved",
        "compile: first call (tracing + compilation + one execution), kept out of the median",
        "err vs f64: max |out - oracle| / max |oracle| on the first and last batch rows (float64 NumPy oracle); "
        "err vs other: the same against the other framework's output",
    ]
    if any(r["workload"] == "cnn_train" for r in doc["rows"]):
        notes.append("cnn_train: median/IQR per epoch after the first; compile = the first epoch (includes "
                     "compilation); img/s = images per second of a steady-state epoch; err columns: see checks")
    five = [r for r in doc["rows"] if r.get("est_5_notebook_epochs_s") is not None]
    if five:
        notes.append("the article's comparison, 5 notebook epochs (500 steps at global batch 1024), extrapolated from "
                     "each row's measured step time plus its first-epoch overhead: "
                     + ", ".join(f"{r['framework']} {r['variant']} x{r['replicas']} "
                                 f"{r['est_5_notebook_epochs_s']:.0f} s" for r in five)
                     + " (article: TPU v2-8 ~40 s, K80 GPU over 2 minutes)")  # fmt: skip
    notes += roofline_notes(doc) + best_notes(doc["rows"])
    notes += env.get("notes", [])
    for s in env.get("skipped", []):
        notes.append(f"not run: {s['framework']}: {s['reason']}")
    notes.append(
        f"host: {env['host_cpu']}, {env['host_cores']} cores; "
        + "; ".join(
            f"{fw} {' '.join(f'{k} {v}' for k, v in f['versions'].items())}" for fw, f in env["frameworks"].items()
        )
    )
    return "\n".join(f"  * {n}" for n in notes)


FLOPS_DISAGREE = 0.10  # compiler count vs formula: beyond this the row's GFLOP/s deserves a second look


def roofline_notes(doc: dict) -> list[str]:
    """What '% peak' and 'bound' divide by, FLOP cross-checks, and which rows were too noisy."""
    notes, peak = [], doc["env"].get("peak")
    if peak:
        m, c = peak.get("measured_flops"), peak.get("computed_flops")
        figs = [f"measured {m / 1e9:.1f} GFLOP/s" if m else None, f"computed {c / 1e9:.1f} GFLOP/s" if c else None]
        figs = ", ".join(f for f in figs if f) or (f"{peak['flops'] / 1e12:.1f} TFLOP/s" if peak["flops"] else "none")
        bw = f"; memory {peak['bandwidth'] / 1e9:.1f} GB/s" if peak.get("bandwidth") else ""
        notes.append(f"% peak: the necessary arithmetic per second (FLOPs without SAME padding's zeros) over the "
                     f"larger {peak['number_format']} peak of the devices used ({peak['device_kind']}: {figs}{bw}; "
                     f"{peak['source']}); bound: compute or memory, by the row's FLOP per minimum byte against the "
                     f"peak's ridge point; a row above the peak shows no % and is named below, a row far above "
                     f"it (x{peak.get('headroom', 1.0):g}) is marked invalid")  # fmt: skip
    seen: dict[tuple, list[dict]] = {}
    for r in doc["rows"]:
        if r.get("compiler_flops") is not None:
            seen.setdefault((r["workload"], r.get("compiler_flops_source")), []).append(r)
    for (wl, src), rs in seen.items():
        r = rs[0]
        c, f, u = r["compiler_flops"], r["flops"], r.get("flops_unpadded") or r["flops"]
        # a counter may or may not count the padding's zeros: each row is judged against the closer count
        bad = [x for x in rs if min(abs(q - 1) for q in compiler_ratios(x)) > FLOPS_DISAGREE]
        names = ", ".join(f"{x['variant']} x{x['replicas']}" for x in bad)
        flag = f" DISAGREES by more than 10% in: {names}" if bad else f" ({len(rs)} row(s) counted, all within 10%)"
        notes.append(f"{wl} FLOPs per call: formula {f / 1e9:.4g} G ({u / 1e9:.4g} G without SAME padding's zeros), "
                     f"{src} {c / 1e9:.4g} G ({c / f:.3f}x, {c / u:.3f}x){flag}")  # fmt: skip
    above = [f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}: {r['above_peak']}"
             for r in doc["rows"] if r.get("above_peak")]  # fmt: skip
    if above:
        notes.append("above the peak, no % shown: " + "; ".join(above))
    noisy = [f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}" for r in doc["rows"] if r.get("noisy")]
    if noisy:
        notes.append(f"! spread (IQR) above 10% of the median, the figure is not to be trusted to better than "
                     f"that: {', '.join(noisy)}")  # fmt: skip
    return notes


def best_notes(rows: list[dict]) -> list[str]:
    """Per workload and replica count: each framework's best row against its out-of-the-box one
    (variants without a '+' suffix), and the best JAX time over the best TF time."""
    notes = []
    ok = [r for r in rows if r["verified"] and r.get("median_s")]
    for wl, n in dict.fromkeys((r["workload"], r["replicas"]) for r in ok):
        parts, best = [], {}
        for fw in dict.fromkeys(r["framework"] for r in ok):
            mine = [r for r in ok if (r["workload"], r["replicas"], r["framework"]) == (wl, n, fw)]
            if not mine:
                continue
            b = best[fw] = min(mine, key=lambda r: r["median_s"])
            plain = [r for r in mine if "+" not in r["variant"]]
            o = min(plain, key=lambda r: r["median_s"]) if plain else None
            if o is None or o is b:
                parts.append(f"{fw} best {b['variant']} {_time(b['median_s'])} (out of the box)")
            else:
                parts.append(f"{fw} best {b['variant']} {_time(b['median_s'])}, {o['median_s'] / b['median_s']:.2f}x "
                             f"faster than out of the box {o['variant']} {_time(o['median_s'])}")  # fmt: skip
        if "tf" in best and "jax" in best:
            parts.append(f"best jax / best tf time {best['jax']['median_s'] / best['tf']['median_s']:.2f}")
        notes.append(f"{wl} x{n}: " + "; ".join(parts))
    return notes


CSV_FIELDS = ("workload", "framework", "variant", "device", "device_kind", "replicas", "processes", "precision",
              "quick",
              "median_s", "q1_s", "q3_s", "iqr_s", "min_s", "reps", "compile_s", "flops", "compiler_flops",
              "compiler_flops_source", "gflops_per_s", "peak_flops", "pct_peak", "min_bytes", "arith_intensity",
              "bound", "images_per_s", "max_rel_err", "xfw_max_rel_err", "noisy", "verified",
              "invalid_reason")  # fmt: skip


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
    fig, axes = plt.subplots(len(workloads), 1, figsize=(9, 1.2 + 0.45 * len(ok) + 0.6 * len(workloads)),
                             squeeze=False)  # fmt: skip
    colors = {"tf": "tab:orange", "jax": "tab:blue"}
    for ax, wl in zip(axes[:, 0], workloads, strict=True):
        rs = [r for r in ok if r["workload"] == wl]
        vals = [_throughput(r) for r in rs]
        labels = [f"{r['framework']} {r['variant']} x{r['replicas']} ({r.get('device_kind') or r['device']})"
                  for r in rs]  # fmt: skip
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


def write_all(doc: dict, out: Path) -> list[Path]:
    """results.json, results.csv, results.md and results.png (when matplotlib is there) under `out`."""
    paths = [out / "results.json", out / "results.csv", out / "results.md"]
    write_json(paths[0], doc)
    write_text(paths[1], csv_text(doc["rows"]))
    write_text(paths[2], markdown(doc))
    env = doc["env"]
    title = f"{env['device']} ({env.get('host_cpu', '')}), precision {env['precision']}"
    if chart(doc["rows"], out / "results.png", title):
        paths.append(out / "results.png")
    return paths


def _md(header, body) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(b) + " |" for b in body])  # fmt: skip


def markdown(doc: dict) -> str:
    """The speed table, the parity checks and the environment as Markdown (for docs/ and reviews)."""
    env = doc["env"]
    rows = [(r["workload"], r["framework"], r["variant"], replicas_cell(r), r["precision"], *_cells(r),
             "yes" if r["verified"] else f"no: {r['invalid_reason']}") for r in doc["rows"]]  # fmt: skip
    out = [_md(COLUMNS[:3] + COLUMNS[4:], rows)]
    if doc.get("checks"):
        out += ["", _md(("parity check", "replicas", "figures", "tolerance", "result", "note"), [
            (c["check"], str(c.get("replicas") or "-"), ", ".join(_figure(k, v) for k, v in c["figures"].items()),
             f"{c['tolerance']:.2g}", {True: "PASS", False: "FAIL", None: "not judged"}[c["passed"]],
             c.get("detail", ""))
            for c in doc["checks"]])]  # fmt: skip
    fw = "; ".join(f"{k}: {' '.join(f'{n} {v}' for n, v in f['versions'].items())} ({f['device_kind']})"
                   for k, f in env["frameworks"].items())  # fmt: skip
    out += ["", f"Device `{env['device']}`, precision `{env['precision']}`, host {env['host_cpu']} "
            f"({env['host_cores']} cores), Python {env['python']}, {env['timestamp']}, commit {env['git_commit']}.",
            f"Frameworks: {fw}."]  # fmt: skip
    out += [f"Note: {n}" for n in roofline_notes(doc) + best_notes(doc["rows"]) + env.get("notes", [])]
    out += [f"Not run: {s['framework']}: {s['reason']}" for s in env.get("skipped", [])]
    return "\n".join(out) + "\n"


# ---- result files from several machines -------------------------------------------------------


class ResultsError(ValueError):
    """A results file that cannot be read as one of ours; the message names the file."""


def load_results(path: Path) -> dict:
    """A results.json written by `parity.run`, checked enough that merging and comparing cannot misread it."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ResultsError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("env"), dict) or not isinstance(doc.get("rows"), list):
        raise ResultsError(f"{path}: not a parity.run results file (no 'env' and 'rows')")
    version = doc["env"].get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema_version {version!r}; this tool reads up to {SCHEMA_VERSION}")
    for i, r in enumerate(doc["rows"]):
        missing = [k for k in ("workload", "framework", "variant", "device", "replicas", "median_s", "verified")
                   if k not in r]  # fmt: skip
        if missing:
            raise ResultsError(f"{path}: row {i} lacks {', '.join(missing)}")
    return doc


def machine(doc: dict) -> str:
    """A short label for the machine a results file came from."""
    env = doc["env"]
    kinds = {str(f.get("device_kind")) for f in env.get("frameworks", {}).values()} - {"None"}
    kinds = sorted({k for k in kinds if k.lower() != env["device"]})  # 'CPU' and 'cpu' say nothing new
    what = env["device"] + (f" {'/'.join(kinds)}" if kinds else "")
    return f"{what}, {env.get('host_cpu', '?')}"


def _time_metric(r: dict) -> float | None:
    """What the cross-device table compares: time per call, or 5 notebook epochs for training."""
    if r["workload"] == "cnn_train":
        return r.get("est_5_notebook_epochs_s")
    return r.get("median_s")


def merged_rows(docs: list[tuple[str, dict]], article: bool = True) -> list[dict]:
    """Every file's rows tagged with their source, then (optionally) the article's reference rows."""
    from parity.workloads import ARTICLE_ROWS

    out = []
    for name, doc in docs:
        for r in doc["rows"]:
            out.append({**r, "source": machine(doc), "file": name, "reference": False,
                        "time": _time_metric(r) if r["verified"] else None})  # fmt: skip
    if article:
        for a in ARTICLE_ROWS:
            out.append({"workload": a["workload"], "framework": "tf (2018)", "variant": "article",
                        "device": a["device"], "device_kind": a["device_kind"], "replicas": "-", "precision": "-",
                        "source": f"2018 article: {a['device_kind']}",
                        "reference": True, "verified": a["invalid_reason"] is None,
                        "invalid_reason": a["invalid_reason"], "time": a["time_s"], "approx": a.get("approx"),
                        "median_s": None})  # fmt: skip
    return out


def parse_baseline(text: str) -> dict:
    """'device:framework:variant[:replicas]' or 'article:DEVICE' -> a row filter."""
    parts = text.split(":")
    if parts[0] == "article" and len(parts) == 2:
        return {"reference": True, "device": parts[1]}
    if len(parts) not in (3, 4) or not all(parts):
        raise ResultsError(f"--baseline {text!r}: expected device:framework:variant[:replicas] or article:DEVICE, "
                           f"e.g. cpu:tf:function or article:cpu")  # fmt: skip
    f = {"reference": False, "device": parts[0], "framework": parts[1], "variant": parts[2]}
    if len(parts) == 4:
        f["replicas"] = int(parts[3]) if parts[3].isdigit() else parts[3]
    return f


def add_speedups(rows: list[dict], baseline: dict | None) -> dict[str, dict]:
    """Speedup of every row over its workload's baseline row (the first match; default: the first
    verified measured row of that workload). Returns {workload: baseline row}."""
    bases = {}
    for wl in dict.fromkeys(r["workload"] for r in rows):
        cands = [r for r in rows if r["workload"] == wl and r["verified"] and r.get("time")]
        if baseline:
            cands = [r for r in cands if all(r.get(k) == v for k, v in baseline.items())]
        else:
            cands = [r for r in cands if not r["reference"]]
        if cands:
            bases[wl] = cands[0]
    for r in rows:
        b = bases.get(r["workload"])
        r["speedup"] = b["time"] / r["time"] if b and r["verified"] and r.get("time") else None
    return bases


def cross_table(rows: list[dict]) -> str:
    body = []
    for r in rows:
        t = r.get("time")
        shown = ("-" if t is None else (f"{r['approx']} " if r.get("approx") else "") + _time(t))
        if r["workload"] == "cnn_train" and t is not None and not r["reference"]:
            shown += " (est.)"
        body.append((r["workload"], r["source"], r["framework"], r["variant"], str(r["replicas"]),
                     str(r.get("precision", "-")), shown if r["verified"] else f"INVALID ({shown})",
                     _f(r.get("gflops_per_s"), ".1f"), _f(r.get("pct_peak"), ".1f"),
                     _f(r.get("speedup"), ".2f", "-") + ("x" if r.get("speedup") else ""),
                     "reference" if r["reference"] else "measured",
                     r.get("invalid_reason") or ""))  # fmt: skip
    return _grid(("workload", "machine", "framework", "variant", "replicas", "precision", "time", "GFLOP/s",
                  "% peak", "speedup", "kind", "note"), body)  # fmt: skip


def report_main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m parity.report",
        description="Merge results.json files from different machines (a CPU here, a GPU box, a TPU VM) into "
                    "one table of framework x device, with speedups over a baseline row. Times are per call; "
                    "cnn_train is compared on 5 notebook epochs (500 steps at batch 1024, extrapolated from "
                    "measured step times), the article's unit.")  # fmt: skip
    ap.add_argument("files", nargs="+", type=Path, help="results.json files written by python -m parity.run")
    ap.add_argument("--baseline", help="the row speedups are relative to, per workload: device:framework:variant"
                                       "[:replicas] (e.g. cpu:tf:function) or article:DEVICE (e.g. article:cpu); "
                                       "default: the first measured verified row of each workload")  # fmt: skip
    ap.add_argument("--no-article", action="store_true", help="leave out the 2018 article's reference rows")
    ap.add_argument("--workload", help="only this workload (conv, cnn_train, cnn_infer)")
    ap.add_argument("--out", type=Path, help="also write merged.json, merged.csv, merged.md and merged.png here")
    args = ap.parse_args(argv)
    try:
        baseline = parse_baseline(args.baseline) if args.baseline else None
        docs = [(str(p), load_results(p)) for p in args.files]
    except ResultsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = merged_rows(docs, article=not args.no_article)
    if args.workload:
        rows = [r for r in rows if r["workload"] == args.workload]
        if not rows:
            print(f"error: no rows of workload {args.workload!r} in the files", file=sys.stderr)
            return 2
    bases = add_speedups(rows, baseline)
    if baseline and not bases:
        print(f"error: no verified row matches --baseline {args.baseline}", file=sys.stderr)
        return 2
    print(cross_table(rows))
    for wl, b in bases.items():
        what = b["source"] if b["reference"] else f"{b['source']} {b['framework']} {b['variant']} x{b['replicas']}"
        print(f"  * {wl} baseline: {what}")
    for wl in dict.fromkeys(r["workload"] for r in rows):
        if wl not in bases:
            print(f"  * {wl}: no verified row matches --baseline {args.baseline}: no speedups")
    if not args.no_article:
        print("  * reference rows are the 2018 article's own figures, not measured here")
    if args.out:
        measured = [r for r in rows if not r["reference"]]
        write_json(args.out / "merged.json", {"files": [n for n, _ in docs], "rows": rows})
        write_text(args.out / "merged.csv", csv_text(measured))
        write_text(args.out / "merged.md", "```\n" + cross_table(rows) + "\n```\n")
        chart(measured, args.out / "merged.png", "merged results")
        print(f"wrote merged.json, merged.csv, merged.md and merged.png in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(report_main())
