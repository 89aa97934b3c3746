"""The GRU in Keras 3 on TensorFlow: the model is keras_models.py's; here its variants, as parity's TensorFlow
implementation declares them (tf_impl.catalog's options records, which its trainer reads)."""

from __future__ import annotations

from parity.api.variants import ONE, Variant
from parity_gru.keras_models import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (this adapter's)
from tf_impl.catalog import InferOptions, TrainOptions

VARIANTS: tuple[Variant, ...] = (
    Variant("fit", TRAIN, ONE, rank=0, options=TrainOptions()),
    Variant("predict", INFER, ONE, rank=0, options=InferOptions()),
)
