"""The row LSTM in Keras 3 on the JAX backend: the model is keras_models.lstm's (the code tf_impl runs on
TensorFlow); here what needs JAX itself: which kernel its layers run on a device, and its inference copy. The generic
model functions (keras_jax_impl.cnn) and the Trainer (keras_jax_impl.cnn_train) take it as they take the CNN."""

from __future__ import annotations

import jax

from keras_jax_impl.catalog import variant as variant_record
from keras_models import lstm
from keras_models.lstm import build_lstm, is_lstm  # noqa: F401 (the shared model code, re-exported as this surface's)


def kernel_path(model, device: jax.Device) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): "Keras's generic loop
    (lax.scan)" or 'unrolled'; on a GPU, Keras 3.15's JAX backend takes cuDNN's too (jax.experimental.rnn) where its
    conditions hold: 'cuDNN' (unverified here)."""
    with jax.default_device(device):
        return lstm.kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why XLA's cost analysis cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can
    (no LSTM, or unrolled): it counts a while loop's body (lax.scan's) once however many steps it runs."""
    if path in (None, "unrolled"):
        return None
    return f"XLA cost analysis: not counted (the LSTM's {path} is counted for one step, not each step)"


def for_inference(model, variant: str, device: jax.Device):
    """The model prepare_inference runs for `variant` of 'lstm_infer' (the unrolled copy, its weights set, for
    '+unroll'), and its kernel path on `device`.

    Raises:
        ValueError: a variant not among variants("lstm_infer", 1).
    """
    if variant_record("lstm_infer", variant, 1).options.unroll:
        copy = lstm.unrolled(model)
        copy.set_weights(model.get_weights())
        model = copy
    return model, kernel_path(model, device)
