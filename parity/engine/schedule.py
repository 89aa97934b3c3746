"""The schedule: every workload x framework x variant x replica count, in rounds of workers.

Two strategies share one expansion of configurations (workerproc.tuned_settings): every framework's workers at
once, their timed calls interleaved; or, on a device that takes one owner at a time, each worker alone.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.api.variants import Setting, setting_from_wire
from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import GetResult, Rep, Warm
from parity.engine import ahead, cluster, devicelock, peaks, profiling, repetitions
from parity.engine.assemble import Case, cross_check, make_row, timed_under
from parity.engine.config import Config, chips
from parity.engine.environment import compilation_cache_notes
from parity.engine.workerproc import Worker, owner, start_owner, start_workers, tuned_settings, with_workers
from parity.judging import roofline
from parity.judging.judge import by_checks, drift_note, judge_row, parity_note
from parity.record.rows import Row
from parity.workloads import WORKLOADS, RowKind
from parity.workloads.base import Suite

AGAIN_TURNS = 2  # an operation's turns when an owner times its rows again (each an untimed and a timed call)


@dataclass
class RunState:
    """What a run gathers as it goes."""

    suites: dict[str, Suite]  # workload -> its parent side, for workloads that have one
    ctxs: dict  # workload -> its suite's state (data file, initial weights, parity arrays)
    rows: list[Row] = field(default_factory=list)
    checks: list = field(default_factory=list)
    hello: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    said: dict = field(default_factory=dict)  # notes said once, however often their cause recurs
    peak: roofline.Peak | None = None
    next_round: int = 0  # rounds are numbered through the run: rows share a round only where they ran in it


@dataclass
class Round:
    """One replica count's workers, for its cfg's workloads (Config.rounds), and where their files go."""

    cfg: Config
    run: RunState
    replicas: int
    save_dir: Path
    workers: dict[str, Worker] = field(default_factory=dict)
    hello: dict[str, dict] = field(default_factory=dict)
    timed: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # row kind -> framework -> code variants
    # one owner at a time: each row's case, kept in its worker to be timed again at the owner's end (drift)
    kept: list[tuple[Row, Case, RowKind]] | None = None


def run_suite(cfg: Config, save_dir: Path) -> dict:
    """Run every workload x framework x variant x replica count.

    Returns {"rows", "checks", "hello", "skipped", "notes", "peak"}, rows as results.json holds them.
    """
    cfg.check_batches()
    suites = {wl: WORKLOADS[wl].suite for wl in cfg.workloads if WORKLOADS[wl].suite is not None}
    run = RunState(suites, {wl: {} for wl in cfg.workloads})
    run.notes += [cluster.run_note(cfg)] if cfg.cluster is not None else []
    run.notes += compilation_cache_notes(cfg.frameworks) + cfg.size_notes()
    for wl, suite in suites.items():  # first: data that is absent or corrupt ends the run before anything is measured
        log(cfg, f"{wl}: reading its data (or making it)")
        run.ctxs[wl], more = suite.prepare(cfg, cfg.spec(wl), save_dir)
        run.notes += more
    run.peak = peaks.before_workers(cfg)
    last = None  # the round before, judged while this round's workers start (it needs none of them)
    for r in cfg.replica_counts():
        if r == 0 and last is not None and last.replicas == 1 and chips(cfg.device, run.hello) == 1:  # every owner's
            run.notes.append(f"one {cfg.device} chip: the x1 rows are every chip's (no second round)")
            continue
        run.skipped.extend(s for s in cfg.left_out(r) if s not in run.skipped)  # no data parallelism: no worker
        for part in cfg.rounds(r):  # the workloads and frameworks that share one set of workers (Config.rounds)
            rnd = Round(part, run, r, save_dir)
            (save_dir / "tmp").mkdir(exist_ok=True)
            if cfg.exclusive:  # one owner at a time: nothing of the parent's beside a starting owner
                _judge_parity(last)
                _one_owner_at_a_time(rnd)
            else:
                _interleaved(rnd, last)
            run.peak = peaks.after_round(cfg, run.peak)  # its workers gone, the next not yet started
            last = rnd
    _judge_parity(last)
    _judge_all(cfg, run)
    return {
        "rows": [r.to_dict() for r in run.rows],
        "checks": run.checks,
        "hello": run.hello,
        "skipped": run.skipped,
        "notes": run.notes,
        "peak": run.peak.to_dict() if run.peak else None,
    }


def _interleaved(rnd: Round, last: Round | None) -> None:
    """Every framework's workers at once (a tuned configuration's its own), calls interleaved; `last`'s parity too."""
    cfg, run = rnd.cfg, rnd.run
    judged = [wl for wl in last.cfg.workloads if wl in run.suites] if last else []  # those with parity checks
    meanwhile = f"; the x{last.replicas or 'all'} {', '.join(judged)} parity checks meanwhile" if judged else ""
    part = f" for {', '.join(cfg.workloads)}" if len(cfg.workloads) < len(run.ctxs) else ""  # Config.rounds
    fws = ", ".join(label(f) for f in cfg.frameworks)
    log(cfg, f"starting {fws} workers{part} on {cfg.device} x{rnd.replicas or 'all'}{meanwhile}")
    rnd.workers, rnd.hello, skip = start_workers(cfg, rnd.replicas, rnd.save_dir / "tmp", lambda: _judge_parity(last))
    run.skipped.extend(s for s in skip if s not in run.skipped)
    if rnd.workers:
        run.rows += with_workers(rnd.workers, lambda: _rows(rnd))


