"""Workloads from outside the repository (parity.workloads.plugins): found through the `parity.workloads` entry-point
group of an installed distribution or named on the command line (`--workload mypkg.gru`), their adapters their own
modules named as the implementation packages, found by each implementation as its own. A bad plug-in (its import
fails, it declares no WORKLOAD, its name is a built-in's, its adapter raises) is one error naming it, and the other
workloads still run. On the NumPy fakes: no framework starts (about 3 s on 2 cores)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import mlp_workload
import pytest
from fakeimpl import fake_engine
from mlp_fake import MlpFake

import parity.workloads as wl
from parity import run
from parity.api import adapters
from parity.cli import workloads as cli
from parity.common import frameworks
from parity.judging import roofline
from parity.output import files
from parity.workloads import plugins

PEAK = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed for the tests", computed_flops=1e9, measured_flops=1e9)

TOY = """
from parity.workloads.base import RowKind, Workload, judged_by_checks

WORKLOAD = Workload("{name}", None, None, None, (RowKind("{name}_op", None, judged_by_checks),), rank=9)
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for the tests' packages and distributions, and the list as it was, put back after."""
    saved = dict(wl.WORKLOADS), dict(wl.PLUGINS), list(wl.PLUGIN_ERRORS), copy.deepcopy(adapters.PLUGGED)
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.ENV, "")  # recorded as it was (absent too), so a --workload parsed here is undone
    monkeypatch.delenv(plugins.ENV)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]
    for live, old in zip((wl.WORKLOADS, wl.PLUGINS, wl.PLUGIN_ERRORS, adapters.PLUGGED), saved, strict=True):
        live.clear()
        live.update(old) if isinstance(live, dict) else live.extend(old)
    adapters.listed.cache_clear()


def package(root, name: str, init: str, modules: dict[str, str] | None = None) -> None:
    """A package `name` under root: its __init__ and modules (name -> source)."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(textwrap.dedent(init))
    for module, source in (modules or {}).items():
        (root / name / f"{module}.py").write_text(textwrap.dedent(source))


def distribution(root, dist: str, entries: dict[str, str]) -> None:
    """An installed distribution's metadata offering `entries` (name -> module path) in the workloads' group."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{plugins.GROUP}]\n{lines}")


def test_an_entry_point_joins_the_list_with_its_origin_and_adapters(site):
    adapters_of = {"jax_impl": "WORKLOAD = 'toy'\n", "torch_impl": "WORKLOAD = 'toy'\n"}
    package(site, "toy_pkg", TOY.format(name="toy"), adapters_of)
    distribution(site, "toy-dist", {"toy": "toy_pkg"})
    wl.discover()
    assert list(wl.WORKLOADS)[-1] == "toy" and not wl.PLUGIN_ERRORS  # by rank, after the built-ins
    found = wl.PLUGINS["toy"]
    assert found.origin == "toy_pkg (entry point toy of toy-dist 0.1)" and found.frameworks == ("jax", "torch")
    said = found.adapters()
    assert said.startswith("adapters: JAX, PyTorch")
    assert "left out: TensorFlow, Keras 3 (JAX), no adapter" in said  # the frameworks it has no module for
    assert adapters.PLUGGED["jax_impl"]["toy"] == "toy_pkg.jax_impl" and "tf_impl" not in adapters.PLUGGED
    assert "matmul, toy (from toy_pkg)" in cli.help_text()  # --workload's help names it, and where it is from
    listing = cli.listing()
    assert "toy_pkg (entry point toy of toy-dist 0.1)" in listing and "lstm    parity (built in)" in listing
    assert all(len(line) <= 120 for line in listing.splitlines())


