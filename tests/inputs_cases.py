"""Hostile inputs to every implementation's entry points, written once: tests/test_inputs.py runs them on TF's and
JAX's implementations in its own process, and on Keras on JAX's in a process of its own
(tests/keras_jax_inputs_probe.py).
Each case is a call on an implementation, and what it must give: a ValueError whose message matches `said`, or, where
`said` is None, no error at all. Not a test module: pytest does not collect it."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

UNITS = 4  # the LSTM the cases build: the smallest that trains and infers in every implementation
X = np.zeros((4, 28, 28, 1), np.float32)
Y = np.zeros(4, np.int32)


@dataclass(frozen=True)
class Case:
    """One call: `call(impl, devices, folder)` and the ValueError it must raise (`said`, a regular expression), or
    None where it must succeed."""

    call: Callable[..., object]
    said: str | None
    slow: bool = False  # seconds, not tenths: out of the fast tier (it builds a wide model, or trains)


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """('ok', '') where the call returns, else its exception's type name and message."""
    try:
        call()
    except Exception as e:  # the case's finding: which error, if any
        return type(e).__name__, str(e)
    return "ok", ""


def _variant(impl, kind: str) -> str:
    return impl.variants(kind, 1)[0].name


def _images(shape, value=0.0, dtype=np.float32) -> np.ndarray:
    return np.full(shape, value, dtype)


def _saved_loads_back(impl, devices, folder: Path, units: int) -> None:
    m = impl.adapter("lstm").build(units, 1)
    impl.adapter("lstm").save_weights(m, folder / f"lstm{units}.npz")
    back = impl.adapter("lstm").build(units, 2)
    impl.adapter("lstm").load_weights(back, folder / f"lstm{units}.npz")
    assert all(
        np.array_equal(a, b)
        for a, b in zip(impl.adapter("lstm").get_weights(back), impl.adapter("lstm").get_weights(m), strict=True)
    )


def _zip_without_npy(impl, devices, folder: Path) -> None:
    with zipfile.ZipFile(folder / "bare.npz", "w") as z:
        z.writestr("w000", np.zeros(3, np.float32).tobytes())
    impl.adapter("cnn").load_weights(impl.adapter("cnn").build(0), folder / "bare.npz")


def _oversize_header(impl, devices, folder: Path) -> None:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (2**20, 2**20)})
    with zipfile.ZipFile(folder / "huge.npz", "w") as z:
        z.writestr("w000.npy", buf.getvalue() + b"\0" * 64)
    impl.adapter("lstm").load_weights(impl.adapter("lstm").build(UNITS), folder / "huge.npz")