def _one_owner_at_a_time(rnd: Round) -> None:
    """A TPU host takes one owning process (libtpu): each worker runs all its rows alone, then releases the device.
    Interleaving cannot spread drift over the frameworks here, so each owner times every row once more at its end
    and the change is reported (the table keeps the first measurement): drift over every owner's span, in seconds."""
    cfg, run = rnd.cfg, rnd.run
    if cfg.device == "tpu":
        devicelock.check_libtpu_lock()
    owners = [(fw, "default", {}, 0) for fw in cfg.frameworks]  # (framework, configuration, its env, port offset)
    k, early = 0, None  # early: the next owner's worker, started while this one compiles ahead (Config.ahead)
    while k < len(owners):
        fw, name, env, offset = owners[k]
        k += 1
        log(
            cfg,
            f"starting the {label(fw)}{'' if name == 'default' else f' ({name})'} worker alone on "
            f"{cfg.device} x{rnd.replicas or 'all'} (one owner at a time{'; its imports done' if early else ''})",
        )
        rnd.workers, rnd.hello, skip = start_owner(cfg, rnd.replicas, fw, name, env, offset, rnd.save_dir, early)
        run.skipped.extend(s for s in skip if s not in run.skipped)
        if not rnd.workers:
            early = None
            continue
        key = next(iter(rnd.workers))
        if name == "default" and cfg.tuned:  # its tuned configurations follow it, each an owner of its own
            envs = tuned_settings(cfg, fw, rnd.hello[key])
            owners[k:k] = [(fw, n, e, i) for i, (n, e) in enumerate(envs.items(), 1)]
            _timed_by_tuned_owners(rnd, key, envs)  # checked in this owner's parity round
        rnd.kept = [] if not cfg.profile else None  # --profile releases each case after its profiled call
        # the next owner imports its framework while this one compiles ahead, then waits for the device
        early = (
            owner(cfg, rnd.replicas, *owners[k], rnd.save_dir, early=True) if cfg.ahead and k < len(owners) else None
        )
        run.rows += with_workers(rnd.workers, lambda: _rows(rnd) + _again(rnd), early)


def _timed_by_tuned_owners(rnd: Round, key: str, envs: dict[str, dict]) -> None:
    """The code variants a framework's tuned owners will time (`envs`: their settings' environments, by name), known
    from its default owner's tables before they start (parity.engine.selection), into the round's `timed`: the
    default owner's parity round, which its tuned owners do not take again, checks them too."""
    w, hello = rnd.workers[key], rnd.hello[key]
    declared = {d["name"]: setting_from_wire(d) for d in hello.get("settings", ())}
    running = [declared.get(n) or Setting(n, env, None) for n, env in envs.items()]
    for wl in rnd.cfg.workloads:
        for kind in WORKLOADS[wl].kinds:
            names = timed_under(rnd.cfg, kind, w, running)
            rnd.timed.setdefault(kind.name, {}).setdefault(w.framework, set()).update(names)


def _again(rnd: Round) -> list[Row]:
    """One owner at a time: each of its rows timed once more at its end (an operation: AGAIN_TURNS turns of an untimed
    and a timed call; a training row: one more epoch), its case then released; the run's drift note. No row."""
    if rnd.kept is None:
        if rnd.cfg.profile:
            rnd.run.said["drift"] = "one owner of the device at a time: no drift measured under --profile"
        return []
    w = rnd.workers[next(iter(rnd.workers))]
    log(rnd.cfg, f"measuring the {w.label} rows again, at the end of its turn (drift)")
    again = []
    for row, c, kind in rnd.kept:
        times = []
        for _ in range(1 if kind.epochs else AGAIN_TURNS):
            if not kind.epochs:
                w.ask(Warm(c.key))
            t = w.ask(Rep(c.key)).time
            if t is not None:
                times.append(t)
        w.ask(GetResult(c.key))  # releases the case
        if times:
            again.append(dataclasses.replace(row, median_s=float(np.median(times))))
    rnd.run.notes.append(drift_note(w.label, [r for r, _, _ in rnd.kept], again))
    return []