@pytest.mark.parametrize(
    ("init", "said"),
    [
        ("import no_such_module_here\n", "its import failed: ModuleNotFoundError"),
        ("X = 1\n", "declares no WORKLOAD (a parity.workloads.base.Workload), found nothing"),
        ("WORKLOAD = 'bad'\n", "declares no WORKLOAD (a parity.workloads.base.Workload), found str"),
        (TOY.format(name="lstm"), "its name 'lstm' is taken by the workload from parity (built in)"),
    ],
)
def test_a_bad_plug_in_is_one_error_naming_it_and_the_others_still_load(site, init, said):
    package(site, "bad_pkg", init)
    package(site, "good_pkg", TOY.format(name="good"))
    distribution(site, "two", {"bad": "bad_pkg", "good": "good_pkg"})
    built_in = dict(wl.WORKLOADS)
    wl.discover()
    assert len(wl.PLUGIN_ERRORS) == 1 and wl.PLUGIN_ERRORS[0].startswith("workload plug-in bad_pkg (entry point bad")
    assert said in wl.PLUGIN_ERRORS[0] and "good" in wl.WORKLOADS and wl.WORKLOADS["lstm"] is built_in["lstm"]
    assert "not loaded: workload plug-in bad_pkg" in cli.listing()


def test_a_plugged_adapter_is_found_as_the_implementations_own(site):
    """What every implementation's adapter(), catalog and Keras's model code go through (parity.api.adapters)."""
    package(site, "impl_pkg", "", {"own": "WORKLOAD = 'own'\nVARIANTS = ('own-v',)\n"})
    package(site, "gru_pkg", "", {"impl_pkg": "WORKLOAD = 'gru'\nVARIANTS = ('gru-v',)\n"})
    package(site, "broken_pkg", "", {"impl_pkg": "raise RuntimeError('the adapter raises')\n"})
    adapters.plug("impl_pkg", "gru", "gru_pkg.impl_pkg")
    adapters.plug("impl_pkg", "broken", "broken_pkg.impl_pkg")
    assert adapters.listed("impl_pkg") == ("own", "gru", "broken")
    module = adapters.find("impl_pkg", "gru")
    assert module is sys.modules["gru_pkg.impl_pkg"] is sys.modules["impl_pkg.gru"]  # one module, two names
    assert module.__spec__.name == "gru_pkg.impl_pkg"  # its own spec kept
    assert adapters.variants_of("impl_pkg") == ("own-v", "gru-v")  # the broken one offers none, the others run
    with pytest.raises(ImportError, match="workload plug-in broken_pkg.impl_pkg: its adapter failed: RuntimeError"):
        adapters.find("impl_pkg", "broken")


def test_the_command_line_names_a_module_and_says_a_bad_one_in_one_line(site, capsys):
    package(site, "named_pkg", TOY.format(name="named"))
    package(site, "clash_pkg", TOY.format(name="cnn"))
    args = run.parser().parse_args(["--workload", "conv", "named_pkg", "clash_pkg"])
    assert args.workload == ["conv", "named", None] and wl.PLUGINS["named"].origin == "named_pkg (--workload)"
    assert run.config(args).workloads == ("conv", "named")  # the bad one left out, the others run
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: workload plug-in clash_pkg (--workload): its name 'cnn' is taken by the workload from parity (built "
        "in); left out, the other workloads run"
    ]
    assert plugins.named() == [("named_pkg", "--workload")]  # what a worker loads, as a fresh process does:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    code = "import parity.workloads as w; print(w.PLUGINS['named'].origin)"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout == (
        "named_pkg (--workload)\n"
    )
    with pytest.raises(SystemExit):
        run.parser().parse_args(["--workload", "no_such_pkg.gru"])
    assert "invalid choice: 'no_such_pkg.gru'" in capsys.readouterr().err


def _mlp_plugin_run(site, out, monkeypatch, fakes: dict, workloads=("mlp_plugin",)) -> tuple[int, dict]:
    """The test MLP (tests/mlp_workload) offered from a module outside parity, run quick on synthetic data at one
    replica, every framework an MlpFake but those in `fakes` (framework -> its fake): the exit and the results."""
    package(site, "mlp_plugin", "from mlp_workload import WORKLOAD\n")
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    fake_engine(monkeypatch, PEAK, {fw: {"default": fakes.get(fw, MlpFake())} for fw in frameworks.KEYS})
    argv = ["--quick", "--workload", *workloads, "--data", "synthetic", "--replicas", "1", "--out", str(out)]
    return run.main([*argv, "--quiet"]), files.load_results(out / "results.json")


