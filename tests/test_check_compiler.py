"""How the untimed parity programs compile (FrameworkImpl.check_compiler): as the timed ones on a CPU; on an
accelerator JAX's at optimization level O1, set only while the parity arrays are made, and said in the run's notes.
A stand-in device kind ('tpu') exercises the accelerator's path on a CPU."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace

import jax
import numpy as np
import pytest

import jax_impl
from parity.judging.judge import parity_note
from parity.workloads.trained import parity_arrays


def test_a_cpu_compiles_its_checks_as_its_timed_programs():
    ctx, said = jax_impl.check_compiler(jax.devices("cpu")[:1])
    before = jax.config.jax_optimization_level
    with ctx:
        assert jax.config.jax_optimization_level == before
    assert said == ""


def test_an_accelerator_compiles_its_checks_at_O1_and_restores_the_default():
    before = jax.config.jax_optimization_level
    ctx, said = jax_impl.check_compiler([SimpleNamespace(platform="tpu")])
    with ctx:
        assert str(jax.config.jax_optimization_level) == "O1"
        assert jax.jit(lambda a: a * 2)(np.float32(3)) == 6  # a program compiles under it
    assert jax.config.jax_optimization_level == before
    assert "O1" in said


def test_the_level_is_the_entering_threads_own():
    """A worker compiles its rows' programs on other threads while its parity round runs at O1 (parity.engine.ahead):
    they must keep the default, so the level is set for the thread that enters the context only."""
    ctx, _ = jax_impl.check_compiler([SimpleNamespace(platform="tpu")])
    seen = {}

    def other():
        seen["level"] = str(jax.config.jax_optimization_level)
        seen["out"] = float(jax.jit(lambda a: a * 3)(np.float32(2)))  # compiled there meanwhile

    with ctx:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert str(jax.config.jax_optimization_level) == "O1"
    assert seen == {"level": str(jax.config.jax_optimization_level), "out": 6.0} and seen["level"] != "O1"


def test_the_level_is_restored_when_a_check_raises():
    before = jax.config.jax_optimization_level
    ctx, _ = jax_impl.check_compiler([SimpleNamespace(platform="tpu")])
    with pytest.raises(RuntimeError), ctx:
        raise RuntimeError("a parity program failed")
    assert jax.config.jax_optimization_level == before


@pytest.mark.parametrize("name", ["tf_impl", "torch_impl"])  # keras_jax_impl's is jax_impl's (its own process)
def test_the_others_compile_their_checks_as_their_timed_programs(name):
    pytest.importorskip(name)
    impl = __import__(name)
    ctx, said = impl.check_compiler([])
    with ctx:
        pass
    assert said == ""


def test_the_parity_arrays_are_made_inside_the_implementations_context(tmp_path):
    seen = []

    @contextmanager
    def compiler():
        seen.append("in")
        yield
        seen.append("out")

    class Adapter:
        TRAIN = "toy_train"

        def forward_layers(self, model, x):
            seen.append("forward")
            return {"out": x * 2}

    impl = SimpleNamespace(check_compiler=lambda devices: (compiler(), "stand-in"))
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    req = {"weights": "w", "forward": str(tmp_path / "x.npy"), "out": str(tmp_path / "out.npz")}
    parity_arrays(impl, Adapter(), [], req, lambda w: None, None)
    assert seen == ["in", "forward", "out"]
    assert np.load(tmp_path / "out.npz")["forward/out"].tolist() == [[2.0] * 3] * 2


def test_the_note_says_how_the_checks_compiled_where_a_worker_says_so():
    hello = {"jax": {"check_compiler": "JAX's optimization level O1, the timed programs at its default"}, "tf": {}}
    said = parity_note("cnn", 1, 12.4, ["JAX", "TF"], hello)
    assert said == (
        "cnn parity x1: its arrays took 12 s (JAX, TF; compiled at JAX's optimization level O1, the timed programs at "
        "its default)"
    )
    assert parity_note("cnn", 0, 3, ["JAX"], {"jax": {"check_compiler": ""}}) == (
        "cnn parity xall: its arrays took 3 s (JAX)"
    )
    assert parity_note("cnn", 1, 3, ["JAX"], {"jax": {}}, ahead=True) == (
        "cnn parity x1: its arrays took 3 s (JAX; each worker's gradient and trajectory programs compiled side by "
        "side, while its rows' programs compiled)"
    )


def test_on_an_accelerator_a_jax_model_is_built_on_the_host(monkeypatch):
    """Its initialisers compile on the CPU (milliseconds) rather than the chip (seconds each); the trainer puts the
    arrays on its devices. On a CPU nothing changes."""
    import jax_impl.devices as jd

    assert jax.config.jax_default_device is None
    with jd.on_host():
        assert jax.config.jax_default_device is None
    monkeypatch.setattr(jd.jax, "default_backend", lambda: "tpu")
    with jd.on_host():
        assert jax.config.jax_default_device == jax.local_devices(backend="cpu")[0]
    assert jax.config.jax_default_device is None
