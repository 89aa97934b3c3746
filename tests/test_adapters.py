"""An implementation's adapters are found by listing its package (parity.api.adapters): a module that declares
WORKLOAD as its own name is one, any other module is not, and a model finds its adapter by MODEL. Shown on a package
of the test's own (no framework), and on jax_impl: its adapters are the workloads' list, nothing else."""

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
            """
        )
    )
    (root / "named.py").write_text('WORKLOAD, MODEL = "named", "a_keras_name"\n')
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


def test_a_model_finds_the_adapter_that_built_it_by_its_type_or_its_name(package):
    net = adapters.find(package, "mlp").build(4)
    assert adapters.of_model(package, net).WORKLOAD == "mlp"
    keras_like = type("Model", (), {"name": "a_keras_name"})()
    assert adapters.of_model(package, keras_like).WORKLOAD == "named"
    with pytest.raises(ValueError, match="not a model adapted builds: 'object'"):
        adapters.of_model(package, object())
    with pytest.raises(ValueError, match="not a model adapted builds: 'other_name'"):
        adapters.of_model(package, type("Model", (), {"name": "other_name"})())


def test_jax_impls_adapters_are_the_workloads():
    """One implementation in this process (tests/test_surface.py asks each for its surface): its adapters are exactly
    the workloads the list holds, an unknown workload is one line, and a model it did not build is refused."""
    import jax_impl
    from parity.workloads import WORKLOADS

    assert set(adapters.listed("jax_impl")) == set(WORKLOADS)
    assert jax_impl.adapter("conv").WORKLOAD == "conv"
    with pytest.raises(ValueError, match="jax_impl has no adapter for workload 'gru'"):
        jax_impl.adapter("gru")
    with pytest.raises(ValueError, match="not a model jax_impl builds: 'object'"):
        jax_impl.get_weights(object())
