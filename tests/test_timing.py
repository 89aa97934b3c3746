"""The timing core refuses to time what it cannot verify."""

import dataclasses

import numpy as np
import pytest

import jax_impl
from parity.api.variants import ONE, Variant
from parity.common import float64 as oracle
from parity.engine.timing import Timer, measure
from parity.workloads.base import output_verifier
from parity.workloads.conv import ConvSpec

SPEC = ConvSpec(batch=8, height=8, width=8, cout=4)
X, W = SPEC.inputs()
IDX = SPEC.oracle_indices()
REF = oracle.conv2d(X[IDX], W)


def verifier(placement=lambda o: ["cpu:0"], replicas=1):
    return output_verifier(
        shape=lambda o: tuple(o.shape),
        rows=lambda o, idx: np.asarray(o)[idx],
        placement=placement,
        expected_shape=SPEC.output_shape,
        indices=IDX,
        reference=REF,
        tol=1e-5,
        device="cpu",
        replicas=replicas,
    )


def real():
    return jax_impl.adapter("conv").conv_op(X, W)


def test_a_real_computation_is_verified_with_statistics():
    m = measure(real, jax_impl.block, verifier(), warmup=1, reps=4)
    assert m.verified and m.invalid is None
    s = m.stats()
    assert s["reps"] == 4 and s["median_s"] > 0 and s["iqr_s"] >= 0 and m.compile_s > 0
    assert m.errors["max_rel_err"] < 1e-5


@pytest.mark.parametrize(
    "stand_in, reason",
    [
        (lambda: None, "returned nothing"),  # the article's 1.22 ms: a program that outputs nothing
        (lambda: np.zeros((8, 4, 4, 3), np.float32), "shape"),
        (lambda: np.zeros(SPEC.output_shape, np.float32), "oracle"),
        (lambda: np.full(SPEC.output_shape, np.nan, np.float32), "oracle"),
        (lambda: object(), "no readable shape"),
    ],
)
def test_a_wrong_output_is_marked_invalid(stand_in, reason):
    m = measure(stand_in, lambda o: None, verifier(), warmup=0, reps=3)
    assert not m.verified
    assert reason in m.invalid
    assert m.stats()["median_s"] is None  # an invalid row never carries a time


def test_the_wrong_device_is_marked_invalid():
    m = measure(real, jax_impl.block, verifier(placement=lambda o: ["cpu:0"], replicas=8), warmup=0, reps=1)
    assert not m.verified and "expected 8 cpu device(s)" in m.invalid
    m = measure(real, jax_impl.block, verifier(placement=lambda o: ["gpu:0"]), warmup=0, reps=1)
    assert not m.verified and "computed on ['gpu:0']" in m.invalid


def test_one_bad_repetition_invalidates_the_row():
    calls = iter([real, real, lambda: None, real])
    m = measure(lambda: next(calls)(), jax_impl.block, verifier(), warmup=0, reps=3)
    assert not m.verified and m.stats()["median_s"] is None


def test_rep_before_first_is_an_error():
    with pytest.raises(RuntimeError, match="first"):
        Timer(real, jax_impl.block, verifier()).rep()


def test_a_diverging_training_run_names_the_step(tmp_path):
    from frameworks_setup import JAX_DEVICES

    from parity.api.weights import save_npz
    from parity.workloads import row_kind
    from parity.workloads.cnn.cases import cnn_train_case
    from parity.workloads.cnn.spec import CNN_QUICK
    from parity.workloads.trained import data

    data.synthetic(256, 32).save(tmp_path / "d.npz")
    cnn = jax_impl.adapter("cnn")
    save_npz(cnn.get_weights(cnn.build(0)), tmp_path / "w.npz")
    spec = dataclasses.replace(CNN_QUICK, learning_rate=1e30, global_batch=16)  # Adam steps of ~1e30
    timed = cnn_train_case(
        jax_impl,
        JAX_DEVICES[:1],
        row_kind("cnn_train")[1],
        spec,
        jax_impl.variants("cnn_train", 1)[0],
        "cpu",
        "default",
        None,
        data=str(tmp_path / "d.npz"),
        weights=str(tmp_path / "w.npz"),
    )
    timer = Timer(timed.run, jax_impl.block, timed.verify, jax_impl.slowest)  # as the worker times it
    timer.first()
    timer.rep()
    assert not timer.m.verified
    assert "training diverged" in timer.m.invalid and "at step" in timer.m.invalid


