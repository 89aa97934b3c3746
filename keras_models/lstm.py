"""The row LSTM in Keras 3, backend-agnostic: its Sequential model from the declared architecture (parity.api.lstm),
its unrolled and mixed-precision copies, its blocks' outputs, its weights, and which kernel its LSTM layers run. The
same code runs on the TensorFlow backend (tf_impl) and the JAX backend (keras_jax_impl)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras
import numpy as np
from keras.src import backend as keras_backend  # the function Keras's LSTM tries first (kernel_path)

from keras_models import models
from keras_models.models import count_params, get_weights  # noqa: F401 (every Keras model's, as this model's)
from parity.api.inputs import check_seed, check_units
from parity.api.lstm import PIXEL_SCALE, LstmArchitecture, check_lstm_weights

# What every model's code declares alike (its adapter, keras_models.models.KerasTrained, knows a model by its name,
# which copies keep):
NAME = "fashion_mnist_lstm"
TRAIN, INFER = "lstm_train", "lstm_infer"  # its row kinds: each Keras adapter declares its variants of them
WORKLOAD, MODEL = "lstm", NAME  # its workload, and the name of what it builds (parity.api.adapters)
FIRST = "lstm1"  # the layer whose compute dtype a trainer reports
BATCHNORM = False  # no BatchNorm: no statistics to take per replica or over the global batch
POOLS = ()  # no max pooling: no gradient routing
# Keras's loop over the steps where it takes no cuDNN kernel and does not unroll, by backend (keras.src.backend's rnn)
GENERIC_LOOP = {"tensorflow": "Keras's generic loop (tf.while_loop)", "jax": "Keras's generic loop (lax.scan)"}


def build(units: int, seed: int = 0) -> keras.Sequential:
    """The row LSTM of parity.api.lstm at `units` per LSTM layer, every numeric choice set explicitly. Raises
    ValueError on units or a seed out of their bounds (parity.api.inputs: check_units, check_seed)."""
    units, seed = check_units(units), check_seed(seed)
    arch = LstmArchitecture(units)
    rows, scale, lstm1, lstm2, dense, probs = arch.names
    seeds = itertools.count(seed * 1000)  # each initialiser its own seed, in the model's order, as the CNN's build

    def lstm(name: str, sequences: bool) -> keras.layers.LSTM:
        return keras.layers.LSTM(
            units,
            activation="tanh",  # the candidate's and the output's squashing (Keras's and Flax's default)
            recurrent_activation="sigmoid",  # the gates': Keras 3's default (older Keras: hard_sigmoid), Flax's
            use_bias=True,  # one bias of 4U, gates i, f, c, o (Flax: on the hidden-state Linear only)
            unit_forget_bias=True,  # the forget gate's bias starts at 1 (Flax's at 0)
            kernel_initializer=keras.initializers.GlorotUniform(seed=next(seeds)),  # Keras's (Flax: lecun_normal)
            recurrent_initializer=keras.initializers.Orthogonal(seed=next(seeds)),  # both frameworks' default
            bias_initializer="zeros",  # every gate's bias but the forget gate's (unit_forget_bias)
            dropout=0.0,  # the row LSTM has none (a recurrent dropout would also rule cuDNN out)
            recurrent_dropout=0.0,
            return_sequences=sequences,  # lstm1: its whole sequence, for lstm2; lstm2: its last hidden state
            unroll=False,  # Keras's symbolic loop (or cuDNN on a GPU); unrolled() makes the unrolled copy
            # Keras's default, cuDNN where its conditions hold (kernel_path says which); not in get_config, so a
            # clone takes the default again
            use_cudnn="auto",
            # the fused form, one (inputs, 4U) product and one (U, 4U) a step: Keras's default and Flax's
            # OptimizedLSTMCell's layout (1 splits them per gate); not in get_config either
            implementation=2,
            name=name,
        )

    return keras.Sequential(
        [
            keras.Input(arch.image),
            keras.layers.Reshape((arch.steps, arch.features), name=rows),  # one image row a step
            keras.layers.Rescaling(PIXEL_SCALE, name=scale),  # raw pixels would saturate the gates
            lstm(lstm1, True),
            lstm(lstm2, False),
            keras.layers.Dense(
                arch.classes,
                kernel_initializer=keras.initializers.GlorotUniform(seed=next(seeds)),  # Keras's (Flax: lecun_normal)
                bias_initializer="zeros",
                name=dense,
            ),
            keras.layers.Activation("softmax", name=probs),
        ],
        name=NAME,
    )


def architecture(model) -> LstmArchitecture:
    """The declared architecture `model` was built from (its width read off its first LSTM layer)."""
    return LstmArchitecture(model.get_layer(LstmArchitecture(1).names[2]).units)


def lstm_layers(model) -> list[keras.layers.LSTM]:
    return [layer for layer in model.layers if isinstance(layer, keras.layers.LSTM)]


def unrolled(model) -> keras.Sequential:
    """A copy of `model` whose LSTM layers unroll their 28 steps (Keras's LSTM(unroll=True): a Python loop, no
    symbolic one, and never cuDNN). Weights are not copied: set them on the copy."""

    def layer(src):
        config = src.get_config()
        if isinstance(src, keras.layers.LSTM):
            config["unroll"] = True
        return src.__class__.from_config(config)

    return keras.models.clone_model(model, clone_function=layer)


def variant_copy(model, options) -> keras.Sequential:
    """The model a variant with `options` runs, its weights not set: the unrolled copy for '+unroll', else the model
    itself."""
    return unrolled(model) if getattr(options, "unroll", False) else model


def mixed_precision(model) -> keras.Sequential:
    """A copy under Keras's 'mixed_bfloat16' policy (keras_models.models.mixed_precision: the softmax float32), the
    rows and their scaling kept float32 too: in bfloat16 Rescaling would round 1/255 to 1/256, every pixel off by
    0.4% the same way; the LSTM casts its float32 input to bfloat16, as Flax's cell does. Set the weights on it."""
    rows, scale = architecture(model).names[:2]
    return models.mixed_precision(model, float32=(rows, scale))


