"""A broken plug-in costs one line and its own rows, never the run (issue 107, A): whatever its import raises
(SystemExit and KeyboardInterrupt too) or prints, a malformed record or a reserved name is one "not loaded" line; its
own bug in a timed call, an output reader, its training, its set-up or its spec fails its rows, INVALID and naming it,
and the other workloads' rows are written (exit 1). On the NumPy fakes, nothing started (a few seconds on 2 cores)."""

from __future__ import annotations

import dataclasses
import os
import textwrap

import mlp_fake
import pytest
import test_plugins
from fakeimpl import fake_engine
from mlp_fake import MlpFake, MlpTrainer
from test_plugins import PEAK, distribution, package

import parity.workloads as wl
from parity import run
from parity.api import adapters
from parity.cli import workloads as cli
from parity.common import frameworks
from parity.output import files
from parity.workloads import plugins

site = test_plugins.site  # the fixture: a folder on sys.path for the tests' packages, the lists put back after


@pytest.fixture(autouse=True)
def named_modules(monkeypatch):
    """The modules a run names for its workers (plugins.ENV), as they were after each test: a parsed --workload
    module sets them in this process's environment."""
    monkeypatch.setenv(plugins.ENV, "")


TOY = "from parity.workloads.base import RowKind, Workload, judged_by_checks\n"
KINDS = '(RowKind("toy_op", None, judged_by_checks),)'


def _record(**fields: str) -> str:
    """A plug-in's module declaring a toy record, `fields` (as source) in place of its defaults."""
    f = {"name": '"toy"', "kinds": KINDS, "rank": "9", "calls": "{}", "quick": "None"} | fields
    return TOY + "WORKLOAD = Workload({name}, None, None, {quick}, {kinds}, rank={rank}, calls={calls})\n".format(**f)


def _loaded(site, init: str, how: str, monkeypatch=None) -> list[str]:
    """Plug-in `bad_pkg` (its __init__ `init`) loaded as `how` finds it, beside a good one: the errors said."""
    package(site, "bad_pkg", init)
    package(site, "good_pkg", _record(name='"good"'))
    if how == "entry point":
        distribution(site, "two", {"bad": "bad_pkg", "good": "good_pkg"})
        wl.discover()
    elif how == "environment":  # as a worker finds the modules its run's command line named
        monkeypatch.setenv(plugins.ENV, os.pathsep.join(["bad_pkg", "good_pkg"]))
        wl.discover()
    else:
        assert cli.workload("good_pkg") == "good" and cli.workload("bad_pkg") is None
    assert "good" in wl.WORKLOADS
    return list(wl.PLUGIN_ERRORS)


@pytest.mark.parametrize("how", ["entry point", "environment", "--workload"])
@pytest.mark.parametrize(
    ("raised", "said"),
    [
        ("SystemExit(0)", "SystemExit: 0"),
        ("SystemExit(5)", "SystemExit: 5"),
        ("KeyboardInterrupt()", "KeyboardInterrupt"),
    ],
)
def test_an_import_that_exits_or_is_interrupted_is_one_line(site, monkeypatch, how, raised, said):
    errors = _loaded(site, f"raise {raised}\n", how, monkeypatch)
    assert len(errors) == 1 and errors[0].startswith("workload plug-in bad_pkg") and said in errors[0], errors
    assert "not loaded: workload plug-in bad_pkg" in cli.listing()


