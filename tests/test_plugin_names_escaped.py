"""A plug-in's names, paths and errors are text from outside: `--list-workloads`, `--workload`'s help and its refusal,
and the "not loaded" lines show them escaped (parity.common.safe), never as terminal escapes (issue 107)."""

import argparse
import io
from types import SimpleNamespace

import pytest

import parity.workloads as wl
from parity.cli import workloads as cli

EVIL = "gru\x1b]0;owned\x07\x1b[2J"  # a window title set, the screen cleared
SHOWN = "gru\\x1b]0;owned\\x07\\x1b[2J"


@pytest.fixture
def evil(monkeypatch):
    """A plug-in whose name, row kind, origin, adapters and a failed sibling's error all carry terminal escapes."""
    monkeypatch.setitem(
        wl.WORKLOADS, EVIL, SimpleNamespace(name=EVIL, kinds=(SimpleNamespace(name=f"{EVIL}_op"),), options=())
    )
    said = SimpleNamespace(origin=f"{EVIL}_pkg (entry point)", path=f"{EVIL}_pkg", adapters=lambda: f"adapters: {EVIL}")
    monkeypatch.setitem(wl.PLUGINS, EVIL, said)
    monkeypatch.setattr(cli, "PLUGIN_ERRORS", [f"workload plug-in {EVIL}_bad: its import failed"])
    monkeypatch.setattr(cli, "SAID", set())


def _clean(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out, out
    assert SHOWN in out


def test_list_workloads_escapes_a_plug_ins_names(evil, capsys):
    with pytest.raises(SystemExit) as e:  # the flag's action, as parity.cli.flags.parser adds it
        cli.ListWorkloads(["--list-workloads"], "list_workloads")(argparse.ArgumentParser(), argparse.Namespace(), [])
    assert e.value.code == 0
    out = capsys.readouterr().out
    _clean(out)
    assert f"  {SHOWN}_pkg (entry point); row kinds: {SHOWN}_op" in out and f"adapters: {SHOWN}" in out
    assert f"not loaded: workload plug-in {SHOWN}_bad" in out


def test_the_workload_flag_s_help_refusal_and_errors_escape_them(evil):
    _clean(cli.help_text())
    with pytest.raises(argparse.ArgumentTypeError) as e:
        cli.workload("no_such_workload")
    _clean(str(e.value))
    said = io.StringIO()
    cli.report_errors(said)
    _clean(said.getvalue())
