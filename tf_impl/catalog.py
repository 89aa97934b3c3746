"""TensorFlow's variants, each declared once as a record (parity.api.variants): what the harness runs, and the
options this implementation's builders read (never the names). TensorFlow names no process-wide setting: its XLA is
a per-function option, a variant; capping oneDNN's ISA costs speed (docs/numerics.md)."""

from __future__ import annotations

from dataclasses import dataclass

from parity.api.cnn import STEPS_PER_DISPATCH
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
class CnnOptions:
    """How the CNN (and the ViT) trains: Keras's 'fit' (model.compile + model.fit) or the harness's custom 'loop' of
    strategy.run steps; under a strategy (`distributed`) or on one device; XLA forced (jit_compile=True) or Keras's
    'auto' (no XLA on a CPU); several steps per dispatch (fit's steps_per_execution, or that many strategy.run
    steps in one tf.function); mixed precision (Keras's 'mixed_bfloat16' policy, float32 softmax)."""

    api: str = "fit"
    distributed: bool = False
    xla: bool = False
    steps_per_dispatch: int = 1
    mixed: bool = False


@dataclass(frozen=True)
class LstmOptions(CnnOptions):
    """How the row LSTM trains: as CnnOptions, and Keras's LSTM(unroll=True) on its LSTM layers (`unroll`: a Python
    loop over the 28 steps, where Keras otherwise runs tf.while_loop, or cuDNN's kernel on a GPU)."""

    unroll: bool = False


@dataclass(frozen=True)
class InferOptions:
    """How a model infers (the LSTM, the ViT): the LSTM's layers unrolled (`unroll`) or not; the call XLA-compiled
    (`xla`: tf.function(jit_compile=True)) or run by TF's executor."""

    unroll: bool = False
    xla: bool = False


def _op(kind: str) -> tuple[Variant, ...]:
    return (
        Variant("function", kind, ONE, best=0, options=OpOptions()),
        Variant("function+xla", kind, ONE, tuned=True, options=OpOptions(xla=True)),
        Variant(
            "function+bf16",
            kind,
            ONE,
            "bfloat16",
            tuned=True,
            best=0,
            float32="function",
            options=OpOptions(bfloat16=True),
        ),
        Variant("strategy", kind, MANY, best=0, options=OpOptions("strategy")),
    )


