"""Compiling ahead (parity.engine.ahead): each worker builds its training rows first and compiles their steps side by
side in its background, computes its parity round meanwhile, and each first epoch then runs what is compiled. On the
test MLP's NumPy fakes (tests/mlp_fake.py), whose trainers pay a fake compile once, ahead or at their first steps,
on a fake clock; no framework starts. The real trainers' `ahead` (JAX, Keras 3 on JAX) runs in the CNN's end-to-end run
(tests/test_cli.py, --compile-ahead)."""

import threading
from functools import partial

import mlp_workload
import pytest
from fakeimpl import fake_engine
from mlp_fake import MlpFake

from parity import run
from parity.common import frameworks
from parity.common.frameworks import JAX, KERAS_JAX, TF
from parity.common.threads import side_by_side
from parity.judging import roofline
from parity.output import files
from parity.workloads import WORKLOADS

PEAK = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed for the tests", computed_flops=1e9, measured_flops=1e9)
COMPILE_S = 50.0  # a fake compile, far above a fake epoch (MlpFake's delay_s)
# A span read off the fake clock: two of its sums of 0.1 s steps apart, whose difference rounds in the last bits
# (49.99999999999999 for a 50 s compile, where the parity round's fake steps moved the clock from another thread)
AT_LEAST_COMPILE_S = COMPILE_S * (1 - 1e-12)


@pytest.fixture
def mlp(monkeypatch, tmp_path):
    """The MLP in the one list; JAX's and Keras 3 on JAX's fakes compile, the others have nothing to compile."""
    monkeypatch.setitem(WORKLOADS, "mlp", mlp_workload.WORKLOAD)
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    fakes = {fw: {"default": MlpFake(compile_s=COMPILE_S if fw in (JAX, KERAS_JAX) else 0.0)} for fw in frameworks.KEYS}
    fake_engine(monkeypatch, PEAK, fakes)
    return fakes


def _run(tmp_path, *flags) -> dict:
    out = tmp_path / "out"
    argv = ["--quick", "--workload", "mlp", "--data", "synthetic", "--out", str(out), "--quiet", *flags]
    assert run.main(argv) == 0
    return files.load_results(out / "results.json")


def test_training_steps_are_compiled_ahead_before_any_first_epoch(mlp, tmp_path):
    doc = _run(tmp_path, "--compile-ahead")
    rows = [r for r in doc["rows"] if r["kind"] == "mlp_train"]
    assert rows and all(r["verified"] for r in doc["rows"])
    assert all(c["passed"] in (True, None) for c in doc["checks"])
    for fw in (JAX, KERAS_JAX):
        said = mlp[fw]["default"].said
        # a round (1 replica, then 2): its training row built and its program compiling in the background (a
        # trainer's x: 4 steps of 32 images), its parity trajectory's program compiled beside the gradients' and the
        # trajectory run meanwhile (3 steps), and only then the row's first epoch
        aheads = [i for i, s in enumerate(said) if s[0] == "ahead"]
        assert len(aheads) == 4 and len(said) == 12, said
        for r in ([(a, x[0]) for a, x in said[:6]], [(a, x[0]) for a, x in said[6:]]):
            first_epoch = r.index(("steps", 4))
            assert r.index(("steps", 3)) < first_epoch and {("ahead", 3), ("ahead", 4)} <= set(r[:first_epoch]), said
    for r in rows:  # the compile, paid ahead, is in the row's first epoch and said apart; none where none compiled
        compiles = r["framework"] in (JAX, KERAS_JAX)
        assert (r["first_epoch_s"] >= AT_LEAST_COMPILE_S) == compiles, r
        assert (r["compiled_ahead_s"] is not None) == compiles, r
        assert not compiles or AT_LEAST_COMPILE_S <= r["compiled_ahead_s"] <= r["first_epoch_s"], r
    notes = [n for n in doc["env"]["notes"] if "compiled side by side before their first calls" in n]
    assert sorted(n.split(" on ")[0] for n in notes) == sorted(["JAX", "JAX", "Keras 3 (JAX)", "Keras 3 (JAX)"])
    # every worker built its model for the rows ahead: none was warmed up first (the MLP's warm size: 4 units)
    assert all(mlp[fw]["default"].built and 4 not in mlp[fw]["default"].built for fw in frameworks.KEYS)
    rounds = [n for n in doc["env"]["notes"] if n.startswith("mlp parity")]
    assert len(rounds) == 2 and all("trajectory programs compiled side by side" in n for n in rounds), rounds
    # the compile as long as the fake's, or longer where the parity round's fake steps ran on the clock meanwhile
    assert all(float(n.split("the longest ")[1].split(" s")[0]) >= AT_LEAST_COMPILE_S for n in notes), notes


