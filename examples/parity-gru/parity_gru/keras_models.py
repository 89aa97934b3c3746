"""The GRU in Keras 3, backend-agnostic: the model code both Keras adapters (tf_impl.py on TensorFlow,
keras_jax_impl.py on JAX) run, found by parity's Keras adapter as keras_models' module of the workload 'gru'. A
Sequential model with every numeric choice set explicitly; weights in Keras's own order and layout."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras
import numpy as np

from parity_gru.spec import PIXEL_SCALE, GruArchitecture, check_gru_weights

NAME = "fashion_mnist_gru"
WORKLOAD, MODEL = "gru", NAME  # its workload, and the name of what it builds: how its adapter knows its models
TRAIN, INFER = "gru_train", "gru_infer"
FIRST = "gru"  # the layer whose compute dtype a trainer reports
BATCHNORM = False
POOLS = ()  # no max pooling: no gradient routing


def build(units: int, seed: int = 0) -> keras.Sequential:
    """The GRU of parity_gru.spec at `units`."""
    arch = GruArchitecture(units)
    seeds = itertools.count(seed * 1000)
    rows, scale, gru, dense, probs = arch.names
    return keras.Sequential(
        [
            keras.Input(arch.image),
            keras.layers.Reshape((arch.steps, arch.features), name=rows),  # one image row a step
            keras.layers.Rescaling(PIXEL_SCALE, name=scale),
            keras.layers.GRU(
                units,
                activation="tanh",
                recurrent_activation="sigmoid",  # Keras 3's default, PyTorch's and the oracle's
                reset_after=True,  # the recurrent bias inside r * (.): Keras 3's default and PyTorch's form
                kernel_initializer=keras.initializers.GlorotUniform(seed=next(seeds)),
                recurrent_initializer=keras.initializers.Orthogonal(seed=next(seeds)),
                bias_initializer="zeros",
                use_cudnn=False,  # the generic loop on every device: the same arithmetic as the other frameworks'
                name=gru,
            ),
            keras.layers.Dense(
                arch.classes, kernel_initializer=keras.initializers.GlorotUniform(seed=next(seeds)), name=dense
            ),
            keras.layers.Activation("softmax", name=probs),
        ],
        name=NAME,
    )


def architecture(model) -> GruArchitecture:
    return GruArchitecture(model.get_layer("gru").units)


def variant_copy(model, options):
    """The model every variant runs: the model itself."""
    return model


def mixed_precision(model):
    raise ValueError("the GRU example offers no bfloat16 variant")


def get_weights(model) -> list[np.ndarray]:
    return [np.asarray(w) for w in model.get_weights()]


def set_weights(model, weights: Sequence[np.ndarray]) -> None:
    check_gru_weights(weights, architecture(model).units)
    model.set_weights([np.asarray(w) for w in weights])


def float64(model) -> keras.Sequential:
    """A copy of the model computing in float64, its weights widened exactly: the float64 oracle's run, on TensorFlow
    or on JAX with x64 on (parity.workloads.trained.float64). Optional: only a framework that is a workload's float64
    oracle has it."""

    def layer(src):
        return src.__class__.from_config({**src.get_config(), "dtype": "float64"})

    copy = keras.models.clone_model(model, clone_function=layer)
    # Rescaling casts its Python float to float64 through float32 on TensorFlow: 1/255 held exactly
    copy.get_layer(GruArchitecture(1).names[1]).scale = np.asarray(PIXEL_SCALE, np.float64)
    copy.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
    return copy


def count_params(model) -> dict[str, int]:
    n = int(model.count_params())
    return {"total": n, "trainable": n, "non_trainable": 0}


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block's output (parity_gru.spec's blocks) as float32 NumPy (inference)."""
    out, h, ends = {}, keras.ops.convert_to_tensor(np.asarray(x, np.float32)), architecture(model).blocks
    for layer in model.layers:
        h = layer(h, training=False)
        if layer.name in ends:
            out[ends[layer.name]] = np.asarray(keras.ops.convert_to_numpy(h))
    return out


def kernel_path(model) -> str:
    """The GRU's loop: Keras's generic one (cuDNN is turned off), on either backend."""
    return f"Keras's generic loop ({'tf.while_loop' if keras.backend.backend() == 'tensorflow' else 'lax.scan'})"
