"""The row LSTM in Keras 3 on the TensorFlow backend: the model is keras_models.lstm's (the code keras_jax_impl runs
on JAX); here what needs TensorFlow itself: which kernel its layers run on a device, and its inference copy. The
generic model functions (tf_impl.cnn) and the Trainer (tf_impl.cnn_train) take it as they take the CNN."""

from __future__ import annotations

import tensorflow as tf

from keras_models import lstm
from keras_models.lstm import build_lstm, is_lstm  # noqa: F401 (the shared model code, re-exported as this surface's)
from tf_impl.catalog import variant as variant_record


def kernel_path(model, device: str) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): on a CPU "Keras's generic
    loop (tf.while_loop)" or 'unrolled'; on a GPU 'cuDNN' where Keras's conditions hold (unverified here)."""
    with tf.device(device):
        return lstm.kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why TF's profiler cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can (no
    LSTM, or unrolled): it counts the graph's ops, and a symbolic loop's graph holds its body once however many steps
    it runs (cuDNN's, one op without a count)."""
    if path in (None, "unrolled"):
        return None
    return f"TF profiler: not counted (the LSTM's {path} holds one step's ops in its graph, not each step's)"


def for_inference(model, variant: str, device: str):
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
