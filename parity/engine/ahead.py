"""Compiling ahead, side by side: a worker's trained-workload programs compiled before their first calls, all at once.

XLA compiles one program on one core, and on an accelerator's host a training step takes far longer to compile than
to run (docs/tpu.md gives a TPU chip's figures), while the host's other cores wait. So where the run
asks for it (Config.ahead: an accelerator), the parent sends each worker, before its rows, every case of the trained
workloads its rows will time, training and inference (protocol.Ahead); the worker builds them, compiles what each
first call (a training row's first epoch) will run on threads of its own (the compiler releases the GIL), and each
first call then runs what is compiled. A row's first-call figure is its compile, slowed by the others beside it, plus
the call; the run's notes say so. A framework with nothing to compile ahead (TensorFlow, PyTorch: `ahead` says False)
compiles at its first call, as before. The operations (the conv, the matmul) compile in about a second at their
first calls, as before.
"""

from __future__ import annotations

from dataclasses import asdict

from parity.common.messages import log
from parity.common.protocol import Ahead, Prepare
from parity.engine.assemble import Case, cases
from parity.workloads import WORKLOADS, RowKind


# ---- the parent's side -------------------------------------------------------------------------------------------
def kind_cases(rnd, wl: str, kind: RowKind, seed_offset: int = 0) -> tuple:
    """A row kind's spec, what its workload's parent side adds to each case, and its cases in this round."""
    cfg, run, workers = rnd.cfg, rnd.run, rnd.workers
    suite = run.suites.get(wl)
    spec, extra, tag = cfg.spec(wl), {}, ""
    if suite:
        spec, extra, tag = suite.case_args(spec, seed_offset, workers, rnd.save_dir, run.ctxs[wl])
    return spec, extra, cases(cfg, kind, workers, rnd.hello, tag, run.said)


def prepare(rnd, kind: RowKind, spec, c: Case, extra: dict) -> Prepare:
    """The request that builds case `c` and makes its first call."""
    return Prepare(c.key, kind.name, c.variant, spec.to_dict(), str(rnd.save_dir / f"{c.key}.npy"), extra)


def compile_ahead(rnd) -> dict[tuple[str, str], tuple]:
    """Every worker of the round builds its trained workloads' cases (training ones: the first seed's) and compiles
    their first calls' programs side by side, the workers at once; returns each such kind's kind_cases, for its rows
    to use."""
    cfg, planned, ask, trains = rnd.cfg, {}, {}, {}
    for wl in (wl for wl in cfg.workloads if WORKLOADS[wl].suite is not None):  # the trained workloads
        for kind in WORKLOADS[wl].kinds:
            spec, extra, todo = planned[(wl, kind.name)] = kind_cases(rnd, wl, kind)
            for c in todo:
                req = asdict(prepare(rnd, kind, spec, c, extra))
                ask.setdefault(c.worker, []).append(req)
                trains[c.worker] = trains.get(c.worker, 0) + kind.epochs
    for key, reqs in ask.items():
        rows = f"{len(reqs)} rows ({trains[key]} training, {len(reqs) - trains[key]} inference)"
        log(cfg, f"{rnd.workers[key].label}: building {rows}, their programs compiled side by side where it can")
        rnd.workers[key].send(Ahead(reqs))
    for key in ask:
        w = rnd.workers[key]
        done = w.answer()
        for case, why in done.failed.items():
            log(cfg, f"  {case}: not compiled ahead ({why}); it compiles at its first call")
        if done.seconds:
            longest = max(done.seconds.values())
            log(cfg, f"  {w.label}: {len(done.seconds)} programs compiled, the longest in {longest:.1f} s")
            key = f"ahead {w.framework} x{rnd.replicas or 'all'}"
            rnd.run.said[key] = ahead_note(w.label, done.seconds, f"{cfg.device} x{rnd.replicas or 'all'}")
    return planned


def ahead_note(who: str, seconds: dict[str, float], where: str) -> str:
    """The run's note for one worker's compiling ahead (`who`: its label; `where`: its device and replicas)."""
    return (
        f"{who} on {where}: {len(seconds)} programs (training steps, inference) compiled side by side before their "
        f"first calls (the longest {max(seconds.values()):.1f} s, {sum(seconds.values()):.1f} s added up); each such "
        "row's first call (a training row's first epoch) is its own compile, slowed by the others beside it, plus the "
        "call (--no-compile-ahead: one at a time)"
    )
