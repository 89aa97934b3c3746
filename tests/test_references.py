"""The parity checks' float64 references computed beside the workers' untimed rounds (parity.common.references): one
background thread in the parent, its jobs in order, each found again by a digest of its inputs (the same function on
the same arrays), never computed twice, its failure raised where the check asks; settle() waits for every job begun,
as the rows' first calls do (parity.engine.ahead.finish). In a run that compiles ahead, the MLP's gradients'
reference is computed there once, and the checks are those of a run that computes it at the judging."""

import threading

import mlp_workload
import numpy as np
import pytest
from test_ahead import _run, mlp  # noqa: F401  (the MLP's fakes on a fake clock)

from parity.common.references import References, settle


class Model:
    """A workload's model: two of them share a method's name, not its answers."""

    def __init__(self, scale: float):
        self.scale, self.calls = scale, []

    def oracle(self, w: list, x: np.ndarray) -> float:
        self.calls.append(threading.current_thread().name)
        return self.scale * float(np.sum(w[0] @ x))


def test_a_reference_begun_ahead_is_computed_once_in_the_background_and_taken_by_its_check():
    m, w, x = Model(2.0), [np.eye(3)], np.arange(3.0)
    refs = References(ahead=True)
    refs.start(m.oracle, w, x)
    refs.start(m.oracle, [np.eye(3)], np.arange(3.0))  # the same inputs again: the job already begun
    settle()
    assert m.calls == ["float64_0"]
    assert refs.get(m.oracle, [np.eye(3)], np.arange(3.0)) == 6.0 and m.calls == ["float64_0"]
    # other inputs, or another model's method of the same name: computed where the check asks
    assert refs.get(m.oracle, w, np.arange(3.0) + 1) == 12.0 and m.calls[-1] == threading.current_thread().name
    other = Model(3.0)
    assert refs.get(other.oracle, w, x) == 9.0 and len(other.calls) == 1


def test_where_the_run_does_not_compute_ahead_start_does_nothing():
    m = Model(1.0)
    refs = References(ahead=False)
    refs.start(m.oracle, [np.eye(2)], np.ones(2))
    settle()
    assert m.calls == []
    assert refs.get(m.oracle, [np.eye(2)], np.ones(2)) == 2.0 and m.calls == [threading.current_thread().name]


def test_settle_waits_for_every_job_begun_and_a_failure_is_raised_at_its_check():
    release, done = threading.Event(), []

    def slow(x: np.ndarray) -> None:
        release.wait(10)
        done.append(x)

    def fails(x: np.ndarray) -> None:
        raise ValueError("the oracle's own error")

    refs = References(ahead=True)
    refs.start(slow, np.zeros(1))
    refs.start(fails, np.zeros(1))
    threading.Timer(0.05, release.set).start()
    settle()
    assert len(done) == 1  # the slow job ended before settle returned
    with pytest.raises(ValueError, match="the oracle's own error"):
        refs.get(fails, np.zeros(1))


def test_a_run_that_compiles_ahead_computes_the_gradients_reference_beside_its_rounds(mlp, tmp_path, monkeypatch):  # noqa: F811
    threads, real = [], mlp_workload.mlp_loss_and_grads

    def spy(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(mlp_workload, "mlp_loss_and_grads", spy)
    ahead = _run(tmp_path / "ahead", "--compile-ahead")
    assert threads == ["float64_0"]  # the first round's, once: every framework's check took it
    threads.clear()
    at_judging = _run(tmp_path / "judging")
    assert threads == ["MainThread"]
    grads = [[c for c in doc["checks"] if "gradients" in c["check"]] for doc in (ahead, at_judging)]
    assert grads[0] and all(c["passed"] for c in grads[0])
    assert [c["figures"] for c in grads[0]] == [c["figures"] for c in grads[1]]