def _model_after_steps(impl, devices, folder: Path) -> None:
    """A trainer that has stepped leaves the model it was built from usable, at its own weights until model()."""
    m = impl.adapter("lstm").build(UNITS)
    before = impl.adapter("lstm").get_weights(
        impl.adapter("lstm").build(UNITS)
    )  # its twin's: reading m's own first would cache them on the host
    t = impl.adapter("lstm").make_trainer(m, devices[:1], _variant(impl, "lstm_train"))
    t.steps(X[None], Y[None])
    assert all(np.array_equal(a, b) for a, b in zip(impl.adapter("lstm").get_weights(m), before, strict=True))
    impl.adapter("lstm").save_weights(m, folder / "after.npz")
    impl.adapter("lstm").prepare_inference(m, X, devices[:1], _variant(impl, "lstm_infer")).run()
    t.model()  # the trained weights, given back to m
    t.steps(X[None], Y[None])  # and a step more, which m does not see until model()
    once, twice = impl.adapter("lstm").get_weights(m), impl.adapter("lstm").get_weights(t.model())
    assert not all(np.array_equal(a, b) for a, b in zip(once, before, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(once, twice, strict=True))


def _same_model(impl, a, b) -> None:
    assert all(
        np.array_equal(p, q)
        for p, q in zip(impl.adapter("lstm").get_weights(a), impl.adapter("lstm").get_weights(b), strict=True)
    )


def _trainer(impl, devices, **numbers):
    return impl.adapter("lstm").make_trainer(
        impl.adapter("lstm").build(UNITS), devices[:1], _variant(impl, "lstm_train"), **numbers
    )


def _infer(impl, devices, images) -> None:
    impl.adapter("lstm").prepare_inference(
        impl.adapter("lstm").build(UNITS), images, devices[:1], _variant(impl, "lstm_infer")
    )


class Foreign:
    """A model no implementation built (its name none of theirs): each refuses it, never running another's code."""

    name = "someone_elses_model"


def _conv(impl, devices, x, k) -> None:
    impl.adapter("conv").prepare(_variant(impl, "conv"), x, k, devices[:1], stride=1)


def _matmul(impl, devices, a, b) -> None:
    impl.adapter("matmul").prepare(_variant(impl, "matmul"), a, b, devices[:1])


def _one(value, at=(0, 5, 7, 0)) -> np.ndarray:
    x = X.copy()
    x[at] = value
    return x


UNITS_SAID, SEED_SAID = (
    r"units must be an integer from 1 to [\d,]+, got ",
    r"seed must be an integer from 0 to 4,294,966",
)
FOREIGN_SAID = r"not a model (jax_impl|keras_jax_impl|tf_impl|torch_impl)\.lstm builds: '(someone_elses_model|Foreign)'"
IMAGES_SAID = r"images of shape \(28, 28, 1\) expected after 1 leading axes"
C64 = np.complex64
CASES = {
    # weights: what save_weights writes, load_weights reads back; a file that is not one is refused
    "save-load-lstm-600": Case(lambda i, d, f: _saved_loads_back(i, d, f, 600), None, slow=True),
    "save-load-lstm-1024": Case(lambda i, d, f: _saved_loads_back(i, d, f, 1024), None, slow=True),
    "zip-without-npy": Case(_zip_without_npy, r"not a parity weight file \(members \['w000'\]"),
    "oversize-header": Case(_oversize_header, r"header asks for 4398046511104 bytes, more than the model's weights"),
    # the LSTM's and the CNN's build: a width within the machine's memory, a seed within Keras's
    "units-10**7": Case(lambda i, d, f: i.adapter("lstm").build(10**7), UNITS_SAID + "10000000"),
    "units-True": Case(lambda i, d, f: i.adapter("lstm").build(True), UNITS_SAID + "True"),
    "units-0": Case(lambda i, d, f: i.adapter("lstm").build(0), UNITS_SAID + "0"),
    "units-4.0": Case(lambda i, d, f: i.adapter("lstm").build(4.0), UNITS_SAID + "4.0"),
    "units-numpy": Case(
        lambda i, d, f: _same_model(i, i.adapter("lstm").build(np.int64(UNITS)), i.adapter("lstm").build(UNITS)), None
    ),
    "seed-numpy": Case(
        lambda i, d, f: _same_model(i, i.adapter("lstm").build(UNITS, np.int32(3)), i.adapter("lstm").build(UNITS, 3)),
        None,
    ),
    "seed-minus-1": Case(lambda i, d, f: i.adapter("lstm").build(UNITS, -1), SEED_SAID + ", got -1"),
    "seed-2**32": Case(lambda i, d, f: i.adapter("lstm").build(UNITS, 2**32), SEED_SAID + ", got 4294967296"),
    "seed-True": Case(lambda i, d, f: i.adapter("lstm").build(UNITS, True), SEED_SAID + ", got True"),
    "cnn-seed-minus-1": Case(lambda i, d, f: i.adapter("cnn").build(-1), SEED_SAID + ", got -1"),
    # loss_and_grads: labels that are classes, finite images
    "grads-label-10": Case(
        lambda i, d, f: i.adapter("cnn").loss_and_grads(i.adapter("cnn").build(0, dropout=False), X, Y + 10),
        "0..9, got 10",
    ),
    "grads-label-minus-1": Case(
        lambda i, d, f: i.adapter("lstm").loss_and_grads(i.adapter("lstm").build(UNITS), X, Y - 1), "0..9, got -1"
    ),
    "grads-float-labels": Case(
        lambda i, d, f: i.adapter("lstm").loss_and_grads(i.adapter("lstm").build(UNITS), X, Y.astype(np.float32)),
        "labels must be integers",
    ),
    "grads-nan-image": Case(
        lambda i, d, f: i.adapter("lstm").loss_and_grads(i.adapter("lstm").build(UNITS), _one(np.nan), Y), "1 pixel"
    ),
    # make_trainer: a finite learning rate and epsilon above 0; evaluate: a batch of 1 or more
    "lr-nan": Case(lambda i, d, f: _trainer(i, d, learning_rate=float("nan")), "learning_rate must be a finite"),
    "lr-inf": Case(lambda i, d, f: _trainer(i, d, learning_rate=float("inf")), "learning_rate must be a finite"),
    "lr-minus-1": Case(lambda i, d, f: _trainer(i, d, learning_rate=-1.0), "learning_rate must be a finite"),
    "epsilon-minus-1": Case(lambda i, d, f: _trainer(i, d, adam_epsilon=-1.0), "adam_epsilon must be a finite"),
    "trainer-seed-minus-1": Case(lambda i, d, f: _trainer(i, d, seed=-1), SEED_SAID),
    "evaluate-batch-0": Case(lambda i, d, f: _trainer(i, d).evaluate(X, Y, batch_size=0), "batch_size must be"),
    # a trainer leaves its model usable
    "model-after-steps": Case(_model_after_steps, None, slow=True),
    # the LSTM's prepare_inference: N images of 28 x 28 x 1, real and finite
    "foreign-set-weights": Case(lambda i, d, f: i.adapter("lstm").set_weights(Foreign(), []), FOREIGN_SAID),
    "foreign-forward": Case(lambda i, d, f: i.adapter("lstm").forward_layers(Foreign(), X), FOREIGN_SAID),
    "foreign-infer": Case(
        lambda i, d, f: i.adapter("lstm").prepare_inference(Foreign(), X, d[:1], "predict"), FOREIGN_SAID
    ),
    "foreign-trainer": Case(
        lambda i, d, f: i.adapter("lstm").make_trainer(Foreign(), d[:1], _variant(i, "lstm_train")), FOREIGN_SAID
    ),
    "infer-0-images": Case(lambda i, d, f: _infer(i, d, X[:0]), "no images"),
    "infer-8x27x28": Case(lambda i, d, f: _infer(i, d, _images((8, 27, 28))), IMAGES_SAID + r", got \(8, 27, 28\)"),
    "infer-8x784": Case(lambda i, d, f: _infer(i, d, _images((8, 784))), IMAGES_SAID + r", got \(8, 784\)"),
    "infer-nan": Case(lambda i, d, f: _infer(i, d, _one(np.nan)), "1 pixel"),
    "infer-inf": Case(lambda i, d, f: _infer(i, d, _one(np.inf)), "1 pixel"),
    "infer-complex": Case(lambda i, d, f: _infer(i, d, X.astype(C64)), "images must hold real numbers"),
    # the conv's and the matmul's prepare: NumPy arrays of one real floating dtype, shapes that compute something
    "conv-complex": Case(
        lambda i, d, f: _conv(i, d, _images((2, 8, 8, 3), 1, C64), _images((3, 3, 3, 4), 1, C64)),
        "conv: images must hold real floating-point numbers",
    ),
    "conv-list": Case(lambda i, d, f: _conv(i, d, [[[[1.0]]]], _images((1, 1, 1, 1))), "images must be a NumPy array"),
    "conv-0-channels": Case(
        lambda i, d, f: _conv(i, d, _images((2, 8, 8, 0)), _images((3, 3, 0, 4))), "conv: .*a dimension of 0"
    ),
    "matmul-complex": Case(
        lambda i, d, f: _matmul(i, d, _images((4, 4), 1, C64), _images((4, 4), 1, C64)), "real floating-point"
    ),
    "matmul-inner": Case(lambda i, d, f: _matmul(i, d, _images((4, 3)), _images((4, 5))), "3 columns, b 4 rows"),
    "matmul-1-d": Case(lambda i, d, f: _matmul(i, d, _images((4,)), _images((4, 5))), r"2 dimensions each"),
    "matmul-list": Case(lambda i, d, f: _matmul(i, d, [[1.0]], _images((1, 1))), "a must be a NumPy array"),
    "matmul-dtypes": Case(
        lambda i, d, f: _matmul(i, d, _images((4, 4)), _images((4, 4), dtype=np.float64)), "operands of one dtype"
    ),
}