def set_weights(model, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch (a list
    made for another width included)."""
    check_lstm_weights(weights, architecture(model).units)
    model.set_weights([np.asarray(w) for w in weights])


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference: every block's output (parity.api.lstm's blocks: the first LSTM's sequence, the second's last hidden
    state, the logits, the probabilities) as float32 NumPy (a mixed-precision copy's bfloat16 ones upcast)."""
    return models.float32_blocks(model, x, architecture(model).blocks)


def kernel_path(model) -> str:
    """Which kernel the model's LSTM layers run on this backend and the current device, decided as Keras's LSTM
    decides it (LSTM.inner_loop): it calls the backend's lstm(), which runs cuDNN's kernel where cuDNN's conditions
    hold (tanh, sigmoid, use_bias, no unroll, a GPU: keras.src.backend's cudnn_ok) and the op runs, and raises
    NotImplementedError otherwise; then Keras falls back to its generic loop, silently. Here that call is made on
    one step of zeros in the layer's compute dtype: 'cuDNN', 'unrolled' or GENERIC_LOOP's."""
    paths = {_path(layer) for layer in lstm_layers(model)}
    return paths.pop() if len(paths) == 1 else " / ".join(sorted(paths))


def _path(layer: keras.layers.LSTM) -> str:
    if layer.use_cudnn in ("auto", True) and not layer.cell.recurrent_dropout and _cudnn_runs(layer):
        return "cuDNN"
    return "unrolled" if layer.unroll else GENERIC_LOOP[keras.backend.backend()]


def _cudnn_runs(layer: keras.layers.LSTM) -> bool:
    cell, dtype = layer.cell, layer.compute_dtype
    units, inputs = cell.units, cell.kernel.shape[0]

    def zeros(*shape):
        return keras.ops.zeros(shape, dtype)

    try:
        keras_backend.lstm(
            zeros(1, 1, inputs),
            zeros(1, units),
            zeros(1, units),
            None,  # no mask: the rows are never padded
            kernel=zeros(inputs, 4 * units),
            recurrent_kernel=zeros(units, 4 * units),
            bias=zeros(4 * units) if cell.use_bias else None,
            activation=cell.activation,
            recurrent_activation=cell.recurrent_activation,
            return_sequences=layer.return_sequences,
            go_backwards=layer.go_backwards,
            unroll=layer.unroll,
        )
    except NotImplementedError:
        return False
    return True
