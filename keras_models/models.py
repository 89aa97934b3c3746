"""Which model code a Keras model is: the one lookup every Keras implementation makes, by the model's name (a copy
keeps it). A model no module here built is refused, never run as another's."""

from __future__ import annotations

from types import ModuleType

from keras_models import cnn, lstm

CODES = {code.NAME: code for code in (cnn, lstm)}


def code_of(model) -> ModuleType:
    """The module that builds `model` and declares its facts (NAME, TRAIN, INFER, FIRST, BATCHNORM, variant_copy,
    mixed_precision, set_weights, forward_layers, kernel_path). Raises ValueError for a model none of them built."""
    code = CODES.get(getattr(model, "name", None))
    if code is None:
        raise ValueError(f"not a model keras_models builds: {getattr(model, 'name', type(model).__name__)!r}")
    return code
