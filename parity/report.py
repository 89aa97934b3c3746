"""Tables and result files: what the user reads and what other tools parse."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

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
        "warmup": cfg.warmup,
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
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


COLUMNS = ("workload", "framework", "variant", "device", "replicas", "precision", "median", "IQR", "compile",
           "GFLOP/s", "img/s", "err vs f64", "err vs other", "verified")  # fmt: skip


def _grid(header, body) -> str:
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(b) for b in body)])


def table(rows: list[dict]) -> str:
    """The speed table; an invalid row shows its reason instead of figures."""
    body = []
    for r in rows:
        ok = r["verified"]
        body.append((
            r["workload"], r["framework"], r["variant"], r["device"], str(r["replicas"]), r["precision"],
            _time(r["median_s"]) if ok else "INVALID",
            _time(r["iqr_s"]) if ok and r["reps"] > 1 else "-",
            _time(r["compile_s"]) if ok else "-",
            _f(r["gflops_per_s"], ".1f") if ok else "-",
            _f(r.get("images_per_s"), ".1f") if ok else "-",
            _f(r["max_rel_err"], ".1e"),
            _f(r.get("xfw_max_rel_err"), ".1e"),
            "yes" if ok else f"NO: {r['invalid_reason']}",
        ))  # fmt: skip
    return _grid(COLUMNS, body)


def _figure(k: str, v) -> str:
    return f"{k} {v:.2e}" if "_vs_" in k else f"{k} {v:.4f}"


def checks_table(checks: list[dict]) -> str:
    """The CNN parity checks: figures, tolerance, pass/fail."""
    body = [
        (c["check"], str(c.get("replicas") or "-"), ", ".join(_figure(k, v) for k, v in c["figures"].items()),
         f"{c['tolerance']:g}", {True: "PASS", False: "FAIL", None: "-"}[c["passed"]], c.get("detail", ""))
        for c in checks
    ]  # fmt: skip
    return _grid(("parity check", "replicas", "figures", "tolerance", "result", "note"), body)


def footnotes(doc: dict) -> str:
    env = doc["env"]
    notes = [
        "median/IQR: steady-state time per call over reps, every call synchronised and its output checked",
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


def _md(header, body) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(b) + " |" for b in body])  # fmt: skip


def markdown(doc: dict) -> str:
    """The speed table, the parity checks and the environment as Markdown (for docs/ and reviews)."""
    env = doc["env"]
    rows = [
        (r["workload"], r["framework"], r["variant"], str(r["replicas"]), r["precision"],
         _time(r["median_s"]) if r["verified"] else "INVALID",
         _time(r["iqr_s"]) if r["verified"] and r["reps"] > 1 else "-", _time(r["compile_s"]),
         _f(r["gflops_per_s"], ".1f"), _f(r.get("images_per_s"), ".1f"), _f(r["max_rel_err"], ".1e"),
         _f(r.get("xfw_max_rel_err"), ".1e"), "yes" if r["verified"] else f"no: {r['invalid_reason']}")
        for r in doc["rows"]
    ]  # fmt: skip
    out = [_md(COLUMNS[:3] + COLUMNS[4:], rows)]
    if doc.get("checks"):
        out += ["", _md(("parity check", "replicas", "figures", "tolerance", "result", "note"), [
            (c["check"], str(c.get("replicas") or "-"), ", ".join(_figure(k, v) for k, v in c["figures"].items()),
             f"{c['tolerance']:g}", {True: "PASS", False: "FAIL", None: "not judged"}[c["passed"]], c.get("detail", ""))
            for c in doc["checks"]])]  # fmt: skip
    fw = "; ".join(f"{k}: {' '.join(f'{n} {v}' for n, v in f['versions'].items())} ({f['device_kind']})"
                   for k, f in env["frameworks"].items())  # fmt: skip
    out += ["", f"Device `{env['device']}`, precision `{env['precision']}`, host {env['host_cpu']} "
            f"({env['host_cores']} cores), Python {env['python']}, {env['timestamp']}, commit {env['git_commit']}.",
            f"Frameworks: {fw}."]  # fmt: skip
    out += [f"Note: {n}" for n in env.get("notes", [])] + [f"Not run: {s['framework']}: {s['reason']}"
                                                            for s in env.get("skipped", [])]  # fmt: skip
    return "\n".join(out) + "\n"
