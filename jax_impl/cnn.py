"""The notebook's 5-layer Fashion-MNIST CNN as a Flax NNX module, with Keras-order weight exchange."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jax_impl.catalog import PREFETCH, CnnOptions, InferOptions, release
from jax_impl.catalog import variant as variant_record
from jax_impl.conv_grads import bias_add, conv_rewritten_grads, max_pool, pool_elementwise
from jax_impl.devices import lowered_flops, on_host, placement
from jax_impl.masks import keep_mask
from jax_impl.models import Classifier, abstract, cross_entropy, infer_blocks, output_head
from parity.api import Gradients, Prepared
from parity.api.cnn import CNN_ARCHITECTURE, STEPS_PER_DISPATCH, check_weights
from parity.api.inputs import check_seed
from parity.api.variants import MANY, ONE, Variant


class CNN(Classifier):
    """Layer for layer the Keras Sequential model of the tensorflow/tpu notebook (NHWC), built from its declaration
    (parity.api.cnn.CNN_ARCHITECTURE): each layer with weights an attribute of its Keras name (bn1, conv1, ...)."""

    def __init__(self, rngs: nnx.Rngs, dropout: bool = True, dtype=None):
        """dtype: the layers' compute dtype (None: float32 throughout; jnp.bfloat16: mixed precision, Flax's
        way: every layer computes and outputs bfloat16, parameters stay float32, param_dtype)."""
        arch, mixed = CNN_ARCHITECTURE, {"dtype": dtype, "param_dtype": jnp.float32}
        # Keras's BatchNorm, set explicitly: Flax's epsilon is 1e-5, and its fast variance (E[x^2] - E[x]^2) loses
        # digits on raw 0..255 pixels; Keras uses tf.nn.moments. In bfloat16, Flax computes the batch statistics in
        # float32 (_compute_stats promotes) from the bfloat16-rounded input, and normalises with gamma and beta
        # rounded to bfloat16.
        norm = {"epsilon": arch.bn_epsilon, "momentum": arch.bn_momentum, "use_fast_variance": False, **mixed}
        glorot = {"kernel_init": nnx.initializers.glorot_uniform(), **mixed}  # Keras's initialiser (Flax's: lecun)
        for b in arch.convs:  # in Keras's order: each layer's parameters draw the next keys of `rngs`
            bn, conv = b.names[:2]
            setattr(self, bn, nnx.BatchNorm(b.channels, **norm, rngs=rngs))
            kernel = (b.kernel, b.kernel)
            setattr(self, conv, nnx.Conv(b.channels, b.filters, kernel, padding="SAME", **glorot, rngs=rngs))
        for d in (*arch.dense, arch.output):
            setattr(self, d.names[0], nnx.Linear(d.units_in, d.units, **glorot, rngs=rngs))
        self.rates = arch.dropout_rates if dropout else (0.0,) * len(arch.dropout_rates)
        self.elementwise_pool = False  # the '+pool' variants: pool_elementwise's gradient (the same array)
        self.float32_bias_grad = False  # the '+bias' variants: float32_bias_gradients
        self.flipped_input_grad = False  # the '+dgrad' variants: flipped_input_gradients
        self.kernel_grad_chunk = 0  # the '+wgrad' variants: chunked_kernel_gradients (0: JAX's own)
        self.straight_line_masks = False  # the '+masks' variants: masks.keep_mask (the same masks)

    def float32_bias_gradients(self) -> None:
        """Each convolution's bias added by bias_add (the conv's own add off; its bias parameter kept), whose
        gradient is a float32 sum: the '+bias' variants. The forward pass is the same."""
        self.float32_bias_grad = True
        for b in CNN_ARCHITECTURE.convs:
            getattr(self, b.names[1]).use_bias = False

    def flipped_input_gradients(self) -> None:
        """float32_bias_gradients, and each convolution's input gradient a forward convolution with the flipped
        kernel (conv_grads.conv_rewritten_grads): the '+dgrad' variants. The forward pass is the same."""
        if any(b.kernel % 2 == 0 for b in CNN_ARCHITECTURE.convs):
            raise ValueError("the flipped input gradient is the transpose for odd kernels only")
        self.float32_bias_gradients()
        self.flipped_input_grad = True

    def chunked_kernel_gradients(self, chunk: int) -> None:
        """Each convolution's kernel gradient summed over chunks of `chunk` images (conv_grads.conv_rewritten_grads),
        its bias added after it as Flax's Conv adds it (or by bias_add under '+bias'): the '+wgrad' variants. The
        forward pass is the same."""
        if chunk < 1:
            raise ValueError(f"chunked kernel gradients need chunk >= 1; got {chunk}")
        self.kernel_grad_chunk = chunk

    def _conv_layer(self, layer: nnx.Conv, h: jax.Array) -> jax.Array:
        """A convolution layer's output: Flax's own, or as the '+bias', '+dgrad' and '+wgrad' variants compute it."""
        if not isinstance(layer, nnx.Conv) or not (self.float32_bias_grad or self.kernel_grad_chunk):
            return layer(h)  # Flax's own (or a stand-in with no kernel: benchmarks/ablation.py's cheap conv)
        if self.flipped_input_grad or self.kernel_grad_chunk:
            kernel = layer.kernel[...].astype(h.dtype)  # promoted to the compute dtype, as Flax's Conv does
            y = conv_rewritten_grads(h, kernel, self.flipped_input_grad, self.kernel_grad_chunk)
        else:
            y = layer(h)  # under '+bias', without its bias
        return bias_add(y, layer.bias[...]) if self.float32_bias_grad else y + layer.bias[...].astype(y.dtype)

    def blocks(self, x: jax.Array, train: bool = False, key: jax.Array | None = None) -> dict[str, jax.Array]:
        """Every block's output, and each pooling layer's input ('pool1_input', ...). train: batch statistics
        and dropout (needs `key` if dropout is on)."""
        if train and key is None and any(self.rates):
            raise ValueError("training with dropout needs a PRNG key (or build the model with dropout=False)")
        keys = list(jax.random.split(key, len(self.rates))) if key is not None else [None] * len(self.rates)

        def drop(h, i):
            r = self.rates[i]
            if not train or r == 0.0:
                return h
            mask = keep_mask if self.straight_line_masks else jax.random.bernoulli
            keep = mask(keys[i], 1.0 - r, h.shape)
            return jnp.where(keep, h / (1.0 - r), 0.0)

        # Each layer in a named scope of Keras's layer name (its HLO ops carry it: per-layer profiles map onto
        # the same names in both frameworks; the conv's ELU is in its scope, as Keras's Conv2D(activation=)).
        arch, out, h = CNN_ARCHITECTURE, {}, x
        ends = arch.blocks  # which layer's output is which block
        for i, b in enumerate(arch.convs):
            bn, conv, pool, dropout = b.names
            with jax.named_scope(bn):
                h = getattr(self, bn)(h, use_running_average=not train)
            with jax.named_scope(conv):
                h = jax.nn.elu(self._conv_layer(getattr(self, conv), h))
            out[f"{pool}_input"] = h
            with jax.named_scope(pool):
                h = pool_elementwise(h, b.pool) if self.elementwise_pool else max_pool(h, b.pool)
            with jax.named_scope(dropout):
                h = drop(h, i)
            out[ends[dropout]] = h
        for i, d in enumerate(arch.dense, len(arch.convs)):
            dense, elu, dropout = d.names
            with jax.named_scope(dense):
                h = getattr(self, dense)(h.reshape(h.shape[0], -1))  # NHWC flatten: Keras's order
            with jax.named_scope(elu):
                h = jax.nn.elu(h)
            out[ends[elu]] = h
            with jax.named_scope(dropout):
                h = drop(h, i)
        dense, softmax = arch.output.names
        return out | output_head(getattr(self, dense), h, (dense, softmax))  # in float32, as Keras's


MODEL = CNN  # what `build` returns: the surface's model functions find this adapter by it


def build(seed: int = 0, dropout: bool = True) -> CNN:
    """The CNN with Keras's initialisers; dropout=False keeps the layers at rate 0 (for parity). Raises ValueError on
    a seed other than an integer from 0 to parity.api.inputs.MAX_SEED."""
    seed = check_seed(seed)
    with on_host():
        return CNN(nnx.Rngs(params=seed), dropout=dropout)


def mixed_precision(model: CNN) -> CNN:
    """A bfloat16-compute copy of `model` (float32 parameters and statistics, the same values): what the '+bf16'
    variants train, as Flax's dtype=jnp.bfloat16, param_dtype=jnp.float32."""
    copy = abstract(lambda: CNN(nnx.Rngs(params=0), dropout=any(model.rates), dtype=jnp.bfloat16))
    copy.rates = model.rates
    nnx.update(copy, nnx.state(model))
    return copy


