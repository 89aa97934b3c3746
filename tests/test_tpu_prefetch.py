"""A timed epoch that never waits for the host (docs/tpu.md): the '+prefetch' training variants take their epoch batch
by batch, each put on the device ahead of the step that takes it, and train exactly as the host-fed epoch does. On a
CPU, tiny shapes: the path, not its speed."""

import numpy as np
import pytest

from parity.workloads.trained import Epochs, Prefetching
from parity.workloads.trained.data import Epoch, batch_offsets, batches, synthetic

jax = pytest.importorskip("jax")


@pytest.fixture(scope="module")
def ds():
    return synthetic(512, 64)


def test_an_epoch_handed_over_batch_by_batch_is_the_stacked_epoch(ds):
    offsets = batch_offsets(3, 5, len(ds.x_train), 16)
    x, y = batches(ds, offsets, 16)
    epoch = Epoch(ds, offsets, 16)
    assert len(epoch) == 5
    for k in range(5):
        xk, yk = epoch[k]
        assert xk.dtype == x.dtype and np.array_equal(xk, x[k]) and np.array_equal(yk, y[k])


def test_each_batch_is_put_on_the_device_ahead_of_its_step():
    """Double-buffered: before step j is dispatched, batches up to j + 1 are placed; no batch is placed twice."""
    from jax_impl.train import _ahead

    events = []

    def placed():
        for k in range(5):
            events.append(("put", k))
            yield k

    for k in _ahead(placed(), 2):
        events.append(("step", k))
    steps = [events.index(("step", k)) for k in range(5)]
    puts = [events.index(("put", k)) for k in range(5)]
    assert all(puts[min(k + 1, 4)] < steps[k] for k in range(5))
    assert [e for e in events if e[0] == "put"] == [("put", k) for k in range(5)]


@pytest.mark.parametrize("workload, variant", [("cnn", "jit+prefetch"), ("cnn", "jit+bf16+prefetch")])
def test_prefetch_trains_as_the_hosts_feed_and_compiles_nothing_more(ds, workload, variant):
    """The same per-step loss and accuracy and the same weights, to the bit, as the host-fed variant of the same
    program, and one jitted program between them (the second trainer's first call compiles nothing)."""
    import jax_impl

    a = jax_impl.adapter(workload)
    fed = variant.replace("+prefetch", "")
    weights = a.get_weights(a.build(0))
    offsets = batch_offsets(0, 3, len(ds.x_train), 8)
    got = {}
    for v in (fed, variant):
        t = a.make_trainer(a.build_with(weights, 0), jax.devices()[:1], v, 1e-3, 1e-7, 0)
        assert isinstance(t, Prefetching) and bool(t.prefetch) == v.endswith("+prefetch")
        steps = t.steps_from(Epoch(ds, offsets, 8)) if t.prefetch else t.steps(*batches(ds, offsets, 8))
        got[v] = (steps, a.get_weights(t.model()), t._step)
    assert np.array_equal(got[fed][0], got[variant][0])
    assert all(np.array_equal(p, q) for p, q in zip(got[fed][1], got[variant][1], strict=True))
    assert got[fed][2] is got[variant][2]


def test_a_trainer_of_another_program_compiles_its_own():
    """Sharing is by what the step compiles: the row LSTM's unrolled loop (unroll True) is not its loop of 1 step an
    iteration (unroll 1), though True == 1 in Python."""
    import jax_impl
    from jax_impl import lstm

    a = jax_impl.adapter("lstm")
    steps = {
        v: a.make_trainer(lstm.build(8, 0), jax.devices()[:1], v, 1e-3, 1e-7, 0)._step for v in ("jit", "jit+unroll")
    }
    unrolled = a.make_trainer(lstm.build(8, 0), jax.devices()[:1], "jit+unroll+prefetch", 1e-3, 1e-7, 0)._step
    assert steps["jit"] is not steps["jit+unroll"] and unrolled is steps["jit+unroll"]


class _Feeding:
    """A trainer stand-in: records which way its epoch came."""

    compute_dtype, batchnorm = "float32", "none"

    def __init__(self, prefetch):
        self.prefetch, self.calls = prefetch, []

    def steps(self, x, y):
        self.calls.append(("arrays", x, y))
        return np.zeros((len(x), 2))

    def steps_from(self, epoch):
        self.calls.append(("epoch", epoch))
        return np.zeros((len(epoch), 2))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_epoch_reaches_the_trainer_as_its_variant_takes_it(ds, prefetch):
    """Epochs.run hands a prefetching trainer the epoch batch by batch (the same batches), any other the arrays the
    notebook's generator sliced on the host before the first step."""
    from types import SimpleNamespace

    s = SimpleNamespace(seed=0, epochs=2, steps_per_epoch=3, global_batch=8)
    t = _Feeding(prefetch)
    e = Epochs(None, [], "cpu", None, s, ds, t, "none")
    e.run()
    e.run()
    x, y = batches(ds, e.offsets[3:6], 8)
    how, *got = t.calls[1]
    assert how == ("epoch" if prefetch else "arrays")
    if prefetch:
        (epoch,) = got
        assert all(np.array_equal(epoch[k][0], x[k]) and np.array_equal(epoch[k][1], y[k]) for k in range(3))
    else:
        assert np.array_equal(got[0], x) and np.array_equal(got[1], y)
