"""Workloads from outside this repository: a module another installed distribution offers through the entry-point
group `parity.workloads` (its value a module path, as pytest's `pytest11` plug-ins), or one named on the command line
(`--workload mypkg.gru`). The module declares `WORKLOAD`, a parity.workloads.base.Workload, as a built-in package
does. Its adapters are its own modules, named as the implementation packages (`mypkg/gru/jax_impl.py`,
`torch_impl.py`, `tf_impl.py`, `keras_jax_impl.py`; the Keras model code both Keras ones share, `keras_models.py`):
each is plugged into parity.api.adapters, so the implementation finds it as its own module of the workload, and a
framework without one is left out of the workload's rows. A plug-in that cannot be loaded is one error naming it
(PluginError), and one whose code raises in a run fails only its own rows and checks, named (PluginFailure,
_Guarded): never the end of the other workloads (docs/your-workload.md)."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, replace

from parity.api.adapters import SHARED, plug
from parity.api.light import Light
from parity.common import frameworks
from parity.workloads.base import Workload

GROUP = "parity.workloads"  # the entry-point group: `<name> = <module path>`
ENV = "PARITY_WORKLOAD_MODULES"  # the module paths the command line named, for the workers (os.pathsep between)
BUILT_IN = "parity (built in)"


class PluginError(Exception):
    """A plug-in that cannot be used: one line naming it and why."""


@dataclass(frozen=True)
class Plugin:
    """A workload from outside: its record, its module, how it was found (for people: an entry point, the command
    line) and the frameworks it has adapters for (keys of parity.common.frameworks.TABLE, in its order)."""

    workload: Workload
    path: str
    how: str
    frameworks: tuple[str, ...]

    @property
    def origin(self) -> str:
        return f"{self.path} ({self.how})"

    @property
    def left_out(self) -> tuple[str, ...]:
        return tuple(fw for fw in frameworks.KEYS if fw not in self.frameworks)

    def adapters(self) -> str:
        """Which frameworks run it and which it leaves out, in one line."""
        have = ", ".join(frameworks.TABLE[fw].label for fw in self.frameworks) or "none"
        out = ", ".join(frameworks.TABLE[fw].label for fw in self.left_out)
        return f"adapters: {have}" + (f" (left out: {out}, no adapter)" if out else "")


def _adapters(name: str, path: str, module) -> tuple[str, ...]:
    """Plug the module's adapter modules (never imported here: a framework's own process imports its one) and
    return the frameworks they serve."""
    subs = _subs(module)
    have = []
    for fw in frameworks.KEYS:
        package = frameworks.TABLE[fw].module
        if package in subs:
            plug(package, name, f"{path}.{package}")
            have.append(fw)
    for package in SHARED:
        if package in subs:
            plug(package, name, f"{path}.{package}")
    return tuple(have)


def load(path: str, how: str, taken: Mapping[str, Workload], others: Mapping[str, Plugin]) -> Plugin:
    """The workload the module at `path` declares, its adapters plugged, its code guarded (_guarded). how: how it was
    found (an entry point, the command line); taken: the workloads already known (a name or a row kind of theirs is
    not to be taken again); others: those of them from outside (the rest: built in). Raises PluginError naming the
    plug-in."""
    origin = f"{path} ({how})"
    who = f"workload plug-in {origin}"
    try:
        module = importlib.import_module(path)
    except Exception as e:  # whatever the user's import raises: said, and the other workloads run
        raise PluginError(f"{who}: its import failed: {type(e).__name__}: {e}") from None
    w = getattr(module, "WORKLOAD", None)
    if isinstance(w, Light):  # a model on one page: its workload made here (parity.workloads.trained.light)
        w = _light(w, path, module, who)
    if not isinstance(w, Workload):
        got = "nothing" if w is None else type(w).__name__
        raise PluginError(f"{who}: declares no WORKLOAD (a parity.workloads.base.Workload), found {got}")
    if w.name in taken:
        raise PluginError(f"{who}: its name {w.name!r} is taken by the workload from {_origin(others, w.name)}")
    kinds = {k.name for t in taken.values() for k in t.kinds}
    clash = [k.name for k in w.kinds if k.name in kinds]
    if clash:
        raise PluginError(f"{who}: its row kinds {', '.join(clash)} are another workload's")
    have = _adapters(w.name, path, module)
    found = Plugin(w, path, how, have)
    note = f"{w.name}: {found.adapters()}" if found.left_out else None  # said once, among the workload's notes
    return replace(found, workload=_guarded(w, f"workload plug-in {path}", note, have))


def _subs(module) -> set[str]:
    return {info.name for info in pkgutil.iter_modules(getattr(module, "__path__", []))}


def _light(light: Light, path: str, module, who: str) -> Workload:
    """The workload of a light record, judged by the float64 run of one of the frameworks it has a module for."""
    from parity.workloads.trained.light import workload

    have = tuple(fw for fw in frameworks.KEYS if frameworks.TABLE[fw].module in _subs(module))
    try:
        return workload(light, path, have)
    except ValueError as e:
        raise PluginError(f"{who}: {e}") from None


def _origin(others: Mapping[str, Plugin], name: str) -> str:
    return others[name].origin if name in others else BUILT_IN


class PluginFailure(RuntimeError):
    """What a plug-in's code raised, named: the row it fails is INVALID, an untimed call's a refusal, never a bug of
    the harness (which would end the run)."""


def _named(fn, who: str):
    """`fn` (a plug-in's case or untimed call, run in a worker), whatever it raises said as PluginFailure."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except PluginFailure:
            raise
        except Exception as e:
            raise PluginFailure(f"{who}: {type(e).__name__}: {e}") from e

    return call


def _guarded(w: Workload, who: str, note: str | None, have: tuple[str, ...]) -> Workload:
    """A plug-in's record with its cases and calls named (_named) and its parent side guarded (_Guarded), which
    asks only the workers of the frameworks it has adapters for (`have`)."""
    kinds = tuple(replace(k, case=_named(k.case, who)) for k in w.kinds)
    calls = {name: _named(fn, who) for name, fn in w.calls.items()}
    suite = None if w.suite is None else _Guarded(w.suite, w.name, who, note, have)
    return replace(w, kinds=kinds, calls=calls, suite=suite)


class _Guarded:
    """A plug-in's parent side, its hooks the suite's own: one that fails (a worker's refusal: the plug-in's adapter
    raised) gives the round one failed check naming the plug-in, and the run goes on with the other workloads. Its
    notes say which frameworks it leaves out (`note`); its hooks see only the workers of those it has adapters for
    (`have`): the others have nothing of it to answer."""

    def __init__(self, suite, name: str, who: str, note: str | None, have: tuple[str, ...]):
        self._suite, self._name, self._who, self._note, self._have = suite, name, who, note, have
        self._failed: dict = {}  # round key (None: the set-up) -> what failed

    def _own(self, workers: dict) -> dict:
        """The workers of the frameworks it has adapter modules for (one with none, its adapters plugged another way:
        every worker)."""
        return {k: w for k, w in workers.items() if w.framework in self._have or not self._have}

    def case_args(self, spec, seed_offset: int, workers: dict, save_dir, state):
        return self._suite.case_args(spec, seed_offset, self._own(workers), save_dir, state)

    def __getattr__(self, attr: str):
        return getattr(self._suite, attr)

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
        state, notes = self._suite.prepare(cfg, spec, save_dir)
        return state, [*notes, self._note] if self._note else notes

    def warm(self, cfg, workers: dict, state) -> None:
        self._try(None, "its set-up", self._suite.warm, cfg, self._own(workers), state)

    def parity_collect(self, cfg, spec, workers, hello, save_dir, state, first, log, key, timed=None) -> None:
        hook, own = self._suite.parity_collect, self._own(workers)
        self._try(key, "its parity arrays", hook, cfg, spec, own, hello, save_dir, state, first, log, key, timed)

    def parity_judge(self, cfg, spec, save_dir, state, first, log, key) -> list[dict]:
        if key not in self._failed:
            rows = self._try(key, "its checks", self._suite.parity_judge, cfg, spec, save_dir, state, first, log, key)
            if key not in self._failed:
                return rows
        return [self._check(key, cfg, log)]

    def summary(self, cfg, rows: list[dict], state) -> tuple[list[dict], list[str]]:
        out = self._try("summary", "its closing checks", self._suite.summary, cfg, rows, state) or ([], [])
        failed = [f"{self._who}: {self._failed[k]}" for k in (None, "summary") if k in self._failed]
        return out[0], [*out[1], *failed]


def entry_points() -> list[tuple[str, str]]:
    """(module path, how it was found) of every module the installed distributions offer in GROUP, in name order."""
    eps = sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name)
    return [(e.value.split(":")[0].strip(), _ep_origin(e)) for e in eps]


def _ep_origin(e) -> str:
    dist = getattr(e, "dist", None)
    return f"entry point {e.name} of {dist.name} {dist.version}" if dist else f"entry point {e.name}"


def named() -> list[tuple[str, str]]:
    """(module path, how it was found) of the modules the command line named (ENV, for a worker)."""
    return [(p, "--workload") for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def name_for(path: str) -> None:
    """Pass a module the command line named to the workers (ENV), once."""
    have = [p for p, _ in named()]
    if path not in have:
        os.environ[ENV] = os.pathsep.join([*have, path])


def is_path(text: str) -> bool:
    """Whether `text` names a module ('mypkg.gru', 'parity_gru'), not a built-in workload's name."""
    return all(p.isidentifier() for p in text.split("."))