def test_what_an_import_prints_goes_to_stderr(site, capfd):
    """A worker's stdout is the protocol's, --list-workloads' the listing: a plug-in's print, Python's or its C
    code's, lands on stderr."""
    init = "import os, sys\nprint('hello from the plug-in')\nos.write(1, b'and from its C code\\n')\n"
    init += _record(name='"chatty"')
    package(site, "chatty_pkg", init)
    assert cli.workload("chatty_pkg") == "chatty"
    out, err = capfd.readouterr()
    assert out == "" and "hello from the plug-in" in err and "and from its C code" in err


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"kinds": "None"}, "kinds is None, not a tuple of one or more RowKind records"),
        ({"kinds": '("toy_op", "toy_infer")'}, "kinds is ('toy_op', 'toy_infer'), not a tuple"),
        ({"calls": "None"}, "calls is None, not a mapping of name -> callable"),
        ({"rank": "'10'"}, "rank is '10', not a finite number"),
        ({"name": "7"}, "name is 7, not a name"),
        ({"kinds": '(RowKind("toy_op", None, None),)'}, "row kind 0 ('toy_op'): tolerance is None, not a callable"),
        ({"quick": "'small'"}, "quick is 'small', not a spec record (a dataclass instance with to_dict())"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_field(site, fields, said):
    errors = _loaded(site, _record(**fields), "entry point")
    assert (
        len(errors) == 1
        and f"workload plug-in bad_pkg (entry point bad of two 0.1): its WORKLOAD's {said}" in (errors[0])
    ), errors
    assert "toy" not in wl.WORKLOADS


def test_a_reserved_name_is_refused(site):
    errors = _loaded(site, _record(name='"all"'), "command line")
    assert errors == ["workload plug-in bad_pkg (--workload): its name 'all' is reserved (--workload all means every "
                      "workload)"]  # fmt: skip
    assert list(wl.WORKLOADS).count("all") == 0


# What a plug-in's own bug meets in a run: the test MLP (tests/mlp_workload) offered from a module outside parity,
# every framework an MlpFake, beside the conv


class StepBug(MlpTrainer):
    def steps(self, x, y):
        raise KeyError("the plug-in's own bug")


class ExitingStep(MlpTrainer):
    def steps(self, x, y):
        raise SystemExit(4)  # sys.exit() in an adapter


class EvalBug(MlpTrainer):
    def evaluate(self, x, y, batch_size: int = 1000):
        raise IndexError("the plug-in's own bug")


class AheadBug(MlpTrainer):
    def ahead(self, x, y):
        raise TypeError("the plug-in's own bug")


class ReaderBug(MlpFake):
    """Its inference output's reader of rows raises."""

    def prepare_inference(self, model, images, devices, variant: str = "predict"):
        def rows(out, indices):
            raise IndexError("the plug-in's own bug")

        return dataclasses.replace(super().prepare_inference(model, images, devices, variant), rows=rows)


PLAIN = "from mlp_workload import WORKLOAD\n"
SPEC = "import dataclasses, mlp_workload\nw = mlp_workload.WORKLOAD\n"
SPEC += "WORKLOAD = dataclasses.replace(w, quick=dataclasses.replace(w.quick, {}))\n"
NO_DATA = """
import dataclasses, mlp_workload
from parity.workloads.trained.model_suite import ModelSuite

class NoData(ModelSuite):
    def prepare(self, cfg, spec, save_dir):
        raise MemoryError("a dataset of its own spec's size")

WORKLOAD = dataclasses.replace(mlp_workload.WORKLOAD, suite=NoData(mlp_workload.MODEL))
"""


def _run(site, tmp_path, monkeypatch, fake, init=PLAIN, extra=()) -> tuple[int, dict]:
    package(site, "hx_mlp", textwrap.dedent(init))
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    fake_engine(monkeypatch, PEAK, {fw: {"default": fake()} for fw in frameworks.KEYS})
    out = tmp_path / "out"
    argv = ["--quick", "--workload", "conv", "hx_mlp", "--data", "synthetic", "--replicas", "1", *extra]
    code = run.main([*argv, "--out", str(out), "--quiet"])
    return code, files.load_results(out / "results.json") if (out / "results.json").exists() else {}


@pytest.mark.parametrize(
    ("trainer", "fake", "init", "extra", "kinds", "said"),
    [
        (StepBug, MlpFake, PLAIN, (), {"mlp_train"}, "KeyError: \"the plug-in's own bug\""),
        (ExitingStep, MlpFake, PLAIN, (), {"mlp_train"}, "SystemExit: 4"),
        (MlpTrainer, ReaderBug, PLAIN, (), {"mlp_infer"}, "IndexError: the plug-in's own bug"),
        (MlpTrainer, MlpFake, SPEC.format("epochs=0"), (), {"mlp_train"}, "ZeroDivisionError"),
        (MlpTrainer, MlpFake, NO_DATA, (), {"mlp_train", "mlp_infer"}, "its data: MemoryError: a dataset of its"),
        (EvalBug, MlpFake, PLAIN, ("--validate", "end"), {"mlp_train"}, "IndexError: the plug-in's own bug"),
    ],
)  # fmt: skip
def test_a_plug_ins_own_bug_fails_its_rows_and_the_others_are_written(
    site, tmp_path, monkeypatch, trainer, fake, init, extra, kinds, said
):
    monkeypatch.setattr(mlp_fake, "MlpTrainer", trainer)
    code, doc = _run(site, tmp_path, monkeypatch, fake, init, extra)
    assert code == 1 and doc, code
    bad = [r for r in doc["rows"] if not r["verified"]]
    assert {r["kind"] for r in bad} == kinds and {r["framework"] for r in bad} == set(frameworks.KEYS)
    assert all("workload plug-in hx_mlp" in r["invalid_reason"] and said in r["invalid_reason"] for r in bad), bad
    conv = [r for r in doc["rows"] if r["kind"] == "conv"]
    assert conv and all(r["verified"] for r in conv)


TOLERANCE_BUG = """
import dataclasses, mlp_workload

def tolerance(device, precision, dtype):
    raise KeyError("the plug-in's own bug")

w = mlp_workload.WORKLOAD
WORKLOAD = dataclasses.replace(w, kinds=tuple(dataclasses.replace(k, tolerance=tolerance) for k in w.kinds))
"""


def test_a_plug_ins_tolerance_that_raises_fails_its_rows_in_the_parent(site, tmp_path, monkeypatch):
    """A plug-in's tolerance function, which the parent calls as it makes each row: its rows INVALID naming it."""
    code, doc = _run(site, tmp_path, monkeypatch, MlpFake, TOLERANCE_BUG)
    assert code == 1 and doc, code
    bad = [r for r in doc["rows"] if not r["verified"]]
    assert {r["kind"] for r in bad} == {"mlp_train", "mlp_infer"}
    assert all("workload plug-in hx_mlp: KeyError" in r["invalid_reason"] for r in bad), bad
    assert all(r["verified"] for r in doc["rows"] if r["kind"] == "conv")


def test_a_plug_ins_bug_in_compiling_ahead_costs_what_it_touched(site, tmp_path, monkeypatch):
    """--compile-ahead: each row's program compiled ahead fails (its row compiles at its first call) and so does its
    parity round's (one failed check naming the plug-in); the rows and the conv's stand."""
    monkeypatch.setattr(mlp_fake, "MlpTrainer", AheadBug)
    monkeypatch.setattr(MlpFake, "compile_s", 0.01)  # the fake's trainer has something to compile ahead
    code, doc = _run(site, tmp_path, monkeypatch, MlpFake, extra=("--compile-ahead",))
    assert code == 1 and all(r["verified"] for r in doc["rows"]) and {r["kind"] for r in doc["rows"]} >= {"conv"}
    failed = [c for c in doc["checks"] if c["passed"] is False]
    assert [c["check"] for c in failed] == ["mlp plug-in"]
    assert "workload plug-in hx_mlp: TypeError: the plug-in's own bug" in failed[0]["detail"]


@pytest.fixture
def notes():
    """PLUGIN_NOTES as they were, put back after (the site fixture keeps the other lists)."""
    saved = list(wl.PLUGIN_NOTES)
    yield wl.PLUGIN_NOTES
    wl.PLUGIN_NOTES[:] = saved


def test_a_module_named_on_the_command_line_takes_the_place_of_an_entry_points_workload(
    site, notes, capsys, monkeypatch
):
    """The example judged by JAX in float64 beside the installed example (docs/your-workload.md): both are 'gru'."""
    monkeypatch.setattr(cli, "SAID", set())  # said once a process: this test's line said here
    record = _record(name='"gru"')
    package(site, "ep_pkg", record, {"jax_impl": "WORKLOAD = 'gru'\n", "torch_impl": "WORKLOAD = 'gru'\n"})
    package(site, "ep_pkg/f64", record, {"jax_impl": "WORKLOAD = 'gru'\n"})
    distribution(site, "ep-dist", {"gru": "ep_pkg"})
    wl.discover()
    assert wl.PLUGINS["gru"].path == "ep_pkg"
    assert run.parser().parse_args(["--workload", "ep_pkg.f64"]).workload == ["gru"] and not wl.PLUGIN_ERRORS
    assert wl.PLUGINS["gru"].origin == "ep_pkg.f64 (--workload)" and list(wl.WORKLOADS).count("gru") == 1
    assert adapters.PLUGGED["jax_impl"]["gru"] == "ep_pkg.f64.jax_impl" and "gru" not in adapters.PLUGGED["torch_impl"]
    said = "note: workload 'gru' from ep_pkg.f64 (--workload) takes the place of the one from ep_pkg (entry point gru"
    assert capsys.readouterr().err.startswith(said)
    wl.PLUGINS.pop("gru"), wl.WORKLOADS.pop("gru")  # a worker: the entry point, then what the run named
    wl.discover()
    assert wl.PLUGINS["gru"].path == "ep_pkg.f64" and not wl.PLUGIN_ERRORS


def test_every_workload_named_left_out_is_one_line_not_an_empty_reason(site, capsys, monkeypatch):
    monkeypatch.setattr(cli, "SAID", set())  # said once a process: this test's line said here
    package(site, "taken_pkg", _record(name='"cnn"'))
    assert run.main(["--workload", "taken_pkg", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: --workload: no workload left to run (each one named was left out, said above)"
    assert "its name 'cnn' is taken" in err[0] and len(err) == 2
