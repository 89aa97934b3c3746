"""A trained workload's schedule, checked before any work whoever declares it (issue 107, minors): an epoch drawn
ahead beyond memory is refused for a plug-in whose record lets no flag set its schedule, and `--schedule notebook`
(which is `--preset notebook`) is refused for workloads that have no notebook schedule, said in one line beside
some that have. No framework started (about a second)."""

from __future__ import annotations

import pytest
import test_plugins
from test_plugins import package

from parity.cli import bounds
from parity.cli.flags import parser
from parity.common.messages import HarnessError
from parity.run import config
from parity.workloads import plugins

GIB = 2**30
site = test_plugins.site  # the fixture: a folder on sys.path for the tests' packages, the lists put back after


@pytest.fixture(autouse=True)
def named_modules(monkeypatch):
    """The modules a run names for its workers (plugins.ENV), as they were after each test: a parsed --workload
    module sets them in this process's environment."""
    monkeypatch.setenv(plugins.ENV, "")


FIXED = """
import dataclasses, mlp_workload
w = mlp_workload.WORKLOAD
quick = dataclasses.replace(w.quick, steps_per_epoch=60000, global_batch=10000)
WORKLOAD = dataclasses.replace(w, options=(), quick=quick)
"""


def _config(*argv: str):
    return config(parser().parse_args(list(argv)), list(argv))


def test_a_plug_ins_epoch_beyond_memory_is_refused_though_no_flag_sets_its_schedule(site, monkeypatch):
    package(site, "fixed_mlp", FIXED)
    monkeypatch.setattr(bounds, "physical_memory", lambda: 24 * GIB)
    said = (
        r"mlp: an epoch of 60000 steps x batch 10000 is drawn ahead in memory: .* more than this machine's 24.0 GiB; "
    )
    with pytest.raises(HarnessError, match=said + r"its spec sets both \(no flag changes them\): lower them there$"):
        _config("--quick", "--framework", "jax", "--workload", "fixed_mlp")


def test_the_notebook_schedule_is_refused_for_workloads_that_have_none(capsys):
    with pytest.raises(HarnessError, match=r"^--schedule notebook sets the trained workloads' schedule \(cnn, lstm, "):
        _config("--schedule", "notebook", "--workload", "conv", "matmul")
    assert _config("--schedule", "notebook", "--workload", "conv", "cnn").notebook
    assert capsys.readouterr().err == (
        "note: --schedule notebook is --preset notebook: conv (no notebook schedule) run under it too\n"
    )
    assert _config("--schedule", "notebook", "--workload", "cnn", "--quiet").notebook and not capsys.readouterr().err
