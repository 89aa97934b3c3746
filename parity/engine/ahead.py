"""Compiling ahead, side by side: a worker's training steps compiled before their first epochs, all at once.

XLA compiles one program on one core, and on an accelerator's host a training step takes far longer to compile than
to run (docs/tpu.md gives a TPU chip's figures), while the host's other cores wait. So where the run
asks for it (Config.ahead: an accelerator), the parent sends each worker, before its rows, every training case its
rows will time (protocol.Ahead); the worker builds them, compiles what each first epoch will run on threads of its
own (the compiler releases the GIL), and each first epoch then runs what is compiled. A row's first-call figure is
its compile, slowed by the others beside it, plus its first epoch; the run's notes say so. A framework with nothing
to compile ahead (TensorFlow, PyTorch: their trainers' `ahead` says False) compiles at its first call, as before.
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
    """Every worker of the round builds its training cases (the first seed's) and compiles their first epochs'
    programs side by side, the workers at once; returns each such kind's kind_cases, for its rows to use."""
    cfg, planned, ask = rnd.cfg, {}, {}
    for wl in cfg.workloads:
        for kind in (k for k in WORKLOADS[wl].kinds if k.epochs):
            spec, extra, todo = planned[(wl, kind.name)] = kind_cases(rnd, wl, kind)
            for c in todo:
                req = asdict(prepare(rnd, kind, spec, c, extra))
                ask.setdefault(c.worker, []).append(req)
    for key, reqs in ask.items():
        log(
            cfg,
            f"{rnd.workers[key].label}: building {len(reqs)} training rows, their steps compiled side by side "
            "where it can",
        )
        rnd.workers[key].send(Ahead(reqs))
    for key in ask:
        w = rnd.workers[key]
        done = w.answer()
        for case, why in done.failed.items():
            log(cfg, f"  {case}: not compiled ahead ({why}); it compiles at its first call")
        if done.seconds:
            longest = max(done.seconds.values())
            log(cfg, f"  {w.label}: {len(done.seconds)} steps compiled, the longest in {longest:.1f} s")
            key = f"ahead {w.framework} x{rnd.replicas or 'all'}"
            rnd.run.said[key] = ahead_note(w.label, done.seconds, f"{cfg.device} x{rnd.replicas or 'all'}")
    return planned


def ahead_note(who: str, seconds: dict[str, float], where: str) -> str:
    """The run's note for one worker's compiling ahead (`who`: its label; `where`: its device and replicas)."""
    return (
        f"{who} on {where}: {len(seconds)} training steps compiled side by side before their first epochs (the "
        f"longest {max(seconds.values()):.1f} s, {sum(seconds.values()):.1f} s added up); each row's first epoch "
        "is its own compile, slowed by the others beside it, plus the epoch (--no-compile-ahead: one at a time)"
    )
