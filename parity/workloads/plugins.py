"""Workloads from outside this repository: a module another installed distribution offers through the entry-point
group `parity.workloads` (its value a module path, as pytest's `pytest11` plug-ins), or one named on the command line
(`--workload mypkg.gru`). The module declares `WORKLOAD`, a parity.workloads.base.Workload, as a built-in package
does. Its adapters are its own modules, named as the implementation packages (`mypkg/gru/jax_impl.py`,
`torch_impl.py`, `tf_impl.py`, `keras_jax_impl.py`; the Keras model code both Keras ones share, `keras_models.py`):
each is plugged into parity.api.adapters, so the implementation finds it as its own module of the workload, and a
framework without one is left out of the workload's rows. A plug-in that cannot be loaded (its import raises
or prints, its record is malformed or takes a name already taken or reserved) is one error naming it (PluginError),
and one whose code raises in a run fails only its own rows and checks, named (parity.workloads.guarded): never the
end of the other workloads (docs/your-workload.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import math
import os
import pkgutil
import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from parity.api.adapters import PLUGGED, SHARED, listed, plug
from parity.api.light import Light
from parity.common import frameworks
from parity.workloads.base import RowKind, Workload
from parity.workloads.guarded import PluginFailure, guarded  # noqa: F401  (PluginFailure: named here too)

GROUP = "parity.workloads"  # the entry-point group: `<name> = <module path>`
ENV = "PARITY_WORKLOAD_MODULES"  # the module paths the command line named, for the workers (os.pathsep between)
BUILT_IN = "parity (built in)"
NAMED = "--workload"  # how a module the command line named was found
ALL = "all"  # --workload's every workload
RESERVED = (ALL,)  # names a flag gives a meaning of its own: no workload's
NAME = re.compile(r"\w[\w.-]*", re.ASCII)  # a workload's or row kind's name: a word of a file name and a flag


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


def load(
    path: str, how: str, taken: Mapping[str, Workload], others: Mapping[str, Plugin], replaceable: Collection[str] = ()
) -> Plugin:
    """The workload the module at `path` declares, its adapters plugged, its code guarded (_guarded). how: how it was
    found (an entry point, the command line); taken: the workloads already known (a name or a row kind of theirs is
    not to be taken again); others: those of them from outside (the rest: built in); replaceable: those of them whose
    name, and row kinds, it may take (the caller then drops the one it replaces: unplug). Raises PluginError naming
    the plug-in."""
    who = f"workload plug-in {path} ({how})"
    module = _import(path, who)
    w = getattr(module, "WORKLOAD", None)
    if isinstance(w, Light):  # a model on one page: its workload made here (parity.workloads.trained.light)
        w = _light(w, path, module, who)
    if not isinstance(w, Workload):
        got = "nothing" if w is None else type(w).__name__
        raise PluginError(f"{who}: declares no WORKLOAD (a parity.workloads.base.Workload), found {got}")
    if problem := malformed(w):
        raise PluginError(f"{who}: its WORKLOAD's {problem}")
    if w.name in RESERVED:
        raise PluginError(f"{who}: its name {w.name!r} is reserved (--workload {w.name} means every workload)")
    if w.name in taken and w.name not in replaceable:
        raise PluginError(f"{who}: its name {w.name!r} is taken by the workload from {_origin(others, w.name)}")
    kinds = {k.name for n, t in taken.items() if n != w.name for k in t.kinds}
    clash = [k.name for k in w.kinds if k.name in kinds]
    if clash:
        raise PluginError(f"{who}: its row kinds {', '.join(clash)} are another workload's")
    have = _adapters(w.name, path, module)
    found = Plugin(w, path, how, have)
    note = f"{w.name}: {found.adapters()}" if found.left_out else None  # said once, among the workload's notes
    return replace(found, workload=guarded(w, f"workload plug-in {path}", note, have))


def _import(path: str, who: str):
    """The module at `path`, whatever its import prints on stderr (a worker's stdout is the protocol's, and
    --list-workloads' the listing's). Raises PluginError for whatever the import raises, SystemExit and
    KeyboardInterrupt too: a plug-in's import never ends the command that loads it."""
    try:
        with contextlib.redirect_stdout(sys.stderr), _stdout_to_stderr():
            return importlib.import_module(path)
    except BaseException as e:  # noqa: BLE001 - the user's import, whatever it raises: said, the others run
        raise PluginError(f"{who}: its import failed: {type(e).__name__}: {e}") from None


@contextlib.contextmanager
def _stdout_to_stderr():
    """File descriptor 1 pointed at 2 meanwhile (what a plug-in's C code writes), where both are open."""
    try:
        sys.__stdout__ and sys.__stdout__.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no descriptor 1 or 2 here: Python's own redirect is all there is
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.__stdout__ and sys.__stdout__.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _is(kind):
    """A field's test: an instance of `kind` (a bool is no number)."""
    return lambda v: isinstance(v, kind) and (kind is bool or not isinstance(v, bool))


def _all(test, v) -> bool:
    return isinstance(v, (tuple, list)) and all(test(x) for x in v)


