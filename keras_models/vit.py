"""The small ViT in Keras 3, backend-agnostic: its Sequential model from the declared architecture (parity.api.vit),
its encoder block and position embedding as layers of their own, its mixed-precision copy, its blocks' outputs and
its weights. The same code runs on the TensorFlow backend (tf_impl) and the JAX backend (keras_jax_impl).

Attention is Keras's MultiHeadAttention as it comes: its weights are already the contract's layout, and its
flash_attention is left at Keras's default (None: the backend decides; on a CPU neither backend takes a fused
kernel, and asked for one, TensorFlow refuses on every device and JAX without cuDNN or a TPU)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import keras
import numpy as np

from keras_models import models
from keras_models.models import count_params, get_weights  # noqa: F401 (every Keras model's, as this model's)
from parity.api.inputs import check_seed, check_vit
from parity.api.vit import LN_EPSILON, PIXEL_SCALE, VitArchitecture, check_vit_weights

# What every model's code declares alike (its adapter, keras_models.models.KerasTrained, knows a model by its name,
# which copies keep):
NAME = "fashion_mnist_vit"
TRAIN, INFER = "vit_train", "vit_infer"  # its row kinds: each Keras adapter declares its variants of them
WORKLOAD, MODEL = "vit", NAME  # its workload, and the name of what it builds (parity.api.adapters)
FIRST = "patch_embed"  # the layer whose compute dtype a trainer reports (the pixels' scaling stays float32)
BATCHNORM = False  # no BatchNorm: no statistics to take per replica or over the global batch
POOLS = ()  # no max pooling: no gradient routing


def _glorot(seed: int) -> keras.initializers.Initializer:
    return keras.initializers.GlorotUniform(seed=seed)  # Keras's default for every kernel, seeded


class PositionEmbedding(keras.layers.Layer):
    """The patch embedding's (7, 7, D) map read as its 49 tokens in row-major order, plus a learned (tokens, D)
    weight named 'embeddings' (the contract's 'pos_embed.embeddings')."""

    def __init__(self, tokens: int, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.tokens, self.seed = tokens, seed

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.tokens, input_shape[-1]),
            # the ViT reference code's (google-research/vision_transformer); Keras has no default for a layer's own
            initializer=keras.initializers.RandomNormal(stddev=0.02, seed=self.seed),
        )

    def call(self, x):
        tokens = keras.ops.reshape(x, (-1, self.tokens, x.shape[-1]))
        return tokens + keras.ops.cast(self.embeddings, tokens.dtype)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.tokens, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "tokens": self.tokens, "seed": self.seed}


