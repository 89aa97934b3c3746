"""The row LSTM (parity.api.lstm) as a Flax NNX module: two nnx.RNN layers over OptimizedLSTMCell with Keras's
numerics set explicitly, and Keras-order weight exchange."""

from __future__ import annotations

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
    TIME_LOOP,
    Classifier,
    abstract,
    block_outputs,
    output_head,
    param_count,
    param_loss_and_grads,
    param_weights,
    prepared_inference,
    set_param_weights,
)
from parity.api import Gradients, Prepared
from parity.api.inputs import check_seed, check_units
from parity.api.lstm import GATES, PIXEL_SCALE, LstmArchitecture, check_lstm_weights
from parity.api.variants import MANY, ONE, Variant


def unit_forget_bias(forget_bias: float):
    """The LSTM bias's initialiser: zeros but the forget gate's quarter, `forget_bias` (Keras's unit_forget_bias)."""

    def init(key, shape, dtype=jnp.float32):
        u, f = shape[-1] // len(GATES), GATES.index("f")
        return jnp.zeros(shape, dtype).at[..., f * u : (f + 1) * u].set(forget_bias)

    return init


def kernel_path(unroll: int | bool) -> str:
    """Which kernel the recurrent layers run, for people: lax.scan's loop, partly or fully unrolled."""
    if unroll is True:
        return "unrolled"
    return "lax.scan" if unroll == 1 else f"lax.scan, unroll {unroll}"


class LSTM(Classifier):
    """Layer for layer the Keras Sequential row LSTM, built from its declaration (parity.api.lstm.LstmArchitecture):
    each layer with weights an attribute of its Keras name (lstm1, lstm2, dense)."""

    def __init__(self, units: int, rngs: nnx.Rngs, dtype=None):
        """dtype: the layers' compute dtype (None: float32 throughout; jnp.bfloat16: mixed precision, Flax's way:
        every layer computes and outputs bfloat16, parameters stay float32, param_dtype)."""
        self.arch = arch = LstmArchitecture(units)
        mixed = {"dtype": dtype, "param_dtype": jnp.float32}
        glorot = nnx.initializers.glorot_uniform()  # Keras's kernel initialiser (Flax's: lecun_normal)
        cell = {
            "kernel_init": glorot,
            "recurrent_kernel_init": nnx.initializers.orthogonal(),  # Keras's Orthogonal(gain=1) (Flax's default too)
            "bias_init": unit_forget_bias(arch.forget_bias),  # Keras's unit_forget_bias=True (Flax starts it at 0)
            "gate_fn": jax.nn.sigmoid,  # Keras 3's recurrent_activation (older Keras: hard_sigmoid)
            "activation_fn": jnp.tanh,  # Keras's activation, on the candidate and on the cell state
            **mixed,
        }
        for name, inputs in arch.lstm_layers:  # in Keras's order: each layer's parameters draw the next keys
            # OptimizedLSTMCell is Keras's layout: one fused (inputs, 4U) input kernel without bias (dense_i), one
            # (U, 4U) recurrent kernel carrying the layer's one (4U,) bias (dense_h), columns split i, f, g, o:
            # Keras's i, f, c, o (GATES). rngs=False: no carry RNG stream (the carry starts at zeros, given below).
            rnn = nnx.RNN(nnx.OptimizedLSTMCell(inputs, units, **cell, rngs=rngs), rngs=False)
            setattr(self, name, rnn)
        setattr(self, arch.names[4], nnx.Linear(units, arch.classes, kernel_init=glorot, **mixed, rngs=rngs))
        self.dtype = dtype

    @property
    def unroll(self) -> int | bool:
        """lax.scan's unroll over the time steps (static: part of the graph definition): 1 a rolled loop, k steps
        per iteration, True every step as straight-line code. The '+unroll' variants set it."""
        return getattr(self, self.arch.names[2]).unroll

    @unroll.setter
    def unroll(self, n: int | bool) -> None:
        for name, _ in self.arch.lstm_layers:
            getattr(self, name).unroll = n

    def blocks(self, x: jax.Array, train: bool = False, key: jax.Array | None = None) -> dict[str, jax.Array]:
        """Every block's output ('lstm1' the first layer's sequence, 'lstm2' the second's last hidden state,
        'logits', 'probs'). train and key as the CNN's take them: no dropout and no BatchNorm, one pass for both."""
        arch, out = self.arch, {}
        rows, scale, lstm1, lstm2, dense, probs = arch.names
        dt = self.dtype or jnp.float32
        # Each layer in a named scope of Keras's layer name (its HLO ops carry it, as the CNN's)
        with jax.named_scope(rows):
            h = x.reshape(x.shape[0], arch.steps, arch.features)  # an image row per time step
        with jax.named_scope(scale):
            # in float32 whatever the compute dtype, then cast, as the Keras model keeps its Rescaling layer float32
            # under mixed precision (keras_models.lstm): a bfloat16 1/255 would put every pixel 0.4% high
            h = (h.astype(jnp.float32) * np.float32(PIXEL_SCALE)).astype(dt)
        # the states in the compute dtype, as Keras's; like the input's, so that under shard_map they vary over the
        # replicas as the carry they start will
        zero = jnp.zeros_like(h, dt, shape=(x.shape[0], arch.units))
        carry = (zero, zero)  # h_0 = c_0 = 0; Flax's carry is (c, h), Keras's states [h, c]
        with jax.named_scope(lstm1):
            out[lstm1] = getattr(self, lstm1)(h, initial_carry=carry)  # every step's h: return_sequences=True
        with jax.named_scope(lstm2):
            (_, h), _ = getattr(self, lstm2)(out[lstm1], initial_carry=carry, return_carry=True)
            out[lstm2] = h  # the last step's h, the carry's second: Keras's return_sequences=False
        return out | output_head(getattr(self, dense), h, (dense, probs))  # in float32, as Keras's


