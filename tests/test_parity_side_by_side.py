"""A parity round's programs compiled side by side (an accelerator's host, Config.ahead): the gradients' program and
each trajectory's first program compiled on threads before any trajectory runs, the arrays the same as one at a
time, a trainer that cannot compile ahead still trained, a failing gradient raised; a later round's, no gradients.
Stand-ins for the framework; the real workers take this path in tests/test_cli.py's `--exclusive --compile-ahead`
run."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

from parity.api.variants import Variant
from parity.workloads.trained import parity_arrays

VARIANTS = ("jit", "jit+scan", "jit+bf16")
CHECKING = threading.local()  # set on a thread inside the stand-in's check compiler


@contextmanager
def _check_compiler():
    CHECKING.on = True
    try:
        yield
    finally:
        CHECKING.on = False


class Trainer:
    def __init__(self, log: list, variant: str, refuse: bool):
        self.log, self.variant, self.refuse = log, variant, refuse
        self.w = np.zeros(3, np.float32)
        self.batchnorm = "none"

    def ahead(self, x, y) -> bool:
        self.log.append(("ahead", self.variant, getattr(CHECKING, "on", False), threading.current_thread().name))
        if self.refuse:
            raise RuntimeError("the compiler refused")
        return True

    def steps(self, x, y):
        self.log.append(("steps", self.variant))
        losses = []
        for xb in x:
            self.w = self.w + xb.mean(axis=0)
            losses.append([float(self.w.sum()), 1.0])
        return np.array(losses)

    def model(self):
        return self


class Adapter:
    TRAIN = "toy_train"

    def __init__(self, log: list, refuse: str = "", grads_fail: bool = False):
        self.log, self.refuse, self.grads_fail = log, refuse, grads_fail

    def loss_and_grads(self, model, x, y):
        self.log.append(("grads", getattr(CHECKING, "on", False), threading.current_thread().name))
        if self.grads_fail:
            raise RuntimeError("the gradient's program failed")
        return SimpleNamespace(loss=float(x.sum()), grads=[x.mean(axis=0)], routing=[])

    def make_trainer(self, model, devices, variant, lr, eps, seed):
        return Trainer(self.log, variant, variant == self.refuse)

    def get_weights(self, model):
        return [model.w]


def _run(tmp_path, ahead: bool, grads: bool = True, **adapter_kw) -> tuple[list, dict]:
    log = []
    impl = SimpleNamespace(
        check_compiler=lambda devices: (_check_compiler(), "stand-in"),
        variants=lambda kind, n: [
            Variant(v, "toy_train", "one", dtype="bfloat16" if "bf16" in v else "float32") for v in VARIANTS
        ],
    )
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "b.npz", x=rng.normal(size=(4, 2, 3)).astype(np.float32), y=np.zeros((4, 2), np.int32))
    out = tmp_path / f"out-{ahead}.npz"
    req = {"weights": "w", "batches": str(tmp_path / "b.npz"), "out": str(out), "bf16": True, "ahead": ahead}
    req["grads"] = grads
    spec = SimpleNamespace(learning_rate=1e-3, adam_epsilon=1e-7, seed=0)
    said = parity_arrays(impl, Adapter(log, **adapter_kw), [], req, lambda w: None, spec)
    assert said == {"variants": list(VARIANTS)}
    return log, dict(np.load(out))


def test_every_program_compiles_before_any_trajectory_and_the_arrays_are_the_same(tmp_path):
    log, arrays = _run(tmp_path, ahead=True)
    first_steps = next(i for i, e in enumerate(log) if e[0] == "steps")
    before = log[:first_steps]
    assert {e[1] for e in before if e[0] == "ahead"} == set(VARIANTS) and any(e[0] == "grads" for e in before)
    assert threading.main_thread().name not in {e[-1] for e in before}  # on the pool's threads
    # each inside the check compiler, entered on its own thread (a thread-local setting: JAX's level, jax_impl)
    assert all(e[-2] is True for e in before if e[0] in ("ahead", "grads")), before
    assert [e[1] for e in log if e[0] == "steps"] == list(VARIANTS)  # then each trajectory, in order
    serial_log, serial = _run(tmp_path, ahead=False)
    assert not any(e[0] == "ahead" for e in serial_log)
    assert arrays.keys() == serial.keys() and all(np.array_equal(arrays[k], serial[k]) for k in arrays)


def test_a_trainer_that_cannot_compile_ahead_still_trains(tmp_path):
    log, arrays = _run(tmp_path, ahead=True, refuse="jit+scan")
    assert [e[1] for e in log if e[0] == "steps"] == list(VARIANTS)
    _, serial = _run(tmp_path, ahead=False)
    assert np.array_equal(arrays["traj/jit+scan/w000"], serial["traj/jit+scan/w000"])


def test_a_failing_gradient_is_raised(tmp_path):
    with pytest.raises(RuntimeError, match="gradient's program failed"):
        _run(tmp_path, ahead=True, grads_fail=True)


@pytest.mark.parametrize("ahead", [False, True])
def test_a_round_after_the_first_takes_no_gradients_and_the_same_trajectories(tmp_path, ahead):
    """The gradients are judged in the run's first round only (one batch on one device: the same at every replica
    count), so a later round's request (grads false) computes none; its trajectories are the first's."""
    log, later = _run(tmp_path, ahead=ahead, grads=False)
    assert not any(e[0] == "grads" for e in log)
    assert not any(k == "loss" or k.startswith("grad/") for k in later)
    _, first = _run(tmp_path, ahead=ahead)
    assert "loss" in first and "grad/000" in first
    assert all(np.array_equal(later[k], first[k]) for k in later) and set(later) < set(first)
