"""The small vision transformer (parity.api.vit) as a Flax NNX module, layer for layer Keras's: its conventions set
explicitly where Flax's defaults differ (LayerNorm's epsilon and variance, exact GELU, MultiHeadAttention's weight
layout), Keras-order weight exchange, and two attention paths: written out, or jax.nn.dot_product_attention."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jax_impl.catalog import PREFETCH
from jax_impl.catalog import variant as variant_record
from jax_impl.devices import on_host
from jax_impl.models import (
    Classifier,
    abstract,
    block_outputs,
    param_count,
    param_loss_and_grads,
    param_weights,
    prepared_inference,
    set_param_weights,
)
from parity.api import Gradients, Prepared
from parity.api.inputs import check_seed, check_vit
from parity.api.variants import MANY, ONE, Variant
from parity.api.vit import LN_EPSILON, PIXEL_SCALE, VitArchitecture, check_vit_weights


@dataclass(frozen=True)
class VitOptions:
    """How the ViT trains ('jit' or 'shard_map', no pmap variant; mixed precision as jax_impl.lstm.LstmOptions's) and,
    its attention alone, infers: 'einsum' (written out, two einsums and a softmax over the keys) or 'fused'
    (jax.nn.dot_product_attention). One training step per dispatch; `prefetch`: as catalog.CnnOptions's."""

    parallel: str = "jit"
    attention: str = "einsum"
    mixed: bool = False
    steps_per_dispatch: int = 1
    prefetch: int = 0


TRAIN, INFER = "vit_train", "vit_infer"  # its row kinds, each with its variants below
WORKLOAD = "vit"  # an adapter (parity.api.adapters): its workload
# Out of the box its attention written out (VitOptions), ranked as the LSTM's; '+fused' jax.nn.dot_product_attention,
# a lever: faster than jit alone but level under the runtime settings, slower than predict in inference, on zen4
# (docs/results/zen4/cpu-levers-vit.json). On a TPU the best-known is the same step with each batch put on the chip
# ahead of it ('+prefetch': docs/tpu.md), not ranked elsewhere (a CPU's host is its device).
ON_TPU = (("tpu", 0),)
VARIANTS: tuple[Variant, ...] = (
    Variant("jit", TRAIN, ONE, rank=1, options=VitOptions()),
    Variant("jit+fused", TRAIN, ONE, tuned=True, options=VitOptions(attention="fused")),
    Variant(
        "jit+bf16",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        rank=0,
        ranks=(("tpu", 1),),
        float32="jit",
        options=VitOptions(mixed=True),
    ),
    Variant("jit+prefetch", TRAIN, ONE, tuned=True, dispatch=True, ranks=ON_TPU, options=VitOptions(prefetch=PREFETCH)),
    Variant(
        "jit+bf16+prefetch",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        dispatch=True,
        ranks=ON_TPU,
        float32="jit+prefetch",
        options=VitOptions(mixed=True, prefetch=PREFETCH),
    ),
    Variant("shard_map", TRAIN, MANY, rank=1, options=VitOptions("shard_map")),
    Variant("predict", INFER, ONE, rank=1, options=VitOptions()),
    Variant("predict+fused", INFER, ONE, tuned=True, options=VitOptions(attention="fused")),
)
ATTENTION = ("einsum", "fused")  # the attention's paths: written out (out of the box), jax.nn.dot_product_attention


@jax.custom_jvp
def gelu(x: jax.Array) -> jax.Array:
    """GELU's exact form, x * Phi(x) with erf (parity.api.vit.GELU): jax.nn.gelu's default is the tanh form."""
    return jax.nn.gelu(x, approximate=False)


@gelu.defjvp
def _gelu_jvp(primals, tangents):
    """Its derivative Phi(x) + x phi(x), written out: JAX 0.12's own (erf's and erfc's exp_neg_sq, a lax.polynomial
    of constant coefficients) fails to trace under shard_map ('Primitive polynomial requires varying manual axes to
    match'), so the data-parallel step could not differentiate jax.nn.gelu."""
    (x,), (dx,) = primals, tangents
    cdf = 0.5 * jax.lax.erfc(x * -math.sqrt(0.5))
    return gelu(x), (cdf + x * jnp.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))) * dx


def layer_norm(dim: int, rngs: nnx.Rngs, dtype=None) -> nnx.LayerNorm:
    """A LayerNorm over the last axis with the declared epsilon (Keras's default is 1e-3) and the variance as the mean
    of squared deviations (Flax's fast E[x^2] - E[x]^2 cancels where a token's mean is large beside its spread);
    statistics in float32 whatever the compute dtype (Flax's rule, Keras's too)."""
    return nnx.LayerNorm(dim, epsilon=LN_EPSILON, use_fast_variance=False, dtype=dtype, rngs=rngs)


