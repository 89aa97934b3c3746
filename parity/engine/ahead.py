"""Compiling ahead, side by side: a worker's trained-workload programs compiled before their first calls, all at once.

XLA compiles one program on one core, and on an accelerator's host a training step takes far longer to compile than to
run (docs/tpu.md gives a TPU chip's figures), while the host's other cores wait. So where the run asks for it
(Config.ahead: an accelerator), the parent sends each worker, before its rows, every case of the trained workloads its
rows will time, training and inference (protocol.Ahead); the worker builds them, compiles what each first call (a
training row's first epoch) will run on threads of its own (the compiler releases the GIL), in its background: meanwhile
it computes its parity rounds (their own programs compiled side by side too), then waits for the compiling
(protocol.AheadDone), and each first call runs what is compiled. A row's first-call figure is its compile, slowed by the
others beside it, plus the call; the run's notes say so. A framework with nothing to compile ahead (TensorFlow, PyTorch:
`ahead` says False) compiles at its first call. The operations (the conv, the matmul) compile in about a second at their
first calls.
"""

from __future__ import annotations

from dataclasses import asdict

from parity.common import references
from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import Ahead, AheadDone, Prepare
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


def first_call(rnd, kind: RowKind, spec, c: Case, extra: dict) -> float | None:
    """A case's first call (compilation, or a training row's first epoch), alone; its time."""
    cfg, w = rnd.cfg, rnd.workers[c.worker]
    what = f"first epoch (seed {spec.seed})" if kind.epochs else "compiling"
    log(cfg, f"{kind.name}: {what} {label(w.framework)} {c.shown} x{c.replicas}")
    resp = w.ask(prepare(rnd, kind, spec, c, extra))
    then = f" ({resp.ahead_s:.1f} s of it compiled ahead)" if resp.ahead_s else ""
    said = f"  first call {resp.compile_s:.3f} s{then}, output verified" if not resp.invalid else ""
    log(cfg, said or f"  INVALID: {resp.invalid}")
    return resp.compile_s


def start(rnd) -> tuple[dict[tuple[str, str], tuple], list[str]]:
    """Every worker of the round builds its trained workloads' cases (training ones: the first seed's) and starts
    compiling their first calls' programs side by side in its background, the workers at once; returns each such
    kind's kind_cases, for its rows to use, and the workers asked (`finish` waits for their compiling). Until then
    a worker takes only its parity round's calls; the round's timed variants are known now (Round.timed)."""
    cfg, planned, ask, trains = rnd.cfg, {}, {}, {}
    references.resume()  # the parity checks' float64 references go on beside the rounds (parity.common.references)
    for wl in (wl for wl in cfg.workloads if WORKLOADS[wl].suite is not None):  # the trained workloads
        for kind in WORKLOADS[wl].kinds:
            spec, extra, todo = planned[(wl, kind.name)] = kind_cases(rnd, wl, kind)
            mark_timed(rnd, kind, todo)
            for c in todo:
                req = asdict(prepare(rnd, kind, spec, c, extra))
                ask.setdefault(c.worker, []).append(req)
                trains[c.worker] = trains.get(c.worker, 0) + kind.epochs
    for key, reqs in ask.items():
        rows = f"{len(reqs)} rows ({trains[key]} training, {len(reqs) - trains[key]} inference)"
        log(cfg, f"{rnd.workers[key].label}: building {rows}, their programs compiled side by side where it can")
        rnd.workers[key].send(Ahead(reqs, wait=False))
    for key in ask:
        _said(rnd, rnd.workers[key], rnd.workers[key].answer())
    return planned, list(ask)


def finish(rnd, asked: list[str]) -> None:
    """Wait for the compiling that `start` left in the background of each worker `asked`, and say what it compiled;
    then pause the parity checks' float64 references computed beside the rounds (parity.common.references): none
    computes beside a timed call."""
    for key in asked:
        log(rnd.cfg, f"{rnd.workers[key].label}: waiting for its rows' programs, compiling since they were built")
        rnd.workers[key].send(AheadDone())
    for key in asked:
        _said(rnd, rnd.workers[key], rnd.workers[key].answer())
    if (waited := references.pause()) > 0.5:
        log(rnd.cfg, f"waited {waited:.1f} s for a float64 reference of the parity checks, computed beside the rounds")


def mark_timed(rnd, kind: RowKind, todo: list[Case]) -> None:
    """The code variants a kind's cases time, into the round's `timed`: what a preset that parity-checks the timed
    variants only asks the workers to train."""
    for c in todo:
        rnd.timed.setdefault(kind.name, {}).setdefault(rnd.workers[c.worker].framework, set()).add(c.variant)


def _said(rnd, w, done) -> None:
    """A worker's answer to Ahead or AheadDone on the progress lines, and its note."""
    for case, why in done.failed.items():
        log(rnd.cfg, f"  {case}: not compiled ahead ({why}); it compiles at its first call")
    if done.seconds:
        longest = max(done.seconds.values())
        log(rnd.cfg, f"  {w.label}: {len(done.seconds)} programs compiled, the longest in {longest:.1f} s")
        where = f"{rnd.cfg.device} x{rnd.replicas or 'all'}"
        rnd.run.said[f"ahead {w.framework} x{rnd.replicas or 'all'}"] = ahead_note(w.label, done.seconds, where)


def ahead_note(who: str, seconds: dict[str, float], where: str) -> str:
    """The run's note for one worker's compiling ahead (`who`: its label; `where`: its device and replicas)."""
    return (
        f"{who} on {where}: {len(seconds)} programs (training steps, inference) compiled side by side before their "
        f"first calls (the longest {max(seconds.values()):.1f} s, {sum(seconds.values()):.1f} s added up); each such "
        "row's first call (a training row's first epoch) is its own compile, slowed by the others beside it, plus the "
        "call (--no-compile-ahead: one at a time)"
    )
