"""A trained model's adapter in both Keras implementations (parity.api.adapters.Trained): the implementation's module
of the workload (its variants) bound to the Keras model code written once for both, keras_models.<workload> (build,
weights in and out, forward blocks, the mixed-precision copy), and to the backend's gradients, inference and trainer,
each written once for every Keras model (tf_impl.models, keras_jax_impl.models and their train modules)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from parity.api import Gradients, Prepared, adapters
from parity.api.inputs import check_examples, check_images


class KerasTrained(adapters.Trained):
    """`code`: the implementation's module of the workload; `backend`: the module whose `loss_and_grads(model, x, y)`
    and `prepare_inference(adapter, model, images, devices, variant)` serve every Keras model on that backend."""

    def __init__(self, code: ModuleType, trainer: str, backend: str):
        super().__init__(code, trainer, importlib.import_module(f"{__package__}.{code.WORKLOAD}"))
        self.backend = importlib.import_module(backend)

    def variant_model(self, model: Any, options: Any) -> Any:
        """What a variant with these options runs: its own copy of `model` ('+unroll'), the model's weights on it, or
        the model itself."""
        copy = self.model_code.variant_copy(model, options)
        if copy is not model:
            copy.set_weights(model.get_weights())
        return copy

    def loss_and_grads(self, model: Any, x: np.ndarray, y: np.ndarray) -> Gradients:
        check_examples(x, y, 1)
        return self.backend.loss_and_grads(self.owned(model), x, y)

    def prepare_inference(self, model: Any, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
        check_images(images)  # once, here: not in the timed call
        return self.backend.prepare_inference(self, self.owned(model), images, devices, variant)
