"""A workload plug-in's code guarded (parity.workloads.plugins): whatever it raises in a worker is a PluginFailure
naming it (a row it fails is INVALID, an untimed call's a refusal), and its parent side's failures are one failed
check, or where its set-up failed, every row of it INVALID: never the end of the other workloads
(docs/your-workload.md)."""

from __future__ import annotations

import functools
from dataclasses import replace

from parity.workloads.base import Invalid, Timed, Workload


class PluginFailure(RuntimeError):
    """What a plug-in's code raised, named: the row it fails is INVALID, an untimed call's a refusal, never a bug of
    the harness (which would end the run)."""


def _named(fn, who: str, passing: tuple[type[BaseException], ...] = ()):
    """`fn` (a plug-in's case or untimed call, run in a worker), whatever it raises said as PluginFailure, SystemExit
    too (`sys.exit()` in an adapter), but what `passing` names (a verifier's Invalid); a Timed it returns guarded
    alike (_timed)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except (PluginFailure, *passing):
            raise
        except (Exception, SystemExit) as e:
            raise PluginFailure(f"{who}: {type(e).__name__}: {e}") from e
        return _timed(out, who) if isinstance(out, Timed) else out

    return call


def _timed(t: Timed, who: str) -> Timed:
    """A plug-in's Timed, every callable of it named (_named): the timed call, its verification (an output that is
    not what was asked for stays Invalid), its closing step, its ahead-of-time compile and its info's readers; the
    compiler's count (`cost`) that fails costs that figure, not the row (_counted)."""
    info = {k: _counted(v, who) if k == "cost" else _named(v, who) if callable(v) else v for k, v in t.info.items()}
    ahead = None if t.ahead is None else _named(t.ahead, who)
    return replace(t, run=_named(t.run, who), verify=_named(t.verify, who, (Invalid,)), info=info,
                   finish=_named(t.finish, who), ahead=ahead)  # fmt: skip


def _counted(cost, who: str):
    """A plug-in's cost reader: what it counts, or, where it raises, no count and why in the count's source."""

    @functools.wraps(cost)
    def call():
        try:
            return cost()
        except (Exception, SystemExit) as e:
            return None, f"{who}: its count failed: {type(e).__name__}: {e}"[:200]

    return call


BROKEN = "plugin_broken"  # a case's extra field: why its plug-in's parent side could not set it up (_Guarded)


FINISHED = "plugin_finish_failed"  # a result's extra field: why its closing step failed (_Guarded.row_extra reads it)


def _case(case, who: str, judged: bool):
    """A row kind's case, named (_named); one whose parent side failed its set-up (BROKEN) fails at once, saying so:
    its row is INVALID naming the plug-in. judged: a parent side reads each row (_Guarded.row_extra), and a closing
    step that fails (a trained row's evaluation) is said to it in the result (FINISHED), the row INVALID there."""
    named = _named(case, who)

    @functools.wraps(named)
    def call(*args, **kwargs):
        if BROKEN in kwargs:
            raise PluginFailure(kwargs[BROKEN])
        t = named(*args, **kwargs)
        return replace(t, finish=_said(t.finish)) if judged and isinstance(t, Timed) else t

    return call


def _said(finish):
    """A closing step whose failure (a PluginFailure: _named) is the result's FINISHED field, not the worker's error
    (which would end the run)."""

    @functools.wraps(finish)
    def call():
        try:
            return finish()
        except PluginFailure as e:
            return {FINISHED: str(e)}

    return call


def guarded(w: Workload, who: str, note: str | None, have: tuple[str, ...]) -> Workload:
    """A plug-in's record with its cases and calls named (_case, _named) and its parent side guarded (_Guarded),
    which asks only the workers of the frameworks it has adapters for (`have`)."""
    kinds = tuple(
        replace(k, case=_case(k.case, who, w.suite is not None), tolerance=_named(k.tolerance, who)) for k in w.kinds
    )  # its tolerance too: called in the parent (parity.engine.assemble), what it raises fails that row
    calls = {name: _named(fn, who) for name, fn in w.calls.items()}
    suite = None if w.suite is None else _Guarded(w.suite, w.name, who, note, have)
    return replace(w, kinds=kinds, calls=calls, suite=suite)


SETUP = "setup"  # _Guarded's key of a failed set-up: its data (prepare) or its shared initial weights (case_args)


