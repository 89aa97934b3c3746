"""The row LSTM in Keras 3 on the JAX backend: the model is keras_models.lstm's (the code tf_impl runs on
TensorFlow); here what needs JAX itself: which kernel a model's recurrent layers run on a device, and whether XLA's
cost analysis can count it. The model functions (keras_jax_impl.models) and the Trainer (keras_jax_impl.train) take
every model alike, through its adapter (keras_models.models.KerasTrained)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import jax

from keras_jax_impl.catalog import InferOptions, TrainOptions, declare
from keras_models.lstm import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.variants import MANY, ONE, Variant


@dataclass(frozen=True)
class LstmOptions(TrainOptions):
    """How the row LSTM trains: as TrainOptions, and Keras's LSTM(unroll=True) on its LSTM layers (`unroll`: a Python
    loop over the 28 steps, where Keras otherwise runs lax.scan)."""

    unroll: bool = False


# fit, its layers unrolled (Keras's LSTM(unroll=True): a lever, not the best-known: 2.49 s an epoch against fit's
# 240 ms on zen4, docs/results/zen4/cpu-default-unrolled-lstm.json), mixed precision, DataParallel; inference
# unrolled, the best-known: 0.87x (0.77-0.94) of predict on xeon-avx512 (docs/results/xeon-avx512/cpu-levers.json)
VARIANTS: tuple[Variant, ...] = (
    declare("fit", TRAIN, ONE, rank=1, options=LstmOptions()),
    declare("fit+unroll", TRAIN, ONE, tuned=True, options=LstmOptions(unroll=True)),
    declare("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=LstmOptions(mixed=True)),
    declare("data_parallel", TRAIN, MANY, rank=0, options=LstmOptions(distributed=True)),
    declare("predict", INFER, ONE, rank=1, options=InferOptions()),
    declare("predict+unroll", INFER, ONE, tuned=True, rank=0, options=InferOptions(unroll=True)),
)


def kernel_path(code: ModuleType, model, device: jax.Device) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): "Keras's generic loop
    (lax.scan)" or 'unrolled'; on a GPU, Keras 3.15's JAX backend takes cuDNN's too (jax.experimental.rnn) where its
    conditions hold: 'cuDNN' (unverified here); None for a model without recurrent layers (the CNN). `code`: the
    model's Keras code (keras_models.<workload>)."""
    with jax.default_device(device):
        return code.kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why XLA's cost analysis cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can
    (no LSTM, or unrolled): it counts a while loop's body (lax.scan's) once however many steps it runs."""
    if path in (None, "unrolled"):
        return None
    return f"XLA cost analysis: not counted (the LSTM's {path} is counted for one step, not each step)"