MODEL = LSTM  # what `build` returns: the surface's model functions find this adapter by it


def build(units: int, seed: int = 0) -> LSTM:
    """The row LSTM at `units` per LSTM layer, with Keras's initialisers and gate order. Raises ValueError on units
    or a seed out of their bounds (parity.api.inputs: check_units, check_seed)."""
    units, seed = check_units(units), check_seed(seed)
    with on_host():
        return LSTM(units, nnx.Rngs(params=seed))


def mixed_precision(model: LSTM) -> LSTM:
    """A bfloat16-compute copy of `model` (float32 parameters, the same values; the same unroll)."""
    copy = abstract(lambda: LSTM(model.arch.units, nnx.Rngs(params=0), dtype=jnp.bfloat16))
    copy.unroll = model.unroll
    nnx.update(copy, nnx.state(model))
    return copy


# Keras's field of an LSTM layer -> the cell's Linear holding it, and that Linear's field


@dataclass(frozen=True)
class LstmOptions:
    """How the row LSTM trains: 'jit' or 'shard_map' (no pmap variant); mixed precision (bfloat16 compute, float32
    parameters and Adam state); lax.scan's unroll over the 28 time steps (1: a rolled loop, as nnx.RNN out of the box;
    k: k steps per loop iteration; True: every step as straight-line code). One training step per dispatch;
    `prefetch`: as catalog.CnnOptions's."""

    parallel: str = "jit"
    unroll: int | bool = 1
    mixed: bool = False
    steps_per_dispatch: int = 1
    prefetch: int = 0


@dataclass(frozen=True)
class LstmInferOptions:
    """The row LSTM's inference program: lax.scan's unroll over the time steps, as LstmOptions's."""

    unroll: int | bool = 1


