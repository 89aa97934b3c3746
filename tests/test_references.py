"""The parity checks' float64 references computed beside the workers' untimed rounds (parity.common.references): one
background thread in the parent, its jobs in order, each found again by a digest of its inputs (the same function on
the same arrays) and never computed twice; its failure raised where the check asks. pause() (before a worker's timed
calls: parity.engine.ahead.finish) waits for the job under way and begins no other until resume() (its next untimed
rounds: ahead.start); a job not begun when its check asks is computed there. In a run that compiles ahead, the
MLP's gradients' reference is computed once, and the checks are those of a run that computes it at the judging."""

import threading

import mlp_workload
import numpy as np
import pytest
from test_ahead import _run, mlp  # noqa: F401  (the MLP's fakes on a fake clock)

from parity.common import references
from parity.common.references import References

WAIT_S = 10  # far longer than any job below takes: a wait that runs out is a failure, never a pass


class Model:
    """A workload's model: two of them share a method's name, not its answers. `started` is set as a job begins
    (which then waits for `release`, where given); each answer is recorded with the thread that computed it, and
    `done` is set."""

    def __init__(self, scale: float, release: threading.Event | None = None):
        self.scale, self.calls, self.release = scale, [], release
        self.started, self.done = threading.Event(), threading.Event()

    def oracle(self, w: list, x: np.ndarray) -> float:
        self.started.set()
        if self.release is not None:
            assert self.release.wait(WAIT_S)
        self.calls.append(threading.current_thread().name)
        self.done.set()
        return self.scale * float(np.sum(w[0] @ x))


@pytest.fixture(autouse=True)
def gate_open():
    """Each test starts and ends with the gate open, as a run's rounds find it."""
    references.resume()
    yield
    references.resume()


def test_a_reference_begun_ahead_is_computed_once_in_the_background_and_taken_by_its_check():
    m, w, x = Model(2.0), [np.eye(3)], np.arange(3.0)
    refs = References(ahead=True)
    refs.start(m.oracle, w, x)
    refs.start(m.oracle, [np.eye(3)], np.arange(3.0))  # the same inputs again: the job already queued
    assert m.done.wait(WAIT_S)
    assert refs.get(m.oracle, [np.eye(3)], np.arange(3.0)) == 6.0 and m.calls == ["float64"]
    # other inputs, or another model's method of the same name: computed where the check asks
    assert refs.get(m.oracle, w, np.arange(3.0) + 1) == 12.0 and m.calls[-1] == threading.current_thread().name
    other = Model(3.0)
    assert refs.get(other.oracle, w, x) == 9.0 and other.calls == [threading.current_thread().name]


def test_where_the_run_does_not_compute_ahead_start_does_nothing():
    m = Model(1.0)
    refs = References(ahead=False)
    refs.start(m.oracle, [np.eye(2)], np.ones(2))
    assert not m.done.wait(0.2)
    assert refs.get(m.oracle, [np.eye(2)], np.ones(2)) == 2.0 and m.calls == [threading.current_thread().name]


def test_pause_waits_for_the_job_under_way_and_begins_none_until_resume():
    release = threading.Event()
    running, queued, taken, last = Model(1.0, release), Model(2.0), Model(3.0), Model(4.0)
    w, x = [np.eye(2)], np.ones(2)
    refs = References(ahead=True)
    for m in (running, queued, taken):
        refs.start(m.oracle, w, x)
    assert running.started.wait(WAIT_S)  # under way (pause before it begins would leave it queued, as the others)
    threading.Timer(0.1, release.set).start()
    references.pause()
    assert running.calls == ["float64"]  # the job under way ended before pause returned
    assert not queued.done.wait(0.3) and not taken.calls  # none begun while paused
    assert refs.get(taken.oracle, w, x) == 6.0 and taken.calls == ["MainThread"]  # not begun: computed here
    references.resume()
    refs.start(last.oracle, w, x)
    assert queued.done.wait(WAIT_S) and last.done.wait(WAIT_S)  # in order, after resume
    assert queued.calls == ["float64"] and taken.calls == ["MainThread"]  # the one taken was not computed again
    assert refs.get(queued.oracle, w, x) == 4.0 and queued.calls == ["float64"]


def test_a_failure_in_the_background_is_raised_where_its_check_asks():
    def fails(x: np.ndarray) -> None:
        raise ValueError("the oracle's own error")

    after = Model(1.0)
    refs = References(ahead=True)
    refs.start(fails, np.zeros(1))
    refs.start(after.oracle, [np.eye(1)], np.ones(1))
    assert after.done.wait(WAIT_S)  # the thread went on to the next job
    with pytest.raises(ValueError, match="the oracle's own error"):
        refs.get(fails, np.zeros(1))


def test_a_run_that_compiles_ahead_computes_the_gradients_reference_once(mlp, tmp_path, monkeypatch):  # noqa: F811
    threads, real = [], mlp_workload.mlp_loss_and_grads

    def spy(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(mlp_workload, "mlp_loss_and_grads", spy)
    ahead = _run(tmp_path / "ahead", "--compile-ahead")
    # the first round's, once: beside the rounds, or where the checks asked if the rows' timed calls came first
    assert len(threads) == 1 and threads[0] in ("float64", "MainThread"), threads
    threads.clear()
    at_judging = _run(tmp_path / "judging")
    assert threads == ["MainThread"]
    grads = [[c for c in doc["checks"] if "gradients" in c["check"]] for doc in (ahead, at_judging)]
    assert grads[0] and all(c["passed"] for c in grads[0])
    assert [c["figures"] for c in grads[0]] == [c["figures"] for c in grads[1]]