TRAIN, INFER = "cnn_train", "cnn_infer"  # its row kinds, each with its variants below
WORKLOAD = "cnn"  # an adapter (parity.api.adapters): its workload


def _bf16(name: str, span: str, rank: int, float32: str, options: CnnOptions) -> Variant:
    """A mixed-precision training variant, judged beside its float32 counterpart `float32`."""
    return Variant(name, TRAIN, span, "bfloat16", tuned=True, rank=rank, float32=float32, options=options)


def _variants(p: str, span: str) -> tuple[Variant, ...]:
    """Each parallel form's (jit, shard_map): several steps a dispatch, mixed precision, the elementwise pooling
    gradient, in bfloat16 the float32 bias gradients and with them the flipped input gradients (docs/tuning.md, "JAX
    variants")."""
    o, pool, bias = partial(CnnOptions, p), {"pool": "elementwise"}, {"bias": "float32"}
    return (
        Variant(p, TRAIN, span, rank=3, options=o()),
        Variant(f"{p}+scan", TRAIN, span, tuned=True, dispatch=True, options=o(steps_per_dispatch=STEPS_PER_DISPATCH)),
        _bf16(f"{p}+bf16", span, 5, p, o(mixed=True)),
        Variant(f"{p}+pool", TRAIN, span, tuned=True, rank=2, options=o(**pool)),
        _bf16(f"{p}+bf16+pool", span, 4, f"{p}+pool", o(mixed=True, **pool)),
        _bf16(f"{p}+bf16+pool+bias", span, 3, f"{p}+pool", o(mixed=True, **pool, **bias)),
        _bf16(f"{p}+bf16+pool+bias+dgrad", span, 2, f"{p}+pool", o(mixed=True, **pool, **bias, dgrad="flipped")),
    )


