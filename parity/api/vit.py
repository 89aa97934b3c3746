"""The small vision transformer, declared once: Fashion-MNIST cut into 4x4 patches (49 tokens of 16 pixels), a
learned position embedding, pre-norm encoder blocks (multi-head self-attention, then a GELU MLP), a final LayerNorm,
the tokens' mean and a dense layer to the 10 classes. Every implementation builds it from here, and the harness
derives its weight table, FLOPs and checks from it.

The conventions the frameworks' defaults disagree on are fixed here, and each implementation sets them explicitly:
LayerNorm's epsilon (Keras 1e-3, Flax 1e-6, PyTorch 1e-5 by default), GELU's form (exact, erf; jax.nn.gelu and Flax
default to the tanh approximation), the attention's weight layout (Keras's, below) and the initialisers (weights are
exchanged, so no side's defaults matter to the checks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parity.api.cnn import Weight
from parity.api.weights import check_table

PIXEL_SCALE = 1.0 / 255.0  # the model's first op, as the LSTM's: uint8 pixels to [0, 1]
LN_EPSILON = 1e-6  # LayerNorm's, on every side: the ViT paper's (and Flax's); Keras's default is 1e-3, PyTorch's 1e-5
GELU = "exact"  # GELU(x) = x * Phi(x) with erf, on every side: the ViT paper's; jax.nn.gelu defaults to the tanh form
ATTENTION_FIELDS = (
    "query_kernel",
    "query_bias",
    "key_kernel",
    "key_bias",
    "value_kernel",
    "value_bias",
    "output_kernel",
    "output_bias",
)  # Keras MultiHeadAttention's weights, in its order
BLOCK_ARRAYS = 16  # an encoder block's arrays: two LayerNorms' 2 each, the attention's 8, the MLP's 4


@dataclass(frozen=True)
class VitArchitecture:
    """The ViT at width `dim`, `depth` encoder blocks of `heads` heads and an MLP of `mlp` hidden units.

    Each block is pre-norm: x + attention(LayerNorm(x)), then x + mlp(LayerNorm(x)), the MLP dense(mlp) -> GELU ->
    dense(dim). Attention: queries, keys and values each a (dim, heads, head_dim) kernel with a (heads, head_dim)
    bias, scores scaled by 1/sqrt(head_dim), softmax over the keys, the heads' outputs through a (heads, head_dim,
    dim) kernel and a (dim,) bias. No dropout, no class token (the head reads the tokens' mean).
    """

    dim: int
    depth: int
    heads: int
    mlp: int
    patch: int = 4  # pixels per patch side: 28 / 4 = 7 patches a side, 49 tokens
    image_size: int = 28
    classes: int = 10

    def __post_init__(self) -> None:
        if min(self.dim, self.depth, self.heads, self.mlp, self.patch) < 1:
            raise ValueError(f"a ViT needs positive sizes, got {self}")
        if self.dim % self.heads:
            raise ValueError(f"width {self.dim} does not divide into {self.heads} heads")
        if self.image_size % self.patch:
            raise ValueError(f"a {self.image_size}-pixel image does not cut into {self.patch}-pixel patches")

    @property
    def image(self) -> tuple[int, int, int]:
        return (self.image_size, self.image_size, 1)

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def tokens(self) -> int:
        return (self.image_size // self.patch) ** 2

    @property
    def patch_pixels(self) -> int:
        return self.patch * self.patch

    @property
    def block_names(self) -> tuple[str, ...]:
        return tuple(f"block{i + 1}" for i in range(self.depth))

    @property
    def names(self) -> tuple[str, ...]:
        """Keras's layer names, in the model's order: the pixel scaling, the patch embedding (a patch x patch conv of
        stride patch, its (7, 7, dim) output read as 49 tokens in row-major order), the position embedding, the
        blocks, the final LayerNorm, the tokens' mean, the dense layer (the logits) and the softmax."""
        return ("scale", "patch_embed", "pos_embed", *self.block_names, "norm", "pool", "dense", "probs")

    @property
    def blocks(self) -> dict[str, str]:
        """The outputs forward_layers() returns on every side, in order, by the layer that puts each out: the
        embedded tokens (batch, tokens, dim, after the position embedding), each block's output (batch, tokens,
        dim), the pooled features (batch, dim, after the final LayerNorm and the mean), the logits, the
        probabilities."""
        return {"pos_embed": "embed", **{b: b for b in self.block_names}, "pool": "pool", "dense": "logits",
                "probs": "probs"}  # fmt: skip

    def block_weights(self, block: str) -> tuple[Weight, ...]:
        """One encoder block's arrays, in order: its first LayerNorm, the attention (ATTENTION_FIELDS), its second
        LayerNorm, the MLP's two dense layers. Their layers are named '<block>_ln1', '<block>_attn', '<block>_ln2',
        '<block>_mlp1' and '<block>_mlp2'."""
        d, h, k, m = self.dim, self.heads, self.head_dim, self.mlp
        ln = lambda name: (Weight(name, "gamma", (d,)), Weight(name, "beta", (d,)))  # noqa: E731
        shapes = {"kernel": (d, h, k), "bias": (h, k)}
        attn = [Weight(f"{block}_attn", f, shapes[f.split("_")[1]]) for f in ATTENTION_FIELDS[:6]]
        attn += [Weight(f"{block}_attn", "output_kernel", (h, k, d)), Weight(f"{block}_attn", "output_bias", (d,))]
        mlp = (
            Weight(f"{block}_mlp1", "kernel", (d, m)),
            Weight(f"{block}_mlp1", "bias", (m,)),
            Weight(f"{block}_mlp2", "kernel", (m, d)),
            Weight(f"{block}_mlp2", "bias", (d,)),
        )
        return (*ln(f"{block}_ln1"), *attn, *ln(f"{block}_ln2"), *mlp)

    @property
    def weights(self) -> tuple[Weight, ...]:
        """Every array in Keras's get_weights() order: the patch embedding's kernel (patch, patch, 1, dim) and bias,
        the position embedding (tokens, dim), each block's (block_weights), the final LayerNorm's gamma and beta,
        the dense layer's kernel (dim, classes) and bias. All trainable."""
        p, d = self.patch, self.dim
        out = [Weight("patch_embed", "kernel", (p, p, 1, d)), Weight("patch_embed", "bias", (d,))]
        out.append(Weight("pos_embed", "embeddings", (self.tokens, d)))
        for b in self.block_names:
            out += self.block_weights(b)
        out += [Weight("norm", "gamma", (d,)), Weight("norm", "beta", (d,))]
        return (*out, Weight("dense", "kernel", (d, self.classes)), Weight("dense", "bias", (self.classes,)))

    def params(self) -> int:
        return sum(int(np.prod(w.shape)) for w in self.weights)

    def forward_flops(self) -> int:
        """Forward FLOPs of one image, multiply-adds x 2: the patch embedding's 2*T*P*D; per block the four
        projections' 8*T*D^2, the scores' and the weighted values' 2*T^2*D each, the MLP's 4*T*D*M; the head's
        2*D*C (T tokens, P pixels a patch, D width, M MLP units, C classes; LayerNorm, softmax, GELU and the mean
        not counted, as the CNN's BatchNorm is not)."""
        t, d = self.tokens, self.dim
        block = 8 * t * d * d + 4 * t * t * d + 4 * t * d * self.mlp
        return 2 * t * self.patch_pixels * d + self.depth * block + 2 * d * self.classes


def architecture_of(weights: Sequence[np.ndarray]) -> VitArchitecture:
    """The ViT a weight list in Keras's order was made for, read off its shapes (the patch kernel's size and width,
    the first block's query kernel's heads and its first MLP kernel's units). Raises ValueError where the list is
    not a ViT's."""
    if isinstance(weights, np.ndarray | str | bytes) or not isinstance(weights, Sequence) or len(weights) < 23:
        raise ValueError("expected a list of ViT weight arrays in Keras's order")
    depth, rest = divmod(len(weights) - 7, BLOCK_ARRAYS)
    if rest:
        raise ValueError(f"{len(weights)} arrays are not a ViT's (7 + {BLOCK_ARRAYS} per block)")
    shape = [tuple(np.shape(a)) for a in weights[:16]]
    if len(shape[0]) != 4 or len(shape[5]) != 3 or len(shape[15]) != 2:
        raise ValueError("the arrays' shapes are not a ViT's (patch kernel, query kernel, MLP kernel)")
    return VitArchitecture(shape[0][-1], depth, shape[5][1], shape[15][1], shape[0][0])


def check_vit_weights(weights: Sequence[np.ndarray], arch: VitArchitecture, dtype=np.float32) -> None:
    """Raise ValueError naming the array when a weight list does not fit `arch` (length, shape, dtype), or holds a
    value that is not finite."""
    check_table(weights, arch.weights, dtype)
