"""A new trained workload, end to end through the engine, touching only its own package: a two-layer MLP declared
in tests/mlp_workload/ (spec, oracle, tolerances and a TrainedModel record: docs/architecture.md's "A new workload"),
implemented by a NumPy fake (tests/mlp_fake.py) through the shared Trained adapter, registered in the one list for the
test alone. Its rows, shared initial weights, parity rounds, trajectories and checks are the shared trained-model
machinery's (parity.workloads.trained). Its rows are verified, its parity checks judged against its float64 oracle
and passed, the results file holds both; a fake that computes wrongly is caught. No TensorFlow or JAX starts."""

import json

import mlp_workload
import pytest
from fakeimpl import fake_engine
from mlp_fake import MlpFake
from mlp_workload.spec import BLOCKS, MLP_QUICK

from parity import run
from parity.common import frameworks
from parity.common.frameworks import JAX, TF
from parity.engine.config import Config
from parity.engine.schedule import run_suite
from parity.judging import roofline, summary
from parity.output import files
from parity.workloads import WORKLOADS
from parity.workloads.base import Suite

PEAK = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed for the tests", computed_flops=1e9, measured_flops=1e9)


@pytest.fixture
def mlp(monkeypatch):
    """The MLP in the one list (for this test only), and every framework a LocalWorker on an MlpFake."""
    monkeypatch.setitem(WORKLOADS, "mlp", mlp_workload.WORKLOAD)
    fakes = {fw: {"default": MlpFake()} for fw in frameworks.KEYS}
    fake_engine(monkeypatch, PEAK, fakes)
    return fakes


def _families(checks: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in checks:
        family = c["check"].removeprefix("mlp ").split(" ")[0]
        out[family] = out.get(family, 0) + 1
    return out


def test_the_workload_declares_what_the_list_asks():
    """Its record: row kinds with a case and a tolerance, a parent side with every Suite hook, its untimed calls."""
    w = mlp_workload.WORKLOAD
    assert [k.name for k in w.kinds] == ["mlp_train", "mlp_infer"] and w.kinds[0].epochs
    hooks = [n for n in vars(Suite) if not n.startswith("_")]
    assert hooks and all(callable(getattr(w.suite, n)) for n in hooks)
    assert set(w.calls) == {"warm", "init_weights", "parity"} and w.spec(True, "cpu") == MLP_QUICK


def test_a_new_trained_workload_runs_end_to_end_and_its_checks_pass(mlp, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)  # no matplotlib work: the engine's files only
    out = tmp_path / "out"
    argv = ["--quick", "--workload", "mlp", "--data", "synthetic", "--validate", "epoch", "--out", str(out), "--quiet"]
    assert run.main(argv) == 0
    doc = files.load_results(out / "results.json")  # the one reader: it knows the MLP's row kinds
    rows, checks = doc["rows"], doc["checks"]
    expected = {("mlp_train", "loop", 1), ("mlp_train", "sharded", 2), ("mlp_infer", "predict", 1)}
    expected |= {("mlp_infer", "sharded", 2)}
    parallel = [fw for fw in frameworks.KEYS if frameworks.TABLE[fw].data_parallel]  # the others: no worker at 2
    assert {(r["kind"], r["framework"], r["variant"], r["replicas"]) for r in rows} == {
        (k, fw, v, n) for fw in frameworks.KEYS for k, v, n in expected if n == 1 or fw in parallel
    }
    assert all(r["verified"] for r in rows), [r["invalid_reason"] for r in rows]
    for r in (r for r in rows if r["kind"] == "mlp_train"):
        assert r["reps"] == MLP_QUICK.epochs - 1 and r["spec"] == MLP_QUICK.to_dict() and r["data"] == "synthetic"
        assert len(r["history"]) == MLP_QUICK.epochs and r["test_accuracy"] is not None
    for r in (r for r in rows if r["kind"] == "mlp_infer"):
        assert 0 < r["max_rel_err"] <= r["tolerance"] and r["xfw_max_rel_err"] == 0.0  # the same fakes' numbers
    assert all(c["workload"] == "mlp" for c in checks)
    # every check judged and passed but test accuracy's, judged only after the full schedule (MODEL.min_accuracy_steps)
    judged = [c for c in checks if not c["check"].startswith("mlp test accuracy")]
    assert all(c["passed"] is True for c in judged), [c for c in judged if not c["passed"]]
    # forward blocks, loss and gradients once; per replica count, each trainer's trajectory against the reference
    # (TF's 'loop' at 1, its 'sharded' at 2): loss and parameters for each of the others; accuracy per count
    trainers = len(frameworks.KEYS) - 1 + len(parallel) - 1
    assert _families(checks) == {
        "forward": len(BLOCKS), "loss": 1, "gradients": 1, "trajectory": 2 * trainers, "test": 2,
    }  # fmt: skip
    grads = next(c for c in checks if c["check"] == "mlp gradients (every parameter)")
    pairs = {f"{a}_vs_{b}" for a, b in frameworks.pairs(frameworks.KEYS)}  # each pair within the sum of its bounds
    assert set(grads["figures"]) == {f"{fw}_vs_f64" for fw in frameworks.KEYS} | pairs and 0 < grads["max_rel_err"]
    assert summary.verdict(doc, "mlp_train", 1, "float32").startswith("PASS (")  # the parity verdict is its checks'
    csv = (out / "results.csv").read_text().splitlines()
    assert len(csv) == 1 + len(rows) and sum(line.startswith("mlp_train,") for line in csv) == len(
        frameworks.KEYS
    ) + len(parallel)
    assert json.loads((out / "results.json").read_text())["rows"] == rows


def test_a_fake_that_computes_wrongly_is_caught(mlp, tmp_path):
    """JAX's fake off by 1e-3 in its outputs and gradients (its loss right): its inference row is invalid against
    float64, and every forward block's check and the gradients' fail on its figures alone; TF's stay within their
    bounds."""
    mlp[JAX]["default"] = MlpFake(error=1e-3)
    cfg = Config(
        frameworks=(TF, JAX), workloads=("mlp",), quick=True, replicas=(1,), data="synthetic", progress=False,
        reps=2, budget_s=0.0, max_reps=2, warmup=0,
    )  # fmt: skip
    res = run_suite(cfg, tmp_path)
    infer = {r["framework"]: r for r in res["rows"] if r["kind"] == "mlp_infer"}
    assert infer[TF]["verified"] and not infer[JAX]["verified"]
    assert "vs the float64 oracle exceeds" in infer[JAX]["invalid_reason"]
    failed = {c["check"] for c in res["checks"] if c["passed"] is False}
    assert failed == {*(f"mlp forward {b}" for b in BLOCKS), "mlp gradients (every parameter)"}
    for c in (c for c in res["checks"] if c["check"] in failed):
        assert c["figures"]["tf_vs_f64"] <= c["tolerance"] < c["figures"]["jax_vs_f64"], c
