"""Keras 3 on JAX: its variants, each declared once as a record (parity.api.variants), and the options this
implementation's builders read (never the names). What a Keras user reaches for: steps_per_execution, the
'mixed_bfloat16' policy, keras.distribution.DataParallel; jit_compile is left as Keras sets it ('auto': XLA on the
JAX backend, always). Its process-wide settings are jax_impl's, ranked alike: the same runtime (XLA's flags, huge
pages), which a Keras user sets as a JAX user does."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from jax_impl.catalog import SETTINGS as JAX_SETTINGS
from jax_impl.catalog import settings as jax_settings
from parity.api.cnn import STEPS_PER_DISPATCH
from parity.api.variants import MANY, ONE, Setting, Variant, lookup, offered


@dataclass(frozen=True)
class OpOptions:
    """How an operation runs: keras.ops on one device ('ops'), or on inputs laid out by
    keras.distribution.DataParallel's data layout over several ('data_parallel'); bfloat16 operands (cast once,
    beforehand; bfloat16 out, as under Keras's mixed_bfloat16 policy)."""

    parallel: str = "ops"
    bfloat16: bool = False


@dataclass(frozen=True)
class CnnOptions:
    """How the CNN (and the ViT) trains: model.fit on one device, or under keras.distribution.DataParallel
    (`distributed`: one SPMD program over the devices, the global batch split along them); fit's steps_per_execution
    (on JAX, Keras still dispatches each step's jitted program: what it saves is the callbacks' and logs' round trips);
    mixed precision (Keras's 'mixed_bfloat16' policy, float32 softmax)."""

    distributed: bool = False
    steps_per_execution: int = 1
    mixed: bool = False


@dataclass(frozen=True)
class LstmOptions(CnnOptions):
    """How the row LSTM trains: as CnnOptions, and Keras's LSTM(unroll=True) on its LSTM layers (`unroll`: a Python
    loop over the 28 steps, where Keras otherwise runs lax.scan)."""

    unroll: bool = False


@dataclass(frozen=True)
class InferOptions:
    """How a model infers (the LSTM, the ViT): the LSTM's layers unrolled (`unroll`) or not."""

    unroll: bool = False


def _op(kind: str) -> tuple[Variant, ...]:
    return (
        Variant("ops", kind, ONE, best=0, multiprocess=False, options=OpOptions()),
        Variant(
            "ops+bf16",
            kind,
            ONE,
            "bfloat16",
            tuned=True,
            best=0,
            multiprocess=False,
            float32="ops",
            options=OpOptions(bfloat16=True),
        ),
        Variant("data_parallel", kind, MANY, best=0, multiprocess=False, options=OpOptions("data_parallel")),
    )


SPE = STEPS_PER_DISPATCH


def _cnn(name: str, span: str, distributed: bool) -> tuple[Variant, ...]:
    return (
        Variant(name, "cnn_train", span, best=1, multiprocess=False, options=CnnOptions(distributed)),
        Variant(
            f"{name}+spe",
            "cnn_train",
            span,
            tuned=True,
            dispatch=True,
            best=0,
            multiprocess=False,
            options=CnnOptions(distributed, SPE),
        ),
        Variant(
            f"{name}+bf16",
            "cnn_train",
            span,
            "bfloat16",
            tuned=True,
            best=0,
            multiprocess=False,
            float32=name,
            options=CnnOptions(distributed, mixed=True),
        ),
    )


# Every variant, in the order rows are listed. `best`: several steps an execution where it helps, mixed precision
# where the hardware has bfloat16, the LSTM's inference unrolled. Measured by `--preset levers` on xeon-avx512 at one
# device in float32 (docs/results/xeon-avx512/cpu-levers.json); the rest from default runs (docs/tuning.md). Not
# offered in a multi-process run: Keras's DataParallel over several processes (keras.distribution.initialize) is not
# wired here; said by the run when asked.
VARIANTS: tuple[Variant, ...] = (
    *_op("conv"),
    *_op("matmul"),
    *_cnn("fit", ONE, False),
    *_cnn("data_parallel", MANY, True),
    Variant("predict", "cnn_infer", ONE, best=0, multiprocess=False),
    # The row LSTM: fit, its layers unrolled (Keras's LSTM(unroll=True): a lever, not the best-known: 2.49 s an epoch
    # against fit's 240 ms on zen4,
    # docs/results/zen4/cpu-default-unrolled-lstm.json), mixed precision, DataParallel
    Variant("fit", "lstm_train", ONE, best=1, multiprocess=False, options=LstmOptions()),
    Variant("fit+unroll", "lstm_train", ONE, tuned=True, multiprocess=False, options=LstmOptions(unroll=True)),
    Variant(
        "fit+bf16",
        "lstm_train",
        ONE,
        "bfloat16",
        tuned=True,
        best=0,
        multiprocess=False,
        float32="fit",
        options=LstmOptions(mixed=True),
    ),
    Variant("data_parallel", "lstm_train", MANY, best=0, multiprocess=False, options=LstmOptions(distributed=True)),
    Variant("predict", "lstm_infer", ONE, best=1, multiprocess=False, options=InferOptions()),
    # unrolled inference: 0.87x (0.77-0.94) of predict on xeon-avx512 (docs/results/xeon-avx512/cpu-levers.json)
    Variant(
        "predict+unroll", "lstm_infer", ONE, tuned=True, best=0, multiprocess=False, options=InferOptions(unroll=True)
    ),
    # The ViT: fit, mixed precision, DataParallel, inference. No flash-attention variant: Keras's
    # MultiHeadAttention(flash_attention=True) runs on JAX only on a TPU or with cuDNN on a GPU, and on a CPU raises
    # ("cuDNN is not detected").
    Variant("fit", "vit_train", ONE, best=0, multiprocess=False, options=CnnOptions()),
    Variant(
        "fit+bf16",
        "vit_train",
        ONE,
        "bfloat16",
        tuned=True,
        best=0,
        multiprocess=False,
        float32="fit",
        options=CnnOptions(mixed=True),
    ),
    Variant("data_parallel", "vit_train", MANY, best=0, multiprocess=False, options=CnnOptions(distributed=True)),
    Variant("predict", "vit_infer", ONE, best=0, multiprocess=False, options=InferOptions()),
)
# JAX's runtime settings, the same records: Keras-JAX/JAX then compares the two frameworks' code on one runtime.
SETTINGS: tuple[Setting, ...] = JAX_SETTINGS


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (in a multi-process run: none)."""
    return offered(VARIANTS, kind, replicas, multiprocess=jax.distributed.is_initialized())


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` among those offered. Raises ValueError naming the variants there are."""
    return lookup(variants(kind, replicas), kind, name, replicas, "Keras (JAX)")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """The process-wide settings that make a difference on `device`: JAX's (jax_impl.catalog.settings)."""
    return jax_settings(device, native_bf16)
