"""The float64 oracle a workload gets without writing one (parity.workloads.trained.float64): the same model run in
float64 by JAX (x64), PyTorch (double) or Keras on TensorFlow, in a child process, is the GRU example's NumPy oracle
to float64 rounding (the GRU's own bounds at float64's unit roundoff); and it catches what a float32 cross-check
cannot: a LayerNorm epsilon planted in one framework's model (Keras's 1e-3 where the model declares PyTorch's 1e-5)
is pinned on that framework, the same mismatch in both float32 frameworks passes their cross-check and fails against
float64, and so does a smaller one within the cross-check's slack (two float32 frameworks are held to twice the
bound, each to the bound against float64). Tiny shapes, CPU, about 30 s on 2 cores (zen4), half of it the six float64
runs of the GRU."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from ln_workload import EPSILON, initial, jax_impl, model, torch_impl

from parity.common.tolerances import F32_UNIT_ROUNDOFF
from parity.output.loading import ResultsError, load_results
from parity.workloads.trained import float64, model_checks
from parity.workloads.trained.float64 import Float64Error, FrameworkOracle
from parity.workloads.trained.model import TrainedModel

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "parity-gru"
KERAS_EPSILON = 1e-3  # Keras's LayerNormalization default: a porting mismatch against the declared 1e-5
JAX_X64 = "JAX float64 (x64)"


@pytest.fixture(scope="module")
def child_path():
    """The child imports the adapters' packages (the tests' ln_workload, the example's parity_gru) by PYTHONPATH."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests"), str(EXAMPLE), os.environ.get("PYTHONPATH", "")]))
        mp.syspath_prepend(str(EXAMPLE))
        yield


# Two float64 runs of the same model: each within the GRU's own float32 bound (parity_gru.bounds, the harness's
# rounding model) with float64's unit roundoff in float32's place, so they differ by at most twice that
F64_OVER_F32 = 2.0**-53 / F32_UNIT_ROUNDOFF


