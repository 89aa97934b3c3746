"""Inputs checked where they enter every implementation (parity.api.inputs): one ValueError naming the problem,
before the framework sees them. The rules without a framework; then every implementation's entry points on the same
hostile inputs (tests/inputs_cases.py), Keras on JAX's in a process of its own (tests/keras_jax_inputs_probe.py)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from inputs_cases import CASES, outcome

from parity.api.cnn import check_weights
from parity.api.inputs import MAX_SEED, check_conv, check_examples, check_seed, check_units, max_units
from parity.common.frameworks import JAX, KERAS_JAX, TF

PROBE = Path(__file__).with_name("keras_jax_inputs_probe.py")

X = np.zeros((1, 4, 28, 28, 1), np.float32)
Y = np.zeros((1, 4), np.int32)


def _one_nan() -> np.ndarray:
    x = X.copy()
    x[0, 2, 5, 7, 0] = np.nan
    return x


@pytest.mark.parametrize(
    "x, y, said",
    [
        (X, Y + 10, "labels must lie in 0..9, got 10..10"),
        (X, Y - 1, "labels must lie in 0..9, got -1..-1"),
        (X, Y.astype(np.float32), "labels must be integers"),
        (X[:, :, :27], Y, "images of shape (28, 28, 1) expected after 2 leading axes, got (1, 4, 27, 28, 1)"),
        (X, Y[:, :3], "labels of shape (1, 4) expected (one per image), got (1, 3)"),
        (X[:, :0], Y[:, :0], "no images"),
        (_one_nan(), Y, "1 pixel(s) not finite"),
    ],
    ids=["label-10", "label-minus-1", "float-labels", "27x28", "labels-short", "empty", "nan-pixel"],
)
def test_training_examples_that_no_framework_should_see_are_one_valueerror(x, y, said):
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        check_examples(x, y, 2)
    check_examples(X, Y, 2)  # and a good batch passes


@pytest.mark.parametrize(
    "kernels, stride, padding, said",
    [
        (np.zeros((3, 3, 2, 4)), 2, "SAME", "images have 3 channels, the kernels take 2"),
        (np.zeros((3, 3, 3, 4)), 0, "SAME", "stride must be an integer of 1 or more, got 0"),
        (np.zeros((3, 3, 3, 4)), -1, "SAME", "got -1"),
        (np.zeros((3, 3, 3, 4)), 1.5, "SAME", "got 1.5"),
        (np.zeros((3, 3, 3, 4)), 1, "BOGUS", "padding must be one of"),
        (np.zeros((3, 3, 4)), 1, "SAME", "4 dimensions"),
    ],
)
def test_a_conv_that_cannot_run_is_refused_before_it_is_prepared(kernels, stride, padding, said):
    with pytest.raises(ValueError, match=said):
        check_conv(np.zeros((2, 8, 8, 3)), kernels, stride, padding)


def test_weights_that_are_not_a_list_are_a_valueerror():
    for bad in (None, 3, "w", np.zeros(3)):
        with pytest.raises(ValueError, match="expected a list of"):
            check_weights(bad)


def test_each_implementation_refuses_them_at_its_entry_points(impl):
    module, devices = impl
    trainer = module.adapter("cnn").make_trainer(
        module.adapter("cnn").build(0, dropout=False), devices[:1], module.variants("cnn_train", 1)[0].name
    )
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        trainer.steps(X, Y + 10)
    with pytest.raises(ValueError, match="no images"):
        trainer.evaluate(X[0, :0], Y[0, :0])
    with pytest.raises(ValueError, match="stride must be"):
        module.adapter("conv").prepare(
            module.variants("conv", 1)[0].name,
            np.zeros((2, 8, 8, 3), np.float32),
            np.zeros((3, 3, 3, 4), np.float32),
            devices[:1],
            stride=0,
        )
    with pytest.raises(ValueError, match="padding must be one of"):
        module.adapter("conv").conv_op(
            np.zeros((2, 8, 8, 3), np.float32), np.zeros((3, 3, 3, 4), np.float32), 1, "BOGUS"
        )
    with pytest.raises(ValueError, match="expected a list of"):
        module.adapter("cnn").set_weights(module.adapter("cnn").build(0), None)


def test_units_and_seeds_have_one_rule():
    assert check_units(np.int64(16)) == 16 and type(check_units(np.int64(16))) is int
    assert check_seed(np.uint32(MAX_SEED)) == MAX_SEED and (MAX_SEED * 1000 + 999) < 2**32  # Keras's uint32 seeds
    assert max_units() >= 1024  # the widths a user trains fit any machine that runs the suite
    for bad in (0, -3, True, 4.0, "4", None, max_units() + 1):
        with pytest.raises(ValueError, match="units must be an integer from 1 to"):
            check_units(bad)
    for bad in (-1, MAX_SEED + 1, False, 1.0):
        with pytest.raises(ValueError, match="seed must be an integer from 0 to"):
            check_seed(bad)


@pytest.fixture(scope="module")
def keras_jax_outcomes(tmp_path_factory) -> dict[str, list[str]]:
    """Every case's outcome in Keras on JAX, run in a process of its own (Keras's backend is fixed once a process)."""
    d = tmp_path_factory.mktemp("kj-inputs")
    p = subprocess.run(
        [sys.executable, str(PROBE), str(d), str(d / "found.json")], capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((d / "found.json").read_text())


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] * CASES[n].slow) for n in sorted(CASES)])
@pytest.mark.parametrize("fw", [JAX, TF, pytest.param(KERAS_JAX, marks=pytest.mark.slow)])  # its probe: 40 s
def test_every_implementation_takes_or_refuses_an_input_alike(fw, name, tmp_path, request):
    """The same call on every implementation: the same ValueError, naming the problem (or, where the case says the
    input is good, no error)."""
    case = CASES[name]
    if fw == KERAS_JAX:
        kind, said = request.getfixturevalue("keras_jax_outcomes")[name]
    else:
        from frameworks_setup import IMPLS

        module, devices = IMPLS[fw]
        kind, said = outcome(lambda: case.call(module, devices, tmp_path))
    if case.said is None:
        assert kind == "ok", f"{kind}: {said}"
    else:
        assert kind == "ValueError" and re.search(case.said, said), f"{kind}: {said}"