# '+dots': XLA:CPU's YNNPACK list for the inference program alone, dots only. With 'reduce' in the list (as under
# '+ynn'), YNNPACK fuses each max pooling with the next BatchNorm, convolution and bias add, so oneDNN ('+onednn')
# gets none of those convolutions; training is faster with 'reduce' (docs/tuning.md). The option is set per
# program, as the list's proto enum number: xla.proto's LIBRARY_FUSION_TYPE_DOT = 1 (its names are refused as
# values). Other backends have no YNNPACK and ignore it. Offered from JAX 0.12, whose XLA has the option.
DOTS = InferOptions({"xla_cpu_experimental_ynn_fusion_type": 1})
# one device's float32 and bfloat16 tuned steps (jit+pool, jit+bf16+pool+bias+dgrad) with the chunked kernel gradient
WGRAD = CnnOptions(pool="elementwise", wgrad=16)
WGRAD_BF16 = CnnOptions(mixed=True, pool="elementwise", bias="float32", dgrad="flipped", wgrad=32)
MASKS_BF16 = replace(WGRAD_BF16, masks="straight-line")


def _tpu_order(v: Variant) -> Variant:
    """`v` in a TPU's order (Variant.ranks; docs/tpu.md): in each format one device's own step with each batch put on
    the chip ahead of it ('+prefetch') first, then the step alone; no CPU lever."""
    if v.span != ONE or v.kind != TRAIN:
        return v
    own = CnnOptions(mixed=v.options.mixed)
    order = {replace(own, prefetch=PREFETCH): 0, own: 1}
    return replace(v, ranks=(("tpu", order.get(v.options)),))