def test_jax_pytorch_and_tensorflow_in_float64_are_the_gru_examples_numpy_oracle(child_path):
    from parity_gru import bounds, oracle
    from parity_gru.spec import GruArchitecture, units_of

    rng = np.random.default_rng(0)
    w = [rng.normal(0, 0.3, s.shape).astype(np.float32) for s in GruArchitecture(3).weights]
    x, y = rng.integers(0, 256, (4, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, 4)
    ref, (loss, grads) = oracle.forward(w, x), oracle.loss_and_grads(w, x, y)
    blocks, bound = bounds.block_tolerances(w, x, "cpu", "default"), bounds.bounds(w, x, y, "cpu", "default")
    tol = lambda f32: 2 * f32 * F64_OVER_F32  # noqa: E731
    for fw in ("jax", "torch", "tf"):
        run = FrameworkOracle(fw, "gru", "parity_gru", sizes=lambda w: (units_of(w),))
        got = run.forward(w, x)
        for block, want in ref.items():
            err = np.max(np.abs(got[block] - want)) / np.max(np.abs(want))
            assert got[block].dtype == np.float64 and err <= tol(blocks[block]), (fw, block, err)
        got_loss, got_grads = run.loss_and_grads(w, x, y)
        assert abs(got_loss - loss) <= tol(bound["loss"]) * abs(loss), fw
        for g, want, b in zip(got_grads, grads, bound["grads"], strict=True):
            err = np.max(np.abs(g - want)) / np.max(np.abs(want))
            assert g.dtype == np.float64 and err <= tol(b), (fw, err)


@pytest.fixture(scope="module")
def ln(child_path) -> dict:
    """The test model's weights, images and TrainedModel judged by JAX's float64 run of it as declared."""
    rng = np.random.default_rng(1)
    w, x = initial(8, seed=0), rng.integers(0, 256, (16, 28, 28, 1)).astype(np.float32)
    m = model(FrameworkOracle("jax", "ln", "ln_workload", sizes=lambda w: (np.shape(w[1])[0],)))
    return {"w": w, "x": x, "m": m, "ref": m.oracle_forward(w, x)}


def _float32(impl, ln: dict, epsilon: float) -> dict:
    """A framework's float32 forward blocks of the test model at `epsilon`, as a parity round saves them."""
    net = impl.build(8, epsilon=epsilon)
    impl.set_weights(net, ln["w"])
    return {f"forward/{k}": v for k, v in impl.forward_layers(net, ln["x"]).items()}


def _judged(ln: dict, saved: dict) -> dict[str, dict]:
    rows = model_checks.forward(ln["m"], saved, ln["w"], ln["x"], "cpu", "default")
    assert {r["oracle"] for r in rows} == {JAX_X64}  # every check names the oracle that judged it
    return {r["check"].removeprefix("forward "): r for r in rows}


def test_two_float32_frameworks_of_the_declared_model_pass_against_float64(ln):
    rows = _judged(ln, {"jax": _float32(jax_impl, ln, EPSILON), "torch": _float32(torch_impl, ln, EPSILON)})
    assert all(r["passed"] for r in rows.values()), {k: r["figures"] for k, r in rows.items()}


def test_the_float64_run_says_which_framework_is_off(ln):
    rows = _judged(ln, {"jax": _float32(jax_impl, ln, EPSILON), "torch": _float32(torch_impl, ln, KERAS_EPSILON)})
    assert rows["dense1"]["passed"]  # before the LayerNorm they agree
    norm = rows["norm"]
    assert not norm["passed"]
    assert norm["figures"]["jax_vs_f64"] <= norm["tolerance"] < norm["figures"]["torch_vs_f64"]
    assert "JAX-PyTorch" in norm["detail"]  # the cross-check alone: apart, but which one? float64 says:
    assert norm["detail"].startswith("PyTorch leaves float64 at block norm") and norm["leaves"] == ["torch"]


def test_two_float32_frameworks_sharing_a_mismatch_agree_and_both_fail_against_float64(ln):
    saved = {"jax": _float32(jax_impl, ln, KERAS_EPSILON), "torch": _float32(torch_impl, ln, KERAS_EPSILON)}
    norm = _judged(ln, saved)["norm"]
    # the cross-check passes
    assert norm["figures"]["jax_vs_torch"] <= 2 * norm["tolerance"] and "apart" not in norm["detail"]
    assert min(norm["figures"]["jax_vs_f64"], norm["figures"]["torch_vs_f64"]) > norm["tolerance"]
    assert not norm["passed"]


def _norm_effect(ln: dict, epsilon: float) -> float:
    """How far the LayerNorm block moves, relative to its max, when the float64 model's epsilon is `epsilon`."""
    h, gamma, beta = ln["ref"]["dense1"], *(np.float64(a) for a in ln["w"][2:4])
    c = h - h.mean(-1, keepdims=True)
    var = (c * c).mean(-1, keepdims=True)
    norm = c / np.sqrt(var + EPSILON) * gamma + beta
    return float(np.max(np.abs(c / np.sqrt(var + epsilon) * gamma + beta - norm)) / np.max(np.abs(norm)))


def test_a_mismatch_within_the_float32_cross_checks_slack_fails_against_float64(ln):
    """An epsilon off by what moves the LayerNorm's output by 1.5 times its bound: within the 2 bounds two float32
    frameworks are allowed between them, beyond the 1 each is allowed from float64."""
    bound = ln["m"].block_tolerances(ln["w"], ln["x"], "cpu", "default")["norm"]
    trial = 1e-4
    epsilon = EPSILON + trial * 1.5 * bound / _norm_effect(ln, EPSILON + trial)  # the effect is linear this small
    assert 1.3 * bound < _norm_effect(ln, epsilon) < 1.7 * bound
    norm = _judged(ln, {"jax": _float32(jax_impl, ln, EPSILON), "torch": _float32(torch_impl, ln, epsilon)})["norm"]
    # the cross-check passes
    assert norm["figures"]["jax_vs_torch"] <= 2 * norm["tolerance"] and "apart" not in norm["detail"]
    assert norm["figures"]["jax_vs_f64"] <= norm["tolerance"] < norm["figures"]["torch_vs_f64"]
    assert not norm["passed"]


def test_an_answer_kept_in_a_folder_serves_another_process_without_a_run(ln, tmp_path, monkeypatch):
    """What each framework's inference row asks (the same weights and images): one float64 run for them all."""
    first = ln["m"].oracle_forward(ln["w"], ln["x"], cache=tmp_path)
    monkeypatch.setattr(float64, "_DONE", {})  # another process: nothing of this one's
    monkeypatch.setattr(float64, "_child", lambda *a: pytest.fail("ran again"))
    again = ln["m"].oracle_forward(ln["w"], ln["x"], cache=tmp_path)
    assert len(list(tmp_path.iterdir())) == 1 and all(np.array_equal(first[k], again[k]) for k in first)


def test_the_float64_run_takes_the_interpreter_the_run_chose_for_its_framework(ln, tmp_path, monkeypatch):
    """--python jax=...: the float64 run of JAX takes that interpreter (model_suite passes the run's choice on)."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$PYTHONPATH" > {tmp_path / "called"}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv(float64.PYTHONS, json.dumps({"jax": str(python)}))
    ln["m"].oracle_forward(ln["w"], ln["x"][:2])  # images not asked before: a run
    assert (tmp_path / "called").read_text().split(os.pathsep)[0].strip() == str(ROOT)  # it finds this checkout


def test_a_float64_model_that_computes_in_float32_is_refused(ln, tmp_path, monkeypatch):
    """An adapter whose float64(model) leaves the model as it is: its answer in float32 is refused, in one line."""
    (tmp_path / "narrow").mkdir()
    (tmp_path / "narrow" / "__init__.py").write_text("")
    body = "from ln_workload.torch_impl import *  # noqa: F403\n\n\ndef float64(model):\n    return model\n"
    (tmp_path / "narrow" / "torch_impl.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    oracle = FrameworkOracle("torch", "ln", "narrow", sizes=lambda w: (np.shape(w[1])[0],))
    with pytest.raises(Float64Error, match="narrow.torch_impl's float64 model gave forward/dense1 in float32, not"):
        oracle.forward(ln["w"], ln["x"])


def test_a_results_file_from_before_the_oracle_field_still_loads_and_a_wrong_one_is_refused(tmp_path):
    old = ROOT / "docs" / "results" / "zen4" / "cpu-default.json"
    doc = load_results(old)
    assert doc["rows"] and all("oracle" not in r for r in json.loads(old.read_text())["rows"])
    raw = json.loads(old.read_text())
    raw["rows"][0]["oracle"] = 64  # not text
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(ResultsError, match="oracle is 64, not str"):
        load_results(bad)


def test_a_bad_choice_is_one_clear_line():
    sizes = lambda w: (4,)  # noqa: E731
    with pytest.raises(ValueError, match="no float64 oracle in framework 'keras-jax': one of jax, torch, tf offers it"):
        FrameworkOracle("keras-jax", "gru", None, sizes)
    with pytest.raises(ValueError, match="not exactly float32"):
        FrameworkOracle("jax", "lstm", None, sizes).forward([np.array([0.1])], np.zeros((1, 28, 28, 1)))
    oracle = FrameworkOracle("jax", "lstm", None, sizes)
    with pytest.raises(ValueError, match="one of the two"):
        model(None)  # neither a NumPy oracle nor a framework's
    with pytest.raises(ValueError, match="one of the two"):
        TrainedModel(**{**model(oracle).__dict__, "forward": lambda w, x: {}, "loss_and_grads": lambda w, x, y: ()})
    said = r"^the float64 run of 'lstm' in JAX float64 \(x64\): jax_impl.lstm offers no float64\(model\)"
    with pytest.raises(Float64Error, match=said):
        oracle.forward([np.zeros(1, np.float32)], np.zeros((1, 28, 28, 1), np.float32))  # a built-in without it


def test_the_float64_run_leaves_this_processs_precision_as_it_was(ln):
    """The float64 run was a child's: JAX here still computes float32 (x64 off)."""
    import jax
    import jax.numpy as jnp

    assert not jax.config.jax_enable_x64 and jnp.asarray(1.0).dtype == jnp.float32
