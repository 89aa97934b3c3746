"""The row LSTM in Keras 3 on the TensorFlow backend: the model is keras_models.lstm's (the code keras_jax_impl runs
on JAX); here what needs TensorFlow itself: which kernel a model's recurrent layers run on a device, and whether TF's
profiler can count it. The model functions (tf_impl.models) and the Trainer (tf_impl.train) take every model alike,
through its adapter (keras_models.models.KerasTrained)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_models.lstm import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.variants import MANY, ONE, Variant
from tf_impl.catalog import InferOptions, TrainOptions


@dataclass(frozen=True)
class LstmOptions(TrainOptions):
    """How the row LSTM trains: as TrainOptions, and Keras's LSTM(unroll=True) on its LSTM layers (`unroll`: a Python
    loop over the 28 steps, where Keras otherwise runs tf.while_loop, or cuDNN's kernel on a GPU)."""

    unroll: bool = False


# fit, its layers unrolled (Keras's LSTM(unroll=True)), mixed precision; over several devices fit under MirroredStrategy
# (not in a multi-process run, as the CNN's) and the custom loop (what one uses). Unrolled loses on the CPU
# (docs/results/zen4/cpu-default-unrolled-lstm.json), so it is a lever, not the best-known; under MirroredStrategy over
# 8 logical CPUs its graph was slow to build and its epochs no faster (docs/tuning.md, "The row LSTM's variants"), so
# that combination is not offered. XLA (jit_compile=True): fit's at one device ('fit+xla'); over several the custom
# loop's, each replica's forward and backward pass under XLA and the all-reduce and Adam outside ('loop+xla'), since
# fit's jit_compile under MirroredStrategy fails on logical CPUs (XLA reads one replica's variables from another's
# device).
# 'fit+xla' is the best-known at one device (docs/tuning.md); 'loop+xla' a lever.
VARIANTS: tuple[Variant, ...] = (
    Variant("fit", TRAIN, ONE, rank=1, options=LstmOptions()),
    Variant("fit+unroll", TRAIN, ONE, tuned=True, options=LstmOptions(unroll=True)),
    Variant("fit+xla", TRAIN, ONE, tuned=True, rank=0, options=LstmOptions(xla=True)),
    Variant("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=LstmOptions(mixed=True)),
    Variant("strategy", TRAIN, MANY, rank=1, multiprocess=False, options=LstmOptions(distributed=True)),
    Variant("loop+xla", TRAIN, MANY, tuned=True, multiprocess=False, options=LstmOptions("loop", True, True)),
    # not in a multi-process run: under MultiWorkerMirroredStrategy the custom loop's LSTM killed the worker with a
    # SIGSEGV at its first epoch (2 processes x 1 CPU, TF 2.21, zen4; docs/multihost.md)
    Variant("loop", TRAIN, MANY, tuned=True, multiprocess=False, options=LstmOptions("loop", True)),
    Variant("predict", INFER, ONE, rank=1, options=InferOptions()),
    Variant("predict+unroll", INFER, ONE, tuned=True, options=InferOptions(unroll=True)),
    # the inference call under XLA, as 'fit+xla' trains (TF's executor runs Keras's generic loop op by op): the
    # best-known (docs/tuning.md; docs/results/xeon-avx512/tf-lstm-inference-xla.json)
    Variant("predict+xla", INFER, ONE, tuned=True, rank=0, options=InferOptions(xla=True)),
)