class EncoderBlock(keras.layers.Layer):
    """One pre-norm encoder block: h = x + attn(ln1(x)), out = h + mlp2(gelu(mlp1(ln2(h)))), its sublayers named
    '<name>_ln1', '<name>_attn', '<name>_ln2', '<name>_mlp1', '<name>_mlp2' (VitArchitecture.block_weights' order,
    which is also their weights' order). Each sublayer computes under the block's dtype policy."""

    def __init__(self, dim: int, heads: int, mlp: int, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.heads, self.mlp, self.seed = dim, heads, mlp, seed
        name, policy, seeds = self.name, self.dtype_policy, itertools.count(seed)

        def norm(suffix: str) -> keras.layers.LayerNormalization:
            # epsilon: the contract's LN_EPSILON, where Keras's default is 1e-3; over the features, biased variance
            return keras.layers.LayerNormalization(axis=-1, epsilon=LN_EPSILON, center=True, scale=True,
                                                   name=f"{name}_{suffix}", dtype=policy)  # fmt: skip

        def dense(units: int, suffix: str) -> keras.layers.Dense:
            return keras.layers.Dense(units, kernel_initializer=_glorot(next(seeds)), bias_initializer="zeros",
                                      name=f"{name}_{suffix}", dtype=policy)  # fmt: skip

        self.ln1 = norm("ln1")
        self.attn = keras.layers.MultiHeadAttention(
            num_heads=heads,
            key_dim=dim // heads,  # the contract's head_dim: the query and key kernels (D, H, hd)
            value_dim=dim // heads,  # the value kernel (D, H, hd) and the output kernel (H, hd, D)
            dropout=0.0,  # none (flash attention, where a backend has it, also requires none)
            use_bias=True,  # the (H, hd) biases and the output's (D,)
            output_shape=None,  # the query's width, D
            attention_axes=None,  # Keras's default: every axis but the batch's and the features', the tokens'
            flash_attention=None,  # Keras's default: the backend decides (the module's docstring)
            kernel_initializer=_glorot(next(seeds)),  # redrawn per projection in build
            bias_initializer="zeros",
            name=f"{name}_attn",
            dtype=policy,
        )
        self.ln2 = norm("ln2")
        self.mlp1, self.mlp2 = dense(mlp, "mlp1"), dense(dim, "mlp2")
        self._attn_seeds = [next(seeds) for _ in range(4)]

    def build(self, input_shape):
        self.ln1.build(input_shape)
        self.attn.build(input_shape, input_shape)
        # MultiHeadAttention gives its four projections clones of its one initialiser: seeded, they would draw the
        # same values (q = k = v at the start). Each its own seed instead, in the order query, key, value, output.
        kernels = [v for v in self.attn.weights if v.name == "kernel"]
        for v, seed in zip(kernels, self._attn_seeds, strict=True):
            v.assign(_glorot(seed)(v.shape, v.dtype))
        self.ln2.build(input_shape)
        self.mlp1.build(input_shape)
        self.mlp2.build((*input_shape[:-1], self.mlp))

    def call(self, x):
        y = self.ln1(x)
        h = x + self.attn(y, y)  # self-attention: queries, keys and values all from ln1(x); no mask
        z = self.mlp1(self.ln2(h))
        return h + self.mlp2(keras.activations.gelu(z, approximate=False))  # the contract's GELU: exact (erf)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "dim": self.dim, "heads": self.heads, "mlp": self.mlp, "seed": self.seed}


def build(dim: int, depth: int, heads: int, mlp: int, seed: int = 0) -> keras.Sequential:
    """The ViT of parity.api.vit (VitArchitecture(dim, depth, heads, mlp)), every numeric choice set explicitly;
    Keras's initialisers, each seeded from `seed`. Raises ValueError on sizes or a seed out of their bounds
    (parity.api.inputs: check_vit, check_seed)."""
    seed, arch = check_seed(seed), check_vit(dim, depth, heads, mlp)
    dim, heads, mlp = arch.dim, arch.heads, arch.mlp  # Python ints: Keras's layers refuse NumPy's
    scale, patch, pos, *rest = arch.names
    norm, pool, dense, probs = rest[-4:]
    seeds = itertools.count(seed * 1000, 10)  # each layer its own seeds, in the model's order (a block takes 7)
    conv_seed, pos_seed = next(seeds), next(seeds)
    blocks = [EncoderBlock(dim, heads, mlp, seed=next(seeds), name=b) for b in arch.block_names]
    return keras.Sequential(
        [
            keras.Input(arch.image),
            keras.layers.Rescaling(PIXEL_SCALE, offset=0.0, name=scale),  # raw pixels to [0, 1], the model's first op
            keras.layers.Conv2D(
                dim,
                arch.patch,
                strides=arch.patch,  # one token a patch, no overlap
                padding="valid",
                data_format="channels_last",  # (B, 7, 7, D), read as tokens row by row; Keras's default is a setting
                kernel_initializer=_glorot(conv_seed),
                bias_initializer="zeros",
                name=patch,
            ),
            PositionEmbedding(arch.tokens, seed=pos_seed, name=pos),
            *blocks,
            keras.layers.LayerNormalization(axis=-1, epsilon=LN_EPSILON, name=norm),  # Keras's default epsilon: 1e-3
            keras.layers.GlobalAveragePooling1D(data_format="channels_last", name=pool),  # the mean over the tokens
            keras.layers.Dense(
                arch.classes, kernel_initializer=_glorot(next(seeds)), bias_initializer="zeros", name=dense
            ),
            keras.layers.Activation("softmax", name=probs),
        ],
        name=NAME,
    )


def architecture(model) -> VitArchitecture:
    """The declared architecture `model` was built from (read off its first block and the count of blocks)."""
    blocks = [layer for layer in model.layers if isinstance(layer, EncoderBlock)]
    return VitArchitecture(blocks[0].dim, len(blocks), blocks[0].heads, blocks[0].mlp)


def variant_copy(model, options) -> keras.Sequential:
    """The model a variant with `options` runs, its weights not set: the ViT's variants run the model itself."""
    return model


def kernel_path(model) -> None:
    """Which kernel its recurrent layers run: the ViT has none."""
    return None


def mixed_precision(model) -> keras.Sequential:
    """A copy under Keras's 'mixed_bfloat16' policy (keras_models.models.mixed_precision: the softmax float32), with the
    pixels' scaling float32 (in bfloat16 1/255 rounds to 1/256, as the LSTM's) and the dense layer too: the logits
    computed in float32, as the contract says. LayerNorm computes in float32 and casts its output to bfloat16
    (Keras's own rule). Set the weights on it."""
    arch = architecture(model)
    return models.mixed_precision(model, float32=(arch.names[0], arch.names[-2]))


def set_weights(model, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order, by the contract's table (VitArchitecture.weights). Raises ValueError naming the
    array on a length/shape/dtype mismatch (a list made for another size included) or a value not finite."""
    check_vit_weights(weights, architecture(model))
    model.set_weights([np.asarray(w) for w in weights])


def forward_layers(model, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference: every block's output (parity.api.vit's blocks: the embedded tokens, each encoder block's output,
    the pooled features, the logits, the probabilities) as float32 NumPy (a mixed-precision copy's bfloat16 ones
    upcast)."""
    return models.float32_blocks(model, x, architecture(model).blocks)
