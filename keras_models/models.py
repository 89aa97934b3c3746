"""Which model code a Keras model is: the one lookup every Keras implementation makes, by the model's name (a copy
keeps it). A model no module here built is refused, never run as another's. The surface's model functions that
need no backend of their own (weights in and out, forward blocks, the mixed-precision copy) are written here once,
for both Keras implementations."""

from __future__ import annotations

from types import ModuleType

import numpy as np

from keras_models.cnn import get_weights
from parity.api import adapters
from parity.api.inputs import check_images
from parity.api.weights import load_npz, save_npz


def code_of(model) -> ModuleType:
    """The module that builds `model` and declares its facts (NAME, TRAIN, INFER, FIRST, BATCHNORM, variant_copy,
    mixed_precision, set_weights, forward_layers, kernel_path). Raises ValueError for a model none of them built."""
    return adapters.of_model(__package__, model)  # found by listing: each module's MODEL is its models' name


def set_weights(model, weights) -> None:
    """Load weights in Keras's order (the CNN's, the LSTM's or the ViT's table, by the model). Raises ValueError naming
    the layer on a length/shape/dtype mismatch."""
    code_of(model).set_weights(model, weights)


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference: every block's output as NumPy, by block name (the CNN's, the LSTM's or the ViT's). Raises ValueError
    on images that are not (N, 28, 28, 1) real, finite numbers (parity.api.inputs)."""
    check_images(x)
    return code_of(model).forward_layers(model, x)


def mixed_precision(model):
    """The model's copy under Keras's 'mixed_bfloat16' policy (the softmax float32; the LSTM's and the ViT's pixel
    scaling too, and the ViT's logits)."""
    return code_of(model).mixed_precision(model)


def save_weights(model, path) -> None:
    """Save to .npz in Keras's get_weights() order: loadable by every implementation."""
    save_npz(get_weights(model), path)


def load_weights(model, path) -> None:
    """Load a .npz written by any implementation's save_weights (bounded by this model's own weights, then
    checked like set_weights)."""
    set_weights(model, load_npz(path, model.weights))