def _rows(rnd: Round) -> list[Row]:
    """The running workers' rows of every workload (returned), and their parity arrays: on an accelerator
    (Config.ahead) before the rows, while the workers compile the rows' programs in their background."""
    cfg, run = rnd.cfg, rnd.run
    for key, h in rnd.hello.items():
        run.hello.setdefault(key, h)
    rows, (planned, asked) = [], ahead.start(rnd) if cfg.ahead else ({}, [])
    with_suites = [wl for wl in cfg.workloads if wl in run.suites]
    for wl in with_suites if cfg.ahead else ():  # beside the rows' programs compiling
        _parity(rnd, wl)
    ahead.finish(rnd, asked)
    for wl in with_suites:  # a worker that built the model ahead: no warming
        built = {c.worker for (w, _), (_, _, todo) in planned.items() if w == wl for c in todo}
        run.suites[wl].warm(cfg, {k: w for k, w in rnd.workers.items() if k not in built}, run.ctxs[wl])
    for wl in cfg.workloads:
        for kind in WORKLOADS[wl].kinds:
            for k in range(cfg.seeds if kind.seeded else 1):
                rows += _run_kind(rnd, wl, kind, k, None if k else planned.get((wl, kind.name)))
        if wl in with_suites and not cfg.ahead:
            _parity(rnd, wl)
    run.peak = peaks.with_workers(cfg, run.peak, rnd.workers, rnd.hello, rows)
    return rows


def _parity(rnd: Round, wl: str) -> None:
    """Workload `wl`'s parity arrays from the running workers (its suite's parity_collect), and the run's note."""
    cfg, run = rnd.cfg, rnd.run
    first = not any(c["workload"] == wl for c in run.checks)
    args = (cfg.spec(wl), rnd.workers, rnd.hello, rnd.save_dir, run.ctxs[wl], first, log, rnd.replicas)
    t0 = time.monotonic()
    run.suites[wl].parity_collect(cfg, *args, timed=rnd.timed)
    who = [w.label for w in rnd.workers.values()]
    run.notes.append(parity_note(wl, rnd.replicas, time.monotonic() - t0, who, rnd.hello, cfg.ahead))


def _run_kind(rnd: Round, wl: str, kind: RowKind, seed_offset: int = 0, planned: tuple | None = None) -> list[Row]:
    """One row kind of a workload: every worker's variants, first calls one at a time, then the timed repetitions
    (an operation's interleaved across cases; a training row's epochs back to back after its first), then the
    rows. `planned`: its cases, where they were built and compiled ahead (parity.engine.ahead)."""
    cfg, run, workers = rnd.cfg, rnd.run, rnd.workers
    suite = run.suites.get(wl)
    spec, extra, todo = planned or ahead.kind_cases(rnd, wl, kind, seed_offset)
    ahead.mark_timed(rnd, kind, todo)
    if not todo:
        return []
    if kind.epochs:  # as a user's fit(epochs=N): the first epoch, then the others at once, one row at a time
        run.said["epochs"] = (
            f"{kind.name}: each row's epochs back to back after its first, one row at a time (as fit(epochs=N) runs "
            "them; an epoch after another worker's reads slower on a VM, docs/statistics.md): its rows share no "
            "rounds, so their intervals are unpaired"
        )
        rounds = {}
        for c in todo:  # no row of the run shares a round with another
            ahead.first_call(rnd, kind, spec, c, extra)
            rounds.update(_timed_reps(rnd, kind, spec, [c]))
    else:
        for c in todo:  # one at a time: its own time
            ahead.first_call(rnd, kind, spec, c, extra)
        rounds = _timed_reps(rnd, kind, spec, todo)
    for c in todo:  # untimed: every worker at once, each answering in order; kept for --profile, or to time again
        workers[c.worker].send(GetResult(c.key, keep=cfg.profile or rnd.kept is not None))
    results = {c.key: workers[c.worker].answer() for c in todo}
    more = {c.key: {"rounds": rounds[c.key]} for c in todo}  # what the schedule adds to each row
    if cfg.profile:  # after the results: a profiled training epoch must not count in the row's training
        profiled = profiling.profile(cfg, kind, todo, workers, rnd.save_dir)
        profiling.with_profiles(results, more, profiled, kind, spec, WORKLOADS[wl].layers)
    rows = []
    for c in todo:
        w = workers[c.worker]
        row = make_row(cfg, kind, c, results[c.key], more[c.key], w, rnd.hello[c.worker], rnd.save_dir)
        # a trained row's own figures; an operation's sizes (a call on 32 images is not one on 128: parity.compare)
        row.update(suite.row_extra(kind, results[c.key], spec) if suite else {"spec": spec.to_dict()})
        rows.append(row)
        if rnd.kept is not None:
            rnd.kept.append((row, c, kind))
    return rows


