"""The small ViT in Keras 3 on the JAX backend: the model is keras_models.vit's (the code tf_impl runs on TensorFlow).
It holds no recurrent layer, so nothing here needs JAX itself: the model functions (keras_jax_impl.models) and the
Trainer (keras_jax_impl.train) take it as every model, through its adapter (keras_models.models.KerasTrained), and its
kernel path is None (keras_jax_impl.models.kernel_path asks the code: keras_models.vit.kernel_path)."""

from __future__ import annotations

from keras_jax_impl.catalog import InferOptions, TrainOptions, declare
from keras_models.vit import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.variants import MANY, ONE, Variant

# fit, mixed precision, DataParallel, inference. No flash-attention variant: Keras's
# MultiHeadAttention(flash_attention=True) runs on JAX only on a TPU or with cuDNN on a GPU, and on a CPU raises
# ("cuDNN is not detected").
VARIANTS: tuple[Variant, ...] = (
    declare("fit", TRAIN, ONE, rank=0, options=TrainOptions()),
    declare("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=TrainOptions(mixed=True)),
    declare("data_parallel", TRAIN, MANY, rank=0, options=TrainOptions(distributed=True)),
    declare("predict", INFER, ONE, rank=0, options=InferOptions()),
)