def test_a_plug_in_named_on_the_command_line_runs_end_to_end(site, tmp_path, monkeypatch):
    """The test MLP (tests/mlp_workload) offered from a module outside parity, every framework an MlpFake."""
    code, doc = _mlp_plugin_run(site, tmp_path / "out", monkeypatch, {})
    assert code == 0
    assert {r["kind"] for r in doc["rows"]} == {k.name for k in mlp_workload.WORKLOAD.kinds}
    assert all(r["verified"] for r in doc["rows"]) and all(c["passed"] is not False for c in doc["checks"])
    assert sum(c["passed"] is True for c in doc["checks"]) > 5  # forward, loss, gradients, trajectories


class Refusing(MlpFake):
    """A plug-in's adapter that raises (a bug of its own: TypeError) in its gradients and its inference."""

    def loss_and_grads(self, model, x, y):
        raise TypeError("the adapter's own bug")

    def prepare_inference(self, model, images, devices, variant: str = "predict"):
        raise TypeError("the adapter's own bug")


def test_an_adapter_that_raises_fails_its_own_rows_and_checks_and_the_others_run(site, tmp_path, monkeypatch):
    """PyTorch's adapter of the plug-in raises: its inference row is INVALID and the plug-in's parity round is one
    failed check, each naming the plug-in; the conv and the plug-in's other rows run and are verified (exit 1: a
    failed check, not the harness's bug)."""
    fakes = {frameworks.TORCH: Refusing()}
    code, doc = _mlp_plugin_run(site, tmp_path / "out", monkeypatch, fakes, ("conv", "mlp_plugin"))
    assert code == 1
    bad = {(r["kind"], r["framework"]) for r in doc["rows"] if not r["verified"]}
    assert bad == {("mlp_infer", frameworks.TORCH)} and {r["kind"] for r in doc["rows"]} >= {"conv", "mlp_train"}
    reason = next(r["invalid_reason"] for r in doc["rows"] if not r["verified"])
    assert "workload plug-in mlp_plugin: TypeError: the adapter's own bug" in reason
    failed = [c for c in doc["checks"] if c["passed"] is False]
    assert [c["check"] for c in failed] == ["mlp plug-in"]
    assert failed[0]["detail"].startswith("workload plug-in mlp_plugin: its parity arrays: HarnessError: PyTorch")
    assert "TypeError: the adapter's own bug" in failed[0]["detail"]


class NoBuild(MlpFake):
    """A plug-in's adapter that cannot build its model: its set-up, its initial weights, every row and its parity."""

    def _build(self, hidden: int, seed: int = 0):
        raise RuntimeError("no model here")


def test_an_adapter_that_cannot_build_leaves_the_weights_to_the_next_framework(site, tmp_path, monkeypatch):
    """TF's adapter (the first framework, which makes the shared initial weights) cannot build: JAX's makes them,
    TF's rows are INVALID naming the plug-in, its set-up a note, and the others' rows and checks stand."""
    code, doc = _mlp_plugin_run(site, tmp_path / "out", monkeypatch, {frameworks.TF: NoBuild()})
    assert code == 1
    bad = [r for r in doc["rows"] if not r["verified"]]
    assert {r["framework"] for r in bad} == {frameworks.TF} and len(bad) == 2
    assert all("workload plug-in mlp_plugin: RuntimeError: no model here" in r["invalid_reason"] for r in bad)
    assert [c["check"] for c in doc["checks"] if c["passed"] is False] == ["mlp plug-in"]
    assert any(n.startswith("workload plug-in mlp_plugin: its set-up: ") for n in doc["env"]["notes"])
