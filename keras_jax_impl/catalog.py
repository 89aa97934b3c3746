"""Keras 3 on JAX: the options its builders read (never the variants' names), and the lookup of the variants its
adapters declare (keras_jax_impl.cnn's VARIANTS, ...), each a record (parity.api.variants). What a Keras user reaches
for: steps_per_execution, the 'mixed_bfloat16' policy, keras.distribution.DataParallel; jit_compile is left as Keras
sets it ('auto': XLA on the JAX backend, always). Its process-wide settings are jax_impl's, ranked alike: the same
runtime (XLA's flags, huge pages), which a Keras user sets as a JAX user does."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from jax_impl.catalog import SETTINGS as JAX_SETTINGS
from jax_impl.catalog import settings as jax_settings
from parity.api.adapters import variants_of
from parity.api.variants import MANY, ONE, Setting, Variant, lookup, offered


@dataclass(frozen=True)
class OpOptions:
    """How an operation runs: keras.ops on one device ('ops'), or on inputs laid out by
    keras.distribution.DataParallel's data layout over several ('data_parallel'); bfloat16 operands (cast once,
    beforehand; bfloat16 out, as under Keras's mixed_bfloat16 policy)."""

    parallel: str = "ops"
    bfloat16: bool = False


@dataclass(frozen=True)
class TrainOptions:
    """How a trained model (the CNN, the ViT; the row LSTM's keras_jax_impl.lstm.LstmOptions adds to it) trains:
    model.fit on one device, or under keras.distribution.DataParallel (`distributed`: one SPMD program over the
    devices, the global batch split along them); fit's steps_per_execution (on JAX, Keras still dispatches each
    step's jitted program: what it saves is the callbacks' and logs' round trips); mixed precision (Keras's
    'mixed_bfloat16' policy, float32 softmax)."""

    distributed: bool = False
    steps_per_execution: int = 1
    mixed: bool = False


@dataclass(frozen=True)
class InferOptions:
    """How a model infers (the LSTM, the ViT): the LSTM's layers unrolled (`unroll`) or not."""

    unroll: bool = False


def declare(*fields, **named) -> Variant:
    """A variant record (parity.api.variants.Variant's fields), not offered in a multi-process run: Keras's
    DataParallel over several processes (keras.distribution.initialize) is not wired here; said by the run when
    asked."""
    return Variant(*fields, multiprocess=False, **named)


def op_variants(kind: str) -> tuple[Variant, ...]:
    """An operation's (the conv's, the matmul's): keras.ops, in bfloat16, on inputs laid out by DataParallel."""
    return (
        declare("ops", kind, ONE, rank=0, options=OpOptions()),
        declare("ops+bf16", kind, ONE, "bfloat16", tuned=True, rank=0, float32="ops", options=OpOptions(bfloat16=True)),
        declare("data_parallel", kind, MANY, rank=0, options=OpOptions("data_parallel")),
    )


# Every variant is declared by its workload's adapter (keras_jax_impl.cnn's VARIANTS, ...), in the order rows are
# listed. `rank`: several steps an execution where it helps, mixed precision where the hardware has bfloat16, the
# LSTM's inference unrolled. Measured by `--preset levers` on xeon-avx512 at one device in float32
# (docs/results/xeon-avx512/cpu-levers.json); the rest from default runs (docs/tuning.md).
def table() -> tuple[Variant, ...]:
    """Every variant Keras on JAX declares: its adapters' (parity.api.adapters.variants_of)."""
    return variants_of(__package__)


# JAX's runtime settings, the same records: Keras-JAX/JAX then compares the two frameworks' code on one runtime.
SETTINGS: tuple[Setting, ...] = JAX_SETTINGS


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (in a multi-process run: none)."""
    return offered(table(), kind, replicas, multiprocess=jax.distributed.is_initialized())


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` among those offered. Raises ValueError naming the variants there are."""
    return lookup(variants(kind, replicas), kind, name, replicas, "Keras (JAX)")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """The process-wide settings that make a difference on `device`: JAX's (jax_impl.catalog.settings)."""
    return jax_settings(device, native_bf16)
