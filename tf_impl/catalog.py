"""TensorFlow's options, those its builders read (never the variants' names), and the lookup of the variants its
adapters declare (tf_impl.cnn's VARIANTS, ...), each a record (parity.api.variants). TensorFlow names no process-wide
setting: its XLA is a per-function option, a variant; capping oneDNN's ISA costs speed (docs/numerics.md)."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.adapters import variants_of
from parity.api.variants import MANY, ONE, Setting, Variant, lookup, offered
from tf_impl.devices import multiworker


@dataclass(frozen=True)
class OpOptions:
    """How an operation runs: one tf.function ('function'; XLA-compiled with `xla`, jit_compile=True), or under the
    device's strategy ('strategy': TPUStrategy on a TPU, MirroredStrategy on GPUs or logical CPUs); bfloat16
    operands (cast once, beforehand; bfloat16 out, as under Keras's mixed_bfloat16 policy)."""

    parallel: str = "function"
    xla: bool = False
    bfloat16: bool = False


@dataclass(frozen=True)
class TrainOptions:
    """How a trained model (the CNN, the ViT; the row LSTM's tf_impl.lstm.LstmOptions adds to it) trains: Keras's
    'fit' (model.compile + model.fit) or the harness's custom 'loop' of strategy.run steps; under a strategy
    (`distributed`) or on one device; XLA forced (jit_compile=True) or Keras's 'auto' (no XLA on a CPU); several
    steps per dispatch (fit's steps_per_execution, or that many strategy.run steps in one tf.function); mixed
    precision (Keras's 'mixed_bfloat16' policy, float32 softmax)."""

    api: str = "fit"
    distributed: bool = False
    xla: bool = False
    steps_per_dispatch: int = 1
    mixed: bool = False


@dataclass(frozen=True)
class InferOptions:
    """How a model infers (the LSTM, the ViT): the LSTM's layers unrolled (`unroll`) or not; the call XLA-compiled
    (`xla`: tf.function(jit_compile=True)) or run by TF's executor."""

    unroll: bool = False
    xla: bool = False


def op_variants(kind: str) -> tuple[Variant, ...]:
    """An operation's (the conv's, the matmul's): a tf.function, under XLA, in bfloat16, under the strategy."""
    return (
        Variant("function", kind, ONE, rank=0, options=OpOptions()),
        Variant("function+xla", kind, ONE, tuned=True, options=OpOptions(xla=True)),
        Variant(
            "function+bf16",
            kind,
            ONE,
            "bfloat16",
            tuned=True,
            rank=0,
            float32="function",
            options=OpOptions(bfloat16=True),
        ),
        Variant("strategy", kind, MANY, rank=0, options=OpOptions("strategy")),
    )


# Every variant is declared by its workload's adapter (tf_impl.cnn's VARIANTS, ...), in the order rows are listed.
# `rank`: the best-known configuration's order of preference within a row kind, replica count and number format
# (lower first); each adapter says why its order is what it is. Measured by `--preset levers` on zen5 and
# xeon-avx512 (docs/results/<class>/cpu-levers.json; bfloat16 on zen5 only). `multiprocess`: Keras 3's fit fails
# under MultiWorkerMirroredStrategy (tensorflow#72388: it reduces scalar logs over axis 0), so a multi-process run
# offers the custom loop only.
def table() -> tuple[Variant, ...]:
    """Every variant TensorFlow declares: its adapters' (parity.api.adapters.variants_of)."""
    return variants_of(__package__)


SETTINGS: tuple[Setting, ...] = ()


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (in a multi-process run, those it offers)."""
    return offered(table(), kind, replicas, multiprocess=multiworker() is not None)


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` among those offered. Raises ValueError naming the variants there are."""
    return lookup(variants(kind, replicas), kind, name, replicas, "TF")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """Process-wide settings worth a worker of their own on `device`: none for TensorFlow, bfloat16 or not."""
    return SETTINGS
