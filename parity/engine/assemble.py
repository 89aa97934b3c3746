"""Row assembly: the cases a round times (each worker's variants), the row each result makes, and the rows'
outputs checked against each other's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from parity.api.variants import Setting, from_wire, setting_from_wire
from parity.common.cpuinfo import isa_capped_below_bf16
from parity.common.float64 import errors
from parity.common.protocol import AskVariants, Result
from parity.engine import selection
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.record.rows import Row
from parity.workloads import RowKind
from parity.workloads.guarded import PluginFailure


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
    """Every worker's variants of this row kind that `--configs` asks for (parity.engine.selection); bfloat16 ones
    only where the hardware has bfloat16."""
    configs = cfg.configs if cfg.tuned else "default"
    running = running_settings(workers, hello)
    out = []
    for wk, w in workers.items():
        n = hello[wk]["replicas"]
        offered = [from_wire(d).on(cfg.device) for d in w.ask(AskVariants(kind.name)).variants]  # as the device ranks
        mine = running[w.framework].get(w.setting)
        chosen, why = selection.to_time(configs, offered, mine, list(running[w.framework].values()))
        offered_settings = [setting_from_wire(d) for d in hello[wk].get("settings", ())]  # the framework's, here
        for note in selection.notes(configs, offered_settings or list(running[w.framework].values()), why):
            said.setdefault(note, note)
        for v in chosen:
            if v.dtype == "bfloat16" and not hello[wk]["native_bf16"]:
                # emulated bfloat16 would only show a slower configuration; the table says why it is absent
                cap = isa_capped_below_bf16(w.env) if cfg.device == "cpu" else None
                reason = f"{cap} caps the CPU below bfloat16" if cap else f"{hello[wk]['device_kind']} has none"
                said["skipped_bf16"] = f"'+bf16' variants not run (no native bfloat16): {reason}"
                continue
            shown = v.name if w.setting == "default" else f"{v.name}+{w.setting}"
            key = f"{kind.name}-{wk}-{v.name}-r{n}{tag}".replace("+", "_")
            out.append(Case(wk, shown, n, key, v.name, v.dtype, v.tuned or w.setting != "default"))
    return out


def timed_under(cfg: Config, kind: RowKind, worker: Worker, settings: list[Setting]) -> set[str]:
    """The code variants of `kind` that workers of `worker`'s framework started with `settings` will time, from
    `worker`'s tables (one owner at a time: known before those workers start)."""
    offered = [from_wire(d).on(cfg.device) for d in worker.ask(AskVariants(kind.name)).variants]
    configs = cfg.configs if cfg.tuned else "default"
    return {v.name for s in settings for v in selection.to_time(configs, offered, s, settings)[0]}


def running_settings(workers: dict[str, Worker], hello: dict) -> dict[str, dict[str, Setting]]:
    """Framework -> {setting name: its record} of the workers running with one: the implementation's declared
    record (its hello), or, for one from the command line, a record that declares no formats."""
    out: dict[str, dict[str, Setting]] = {w.framework: {} for w in workers.values()}
    declared: dict[str, dict[str, Setting]] = {fw: {} for fw in out}
    for wk, w in sorted(workers.items(), key=lambda kw: kw[1].setting != "default"):  # a worker's own hello last
        declared[w.framework].update({d["name"]: setting_from_wire(d) for d in hello[wk].get("settings", ())})
    for w in (w for w in workers.values() if w.setting != "default"):
        out[w.framework][w.setting] = declared[w.framework].get(w.setting) or Setting(w.setting, w.setting_env, None)
    return out


MEMORY = ("bytes", "source", "at_least")


def _tolerance(cfg: Config, kind: RowKind, c: Case, res: Result) -> tuple[float | None, str | None]:
    """A row's tolerance (one its case derived from the row's own inputs, the LSTM's inference; else its kind's) and
    why it is invalid: the worker's reason, or a plug-in's tolerance function that failed (PluginFailure: that row
    INVALID, named; a built-in's failure is the harness's own and ends the run)."""
    try:
        tol = res.extra.get("tolerance", kind.tolerance(cfg.device, cfg.precision, c.dtype))
    except PluginFailure as e:
        return None, res.invalid or str(e)
    return tol, res.invalid


def make_row(
    cfg: Config, kind: RowKind, c: Case, res: Result, more: dict, worker: Worker, hello: dict, save_dir: Path
) -> Row:
    """A result row: what ran where, its times, its figures and its verdict, from the worker's result (`more`: what
    the schedule adds, its rounds and --profile's figures). The one place a result becomes a Row."""
    med = res.median_s
    tol, invalid = _tolerance(cfg, kind, c, res)
    return Row(
        kind=kind.name,
        framework=worker.framework,
        variant=c.shown,
        setting_env=worker.setting_env,
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
        iqr_s=res.iqr_s,
        q1_s=res.q1_s,
        q3_s=res.q3_s,
        min_s=res.min_s,
        reps=res.reps,
        # raw times, memory and --profile's figures, as the worker (and the schedule) measured them
        **{k: getattr(res, k) for k in ("times_s", "busy_after_s", *(f"peak_memory_{m}" for m in MEMORY))},
        **{k: more.get(k) for k in ("rounds", "profile_dir", "profile_call_s", "layers", "profile_coverage")},
        # an operation's first call (tracing, compilation, one execution); a training row's first epoch is
        # first_epoch_s instead, never called a compile time
        compile_s=None if kind.epochs else res.compile_s,
        compiled_ahead_s=res.ahead_s,  # of the first call's figure, the part compiled ahead (--compile-ahead)
        gflops_per_s=res.flops / med / 1e9 if med and res.flops else None,
        flops=res.flops,
        flops_unpadded=res.flops_unpadded,
        flops_formula=" ".join(res.flops_formula.split()),
        compiler_flops=res.compiler_flops,
        compiler_flops_source=res.compiler_flops_source,
        program_ops=res.program_ops,  # judged into attainable_s (parity.judging.roofline.attainable), not saved
        min_bytes=res.min_bytes,
        max_abs_err=res.max_abs_err,
        max_rel_err=res.max_rel_err,
        # a training row is checked for finite losses and placement; its numbers are judged by the checks
        tolerance=tol,
        verified=invalid is None and med is not None,
        invalid_reason=invalid if invalid is not None or med is not None else "no timed call completed",
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
            and other.kind == row.kind
            and other.dtype == row.dtype
            and row.verified
            and other.verified
        ]
        errs = [e for e in errs if e is not None]
        row.xfw_max_rel_err = max(errs) if errs else None
