"""The surface's model functions (parity.api.FrameworkImpl), each taking any trained model as its adapter's `build`
returned it (`adapter('cnn').build()`), and dispatching to that adapter's own (jax_impl.cnn, jax_impl.lstm,
jax_impl.vit), found by listing: a new trained workload's module is found here without a line of this file."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from parity.api import Gradients, Prepared, adapters
from parity.api.inputs import check_examples, check_images
from parity.api.weights import load_npz, save_npz

Model = Any  # what an adapter's `build` returns: an nnx.Module of its own class (its MODEL)


def code_of(model: Model) -> ModuleType:
    """The adapter implementing `model`'s workload: it built the model and declares its facts (TRAIN, INFER, train_with,
    compute_dtype). Raises ValueError for a model none of them built, never running it as another's."""
    return adapters.of_model(__package__, model)


def adapter(workload: str) -> ModuleType:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing.
    Raises ValueError for a workload it has none for."""
    return adapters.find(__package__, workload)


def mixed_precision(model: Model) -> Model:
    """A bfloat16-compute copy of `model` (float32 parameters, the same values): what the '+bf16' variants train."""
    return code_of(model).mixed_precision(model)


def get_weights(model: Model) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order."""
    return code_of(model).get_weights(model)


def set_weights(model: Model, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch."""
    code_of(model).set_weights(model, weights)


def count_params(model: Model) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them."""
    return code_of(model).count_params(model)


def forward_layers(model: Model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference: every block's output as NumPy, by block name (the workload's architecture names them). Raises
    ValueError on images that are not (N, 28, 28, 1) real, finite numbers (parity.api.inputs)."""
    check_images(x)
    return code_of(model).forward_layers(model, x)


def loss_and_grads(model: Model, x: np.ndarray, y: np.ndarray) -> Gradients:
    """One batch's loss and gradients in Keras's trainable_weights order, and each max-pooling layer's routing.
    Raises ValueError on images or labels the model cannot take (parity.api.inputs.check_examples)."""
    check_examples(x, y, 1)
    return code_of(model).loss_and_grads(model, x, y)


def prepare_inference(model: Model, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` on devices[0], inputs placed beforehand; variants of the model's
    '<workload>_infer' row kind. Raises ValueError for another, and on images that are not (N, 28, 28, 1) real,
    finite numbers (checked here, once: not in the timed call)."""
    check_images(images)
    return code_of(model).prepare_inference(model, images, devices, variant)


def save_weights(model: Model, path) -> None:
    """Save to .npz in Keras's get_weights() order: loadable by every framework."""
    save_npz(get_weights(model), path)


def load_weights(model: Model, path) -> None:
    """Load a .npz written by any framework's save_weights (bounded by this model's own weights, then checked like
    set_weights)."""
    set_weights(model, load_npz(path, get_weights(model)))
