"""--profile: one more call of each case under its framework's profiler, after its timed ones, and its ops attributed
to the model's layers (or to its one op)."""

from __future__ import annotations

from pathlib import Path

from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import Profile
from parity.engine.assemble import Case
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.judging.layers import attribute, one_op
from parity.record.schema import PROFILES
from parity.workloads import RowKind


def with_profiles(results: dict, more: dict, profiled: dict, kind: RowKind, spec, layers: tuple) -> None:
    """Each profiled case's trace folder, its ops attributed to layers (a workload with layers) or to its one op
    (an operation), and the coverage, into what the schedule adds to its row (`more`)."""
    for key, (rel, ops, call_s) in profiled.items():
        per = spec.steps_per_epoch if kind.epochs else 1  # the profiled call: an epoch of steps, or one call
        more[key]["profile_dir"], more[key]["profile_call_s"] = rel, call_s
        med = results[key].median_s
        if ops and med:
            more[key]["layers"], more[key]["profile_coverage"] = (
                attribute(ops, per, med, layers, call_s) if layers else one_op(kind.name, ops, med, call_s)
            )


def profile(cfg: Config, kind: RowKind, todo: list[Case], workers: dict[str, Worker], save_dir: Path) -> dict:
    """--profile: after the timed calls, one more call of each case (a training row: one epoch) under its
    framework's profiler, one at a time; {case key: (its trace folder relative to --out, its ops as (scope,
    seconds, start_s, thread), the profiled call's own time)}."""
    out = {}
    for c in todo:
        rel = f"{PROFILES}/{c.key}"
        log(cfg, f"{kind.name}: profiling {label(workers[c.worker].framework)} {c.shown} x{c.replicas} (one call)")
        resp = workers[c.worker].ask(Profile(c.key, str(save_dir / rel)))
        if resp.profiled:
            out[c.key] = (rel, [tuple(op) for op in resp.ops or []], resp.call_s)
            if not resp.ops:  # a trace whose form the reader does not know (a new backend's): said, not left blank
                log(cfg, f"  traced to {rel}, but no op was read from the trace: the row has no layer split")
        elif resp.why:
            log(cfg, f"  not profiled: {resp.why}")
    return out