class SelfAttention(nnx.Module):
    """Keras MultiHeadAttention over one sequence (query, key and value all x), each weight an nnx.Param of Keras's
    name and layout (parity.api.vit.ATTENTION_FIELDS): query, key and value kernels (D, H, hd) with (H, hd) biases,
    the output kernel (H, hd, D) and its (D,) bias. No dropout, no mask."""

    def __init__(self, dim: int, heads: int, rngs: nnx.Rngs):
        hd = dim // heads
        # Flax's dense initialiser (lecun_normal) over each kernel's fan-in: its input axes
        into = nnx.initializers.lecun_normal(in_axis=0, out_axis=(1, 2))
        for n in ("query", "key", "value"):
            setattr(self, f"{n}_kernel", nnx.Param(into(rngs.params(), (dim, heads, hd))))
            setattr(self, f"{n}_bias", nnx.Param(jnp.zeros((heads, hd))))
        out = nnx.initializers.lecun_normal(in_axis=(0, 1), out_axis=2)
        self.output_kernel = nnx.Param(out(rngs.params(), (heads, hd, dim)))
        self.output_bias = nnx.Param(jnp.zeros((dim,)))

    def __call__(self, x: jax.Array, fused: bool) -> jax.Array:
        """(B, T, D) -> (B, T, D), in x's dtype. fused: jax.nn.dot_product_attention computes the scores, the softmax
        and the weighted values ((B, T, heads, hd) in and out); else the einsums below, Keras's."""
        w = lambda name: getattr(self, name).value.astype(x.dtype)  # noqa: E731
        q, k, v = (jnp.einsum("btd,dhk->bthk", x, w(f"{n}_kernel")) + w(f"{n}_bias") for n in ("query", "key", "value"))
        if fused:  # its default scale 1/sqrt(hd) on the scores, its softmax in float32, its implementation JAX's choice
            heads = jax.nn.dot_product_attention(q, k, v)
        else:
            q = q * jnp.asarray(1.0 / math.sqrt(q.shape[-1]), x.dtype)  # Keras scales the queries, before the product
            scores = jnp.einsum("bqhk,bthk->bhqt", q, k)
            # the softmax over the keys in float32 whatever the compute dtype, as dot_product_attention's: the two
            # paths compute the same (a no-op in float32)
            p = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
            heads = jnp.einsum("bhqt,bthk->bqhk", p, v)
        return jnp.einsum("bthk,hkd->btd", heads, w("output_kernel")) + w("output_bias")


class Block(nnx.Module):
    """One pre-norm encoder block: h = x + attn(ln1(x)); out = h + mlp2(gelu(mlp1(ln2(h))))."""

    def __init__(self, arch: VitArchitecture, rngs: nnx.Rngs, dtype=None):
        d, mixed = arch.dim, {"dtype": dtype, "param_dtype": jnp.float32}
        self.ln1, self.attn = layer_norm(d, rngs, dtype), SelfAttention(d, arch.heads, rngs)
        self.ln2 = layer_norm(d, rngs, dtype)
        self.mlp1 = nnx.Linear(d, arch.mlp, **mixed, rngs=rngs)
        self.mlp2 = nnx.Linear(arch.mlp, d, **mixed, rngs=rngs)

    def __call__(self, x: jax.Array, fused: bool) -> jax.Array:
        # sub-scopes under the block's (no layer's name: the profile counts them the block's)
        with jax.named_scope("ln1"):
            a = self.ln1(x)
        with jax.named_scope("attn"):
            h = x + self.attn(a, fused)
        with jax.named_scope("ln2"):
            a = self.ln2(h)
        with jax.named_scope("mlp"):
            return h + self.mlp2(gelu(self.mlp1(a)))


class PositionEmbedding(nnx.Module):
    """A learned (tokens, dim) array, `embeddings` (Keras's field), added to every image's tokens."""

    def __init__(self, tokens: int, dim: int, rngs: nnx.Rngs):
        init = nnx.initializers.normal(0.02)  # the original ViT code's
        self.embeddings = nnx.Param(init(rngs.params(), (tokens, dim)))


