"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3, backend-agnostic: its Sequential model from the declared
architecture, weights in Keras's order and its blocks' outputs (what every Keras model shares: keras_models.models).
Every op here is keras.ops, so the same code runs on the TensorFlow backend (tf_impl) and the JAX backend
(keras_jax_impl)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras
import numpy as np

from keras_models.models import count_params, get_weights, mixed_precision  # noqa: F401 (every Keras model's)
from parity.api.cnn import CNN_ARCHITECTURE, check_weights
from parity.api.inputs import check_seed

# What every model's code declares alike (its adapter, keras_models.models.KerasTrained, knows a model by its name,
# which copies keep):
NAME = "fashion_mnist_cnn"
TRAIN, INFER = "cnn_train", "cnn_infer"  # its row kinds: each Keras adapter declares its variants of them
WORKLOAD, MODEL = "cnn", NAME  # its workload, and the name of what it builds (parity.api.adapters)
FIRST = "conv1"  # the layer whose compute dtype a trainer reports
BATCHNORM = True  # its BatchNorm statistics: each replica's share of the batch, or the global batch's
POOLS = tuple(b.names[2] for b in CNN_ARCHITECTURE.convs)  # its max-pooling layers, whose gradient routing is checked


def build(seed: int = 0, dropout: bool = True) -> keras.Sequential:
    """The notebook's Sequential model, built from its declaration (parity.api.cnn.CNN_ARCHITECTURE); dropout=False
    keeps the dropout layers at rate 0 (for parity checks). Raises ValueError on a seed other than an integer from 0
    to parity.api.inputs.MAX_SEED."""
    L, arch, seed = keras.layers, CNN_ARCHITECTURE, check_seed(seed)
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
    return keras.Sequential(layers, name=NAME)


def variant_copy(model, options) -> keras.Sequential:
    """The model a variant with `options` runs, its weights not set: the CNN's variants run the model itself."""
    return model


def kernel_path(model) -> None:
    """Which kernel its recurrent layers run: the CNN has none."""
    return None


def set_weights(model, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch."""
    check_weights(weights)
    model.set_weights([np.asarray(w) for w in weights])


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference (BatchNorm on moving statistics): every block's output as NumPy, by block name."""
    out, h, ends = {}, keras.ops.convert_to_tensor(np.asarray(x, np.float32)), CNN_ARCHITECTURE.blocks
    for layer in model.layers:
        h = layer(h, training=False)
        if layer.name in ends:
            out[ends[layer.name]] = keras.ops.convert_to_numpy(h)
    return out
