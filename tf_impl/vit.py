"""The small ViT in Keras 3 on the TensorFlow backend: the model is keras_models.vit's (the code keras_jax_impl runs on
JAX). It holds no recurrent layer, so nothing here needs TensorFlow itself: the model functions (tf_impl.models) and
the Trainer (tf_impl.train) take it as every model, through its adapter (keras_models.models.KerasTrained), and its
kernel path is None (tf_impl.models.kernel_path asks the code: keras_models.vit.kernel_path)."""

from __future__ import annotations

from keras_models.vit import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.variants import MANY, ONE, Variant
from tf_impl.catalog import InferOptions, TrainOptions

# fit, fit under XLA (jit_compile=True), mixed precision, and over several devices fit under MirroredStrategy (not in
# a multi-process run, as the CNN's); inference by TF's executor or under XLA. No flash-attention variant: Keras's
# MultiHeadAttention(flash_attention=True) raises on the TensorFlow backend, on a CPU as on every device ("Flash
# attention is not supported in tensorflow backend"). Training's best-known is fit+xla: faster than fit on
# xeon-amx, level on zen4 (docs/tuning.md, "On `xeon-amx`: the ViT's and the row LSTM's levers")
VARIANTS: tuple[Variant, ...] = (
    Variant("fit", TRAIN, ONE, rank=1, options=TrainOptions()),
    Variant("fit+xla", TRAIN, ONE, tuned=True, rank=0, options=TrainOptions(xla=True)),
    Variant("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=TrainOptions(mixed=True)),
    Variant("strategy", TRAIN, MANY, rank=0, multiprocess=False, options=TrainOptions(distributed=True)),
    Variant("predict", INFER, ONE, rank=1, options=InferOptions()),
    # best-known: faster than predict on zen4 (docs/results/zen4/cpu-levers-vit.json)
    Variant("predict+xla", INFER, ONE, tuned=True, rank=0, options=InferOptions(xla=True)),
)
