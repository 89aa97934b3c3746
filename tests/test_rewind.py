"""A trainer rewound (its `rewind`: parity.workloads.trained.kept gives a parity round's trajectory the trainer a timed
row left) trains as a new one: the same losses and weights, to the bit, as its own first steps when new, after steps
on other batches before the rewind (one trainer, one compilation). Each
in-process implementation's trainer at one device and data-parallel, the CNN with its dropout on (the dropout keys'
and seed states' rewind); Keras 3 on JAX's in tests/test_keras_jax.py (its probe's `rewound`). And the registry: a
trainer is taken only under its own key, rewound, once; the rest released, and none kept after its kind's round."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from parity.workloads.trained import kept

CASES = {  # (workload, sizes as build takes them, variant by framework and replica count)
    "lstm": ((8,), {("tf", 1): "fit", ("tf", 2): "loop", ("jax", 1): "jit", ("jax", 2): "shard_map"}),
    "cnn": ((), {("tf", 1): "fit", ("tf", 2): "strategy", ("jax", 1): "jit", ("jax", 2): "pmap"}),
}


def _batches(seed: int, k: int = 2, b: int = 8):
    rng = np.random.default_rng(seed)
    return (rng.random((k, b, 28, 28, 1)) * 255).astype(np.float32), rng.integers(0, 10, (k, b))


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("workload", sorted(CASES))
@pytest.mark.parametrize("name", ["jax", "tf"])
def test_a_rewound_trainer_trains_as_a_new_one(name, workload, replicas):
    from frameworks_setup import IMPLS

    mod, devices = IMPLS[name]
    sizes, variants = CASES[workload]
    adapter = mod.adapter(workload)
    w = adapter.get_weights(adapter.build(*sizes, 3))
    x, y = _batches(0)

    t = adapter.make_trainer(
        adapter.build_with(w, *sizes, 0), devices[:replicas], variants[name, replicas], 1e-3, 1e-7, 0
    )
    want = [np.asarray(t.steps(x, y))] + adapter.get_weights(t.model())  # what the new trainer takes
    t.steps(*_batches(1))  # other batches: its weights, optimizer state and step count move on
    t.rewind()
    got = [np.asarray(t.steps(x, y))] + adapter.get_weights(t.model())
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_pytorchs_trainer_compiles_nothing_to_keep_so_none_is_kept():
    from frameworks_setup import IMPLS

    mod, devices = IMPLS["torch"]
    adapter = mod.adapter("lstm")
    t = adapter.make_trainer(adapter.build(8, 0), devices[:1], "eager", 1e-3, 1e-7, 0)
    assert not hasattr(t, "rewind")


def test_a_kept_trainer_is_taken_only_under_its_key_rewound_once_and_the_rest_released(monkeypatch):
    monkeypatch.setattr(kept, "KEPT", {})  # this process's own, whatever a test before this one left
    monkeypatch.setattr(kept, "TAKEN", set())

    class Trainer:
        rewound = 0

        def rewind(self):
            self.rewound += 1

    spec = SimpleNamespace(learning_rate=1e-3, adam_epsilon=1e-7, seed=0)
    k = kept.key("lstm_train", "jit", [0], (8,), "w.npz", spec, 32)
    t, other = Trainer(), Trainer()
    kept.keep(k, t)
    kept.keep(kept.key("lstm_train", "jit", [0], (8,), "w.npz", spec, 64), other)  # another batch: another key
    kept.keep(k[:-1] + (16,), object())  # cannot rewind: not kept
    assert len(kept.KEPT) == 2
    assert kept.take(kept.key("lstm_train", "jit", [0, 1], (8,), "w.npz", spec, 32)) is None  # more devices
    assert kept.take(k) is t and t.rewound == 1 and kept.take(k) is None
    kept.drop("lstm_train")
    assert kept.KEPT == {} and other.rewound == 0
    kept.keep(k, t)  # a row finished after its kind's round (an accelerator's host takes the rounds first)
    assert kept.KEPT == {}
