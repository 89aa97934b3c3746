"""The workloads, found by listing: each is a package under parity/workloads/ whose WORKLOAD record (named as the
package) declares its specs, row kinds (with the case a worker builds for each), formulas, tolerances, its rank among
the others and, for a trained one, its parent side and untimed calls. A new workload is one package here plus one
module per implementation (docs/architecture.md); nothing here names it. Workloads from outside (an installed
distribution's entry point, a module the command line names: parity.workloads.plugins) join the same list, each
with where it came from (PLUGINS); one that cannot be loaded is a line in PLUGIN_ERRORS, and the others run.
"""

from __future__ import annotations

from parity.api.adapters import declaring
from parity.workloads import plugins
from parity.workloads.base import DEVICES, PRECISIONS, RowKind, Workload

__all__ = [
    "DEVICES",
    "PLUGINS",
    "PLUGIN_ERRORS",
    "PLUGIN_NOTES",
    "PRECISIONS",
    "WORKLOADS",
    "RowKind",
    "Workload",
    "add",
    "discover",
    "row_kind",
    "times_epochs",
    "trained",
]


def _listed() -> dict[str, Workload]:
    """Every package here whose WORKLOAD is a Workload record of its own name (not `trained`, the machinery the trained
    ones share), by rank."""

    def declares(name: str, module) -> bool:
        record = getattr(module, "WORKLOAD", None)
        return isinstance(record, Workload) and record.name == name

    found = [m.WORKLOAD for m in declaring(__name__, declares)]
    return {w.name: w for w in sorted(found, key=lambda w: (w.rank, w.name))}


WORKLOADS: dict[str, Workload] = _listed()
PLUGINS: dict[str, plugins.Plugin] = {}  # a workload from outside: where it came from, its adapters (built-in: absent)
PLUGIN_ERRORS: list[str] = []  # one line for each plug-in that could not be loaded
PLUGIN_NOTES: list[str] = []  # one line for each entry point's workload a module named on the command line replaced


def _join(found: plugins.Plugin) -> None:
    """A plug-in's workload into WORKLOADS (the one dict every module reads), in the rank order."""
    every = sorted([*WORKLOADS.values(), found.workload], key=lambda w: (w.rank, w.name))
    WORKLOADS.clear()
    WORKLOADS.update({w.name: w for w in every})
    PLUGINS[found.workload.name] = found


def _load(path: str, how: str) -> plugins.Plugin:
    """Load one plug-in into the list. A module the command line names takes the place of an entry point's
    workload of the same name (the example judged another way: docs/your-workload.md), said in PLUGIN_NOTES. Raises
    plugins.PluginError naming it."""
    named = how == plugins.NAMED
    replaceable = [n for n, p in PLUGINS.items() if p.how != plugins.NAMED] if named else []
    found = plugins.load(path, how, WORKLOADS, PLUGINS, replaceable)
    name = found.workload.name
    if name in PLUGINS:
        old = PLUGINS.pop(name)
        del WORKLOADS[name]
        plugins.unplug(old, found)
        PLUGIN_NOTES.append(f"workload {name!r} from {found.origin} takes the place of the one from {old.origin}")
    _join(found)
    return found


def _plug_in(path: str, how: str) -> str | None:
    """Load one plug-in into the list (_load); its name, or None with its error in PLUGIN_ERRORS."""
    try:
        return _load(path, how).workload.name
    except plugins.PluginError as e:
        PLUGIN_ERRORS.append(str(e))
        return None


def add(path: str) -> str:
    """The workload the module at `path` declares (`--workload mypkg.gru`), loaded into WORKLOADS once (in place of
    an entry point's of its name) and passed to the workers; its name. Raises plugins.PluginError naming it."""
    for name, p in PLUGINS.items():
        if p.path == path:
            return name
    found = _load(path, plugins.NAMED)
    plugins.name_for(path)
    return found.workload.name


def discover() -> None:
    """Load the installed distributions' workloads (entry points) and those the command line named (for a worker),
    each once; one that cannot be loaded is a line in PLUGIN_ERRORS."""
    loaded = {p.path for p in PLUGINS.values()}
    for path, how in (*plugins.entry_points(), *plugins.named()):
        if path not in loaded:
            _plug_in(path, how)
            loaded.add(path)


discover()


def row_kind(name: str) -> tuple[Workload, RowKind]:
    """The workload and row kind named `name` ('conv', 'cnn_train', ...). Raises KeyError."""
    for w in WORKLOADS.values():
        for k in w.kinds:
            if k.name == name:
                return w, k
    raise KeyError(f"no row kind {name!r}; have {[k.name for w in WORKLOADS.values() for k in w.kinds]}")


def times_epochs(kind: str) -> bool:
    """Whether rows of the row kind named `kind` time training epochs (the first apart) rather than calls."""
    return row_kind(kind)[1].epochs
