"""A model given its weights as it is built (parity.api.adapters.Trained.build_with) is the model build() then
set_weights() make: every variable the same (JAX's none left abstract: jax_impl.models.abstract leaves each to
set_weights), so what trains from it is the same. Each in-process implementation, each trained workload at tiny sizes;
Keras 3 on JAX's, whose build_with leaves Keras's initialisers out, in its own process (tests/keras_jax_probe.py's
`built_with`, judged in tests/test_keras_jax.py)."""

from __future__ import annotations

import numpy as np
import pytest

SIZES = {"cnn": (), "lstm": (8,), "vit": (16, 1, 2, 32)}  # tiny sizes, as build takes them before the seed


def _state(name: str, model) -> list:
    """Every variable of `model` as NumPy, in the framework's own order: a JAX leaf that is not an array (an abstract
    one set_weights never filled) is refused."""
    if name == "jax":
        import jax
        from flax import nnx

        leaves = jax.tree.leaves(nnx.state(model))
        assert all(isinstance(a, jax.Array) for a in leaves), [type(a).__name__ for a in leaves]
        return [np.asarray(a) for a in leaves]
    if name == "torch":
        return [t.detach().numpy() for t in model.state_dict().values()]
    return [np.asarray(v.numpy()) for v in model.variables]  # Keras's: a dropout layer's seed state among them


def _other_weights(adapter, sizes) -> list[np.ndarray]:
    """Weights no seed of build's makes: seed 1's, each shifted, so that a variable left at its initial value shows."""
    return [w + np.asarray(0.25, w.dtype) for w in adapter.get_weights(adapter.build(*sizes, 1))]


@pytest.mark.parametrize("workload", sorted(SIZES))
def test_build_with_is_build_then_set_weights(impl, workload):
    mod, _ = impl
    name = mod.__name__.removesuffix("_impl")
    adapter = mod.adapter(workload)
    w = _other_weights(adapter, SIZES[workload])
    plain = [adapter.build(*SIZES[workload], 0) for _ in range(2)]
    for m in plain:
        adapter.set_weights(m, w)
    given = adapter.build_with(w, *SIZES[workload], 0)
    got, want, again = _state(name, given), _state(name, plain[0]), _state(name, plain[1])
    assert len(got) == len(want)
    # a variable two builds set alike (a Keras LSTM's unseeded, unused dropout seed differs from build to build)
    fixed = [i for i, (a, b) in enumerate(zip(want, again, strict=True)) if np.array_equal(a, b)]
    assert len(fixed) >= len(w)
    for i in fixed:
        assert got[i].dtype == want[i].dtype and np.array_equal(got[i], want[i])
    assert all(np.array_equal(a, b) for a, b in zip(adapter.get_weights(given), w, strict=True))


def test_build_with_refuses_weights_as_set_weights_does(impl):
    mod, _ = impl
    adapter = mod.adapter("lstm")
    w = adapter.get_weights(adapter.build(8, 0))
    with pytest.raises(ValueError):
        adapter.build_with(w[:-1], 8, 0)
