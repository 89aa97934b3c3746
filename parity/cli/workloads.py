"""`--workload` and `--list-workloads`: a built-in workload's name, or a module path that declares one
(`--workload mypkg.gru`, parity.workloads.plugins), and where each workload comes from. A plug-in that cannot be
loaded is one line on stderr naming it; the other workloads run."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from parity.common import frameworks
from parity.common.safe import text
from parity.workloads import PLUGIN_ERRORS, PLUGIN_NOTES, PLUGINS, WORKLOADS, add, plugins

ALL = plugins.ALL  # every workload: a name no plug-in may take
SAID: set[str] = set()  # plug-in errors already printed (a parser parses once a run; tests build many)


def help_text() -> str:
    """--workload's help: the workloads by origin, and how to name one from outside (a plug-in's names escaped:
    parity.common.safe)."""
    built = [n for n in WORKLOADS if n not in PLUGINS]
    more = [text(f"{n} (from {PLUGINS[n].path})") for n in WORKLOADS if n in PLUGINS]
    return (
        f"which workload(s) to run: one or several of {', '.join([*built, *more])} (run in that order), or all "
        "(default: all); or a module that declares a WORKLOAD, e.g. mypkg.gru (docs/your-workload.md); "
        "--list-workloads says where each comes from"
    )


def workload(given: str) -> str | None:
    """An argparse type: a workload's name, 'all', or a module path whose workload is loaded (its name). A module
    that cannot be found is an invalid choice; one found that cannot be used (its import fails, it declares no
    WORKLOAD, its name is taken) is None, its error in PLUGIN_ERRORS, said once by `report_errors`."""
    if given == ALL or given in WORKLOADS:
        return given
    choices = text(", ".join([*WORKLOADS, ALL]))
    invalid = f"invalid choice: {given!r} (choose from {choices}, or a module path that declares a WORKLOAD)"
    if not plugins.is_path(given) or not _found(given):
        raise argparse.ArgumentTypeError(invalid)
    try:
        return add(given)
    except plugins.PluginError as e:
        PLUGIN_ERRORS.append(str(e))
        return None


def _found(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):  # a parent package that is not there, or fails to import
        return "." in path and _found(path.rsplit(".", 1)[0])


def report_errors(out=None) -> None:
    """Each plug-in error not yet said, then each workload replaced (PLUGIN_NOTES), one line each (on stderr)."""
    lines = [f"error: {e}; left out, the other workloads run" for e in PLUGIN_ERRORS]
    for line in [*lines, *(f"note: {n}" for n in PLUGIN_NOTES)]:
        if line not in SAID:
            SAID.add(line)
            print(text(line), file=out or sys.stderr)


def listing() -> str:
    """Every workload, its row kinds and where it comes from, then the plug-ins that could not be loaded: each line
    escaped (parity.common.safe), as a plug-in's names, paths and errors are text from outside."""
    width = max(len(n) for n in WORKLOADS)
    lines = ["workloads (run in this order):"]
    for name, w in WORKLOADS.items():
        kinds = ", ".join(k.name for k in w.kinds)
        origin = PLUGINS[name].origin if name in PLUGINS else plugins.BUILT_IN
        lines.append(f"  {name:<{width}}  {origin}; row kinds: {kinds}")
        if name in PLUGINS:
            lines.append(f"  {'':<{width}}  {PLUGINS[name].adapters()}")
    lines += [f"  not loaded: {e}" for e in PLUGIN_ERRORS] + [f"  note: {n}" for n in PLUGIN_NOTES]
    where = ", ".join(frameworks.TABLE[fw].module for fw in frameworks.KEYS)
    lines.append(f"a workload from outside: an entry point in group {plugins.GROUP!r}, or --workload <module>;")
    lines.append(f"its adapters are its modules named {where} (docs/your-workload.md)")
    return "\n".join(text(line) for line in lines)


class ListWorkloads(argparse.Action):
    """--list-workloads: print the listing and exit, as --help does."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(listing())
        parser.exit(0)
