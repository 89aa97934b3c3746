"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3 (TensorFlow backend), trained with model.fit."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from parity.api import Gradients, Prepared  # noqa: E402
from parity.api.cnn import CNN_ARCHITECTURE, check_weights  # noqa: E402
from parity.api.weights import load_npz, save_npz  # noqa: E402
from tf_impl.catalog import variant as variant_record  # noqa: E402
from tf_impl.devices import graph_flops, placement  # noqa: E402

if keras.backend.backend() != "tensorflow":
    raise ImportError(f"tf_impl needs Keras's TensorFlow backend, got {keras.backend.backend()!r}")


def build_cnn(seed: int = 0, dropout: bool = True) -> keras.Sequential:
    """The notebook's Sequential model, built from its declaration (parity.api.cnn.CNN_ARCHITECTURE); dropout=False
    keeps the dropout layers at rate 0 (for parity checks)."""
    L, arch = keras.layers, CNN_ARCHITECTURE
    # each initialiser and dropout layer its own seed, in the model's order (kernels from seed * 1000, dropouts + 10)
    kernel_seeds, drop_seeds = itertools.count(seed * 1000), itertools.count(seed * 1000 + 10)

    def init():
        return keras.initializers.GlorotUniform(seed=next(kernel_seeds))

    def drop(rate, name):
        return L.Dropout(rate if dropout else 0.0, seed=next(drop_seeds), name=name)

    layers = [keras.Input(arch.image)]
    for b in arch.convs:
        bn, conv, pool, drop_name = b.names
        layers += [
            L.BatchNormalization(epsilon=arch.bn_epsilon, momentum=arch.bn_momentum, name=bn),
            L.Conv2D(
                b.filters, (b.kernel, b.kernel), padding="same", activation="elu", kernel_initializer=init(), name=conv
            ),
            L.MaxPooling2D(pool_size=(b.pool, b.pool), strides=(b.pool, b.pool), name=pool),
            drop(b.dropout, drop_name),
        ]
    layers.append(L.Flatten(name="flatten"))
    for d in arch.dense:
        dense, elu, drop_name = d.names
        layers += [
            L.Dense(d.units, kernel_initializer=init(), name=dense),
            L.Activation("elu", name=elu),
            drop(d.dropout, drop_name),
        ]
    dense, probs = arch.output.names
    layers += [
        L.Dense(arch.output.units, kernel_initializer=init(), name=dense),
        L.Activation("softmax", name=probs),
    ]
    return keras.Sequential(layers, name="fashion_mnist_cnn")


def mixed_precision(model) -> keras.Sequential:
    """A copy of `model` under Keras's 'mixed_bfloat16' policy, layer by layer (a global policy would change
    every model the process builds afterwards): bfloat16 compute, float32 variables. The softmax layer keeps
    'float32', as Keras's mixed-precision guide prescribes for a model's output, so the loss is float32 too.
    BatchNormalization upcasts its bfloat16 input and computes statistics and normalisation in float32 (Keras's
    own rule), then casts its output to bfloat16. Weights are not copied: set them on the copy."""

    def layer(src):
        softmax = src.name == CNN_ARCHITECTURE.output.names[-1]
        config = {**src.get_config(), "dtype": "float32" if softmax else "mixed_bfloat16"}
        return src.__class__.from_config(config)

    return keras.models.clone_model(model, clone_function=layer)


def get_weights(model) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order."""
    return [np.asarray(w) for w in model.get_weights()]


def set_weights(model, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch."""
    check_weights(weights)
    model.set_weights([np.asarray(w) for w in weights])


def count_params(model) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them."""
    t = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    n = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return {"total": t + n, "trainable": t, "non_trainable": n}


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference (BatchNorm on moving statistics): every block's output as NumPy, by block name."""
    out, h, ends = {}, tf.convert_to_tensor(x, tf.float32), CNN_ARCHITECTURE.blocks
    for layer in model.layers:
        h = layer(h, training=False)
        if layer.name in ends:
            out[ends[layer.name]] = h.numpy()
    return out


def cross_entropy(probs, y):
    """Mean sparse cross-entropy of the model's output and integer labels: jax_impl.cnn.cross_entropy's order (its
    model's output is the logits, Keras's the softmax). On the TF backend Keras computes it from the softmax's cached
    logits (no clipping of p)."""
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, probs))


def loss_and_grads(model, x: np.ndarray, y: np.ndarray) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer routed its gradient in this pass.

    Batch statistics as in training, dropout off (build the model with dropout=False); the model
    itself is not changed (the moving statistics the call updates are restored).
    """
    if any(layer.rate for layer in model.layers if isinstance(layer, keras.layers.Dropout)):
        raise ValueError("loss_and_grads compares without dropout: build the model with dropout=False")
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
    """Softmax probabilities of `images` (inference mode) on devices[0], inputs placed beforehand.

    Raises:
        ValueError: a variant not among variants("cnn_infer", 1).
    """
    variant_record("cnn_infer", variant, 1)
    with tf.device(devices[0]):
        x = tf.constant(images, tf.float32)
    f = tf.function(lambda x: model(x, training=False))

    def run():
        with tf.device(devices[0]):
            return f(x)

    return Prepared(
        run, lambda o: tuple(o.shape), lambda o, idx: o.numpy()[list(idx)], placement, lambda: graph_flops(f, x)
    )


def save_weights(model, path) -> None:
    """Save to .npz in Keras's get_weights() order: loadable by either framework."""
    save_npz(get_weights(model), path)


def load_weights(model, path) -> None:
    """Load a .npz written by either framework's save_weights (checked like set_weights)."""
    set_weights(model, load_npz(path))