TRAIN, INFER = "lstm_train", "lstm_infer"  # its row kinds, each with its variants below
WORKLOAD = "lstm"  # an adapter (parity.api.adapters): its workload
# nnx.RNN over lax.scan out of the box; '+unroll' the scan fully unrolled (28 steps of straight-line code), '+unroll4'
# four steps per iteration. Unrolled training loses on every CPU class measured
# (docs/results/zen4/cpu-default-unrolled-lstm.json): in `levers`, not the best-known. Unrolled inference is the
# best-known (docs/tuning.md; docs/results/xeon-avx512/cpu-levers.json). On a TPU unrolled training is the best-known
# in float32 (docs/tpu.md, "Best-known on the chip"), and there each format's best-known puts each batch on the chip
# ahead of its step ('+prefetch'), not ranked elsewhere (a CPU's host is its device).
ON_TPU = (("tpu", 0),)
VARIANTS: tuple[Variant, ...] = (
    Variant("jit", TRAIN, ONE, rank=1, ranks=(("tpu", 2),), options=LstmOptions()),
    Variant("jit+unroll", TRAIN, ONE, tuned=True, ranks=(("tpu", 1),), options=LstmOptions(unroll=True)),
    Variant("jit+unroll4", TRAIN, ONE, tuned=True, options=LstmOptions(unroll=4)),
    Variant(
        "jit+bf16",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        rank=0,
        ranks=(("tpu", 1),),
        float32="jit",
        options=LstmOptions(mixed=True),
    ),
    Variant("jit+prefetch", TRAIN, ONE, tuned=True, dispatch=True, options=LstmOptions(prefetch=PREFETCH)),
    Variant(
        "jit+unroll+prefetch",
        TRAIN,
        ONE,
        tuned=True,
        dispatch=True,
        ranks=ON_TPU,
        options=LstmOptions(unroll=True, prefetch=PREFETCH),
    ),
    Variant(
        "jit+bf16+prefetch",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        dispatch=True,
        ranks=ON_TPU,
        float32="jit+prefetch",
        options=LstmOptions(mixed=True, prefetch=PREFETCH),
    ),
    Variant(
        "jit+bf16+unroll",
        TRAIN,
        ONE,
        "bfloat16",
        tuned=True,
        float32="jit+unroll",
        options=LstmOptions(unroll=True, mixed=True),
    ),
    Variant("shard_map", TRAIN, MANY, rank=1, options=LstmOptions("shard_map")),
    Variant("shard_map+unroll", TRAIN, MANY, tuned=True, options=LstmOptions("shard_map", unroll=True)),
    Variant("predict", INFER, ONE, rank=1, options=LstmInferOptions()),
    Variant("predict+unroll", INFER, ONE, tuned=True, rank=0, options=LstmInferOptions(unroll=True)),
)


def train_with(model: LSTM, o) -> tuple[str, str, bool]:
    """Set a training variant's static options (LstmOptions) on the model a trainer compiles; returns what the
    trainer reports: its recurrent kernel, no BatchNorm statistics, whether its time steps run in a lax.scan loop."""
    model.unroll = o.unroll
    return kernel_path(o.unroll), "none", o.unroll is not True


def compute_dtype(model: LSTM) -> str:
    """What the model's layers compute in: 'float32' or 'bfloat16'."""
    return jnp.dtype(model.dtype or jnp.float32).name


_CELL = {"kernel": ("dense_i", "kernel"), "recurrent_kernel": ("dense_h", "kernel"), "bias": ("dense_h", "bias")}


def _slots(model: LSTM):
    """Each variable in the order Keras's Model.get_weights() lists them (parity.api.lstm's table)."""
    for w in model.arch.weights:
        layer = getattr(model, w.layer)
        if isinstance(layer, nnx.RNN):
            linear, field = _CELL[w.field]
            yield getattr(getattr(layer.cell, linear), field)
        else:
            yield getattr(layer, w.field)


def get_weights(model: LSTM) -> list[np.ndarray]:
    """All weights as NumPy arrays, in Keras's get_weights() order."""
    return param_weights(_slots, model)


def set_weights(model: LSTM, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch (a list
    for another width included)."""
    check_lstm_weights(weights, model.arch.units)
    set_param_weights(_slots, model, weights)


count_params = param_count  # as Keras's summary counts them: every weight trains
forward_layers = block_outputs  # every block's output as NumPy, by block name (inference)


def loss_and_grads(model: LSTM, x: np.ndarray, y: np.ndarray) -> Gradients:
    """One batch's loss and gradients, grads in Keras's trainable_weights order (all 8 arrays); no max pooling,
    so no routing. The model is not changed."""
    return param_loss_and_grads(model, x, y, _slots)


def prepare_inference(model: LSTM, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` on devices[0], inputs placed beforehand; the variant's unroll on a copy
    (the model passed in keeps its own).

    Raises:
        ValueError: a variant not among variants("lstm_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # LstmInferOptions
    cost = (lambda: (None, TIME_LOOP)) if o.unroll is not True else None  # XLA counts a loop's body once
    return prepared_inference(
        model, images, devices, lambda m: setattr(m, "unroll", o.unroll), cost, kernel_path(o.unroll)
    )