def test_without_the_flag_a_cpu_compiles_each_step_at_its_first_call(mlp, tmp_path):
    doc = _run(tmp_path)  # a CPU's default: off
    assert not any(s[0] == "ahead" for fw in frameworks.KEYS for s in mlp[fw]["default"].said)
    assert all(mlp[fw]["default"].built[0] == 4 for fw in frameworks.KEYS)  # warmed up before its rows
    jax_rows = [r for r in doc["rows"] if r["kind"] == "mlp_train" and r["framework"] == JAX]
    assert jax_rows and all(r["first_epoch_s"] >= AT_LEAST_COMPILE_S for r in jax_rows)  # paid at its first call
    assert all(r["compiled_ahead_s"] is None for r in doc["rows"])
    assert not any("compiled side by side" in n for n in doc["env"]["notes"])


def test_the_flag_is_on_by_default_on_an_accelerator_only():
    assert run.config(run.parser().parse_args([])).ahead is False
    assert run.config(run.parser().parse_args(["--compile-ahead"])).ahead is True
    assert run.config(run.parser().parse_args(["--compile-ahead", "--no-compile-ahead"])).ahead is False


def test_jobs_run_side_by_side_and_a_refusal_is_said_not_raised():
    def refuses():
        raise RuntimeError("XlaRuntimeError: the compiler refused\n  on two lines")

    def bug():
        raise TypeError("this code is wrong")

    seconds, failed = side_by_side({"a": lambda: True, "b": lambda: False, "c": refuses}, (TypeError,))
    assert set(seconds) == {"a"} and seconds["a"] >= 0
    assert failed == {"c": "RuntimeError: XlaRuntimeError: the compiler refused on two lines"}
    with pytest.raises(TypeError):
        side_by_side({"a": bug}, (TypeError,))
    assert side_by_side({}, (TypeError,)) == ({}, {})
    assert TF in frameworks.KEYS  # the framework with nothing to compile ahead in the runs above


def _background_worker(monkeypatch, job):
    """A worker's request handling (parity.engine.worker.respond) with one case whose ahead is `job`, and a named
    call that says whether the compiling was still going on when it ran."""
    from types import SimpleNamespace

    from parity.common import protocol
    from parity.engine import worker

    def build(impl, devices, args, timers, p):
        timers[p.id] = (SimpleNamespace(ahead_s=None), {}, None)
        return job

    monkeypatch.setattr(worker, "_build", build)
    monkeypatch.setitem(worker._HANDLERS, protocol.Call, lambda *a: {"beside": isinstance(a[2].compiling, tuple)})
    args, timers = SimpleNamespace(compiling=None), {}
    ask = partial(worker.respond, None, [], args, timers)
    case = {"id": "k", "kind": "mlp_train", "variant": "jit", "spec": {}}
    return ask, protocol.Ahead([case], wait=False), args, timers


def test_a_worker_compiles_in_its_background_while_it_answers_its_parity_calls(monkeypatch):
    from parity.common import protocol

    gate = threading.Event()
    ask, ahead, args, timers = _background_worker(monkeypatch, lambda: gate.wait(30))
    assert ask(ahead) == protocol.Compiled({}, {})  # answered once built, the compile not done
    assert ask(protocol.Call("mlp", "parity")) == {"beside": True}
    gate.set()
    done = ask(protocol.AheadDone())
    assert list(done.seconds) == ["k"] and timers["k"][0].ahead_s == done.seconds["k"] and args.compiling is None
    assert ask(protocol.AheadDone()) == protocol.Compiled()  # nothing left compiling


def test_any_other_request_waits_for_the_compiling_and_a_bug_in_it_is_raised(monkeypatch):
    from parity.common import protocol

    ask, ahead, args, timers = _background_worker(monkeypatch, lambda: None + 1)
    ask(ahead)
    got = ask(protocol.Rep("k"))  # nothing timed beside the compiling: it is waited for first, and its bug raised
    assert got["bug"] and got["error"].startswith("TypeError")
