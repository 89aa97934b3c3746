"""What every Keras model shares, on either backend: a trained model's adapter in both Keras implementations
(parity.api.adapters.Trained), the implementation's module of the workload (its variants) bound to the Keras model
code written once for both, keras_models.<workload> (build, weights in and out, forward blocks, the mixed-precision
copy), and to the backend's gradients, inference and trainer, each written once for every Keras model (tf_impl.models,
keras_jax_impl.models and their train modules); and the model functions, losses and fit's per-step logs those share."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import keras
import numpy as np
from keras.src.backend.common import global_state
from keras.src.backend.common.variables import initialize_all_variables

from parity.api import Gradients, Prepared, adapters
from parity.api.inputs import check_examples, check_images


class KerasTrained(adapters.Trained):
    """`code`: the implementation's module of the workload; `backend`: the module whose
    `loss_and_grads(model, x, y, pools)` (`pools`: the model code's POOLS, its max-pooling layers by name),
    `prepare_inference(adapter, model, images, devices, variant)`, `on_host()` (where a model is built) and `unfilled`
    (parity.api.adapters.Trained's: a function, or None) serve every Keras model on that backend."""

    def __init__(self, code: ModuleType, trainer: str, backend: str):
        self.backend = importlib.import_module(backend)
        model_code = importlib.import_module(f"{__package__}.{code.WORKLOAD}")
        super().__init__(code, trainer, model_code, self.backend.unfilled)

    def build(self, *sizes: int, **options: Any) -> Any:
        """As every adapter's, where the backend builds a model (its `on_host()`: Keras 3 on JAX on an accelerator
        builds on the host's CPU; the arrays move to the devices where the model runs)."""
        with self.backend.on_host():
            return super().build(*sizes, **options)

    def variant_model(self, model: Any, options: Any) -> Any:
        """What a variant with these options runs: its own copy of `model` ('+unroll', built where build builds), the
        model's weights on it, or the model itself."""
        with self.backend.on_host():
            copy = self.unfilled_of(lambda: self.model_code.variant_copy(model, options))
        if copy is not model:
            copy.set_weights(model.get_weights())
        return copy

    def loss_and_grads(self, model: Any, x: np.ndarray, y: np.ndarray) -> Gradients:
        check_examples(x, y, 1)
        return self.backend.loss_and_grads(self.owned(model), x, y, self.model_code.POOLS)

    def prepare_inference(self, model: Any, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
        check_images(images)  # once, here: not in the timed call
        return self.backend.prepare_inference(self, self.owned(model), images, devices, variant)


def mixed_precision(model, float32: Sequence[str] = ()) -> keras.Sequential:
    """A copy of `model` under Keras's 'mixed_bfloat16' policy, layer by layer (a global policy would change
    every model the process builds afterwards): bfloat16 compute, float32 variables. The softmax layer (the model's
    last: the CNN's and the LSTM's) keeps 'float32', as Keras's mixed-precision guide prescribes for a model's
    output, so the loss is float32 too; so do the layers named in `float32`. BatchNormalization upcasts its bfloat16
    input and computes statistics and normalisation in float32 (Keras's own rule), then casts its output to
    bfloat16. Weights are not copied: set them on the copy."""
    keep = {model.layers[-1].name, *float32}

    def layer(src):
        config = {**src.get_config(), "dtype": "float32" if src.name in keep else "mixed_bfloat16"}
        return src.__class__.from_config(config)

    return keras.models.clone_model(model, clone_function=layer)


def get_weights(model) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order."""
    return [np.asarray(w) for w in model.get_weights()]


def count_params(model) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them."""
    t = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    n = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return {"total": t + n, "trainable": t, "non_trainable": n}


def float32_blocks(model, x: np.ndarray, ends: dict[str, str]) -> dict[str, np.ndarray]:
    """Inference: the output of each layer named in `ends` (layer name -> block name) as float32 NumPy, by block name
    (a mixed-precision copy's bfloat16 ones upcast)."""
    out, h = {}, keras.ops.convert_to_tensor(np.asarray(x, np.float32))
    for layer in model.layers:
        h = layer(h, training=False)
        if layer.name in ends:
            out[ends[layer.name]] = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(h, "float32")))
    return out


def cross_entropy(probs, y):
    """Mean sparse cross-entropy of the model's softmax output and integer labels, as Keras's compiled loss takes
    it. The backends differ here: on TensorFlow Keras computes it from the softmax's cached logits, on JAX from the
    probabilities, clipped to [1e-7, 1 - 1e-7] (keras.losses.sparse_categorical_crossentropy, from_logits=False),
    so a sample whose label's probability is under 1e-7 adds no gradient there. Where that matters, train the
    logits_copy with logits_loss instead."""
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(y, probs))