class _Clock:
    """A stand-in for time.perf_counter that moves only when the fake trainer works: no test on this
    machine's speed."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _FakeImpl:
    """Just enough of an implementation for cnn_train_case: an epoch costs 1 s, an evaluation 100 s."""

    def __init__(self, clock):
        self.clock, self.evaluations = clock, 0

    def adapter(self, workload):
        return self  # the CNN's adapter: its trainer

    def make_trainer(self, model, devices, variant, lr, eps, seed):
        impl = self

        class Trainer:
            compute_dtype = "float32"

            def steps(self, x, y):
                impl.clock.now += 1.0
                return np.tile([[0.5, 0.75]], (len(x), 1))

            def evaluate(self, x, y):
                impl.clock.now += 100.0
                impl.evaluations += 1
                return {"loss": 0.25 * impl.evaluations, "accuracy": 0.5 + 0.01 * impl.evaluations}

            def placement(self):
                return ["cpu:0"]

            def program_text(self):
                return None

        return Trainer()

    def process_info(self, devices):
        return {"local_replicas": 1}

    def block(self, out):
        pass

    slowest = staticmethod(float)


@pytest.mark.parametrize("validate", ["epoch", "end", "none"])
def test_validation_is_outside_the_timed_interval(tmp_path, monkeypatch, validate):
    """Evaluating after every epoch (100 fake seconds each) leaves every epoch's time at its 1 s of training,
    and the history holds every epoch, first included; 'end' evaluates once, 'none' never."""
    from parity.engine import timing
    from parity.workloads import row_kind
    from parity.workloads.cnn import cases
    from parity.workloads.cnn.spec import CNN_QUICK
    from parity.workloads.trained import data

    JIT = Variant("jit", "cnn_train", ONE)  # noqa: N806
    clock = _Clock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    monkeypatch.setattr(cases, "_cnn_model", lambda *a, **k: None)
    data.synthetic(256, 32).save(tmp_path / "d.npz")
    spec = dataclasses.replace(CNN_QUICK, epochs=3, train_size=256, test_size=32)
    impl = _FakeImpl(clock)
    kind = row_kind("cnn_train")[1]
    timed = cases.cnn_train_case(
        impl, ["cpu:0"], kind, spec, JIT, "cpu", "default", None, str(tmp_path / "d.npz"), "unused", validate
    )
    timer, finish = Timer(timed.run, impl.block, timed.verify, impl.slowest), timed.finish
    assert timer.first() == 1.0
    assert [timer.rep() for _ in range(2)] == [1.0, 1.0]
    assert timer.m.compile_s == 1.0 and timer.m.times == [1.0, 1.0]
    done = finish()
    if validate == "epoch":
        assert impl.evaluations == 3
        assert [h["epoch"] for h in done["history"]] == [1, 2, 3]
        assert done["history"][0] == {"epoch": 1, "loss": 0.5, "accuracy": 0.75, "val_loss": 0.25, "val_accuracy": 0.51}
        assert done["test_accuracy"] == done["history"][-1]["val_accuracy"]  # the last epoch's, not a 4th pass
        assert timer.m.last["val_accuracy"] == 0.53  # the progress line shows it
    elif validate == "end":
        assert impl.evaluations == 1 and done["test_accuracy"] == 0.51 and "history" not in done
    else:
        assert impl.evaluations == 0 and "test_accuracy" not in done