# `rank` (catalog.table): the elementwise pooling gradient ('+pool', faster with every setting, measured on a Zen
# 5); in bfloat16 with '+bias+dgrad' too; at one device with '+wgrad' and '+masks' too (those three measured on
# xeon-amx only); its inference with YNNPACK on the dots alone. A TPU's order: _tpu_order.
_DECLARED: tuple[Variant, ...] = (
    *_variants("jit", ONE),
    # '+pool' with each kernel gradient summed over chunks of 16 images: faster on xeon-amx under 'ynn+onednn+thp',
    # level under 'ynn+thp' (docs/tuning.md, "JAX variants"); over 8 replicas (32 images each) level: not offered
    Variant("jit+pool+wgrad", TRAIN, ONE, tuned=True, rank=1, options=WGRAD),
    # and in bfloat16 with '+bias+dgrad', over chunks of 32 images (docs/tuning.md)
    _bf16("jit+bf16+pool+bias+dgrad+wgrad", ONE, 1, "jit+pool+wgrad", WGRAD_BF16),
    # each with dropout's masks as straight-line code, the same masks (docs/tuning.md)
    Variant("jit+pool+wgrad+masks", TRAIN, ONE, tuned=True, rank=0, options=replace(WGRAD, masks="straight-line")),
    _bf16("jit+bf16+pool+bias+dgrad+wgrad+masks", ONE, 0, "jit+pool+wgrad+masks", MASKS_BF16),
    # each batch put on the device ahead of its step: the best-known on a TPU (_tpu_order, docs/tpu.md), not on a CPU
    Variant("jit+prefetch", TRAIN, ONE, tuned=True, dispatch=True, options=CnnOptions(prefetch=PREFETCH)),
    Variant(
        "jit+bf16+prefetch",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        dispatch=True,
        float32="jit+prefetch",
        options=CnnOptions(mixed=True, prefetch=PREFETCH),
    ),
    Variant("pmap", TRAIN, MANY, options=CnnOptions("pmap")),
    *_variants("shard_map", MANY),
    Variant("predict", INFER, ONE, rank=1, options=InferOptions()),
    *(
        (Variant("predict+dots", INFER, ONE, tuned=True, rank=0, options=DOTS),)
        if release(jax.__version__) >= (0, 12)
        else ()
    ),
)
VARIANTS: tuple[Variant, ...] = tuple(map(_tpu_order, _DECLARED))


def train_with(model: CNN, o) -> tuple[None, str, bool]:
    """Set a training variant's static options (catalog.CnnOptions) on the model a trainer compiles; returns what the
    trainer reports: no recurrent kernel, BatchNorm statistics over each replica's share, no time loop."""
    model.elementwise_pool = o.pool == "elementwise"
    if o.dgrad == "flipped":  # (the '+bias' and '+dgrad' variants are mixed: their bfloat16 copy's convs)
        model.flipped_input_gradients()
    elif o.bias == "float32":
        model.float32_bias_gradients()
    if o.wgrad:
        model.chunked_kernel_gradients(o.wgrad)
    model.straight_line_masks = o.masks == "straight-line"
    return None, "replica", False


def compute_dtype(model: CNN) -> str:
    """What the model's layers compute in, read off its first: 'float32' or 'bfloat16'."""
    return jnp.dtype(model.conv1.dtype or jnp.float32).name


