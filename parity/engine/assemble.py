"""Row assembly: the cases a round times (each worker's variants), the row each result makes, and the rows'
outputs checked against each other's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from parity.common.float64 import errors
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.judging import roofline
from parity.output.rows import Row
from parity.workloads import RowKind


@dataclass(frozen=True)
class Case:
    """One timed case: a worker's variant at its replica count, the name it is shown by, its number format."""

    worker: str  # 'tf', 'jax', 'jax+ynn', ...
    shown: str  # the variant, with the worker's configuration appended ('jit+ynn')
    replicas: int
    key: str  # unique in the run: the worker's id for it and the stem of its saved output
    variant: str  # the implementation's own name
    dtype: str
    tuned: bool  # not the framework out of the box: a tuned variant, or a worker with a tuned configuration


def cases(cfg: Config, kind: RowKind, workers: dict[str, Worker], hello: dict, tag: str, said: dict) -> list[Case]:
    """Every worker's variants of this row kind that `--configs` asks for; bfloat16 ones only where the hardware
    has bfloat16."""
    out = []
    for wk, w in workers.items():
        n = hello[wk]["replicas"]
        offered = w.ask(cmd="variants", workload=kind.name, tuned=cfg.tuned)
        for variant in offered["variants"]:
            dtype = offered["dtypes"][variant]
            if not _asked(cfg, wk, workers, hello, offered, variant, said):
                continue
            if dtype == "bfloat16" and not roofline.native_bf16(cfg.device, hello[wk]["device_kind"], w.env):
                # emulated bfloat16 would only show a slower configuration; the table says why it is absent
                cap = roofline.isa_capped_below_bf16(w.env) if cfg.device == "cpu" else None
                why = f"{cap} caps the CPU below bfloat16" if cap else f"{hello[wk]['device_kind']} has none"
                said["skipped_bf16"] = f"'+bf16' variants not run (no native bfloat16): {why}"
                continue
            shown = variant if w.config == "default" else f"{variant}+{w.config}"
            key = f"{kind.name}-{wk}-{variant}-r{n}{tag}".replace("+", "_")
            tuned = variant in offered["tuned"] or w.config != "default"
            out.append(Case(wk, shown, n, key, variant, dtype, tuned))
    return out


def _asked(cfg: Config, wk: str, workers: dict, hello: dict, offered: dict, variant: str, said: dict) -> bool:
    """Whether `--configs` times this worker's variant: 'all' every one; 'levers' each tuning on its own and with
    each process-wide configuration of its number format, but not the several-steps-per-dispatch ones with one;
    'best' the framework out of the box and, per number format, its best-known configuration (the implementation's
    first BEST_VARIANTS offered, in the worker of the configuration for that format, where one runs)."""
    w, dtype = workers[wk], offered["dtypes"][variant]
    formats = hello[wk].get("config_formats", {}).get(w.config)  # None: the default, or a command line's
    if cfg.configs == "levers" and formats is not None and dtype not in formats:
        said["configs_levers"] = (
            "--configs levers: each tuned configuration ran only the variants of the number formats it acts on ("
            + ", ".join(f"+{k} {'/'.join(v) or 'none'}" for k, v in hello[wk]["config_formats"].items())
            + "); --configs all runs every combination"
        )
        return False
    if cfg.configs == "levers" and formats is not None and variant in offered.get("dispatch", ()):
        said["configs_levers_dispatch"] = (
            "--configs levers: the tuned configurations ran without the several-steps-per-dispatch variants "
            "('+scan': DISPATCH_VARIANTS), each measured out of the box; --configs all runs them with each"
        )
        return False
    if cfg.configs != "best" or (w.config != "default" and formats is None):
        return True
    covered = {  # the formats a configuration of this framework's acts on, in a worker of its own
        f
        for ok, o in workers.items()
        if o.framework == w.framework and o.config != "default"
        for f in hello[ok].get("config_formats", {}).get(o.config) or ()
    }
    best = offered["best"].get(dtype) == variant
    plain = w.config == "default" and variant in offered["plain"]
    said["configs_best"] = (
        "--configs best: each framework out of the box and its best-known configuration for each workload, "
        "replica count and number format (its implementation's first BEST_VARIANTS offered, with the process-wide "
        "setting for that format where it names one); every parity check still runs each variant; "
        "--configs levers times each tuning on its own, --configs all every combination"
    )
    return plain or (best and (dtype in formats if w.config != "default" else dtype not in covered))


def make_row(cfg: Config, kind: RowKind, c: Case, res: dict, worker: Worker, hello: dict, save_dir: Path) -> Row:
    """A result row: what ran where, its times, its figures and its verdict, from the worker's result."""
    med = res.get("median_s")
    return Row(
        workload=kind.name,
        framework=worker.framework,
        variant=c.shown,
        config_env=worker.config_env,
        device=cfg.device,
        device_kind=hello["device_kind"],
        replicas=c.replicas,
        processes=hello.get("num_processes", 1),
        # bfloat16 inputs: the float32 --precision setting does not apply, the format is what the row ran in
        dtype=c.dtype,
        precision="bfloat16" if c.dtype == "bfloat16" else cfg.precision,
        tuned=c.tuned,
        quick=cfg.quick,
        median_s=med,
        iqr_s=res.get("iqr_s"),
        q1_s=res.get("q1_s"),
        q3_s=res.get("q3_s"),
        min_s=res.get("min_s"),
        reps=res.get("reps"),
        # raw times, memory and --profile's figures, as the worker (and the schedule) measured them
        **{k: res.get(k) for k in ("times_s", "rounds", "busy_after_s", "peak_memory_bytes", "peak_memory_source")},
        **{k: res.get(k) for k in ("profile_dir", "layers", "profile_coverage")},
        # an operation's first call (tracing, compilation, one execution); a training row's first epoch is
        # first_epoch_s instead, never called a compile time
        compile_s=None if kind.epochs else res.get("compile_s"),
        gflops_per_s=res["flops"] / med / 1e9 if med and res.get("flops") else None,
        flops=res.get("flops"),
        flops_unpadded=res.get("flops_unpadded"),
        flops_formula=" ".join(res.get("flops_formula", "").split()),
        compiler_flops=res.get("compiler_flops"),
        compiler_flops_source=res.get("compiler_flops_source"),
        min_bytes=res.get("min_bytes"),
        max_abs_err=res.get("max_abs_err"),
        max_rel_err=res.get("max_rel_err"),
        # a training row is checked for finite losses and placement; its numbers are judged by the checks
        tolerance=kind.tolerance(cfg.device, cfg.precision, c.dtype),
        verified=res["invalid"] is None and med is not None,
        invalid_reason=res["invalid"],
        saved=str(save_dir / f"{c.key}.npy"),
    )


def saved_error(a: str, b: str) -> float | None:
    """Max error between two saved outputs relative to the second's largest value; None if one is missing."""
    if not (Path(a).exists() and Path(b).exists()):
        return None
    return errors(np.load(a), np.load(b))["max_rel_err"]


def cross_check(rows: list[Row], error=saved_error) -> None:
    """Each row's oracle rows against every other framework's, same workload and number format (dtype)."""
    for row in rows:
        errs = [
            error(row.saved, other.saved)
            for other in rows
            if other.framework != row.framework
            and other.workload == row.workload
            and other.dtype == row.dtype
            and row.verified
            and other.verified
        ]
        errs = [e for e in errs if e is not None]
        row.xfw_max_rel_err = max(errs) if errs else None
