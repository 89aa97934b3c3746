"""The adapters of Keras 3 on the TensorFlow backend (parity.api.adapters): an operation's module as it is, a trained
model's bound to the Keras model code (keras_models.models.KerasTrained), to the one trainer (tf_impl.train) and to
what needs TensorFlow itself, written here once for every model keras_models builds: gradients and inference."""

from __future__ import annotations

from typing import Any

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_models.cnn import check_no_dropout, cross_entropy  # noqa: E402
from keras_models.models import KerasTrained  # noqa: E402
from parity.api import Gradients, Prepared, adapters  # noqa: E402
from tf_impl import lstm as tf_lstm  # noqa: E402
from tf_impl.catalog import variant as variant_record  # noqa: E402
from tf_impl.devices import graph_flops, placement  # noqa: E402

if keras.backend.backend() != "tensorflow":
    raise ImportError(f"tf_impl needs Keras's TensorFlow backend, got {keras.backend.backend()!r}")


def loss_and_grads(model, x: np.ndarray, y: np.ndarray) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer routed its gradient in this pass (a model without any: routing []).

    Batch statistics as in training, dropout off (build the model with dropout=False); the model
    itself is not changed (the moving statistics the call updates are restored).
    """
    check_no_dropout(model)
    saved = model.get_weights()
    pool_inputs = []
    with tf.GradientTape() as tape:
        h = tf.convert_to_tensor(x, tf.float32)
        for layer in model.layers:  # what model(x, training=True) runs, op for op, keeping the pooling inputs
            if isinstance(layer, keras.layers.MaxPooling2D):
                pool_inputs.append((layer, h))
            h = layer(h, training=True)
        loss = cross_entropy(h, tf.convert_to_tensor(y))
    grads = tape.gradient(loss, model.trainable_weights)
    model.set_weights(saved)
    routing = []
    for layer, a in pool_inputs:  # TF's own max-pool gradient on the same activations
        with tf.GradientTape() as t:
            t.watch(a)
            out = layer(a)
        routing.append(t.gradient(out, a, output_gradients=tf.ones_like(out)).numpy())
    return Gradients(float(loss), [g.numpy() for g in grads], routing)


def prepare_inference(adapter: KerasTrained, model, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` (inference mode) on devices[0], inputs placed beforehand; for the LSTM, its
    kernel path too. Raises ValueError for a variant not of the adapter's INFER ('<workload>_infer')."""
    options = variant_record(adapter.INFER, variant, 1).options
    model = adapter.variant_model(model, options)
    path = tf_lstm.kernel_path(adapter.model_code, model, devices[0])
    with tf.device(devices[0]):
        x = tf.constant(images, tf.float32)
    f = tf.function(lambda x: model(x, training=False), jit_compile=True if getattr(options, "xla", False) else None)

    def run():
        with tf.device(devices[0]):
            return f(x)

    return Prepared(
        run,
        lambda o: tuple(o.shape),
        lambda o, idx: o.numpy()[list(idx)],
        placement,
        lambda: (None, tf_lstm.uncounted(path)) if tf_lstm.uncounted(path) else graph_flops(f, x),
        kernel_path=path,
    )


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's bound to the Keras model code, tf_impl.train's trainer and this module's gradients and inference
    (keras_models.models.KerasTrained). Raises ValueError for a workload it has none for."""
    return adapters.bound(__package__, workload, lambda code: KerasTrained(code, "tf_impl.train", __name__))