# Keras's field names -> Flax NNX's (BatchNorm: scale, bias, mean, var)
_FIELDS = {"gamma": "scale", "beta": "bias", "moving_mean": "mean", "moving_variance": "var"}


def _slots(model: CNN):
    """(layer name, variable) in the order Keras's Model.get_weights() lists them."""
    for w in CNN_ARCHITECTURE.weights:
        yield w.layer, getattr(getattr(model, w.layer), _FIELDS.get(w.field, w.field))


def get_weights(model: CNN) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order (BN: gamma, beta, mean, var)."""
    return [np.asarray(v.value) for _, v in _slots(model)]


def set_weights(model: CNN, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch."""
    check_weights(weights)
    for (_, v), w in zip(_slots(model), weights, strict=True):
        v.value = jnp.asarray(w)


def count_params(model: CNN) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them."""
    trainable = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
    stats = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(model, nnx.BatchStat)))
    return {"total": trainable + stats, "trainable": trainable, "non_trainable": stats}


def forward_layers(model: CNN, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference (BatchNorm on moving statistics): every block's output as NumPy, by block name."""
    blocks = infer_blocks(model, jnp.asarray(x))
    return {k: np.asarray(blocks[k]) for k in CNN_ARCHITECTURE.blocks.values()}


def loss_and_grads(model: CNN, x: np.ndarray, y: np.ndarray) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer routed its gradient in this pass.

    Batch statistics as in training, dropout off (build the model with dropout=False); the model
    itself is not changed.
    """
    if any(model.rates):
        raise ValueError("loss_and_grads compares without dropout: build the model with dropout=False")
    graphdef, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
    (loss, pool_inputs), g = _loss_and_grads(graphdef, params, stats, jnp.asarray(x), jnp.asarray(y))
    gm = nnx.merge(graphdef, g, stats)
    grads = [np.asarray(v.value) for _, v in _slots(gm) if isinstance(v, nnx.Param)]
    pools = [b.pool for b in CNN_ARCHITECTURE.convs]
    return Gradients(float(loss), grads, [np.asarray(_routing(a, p)) for a, p in zip(pool_inputs, pools, strict=True)])


@partial(jax.jit, static_argnums=0)
def _loss_and_grads(graphdef, params, stats, x, y):
    m = nnx.merge(graphdef, params, stats)  # a copy: the caller's model keeps its moving statistics

    def f(m):
        out = m.blocks(x, train=True)
        return cross_entropy(out["logits"], y), [out[f"{b.names[2]}_input"] for b in CNN_ARCHITECTURE.convs]

    return nnx.value_and_grad(f, has_aux=True)(m)


@partial(jax.jit, static_argnums=1)
def _routing(a: jax.Array, size: int) -> jax.Array:
    """Max pooling's own gradient at `a` for a cotangent of ones: where each window's gradient goes."""
    out, vjp = jax.vjp(partial(max_pool, size=size), a)
    return vjp(jnp.ones_like(out))[0]


def prepare_inference(model: CNN, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` (inference mode) on devices[0], inputs placed beforehand.

    Raises:
        ValueError: a variant not among variants("cnn_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # jax_impl.catalog.InferOptions
    graphdef, state = nnx.split(model)
    x = jax.device_put(jnp.asarray(images, jnp.float32), devices[0])
    state = jax.device_put(state, devices[0])
    f = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x), compiler_options=o.compiler_options)
    return Prepared(
        lambda: f(state, x),
        lambda o: tuple(o.shape),
        lambda o, idx: np.asarray(o)[list(idx)],
        placement,
        lambda: lowered_flops(f, state, x),
        lambda: f.lower(state, x).compile().as_text(),  # its HLO: a profile's ops back to the named scopes
        ahead=lambda: bool(f.lower(state, x).compile()),  # JAX keeps the program for the first call
    )