def logits_copy(model) -> keras.Sequential:
    """A copy of `model` (its layers and their dtype policies, not its weights: set them on the copy) whose last
    layer outputs the logits: the softmax replaced by a float32 identity, for a loss computed from the logits
    (logits_loss). The softmax holds no weight, so both take the same weights in the same order. The softmax is the
    model's last layer: the CNN's and the LSTM's."""
    softmax = model.layers[-1].name

    def layer(src):
        if src.name != softmax:
            return src.__class__.from_config(src.get_config())
        return keras.layers.Activation("linear", dtype="float32", name=f"{softmax}_logits")

    return keras.models.clone_model(model, clone_function=layer)


def unfilled(build: Callable[[], Any]) -> Any:
    """The model build() makes (and any it copies on the way), each weight zeros from NumPy, not its initialiser's
    values, for set_weights to replace: built in Keras's stateless scope, where its variables wait uninitialised, then
    initialised at once (Keras's deferred initialisation, variables.initialize_all_variables). Only an Initializer's
    values are left out: a dropout layer's seed state keeps its own."""
    with keras.StatelessScope(initialize_variables=False):
        model = build()
    for v in global_state.get_global_attribute("uninitialized_variables", []):
        if isinstance(v._initializer, keras.initializers.Initializer):  # its private slot: Keras 3 reads it here
            v._initializer = _zeros
    initialize_all_variables()
    return model


def _zeros(shape, dtype=None) -> np.ndarray:
    return np.zeros(shape, dtype or "float32")


def trained_state(m) -> list[np.ndarray]:
    """Every variable of a compiled model and of its built optimizer, as NumPy, in order: what a Keras trainer holds
    at its start for its rewind (restore_state)."""
    return [np.array(v.numpy()) for v in m.variables + m.optimizer.variables]


def restore_state(m, values: list[np.ndarray]) -> None:
    """Every variable trained_state read, set back (inside the trainer's scope and device)."""
    for v, a in zip(m.variables + m.optimizer.variables, values, strict=True):
        v.assign(a)


def logits_loss() -> keras.losses.Loss:
    """The sparse cross-entropy from the logits: what TensorFlow's Keras computes for a softmax output (from its
    cached logits) and Flax from its logits, set explicitly so that Keras on JAX computes it too."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def check_no_dropout(model) -> None:
    """loss_and_grads compares without dropout. Raises ValueError where a dropout layer has a rate."""
    if any(layer.rate for layer in model.layers if isinstance(layer, keras.layers.Dropout)):
        raise ValueError("loss_and_grads compares without dropout: build the model with dropout=False")


class StepLogs(keras.callbacks.Callback):
    """Per-step loss and accuracy from fit's running means (Keras logs the mean over the epoch so far, once per
    execution: every step, or every steps_per_execution steps)."""

    def on_epoch_begin(self, epoch, logs=None):
        self.means = []

    def on_train_batch_end(self, batch, logs=None):  # batch: the execution's last step (as if it were full)
        self.means.append((batch + 1, float(logs["loss"]), float(logs["accuracy"])))

    def per_step(self, steps: int) -> np.ndarray:
        """(steps, 2): each step's loss and accuracy; under steps_per_execution, its execution's mean."""
        out, done, prev = np.zeros((steps, 2)), 0, np.zeros(2)
        for end, *mean in self.means:
            end = min(end, steps)  # the epoch's last execution may be shorter
            total = np.array(mean) * end
            out[done:end] = (total - prev) / (end - done)
            done, prev = end, total
        return out