class VIT(Classifier):
    """Layer for layer the Keras ViT, built from its declaration (parity.api.vit.VitArchitecture): each layer with
    weights an attribute of its Keras name (patch_embed, pos_embed, block1.., norm, dense), a block's layers
    attributes of their suffix ('block1_attn' is block1.attn)."""

    def __init__(self, arch: VitArchitecture, rngs: nnx.Rngs, dtype=None):
        """dtype: the layers' compute dtype (None: float32 throughout; jnp.bfloat16: mixed precision, Flax's way, the
        parameters float32), but for the head, float32 always."""
        self.arch, p, d = arch, arch.patch, arch.dim
        # the patches: a p x p convolution of stride p over NHWC images, its kernel HWIO (p, p, 1, D) as Keras's
        self.patch_embed = nnx.Conv(1, d, (p, p), p, padding="VALID", dtype=dtype, rngs=rngs)
        self.pos_embed = PositionEmbedding(arch.tokens, d, rngs)
        for name in arch.block_names:
            setattr(self, name, Block(arch, rngs, dtype))
        self.norm = layer_norm(d, rngs, dtype)
        self.dense = nnx.Linear(d, arch.classes, dtype=jnp.float32, rngs=rngs)
        self.dtype = dtype
        self.attention = ATTENTION[0]  # static (part of the graph definition): the variants' options set it

    def blocks(self, x: jax.Array, train: bool = False, key: jax.Array | None = None) -> dict[str, jax.Array]:
        """Every block's output (VitArchitecture.blocks' values). train and key as the CNN's take them: no dropout
        and no BatchNorm, one pass for both."""
        arch, out, dt, fused = self.arch, {}, self.dtype or jnp.float32, self.attention == "fused"
        scale, patch, pos, *blocks, norm, pool, dense, probs = arch.names
        # Each layer in a named scope of Keras's layer name (its HLO ops carry it, as the CNN's)
        with jax.named_scope(scale):  # in float32, then cast: a bfloat16 1/255 would put every pixel 0.4% high
            h = (x.astype(jnp.float32) * np.float32(PIXEL_SCALE)).astype(dt)
        with jax.named_scope(patch):
            h = self.patch_embed(h)
            h = h.reshape(h.shape[0], arch.tokens, arch.dim)  # the (7, 7, D) map's rows in order: row-major tokens
        with jax.named_scope(pos):
            out["embed"] = h = h + self.pos_embed.embeddings.value.astype(dt)
        for name in blocks:
            with jax.named_scope(name):
                out[name] = h = getattr(self, name)(h, fused)
        with jax.named_scope(norm):
            h = self.norm(h)
        with jax.named_scope(pool):
            out["pool"] = h = h.mean(axis=1)
        # The head, softmax and loss in float32 whatever the compute dtype: Keras's mixed-precision rule for a
        # model's output, applied by hand. A no-op in float32.
        with jax.named_scope(dense):
            out["logits"] = self.dense(h.astype(jnp.float32))
        with jax.named_scope(probs):
            out["probs"] = jax.nn.softmax(out["logits"])
        return out


MODEL = VIT  # what `build` returns: the surface's model functions find this adapter by it


def build(dim: int, depth: int, heads: int, mlp: int, seed: int = 0) -> VIT:
    """The ViT of VitArchitecture(dim, depth, heads, mlp), its initial weights Flax's own initialisers'. Raises
    ValueError on sizes out of their bounds (not whole numbers of 1 or more, a width the heads do not divide, a model
    this machine cannot train) or a seed out of its bounds (parity.api.inputs: check_vit, check_seed)."""
    arch, seed = check_vit(dim, depth, heads, mlp), check_seed(seed)
    with on_host():
        return VIT(arch, nnx.Rngs(params=seed))


def mixed_precision(model: VIT) -> VIT:
    """A bfloat16-compute copy of `model` (float32 parameters, the same values; the same attention path)."""
    copy = abstract(lambda: VIT(model.arch, nnx.Rngs(params=0), dtype=jnp.bfloat16))
    copy.attention = model.attention
    nnx.update(copy, nnx.state(model))
    return copy


def train_with(model: VIT, o) -> tuple[str | None, str, bool]:
    """Set a training variant's static options (VitOptions) on the model a trainer compiles; returns what the
    trainer reports: no recurrent kernel, no BatchNorm statistics, no time loop."""
    model.attention = o.attention
    return None, "none", False


def compute_dtype(model: VIT) -> str:
    """What the model's layers compute in: 'float32' or 'bfloat16'."""
    return jnp.dtype(model.dtype or jnp.float32).name


_FIELD = {"gamma": "scale", "beta": "bias"}  # Keras's LayerNorm fields -> Flax's; every other field keeps its name


def _slots(model: VIT):
    """Each variable in the order Keras's Model.get_weights() lists them (parity.api.vit's table)."""
    for w in model.arch.weights:
        block, _, part = w.layer.partition("_")
        layer = getattr(getattr(model, block), part) if block in model.arch.block_names else getattr(model, w.layer)
        yield getattr(layer, _FIELD.get(w.field, w.field))


def get_weights(model: VIT) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order."""
    return param_weights(_slots, model)


def set_weights(model: VIT, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the array on a length/shape/dtype mismatch (a list
    for another size included) or a value that is not finite."""
    check_vit_weights(weights, model.arch)
    set_param_weights(_slots, model, weights)


count_params = param_count  # as Keras's summary counts them: every weight trains
forward_layers = block_outputs  # every block's output as NumPy, by block name (inference)


def loss_and_grads(model: VIT, x: np.ndarray, y: np.ndarray) -> Gradients:
    """One batch's loss and gradients, grads in Keras's trainable_weights order (every array); no max pooling, so
    no routing. The model is not changed."""
    return param_loss_and_grads(model, x, y, _slots)


def prepare_inference(model: VIT, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` on devices[0], inputs placed beforehand; the variant's attention on a copy
    (the model passed in keeps its own).

    Raises:
        ValueError: a variant not among variants("vit_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # VitOptions
    return prepared_inference(model, images, devices, lambda m: setattr(m, "attention", o.attention), None)