def _named_word(v) -> bool:
    return isinstance(v, str) and NAME.fullmatch(v) is not None


def _spec(v) -> bool:
    """A size the engine reads: a dataclass instance with to_dict() (None: a record only listed, never run)."""
    return v is None or (dataclasses.is_dataclass(v) and not isinstance(v, type) and callable(getattr(v, "to_dict", 0)))


# A record's fields as the engine reads them: (field, its test, what it must be)
_FIELDS = (
    ("name", _named_word, "a name of letters, digits, '_', '-' and '.'"),
    *((f, _spec, "a spec record (a dataclass instance with to_dict())") for f in ("full", "cpu", "quick")),
    ("kinds", lambda v: _all(_is(RowKind), v) and len(v) > 0, "a tuple of one or more RowKind records"),
    ("options", lambda v: _all(_named_word, v), "a tuple of spec field names"),
    ("layers", lambda v: _all(_is(str), v), "a tuple of layer names"),
    ("calls", lambda v: isinstance(v, Mapping) and all(_is(str)(k) and callable(f) for k, f in v.items()),
     "a mapping of name -> callable"),
    ("notebook", lambda v: isinstance(v, Mapping) and all(_is(str)(k) and _is(int)(n) for k, n in v.items()),
     "a mapping of spec field -> whole number"),
    ("rank", lambda v: _is((int, float))(v) and math.isfinite(v), "a finite number"),
    ("peak_call", lambda v: v is None or _is(str)(v), "None or the name of one of its calls"),
)  # fmt: skip
_KIND_FIELDS = (
    ("name", _named_word, "a name of letters, digits, '_', '-' and '.'"),
    ("case", lambda v: v is None or callable(v), "a callable"),
    ("tolerance", callable, "a callable"),
    ("prepare", lambda v: v is None or callable(v), "None or a callable"),
    *((f, _is(bool), "True or False") for f in ("epochs", "seeded", "ceiling")),
)
SUITE_HOOKS = ("prepare", "warm", "case_args", "row_extra", "parity_collect", "parity_judge", "summary")


def malformed(w: Workload) -> str | None:
    """What of a record the engine cannot read, in a few words naming the field (None: nothing)."""
    for field, test, want in _FIELDS:
        if not test(getattr(w, field)):
            return f"{field} is {_shown(getattr(w, field))}, not {want}"
    for i, k in enumerate(w.kinds):
        for field, test, want in _KIND_FIELDS:
            if not test(getattr(k, field)):
                return f"row kind {i} ({_shown(k.name)}): {field} is {_shown(getattr(k, field))}, not {want}"
    names = [k.name for k in w.kinds]
    if len(set(names)) < len(names):
        return f"kinds name a row kind twice ({', '.join(names)})"
    if w.peak_call is not None and w.peak_call not in w.calls:
        return f"peak_call {w.peak_call!r} is none of its calls"
    lacks = [h for h in SUITE_HOOKS if w.suite is not None and not callable(getattr(w.suite, h, None))]
    return f"suite has no {', '.join(lacks)} (parity.workloads.base.Suite's hooks)" if lacks else None


def _shown(v) -> str:
    said = repr(v)
    return said if len(said) <= 40 else said[:37] + "..."


def unplug(old: Plugin, new: Plugin) -> None:
    """The adapters of `old` that `new` (its workload's name) did not plug in place of its own: unplugged, so that no
    implementation finds one of them as the workload's."""
    for package in (*(frameworks.TABLE[fw].module for fw in frameworks.KEYS), *SHARED):
        mine = PLUGGED.get(package, {})
        if mine.get(new.workload.name) == f"{old.path}.{package}":
            del mine[new.workload.name]
    listed.cache_clear()


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
    except Exception as e:  # a field the record's reader could not read: the record's, said as the others
        raise PluginError(f"{who}: its Light record: {type(e).__name__}: {e}") from None


def _origin(others: Mapping[str, Plugin], name: str) -> str:
    return others[name].origin if name in others else BUILT_IN


def entry_points() -> list[tuple[str, str]]:
    """(module path, how it was found) of every module the installed distributions offer in GROUP, in name order."""
    eps = sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name)
    return [(e.value.split(":")[0].strip(), _ep_origin(e)) for e in eps]


def _ep_origin(e) -> str:
    dist = getattr(e, "dist", None)
    return f"entry point {e.name} of {dist.name} {dist.version}" if dist else f"entry point {e.name}"


def named() -> list[tuple[str, str]]:
    """(module path, how it was found) of the modules the command line named (ENV, for a worker)."""
    return [(p, NAMED) for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def name_for(path: str) -> None:
    """Pass a module the command line named to the workers (ENV), once."""
    have = [p for p, _ in named()]
    if path not in have:
        os.environ[ENV] = os.pathsep.join([*have, path])


def is_path(text: str) -> bool:
    """Whether `text` names a module ('mypkg.gru', 'parity_gru'), not a built-in workload's name."""
    return all(p.isidentifier() for p in text.split("."))
