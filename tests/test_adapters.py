"""An implementation's adapters are found by listing its package (parity.api.adapters): a module that declares
WORKLOAD as its own name is one, any other module is not, and a trained model's adapter takes only the models its
build made (MODEL). Shown on a package of the test's own (no framework), and on jax_impl: its adapters are the
workloads' list, nothing else."""

from __future__ import annotations

import sys
import textwrap

import pytest

from parity.api import adapters


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package 'adapted' with two adapters (an operation's, a trained model's, the latter under a Keras-style name
    too) and a helper module that declares no workload."""
    root = tmp_path / "adapted"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "mlp.py").write_text(
        textwrap.dedent(
            """
            WORKLOAD, TRAIN, INFER = "mlp", "mlp_train", "mlp_infer"

            class Net:
                pass

            MODEL = Net

            def build(width, seed=0):
                return Net()

            def get_weights(model):
                return [width_of(model)]

            def width_of(model):
                return 4

            def make_trainer(adapter, model, *rest):
                return ("trainer of", adapter.WORKLOAD, *rest)
            """
        )
    )
    (root / "named.py").write_text(
        'WORKLOAD, TRAIN, INFER, MODEL = "named", "named_train", "named_infer", "a_keras_name"\n'
    )
    (root / "dot.py").write_text('WORKLOAD = "dot"\n\ndef prepare(variant, a, b, devices):\n    return None\n')
    (root / "helpers.py").write_text('WORKLOAD = "not its name"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "adapted"
    adapters.listed.cache_clear()
    for name in [m for m in sys.modules if m == "adapted" or m.startswith("adapted.")]:
        del sys.modules[name]


def test_a_module_that_declares_its_own_name_is_an_adapter_and_no_other_is(package):
    assert adapters.listed(package) == ("dot", "mlp", "named")
    assert adapters.find(package, "mlp").build(4).__class__.__name__ == "Net"
    with pytest.raises(ValueError, match="adapted has no adapter for workload 'helpers'; it has: dot, mlp, named"):
        adapters.find(package, "helpers")


def test_a_trained_adapter_takes_only_the_models_its_build_made(package):
    """An operation's module is its adapter as it is; a trained model's is bound to the framework's trainer, and its
    model functions refuse a model of another workload (by its type, or a Keras model's name) before running it."""

    def trained(code):
        return adapters.Trained(code, "adapted.mlp")  # its trainer: the module's make_trainer

    assert adapters.bound(package, "dot", trained).__name__ == "adapted.dot"
    mlp, named = adapters.bound(package, "mlp", trained), adapters.bound(package, "named", trained)
    net = mlp.build(4)
    assert mlp.get_weights(net) == [4]
    assert mlp.make_trainer(net, ["cpu:0"], "loop", 1e-3, 1e-7, 5) == (
        "trainer of",
        "mlp",
        ["cpu:0"],
        "loop",
        1e-3,
        1e-7,
        5,
    )
    assert named.owned(keras_like := type("Model", (), {"name": "a_keras_name"})()) is keras_like
    with pytest.raises(ValueError, match="not a model adapted.mlp builds: 'object'"):
        mlp.get_weights(object())
    with pytest.raises(ValueError, match="not a model adapted.mlp builds: 'a_keras_name'"):
        mlp.make_trainer(keras_like, ["cpu:0"], "loop")
    with pytest.raises(ValueError, match="not a model adapted.named builds: 'other_name'"):
        named.owned(type("Model", (), {"name": "other_name"})())
    with pytest.raises(
        ValueError, match="learning_rate must be a finite number"
    ):  # the trainer's numbers are checked before the framework's
        mlp.make_trainer(net, ["cpu:0"], "loop", float("nan"))


def test_jax_impls_adapters_are_the_workloads():
    """One implementation in this process (tests/test_surface.py asks each for its surface): its adapters are exactly
    the workloads the list holds, an unknown workload is one line, and a model it did not build is refused."""
    import jax_impl
    from parity.workloads import WORKLOADS

    assert set(adapters.listed("jax_impl")) == set(WORKLOADS)
    assert jax_impl.adapter("conv").WORKLOAD == "conv"
    with pytest.raises(ValueError, match="jax_impl has no adapter for workload 'gru'"):
        jax_impl.adapter("gru")
    with pytest.raises(ValueError, match="not a model jax_impl.cnn builds: 'object'"):
        jax_impl.adapter("cnn").get_weights(object())