class _Guarded:
    """A plug-in's parent side, its hooks the suite's own: one that fails (a worker's refusal: the plug-in's adapter
    raised) gives the round one failed check naming the plug-in, and the run goes on with the other workloads. Its
    notes say which frameworks it leaves out (`note`); its hooks see only the workers of those it has adapters for
    (`have`): the others have nothing of it to answer."""

    def __init__(self, suite, name: str, who: str, note: str | None, have: tuple[str, ...]):
        self._suite, self._name, self._who, self._note, self._have = suite, name, who, note, have
        self._failed: dict = {}  # round key (None: the workers' set-up; SETUP: the run's) -> what failed

    def _own(self, workers: dict) -> dict:
        """The workers of the frameworks it has adapter modules for (one with none, its adapters plugged another way:
        every worker)."""
        return {k: w for k, w in workers.items() if w.framework in self._have or not self._have}

    def case_args(self, spec, seed_offset: int, workers: dict, save_dir, state):
        """The suite's, or where its set-up failed (prepare's, or the shared initial weights here), the cases'
        BROKEN field: each row INVALID, naming the plug-in."""
        if SETUP not in self._failed:
            got = self._try(SETUP, "its initial weights", self._suite.case_args, spec, seed_offset,
                            self._own(workers), save_dir, state)  # fmt: skip
            if got is not None:
                return got
        return spec, {BROKEN: f"{self._who}: {self._failed[SETUP]}"}, f"-s{seed_offset}-broken"

    def __getattr__(self, attr: str):
        return getattr(self._suite, attr)

    def row_extra(self, kind, res, spec) -> dict:
        """The suite's figures of a row; the row INVALID, naming the plug-in, where its closing step failed in the
        worker (FINISHED) or the suite's reading of it fails here."""
        failed = res.extra.get(FINISHED)
        try:
            extra = self._suite.row_extra(kind, res, spec)
        except Exception as e:  # the plug-in's reading of its row's figures
            extra, failed = {}, failed or f"{self._who}: its row's figures: {type(e).__name__}: {e}"
        return {**extra, "verified": False, "invalid_reason": failed} if failed else extra

    def _try(self, key, what: str, hook, *args, **kwargs):
        try:
            return hook(*args, **kwargs)
        except Exception as e:  # the plug-in's code, or a worker's refusal of it
            self._failed.setdefault(key, f"{what}: {type(e).__name__}: {e}")
            return None

    def _check(self, key, cfg, log) -> dict:
        detail = self._failed[key] if self._failed[key].startswith(self._who) else f"{self._who}: {self._failed[key]}"
        log(cfg, f"  FAIL {self._name} plug-in: {detail}")
        return {"check": f"{self._name} plug-in", "replicas": key, "figures": {}, "max_rel_err": None,
                "tolerance": 0.0, "passed": False, "detail": detail}  # fmt: skip

    def prepare(self, cfg, spec, save_dir):
        state, notes = self._try(SETUP, "its data", self._suite.prepare, cfg, spec, save_dir) or (None, [])
        return state, [*notes, self._note] if self._note else notes

    def warm(self, cfg, workers: dict, state) -> None:
        if SETUP not in self._failed:
            self._try(None, "its set-up", self._suite.warm, cfg, self._own(workers), state)

    def parity_collect(self, cfg, spec, workers, hello, save_dir, state, first, log, key, timed=None) -> None:
        if SETUP in self._failed:  # no data or weights to compare on
            self._failed.setdefault(key, self._failed[SETUP])
            return
        hook, own = self._suite.parity_collect, self._own(workers)
        self._try(key, "its parity arrays", hook, cfg, spec, own, hello, save_dir, state, first, log, key, timed)

    def parity_judge(self, cfg, spec, save_dir, state, first, log, key) -> list[dict]:
        if key not in self._failed:
            rows = self._try(key, "its checks", self._suite.parity_judge, cfg, spec, save_dir, state, first, log, key)
            if key not in self._failed:
                return rows
        return [self._check(key, cfg, log)]

    def summary(self, cfg, rows: list[dict], state) -> tuple[list[dict], list[str]]:
        hook = self._suite.summary
        out = ([], []) if SETUP in self._failed else self._try("summary", "its closing checks", hook, cfg, rows, state)
        failed = [f"{self._who}: {self._failed[k]}" for k in (None, SETUP, "summary") if k in self._failed]
        out = out or ([], [])
        return out[0], [*out[1], *failed]