SPE = STEPS_PER_DISPATCH
# Every variant, in the order rows are listed. `best`: the best-known configuration's order of preference within a
# row kind, replica count and number format (lower first): several steps a dispatch (Keras's steps_per_execution; at
# 8 replicas the custom loop, which stalls less than fit), mixed precision, not '+xla' (slower in every Zen 4 and
# Zen 5 run recorded: docs/tuning.md, "Which rows a run times") but for the row LSTM's. Measured by `--preset levers`
# on zen5 and xeon-avx512 (docs/results/<class>/cpu-levers.json; bfloat16 on zen5 only). `multiprocess`: Keras 3's fit
# fails under MultiWorkerMirroredStrategy (tensorflow#72388: it reduces scalar logs over axis 0), so a multi-process
# run offers the custom loop only.
VARIANTS: tuple[Variant, ...] = (
    *_op("conv"),
    *_op("matmul"),
    Variant("fit", "cnn_train", ONE, options=CnnOptions()),
    Variant("fit+xla", "cnn_train", ONE, tuned=True, options=CnnOptions(xla=True)),
    Variant("fit+spe", "cnn_train", ONE, tuned=True, dispatch=True, best=0, options=CnnOptions(steps_per_dispatch=SPE)),
    Variant(
        "fit+bf16", "cnn_train", ONE, "bfloat16", tuned=True, best=0, float32="fit", options=CnnOptions(mixed=True)
    ),
    Variant("strategy", "cnn_train", MANY, best=1, multiprocess=False, options=CnnOptions(distributed=True)),
    Variant("loop", "cnn_train", MANY, tuned=True, options=CnnOptions("loop", True)),
    Variant(
        "strategy+spe",
        "cnn_train",
        MANY,
        tuned=True,
        dispatch=True,
        multiprocess=False,
        options=CnnOptions(distributed=True, steps_per_dispatch=SPE),
    ),
    Variant(
        "loop+spe", "cnn_train", MANY, tuned=True, dispatch=True, best=0, options=CnnOptions("loop", True, False, SPE)
    ),
    Variant(
        "strategy+bf16",
        "cnn_train",
        MANY,
        "bfloat16",
        tuned=True,
        best=1,
        multiprocess=False,
        float32="strategy",
        options=CnnOptions(distributed=True, mixed=True),
    ),
    # bfloat16 over several devices on the float32 row's path: the custom loop, 10 steps a dispatch. Ranked first by
    # the mechanism measured in float32 (fit under MirroredStrategy stalls at each epoch's end, whatever the format:
    # docs/tuning.md, `loop`); its own speed is unmeasured, on no class with bfloat16 yet.
    Variant(
        "loop+spe+bf16",
        "cnn_train",
        MANY,
        "bfloat16",
        tuned=True,
        dispatch=True,
        best=0,
        float32="loop+spe",
        options=CnnOptions("loop", True, False, SPE, mixed=True),
    ),
    Variant("predict", "cnn_infer", ONE, best=0),
    # The row LSTM: fit, its layers unrolled (Keras's LSTM(unroll=True)), mixed precision; over several devices fit
    # under MirroredStrategy (not in a multi-process run, as the CNN's) and the custom loop (what one uses).
    # Unrolled loses on the CPU (fit 199 ms an epoch, unrolled 213 ms on zen4:
    # docs/results/zen4/cpu-default-unrolled-lstm.json), so it is a lever, not
    # the best-known; under MirroredStrategy over 8 logical CPUs its graph took 119 s to build and its epochs were
    # slower still (1.88 s against 1.46 s), so that combination is not offered. XLA (jit_compile=True): fit's at
    # one device ('fit+xla'); over several the custom loop's, each replica's forward and backward pass under XLA and
    # the all-reduce and Adam outside ('loop+xla'), since fit's jit_compile under MirroredStrategy fails on logical
    # CPUs (XLA reads one replica's variables from another's device). 'fit+xla' is the best-known at one device:
    # 0.88x (0.75-0.95) of fit on xeon-avx512 (docs/tuning.md); 'loop+xla' a lever.
    Variant("fit", "lstm_train", ONE, best=1, options=LstmOptions()),
    Variant("fit+unroll", "lstm_train", ONE, tuned=True, options=LstmOptions(unroll=True)),
    Variant("fit+xla", "lstm_train", ONE, tuned=True, best=0, options=LstmOptions(xla=True)),
    Variant(
        "fit+bf16", "lstm_train", ONE, "bfloat16", tuned=True, best=0, float32="fit", options=LstmOptions(mixed=True)
    ),
    Variant("strategy", "lstm_train", MANY, best=1, multiprocess=False, options=LstmOptions(distributed=True)),
    Variant("loop+xla", "lstm_train", MANY, tuned=True, multiprocess=False, options=LstmOptions("loop", True, True)),
    # not in a multi-process run: under MultiWorkerMirroredStrategy the custom loop's LSTM killed the worker with a
    # SIGSEGV at its first epoch (2 processes x 1 CPU, TF 2.21, zen4; docs/multihost.md)
    Variant("loop", "lstm_train", MANY, tuned=True, multiprocess=False, options=LstmOptions("loop", True)),
    Variant("predict", "lstm_infer", ONE, best=1, options=InferOptions()),
    Variant("predict+unroll", "lstm_infer", ONE, tuned=True, options=InferOptions(unroll=True)),
    # the inference call under XLA, as 'fit+xla' trains (TF's executor runs Keras's generic loop op by op): the
    # best-known, 0.51x (0.48-0.56) of predict on xeon-avx512 (docs/results/xeon-avx512/tf-lstm-inference-xla.json)
    Variant("predict+xla", "lstm_infer", ONE, tuned=True, best=0, options=InferOptions(xla=True)),
    # The ViT: fit, fit under XLA (jit_compile=True), mixed precision, and over several devices fit under
    # MirroredStrategy (not in a multi-process run, as the CNN's); inference by TF's executor or under XLA. No
    # flash-attention variant: Keras's MultiHeadAttention(flash_attention=True) raises on the TensorFlow backend, on a
    # CPU as on every device ("Flash attention is not supported in tensorflow backend"). Training's best-known is
    # fit+xla: fit+xla / fit 0.87x (0.77-0.91) on xeon-amx (docs/results/xeon-amx/cpu-levers-vit.json), 0.98x
    # (0.96-1.08) on zen4, no difference there (docs/results/zen4/cpu-levers-vit.json)
    Variant("fit", "vit_train", ONE, best=1, options=CnnOptions()),
    Variant("fit+xla", "vit_train", ONE, tuned=True, best=0, options=CnnOptions(xla=True)),
    Variant(
        "fit+bf16", "vit_train", ONE, "bfloat16", tuned=True, best=0, float32="fit", options=CnnOptions(mixed=True)
    ),
    Variant("strategy", "vit_train", MANY, best=0, multiprocess=False, options=CnnOptions(distributed=True)),
    Variant("predict", "vit_infer", ONE, best=1, options=InferOptions()),
    # best-known: predict+xla / predict 0.76x (0.75-0.81) on zen4 (docs/results/zen4/cpu-levers-vit.json); fit+xla /
    # fit 0.98x (0.96-1.08) there, a lever
    Variant("predict+xla", "vit_infer", ONE, tuned=True, best=0, options=InferOptions(xla=True)),
)
SETTINGS: tuple[Setting, ...] = ()


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (in a multi-process run, those it offers)."""
    return offered(VARIANTS, kind, replicas, multiprocess=multiworker() is not None)


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` among those offered. Raises ValueError naming the variants there are."""
    return lookup(variants(kind, replicas), kind, name, replicas, "TF")


def declared(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` in the table, offered here or not. Raises ValueError naming the variants there are."""
    return lookup(VARIANTS, kind, name, replicas, "TF")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """Process-wide settings worth a worker of their own on `device`: none for TensorFlow, bfloat16 or not."""
    return SETTINGS
