"""The surface's model functions in Keras 3 on the TensorFlow backend (parity.api.FrameworkImpl): what needs
TensorFlow itself, gradients, inference and weight files, for every model keras_models builds, each found through
its code (keras_models.models.code_of: a model no module there built is refused)."""

from __future__ import annotations

from types import ModuleType

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_models.cnn import (  # noqa: E402, F401 (the shared model code, re-exported as this surface's)
    check_no_dropout,
    count_params,
    cross_entropy,
    get_weights,
)
from keras_models.models import (  # noqa: E402, F401 (written once for both Keras implementations)
    code_of,
    forward_layers,
    load_weights,
    mixed_precision,
    save_weights,
    set_weights,
)
from parity.api import Gradients, Prepared, adapters  # noqa: E402
from parity.api.inputs import check_examples, check_images  # noqa: E402
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
    check_examples(x, y, 1)  # images and labels the model can take (parity.api.inputs)
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


def prepare_inference(model, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` (inference mode) on devices[0], inputs placed beforehand; for the LSTM, its
    kernel path too.

    Raises:
        ValueError: a variant not among variants("cnn_infer", 1) (another model's: its
            '<workload>_infer'), or images that are not (N, 28, 28, 1) real, finite numbers.
    """
    check_images(images)  # once, here: not in the timed call
    code = code_of(model)
    options = variant_record(code.INFER, variant, 1).options
    copy = code.variant_copy(model, options)
    if copy is not model:  # the variant's own copy ('+unroll'): the model's weights on it
        copy.set_weights(model.get_weights())
    model, path = copy, tf_lstm.kernel_path(copy, devices[0])
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


def adapter(workload: str) -> ModuleType:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing.
    Raises ValueError for a workload it has none for."""
    return adapters.find(__package__, workload)
