"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3, backend-agnostic: its Sequential model from the declared
architecture, its mixed-precision copy, weights in Keras's order, and fit's per-step logs. Every op here is
keras.ops, so the same code runs on the TensorFlow backend (tf_impl) and the JAX backend (keras_jax_impl)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras
import numpy as np

from parity.api.cnn import CNN_ARCHITECTURE, check_weights
from parity.api.inputs import check_seed

# What every model's code declares alike (its adapter, keras_models.models.KerasTrained, knows a model by its name,
# which copies keep):
NAME = "fashion_mnist_cnn"
TRAIN, INFER = "cnn_train", "cnn_infer"  # its row kinds: each Keras adapter declares its variants of them
WORKLOAD, MODEL = "cnn", NAME  # its workload, and the name of what it builds (parity.api.adapters)
FIRST = "conv1"  # the layer whose compute dtype a trainer reports
BATCHNORM = True  # its BatchNorm statistics: each replica's share of the batch, or the global batch's


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


def variant_copy(model, options) -> keras.Sequential:
    """The model a variant with `options` runs, its weights not set: the CNN's variants run the model itself."""
    return model


def kernel_path(model) -> None:
    """Which kernel its recurrent layers run: the CNN has none."""
    return None


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
    out, h, ends = {}, keras.ops.convert_to_tensor(np.asarray(x, np.float32)), CNN_ARCHITECTURE.blocks
    for layer in model.layers:
        h = layer(h, training=False)
        if layer.name in ends:
            out[ends[layer.name]] = keras.ops.convert_to_numpy(h)
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
