"""The adapters of Keras 3 on the TensorFlow backend (parity.api.adapters): an operation's module as it is, a trained
model's bound to the Keras model code (keras_models.models.KerasTrained), to the one trainer (tf_impl.train) and
to what needs TensorFlow itself, written once for every model keras_models builds (tf_impl.models)."""

from __future__ import annotations

from typing import Any

from keras_models.models import KerasTrained
from parity.api import adapters

# what a trained model's adapter binds: the one trainer, and the gradients and inference of every Keras model
TRAINER, MODELS = "tf_impl.train", "tf_impl.models"


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's bound to the Keras model code, the trainer and the gradients and inference (TRAINER, MODELS;
    keras_models.models.KerasTrained). Raises ValueError for a workload it has none for."""
    return adapters.bound(__package__, workload, lambda code: KerasTrained(code, TRAINER, MODELS))