def _timed_reps(rnd: Round, kind: RowKind, spec, todo: list[Case]) -> dict[str, list[int]]:
    """Warm-up, then the timed repetitions in rounds, interleaved across cases with alternating order (a training
    kind's cases come one at a time: its first epoch was its first call, each later epoch is one repetition), each
    round's cases chosen by the settling rule (parity.engine.repetitions): those below their minimum, or not yet
    settled with budget left. Nothing of another worker's comes between two calls that a user's loop makes back to
    back: an operation's timed calls (two to a turn: repetitions.OP_CALLS_PER_TURN, each its own round) follow an
    untimed call of its own, a training row's epochs follow each other. On
    a VM that hands freed memory back to its host, a call after another worker's finds its fresh buffers slow to
    touch (docs/statistics.md gives the times). Returns each case's rounds: the round of each of its timed
    calls, in order, numbered on from the run's last (a call that came back invalid is no timed call)."""
    cfg, workers = rnd.cfg, rnd.workers
    for _ in range(0 if kind.epochs else cfg.warmup):
        for c in todo:
            workers[c.worker].ask(Warm(c.key))
    rule = repetitions.rule(cfg, kind, spec)
    times: dict[str, list[float]] = {c.key: [] for c in todo}
    rounds: dict[str, list[int]] = {c.key: [] for c in todo}
    invalid: set[str] = set()
    said_at, i = time.monotonic(), 0
    while more := repetitions.wanting(rule, todo, workers, times, rounds, invalid):
        said = []
        for c in todo if i % 2 == 0 else todo[::-1]:  # alternate so no case always runs first
            if c.key not in more:
                continue
            if not kind.epochs:  # back to back with an untimed call of its own, as in a user's loop
                workers[c.worker].ask(Warm(c.key))
            figs = []
            for j in range(rule.visit(len(times[c.key]))):  # its turn: one or more timed calls, each a round
                if j and rule.spent(times[c.key]):
                    break
                resp = workers[c.worker].ask(Rep(c.key))
                t, last = resp.time, resp.last or {}
                figs.append(f"{t:.4f}s" if t is not None else f"INVALID ({resp.invalid})")
                if t is None:
                    invalid.add(c.key)
                    break
                times[c.key].append(t)
                rounds[c.key].append(rnd.run.next_round + i * rule.per_visit + j)
                if kind.epochs:  # a training epoch's last step: its loss and accuracy
                    figs[-1] += "".join(f" {k} {v:.4f}" for k, v in last.items())
            said.append(f"{workers[c.worker].framework} {c.shown} {' '.join(figs)}")
        i += 1
        what = f"epoch {i + 1}" if kind.epochs else f"round {i}"
        if kind.epochs or time.monotonic() - said_at > 5:  # a line every 5 s
            log(cfg, f"{kind.name} {what}: " + ", ".join(said))
            said_at = time.monotonic()
    rnd.run.next_round += i * rule.per_visit
    return rounds


def _judge_parity(rnd: Round | None) -> None:
    """A round's parity checks, into the run's (None: no round)."""
    run = rnd.run if rnd else None
    for wl, suite in run.suites.items() if run else ():
        if wl not in rnd.cfg.workloads:
            continue
        first = not any(c["workload"] == wl for c in run.checks)
        run.checks += [
            {**c, "workload": wl}
            for c in suite.parity_judge(rnd.cfg, rnd.cfg.spec(wl), rnd.save_dir, run.ctxs[wl], first, log, rnd.replicas)
        ]


def _judge_all(cfg: Config, run: RunState) -> None:
    """After every round: rows against each other and the peak, then each workload's closing checks."""
    run.notes += run.said.values()
    by_checks(run.rows, run.checks)  # a training row whose framework fails a float64 check is not verified
    cross_check(run.rows)
    run.peak, notes = peaks.after_rows(cfg, run.peak, run.rows)
    for row in run.rows:
        judge_row(row, run.peak)
    run.notes += notes
    as_saved = [r.to_dict() for r in run.rows]
    for wl, suite in run.suites.items():
        more, notes = suite.summary(cfg, as_saved, run.ctxs[wl])
        run.checks += [{**c, "workload": wl} for c in more]
        run.notes += notes
