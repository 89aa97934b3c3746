"""The GRU in Keras 3 on JAX: the model is keras_models.py's; here its variants, as parity's Keras-on-JAX
implementation declares them (keras_jax_impl.catalog's options records, which its trainer reads)."""

from __future__ import annotations

from keras_jax_impl.catalog import InferOptions, TrainOptions, declare
from parity.api.variants import ONE, Variant
from parity_gru.keras_models import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (this adapter's)

VARIANTS: tuple[Variant, ...] = (
    declare("fit", TRAIN, ONE, rank=0, options=TrainOptions()),
    declare("predict", INFER, ONE, rank=0, options=InferOptions()),
)
