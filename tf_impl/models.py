"""What every trained model shares on Keras 3's TensorFlow backend, written once for every model keras_models builds
(mirror image of jax_impl.models): gradients, inference, and which kernel a model's recurrent layers run and
whether the FLOP count can count it. Each model's adapter (keras_models.models.KerasTrained) calls these."""

from __future__ import annotations

from contextlib import nullcontext
from types import ModuleType

import keras
import numpy as np
import tensorflow as tf

from keras_models.models import KerasTrained, check_no_dropout, cross_entropy
from parity.api import Gradients, Prepared
from tf_impl.catalog import variant as variant_record
from tf_impl.devices import graph_flops, placement

if keras.backend.backend() != "tensorflow":
    raise ImportError(f"tf_impl needs Keras's TensorFlow backend, got {keras.backend.backend()!r}")


def on_host():
    """Where a Keras model is built (KerasTrained.build): where it runs, on TensorFlow."""
    return nullcontext()


# How a model given its weights is built (KerasTrained.build_with): by build() itself, its initialisers run (TensorFlow
# runs them in milliseconds; Keras 3 on JAX leaves them out: keras_models.models.unfilled)
unfilled = None


def loss_and_grads(model, x: np.ndarray, y: np.ndarray, pools: tuple[str, ...] = ()) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer (`pools`, by name) routed its gradient in this pass (a model without any: routing []).

    Batch statistics as in training, dropout off (build the model with dropout=False); the model
    itself is not changed (the moving statistics the call updates are restored).
    """
    check_no_dropout(model)
    saved = model.get_weights()
    pool_inputs = []
    with tf.GradientTape() as tape:
        h = tf.convert_to_tensor(x, tf.float32)
        for layer in model.layers:  # what model(x, training=True) runs, op for op, keeping the pooling inputs
            if layer.name in pools:
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
    path = kernel_path(adapter.model_code, model, devices[0])
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
        lambda: (None, uncounted(path)) if uncounted(path) else graph_flops(f, x),
        kernel_path=path,
    )


def kernel_path(code: ModuleType, model, device: str) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): on a CPU "Keras's generic
    loop (tf.while_loop)" or 'unrolled'; on a GPU 'cuDNN' where Keras's conditions hold (unverified here); None for a
    model without recurrent layers (the CNN). `code`: the model's Keras code (keras_models.<workload>)."""
    with tf.device(device):
        return code.kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why TF's profiler cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can (no
    LSTM, or unrolled): it counts the graph's ops, and a symbolic loop's graph holds its body once however many steps
    it runs (cuDNN's, one op without a count)."""
    if path in (None, "unrolled"):
        return None
    return f"TF profiler: not counted (the LSTM's {path} holds one step's ops in its graph, not each step's)"
