"""The row LSTM in Keras 3 on the TensorFlow backend: the model is keras_models.lstm's (the code keras_jax_impl runs
on JAX); here what needs TensorFlow itself: which kernel a model's recurrent layers run on a device, and whether TF's
profiler can count it. The model functions (tf_impl.models) and the Trainer (tf_impl.train) take every model alike,
through its code (keras_models.models.code_of)."""

from __future__ import annotations

import tensorflow as tf

from keras_models.lstm import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from keras_models.models import code_of


def kernel_path(model, device: str) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): on a CPU "Keras's generic
    loop (tf.while_loop)" or 'unrolled'; on a GPU 'cuDNN' where Keras's conditions hold (unverified here); None for a
    model without recurrent layers (the CNN)."""
    with tf.device(device):
        return code_of(model).kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why TF's profiler cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can (no
    LSTM, or unrolled): it counts the graph's ops, and a symbolic loop's graph holds its body once however many steps
    it runs (cuDNN's, one op without a count)."""
    if path in (None, "unrolled"):
        return None
    return f"TF profiler: not counted (the LSTM's {path} holds one step's ops in its graph, not each step's)"
