"""The row LSTM in Keras 3 on the JAX backend: the model is keras_models.lstm's (the code tf_impl runs on
TensorFlow); here what needs JAX itself: which kernel a model's recurrent layers run on a device, and whether XLA's
cost analysis can count it. The model functions (keras_jax_impl.models) and the Trainer (keras_jax_impl.train) take
every model alike, through its adapter (keras_models.models.KerasTrained)."""

from __future__ import annotations

from dataclasses import dataclass

from keras_jax_impl.catalog import InferOptions, TrainOptions, declare
from keras_models.lstm import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.variants import MANY, ONE, Variant


@dataclass(frozen=True)
class LstmOptions(TrainOptions):
    """How the row LSTM trains: as TrainOptions, and Keras's LSTM(unroll=True) on its LSTM layers (`unroll`: a Python
    loop over the 28 steps, where Keras otherwise runs lax.scan)."""

    unroll: bool = False


# fit, its layers unrolled (Keras's LSTM(unroll=True): a lever, not the best-known,
# docs/results/zen4/cpu-default-unrolled-lstm.json), mixed precision, DataParallel; inference unrolled, the best-known
# (docs/tuning.md; docs/results/xeon-avx512/cpu-levers.json)
VARIANTS: tuple[Variant, ...] = (
    declare("fit", TRAIN, ONE, rank=1, options=LstmOptions()),
    declare("fit+unroll", TRAIN, ONE, tuned=True, options=LstmOptions(unroll=True)),
    declare("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=LstmOptions(mixed=True)),
    declare("data_parallel", TRAIN, MANY, rank=0, options=LstmOptions(distributed=True)),
    declare("predict", INFER, ONE, rank=1, options=InferOptions()),
    declare("predict+unroll", INFER, ONE, tuned=True, rank=0, options=InferOptions(unroll=True)),
)
