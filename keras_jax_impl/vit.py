"""The small ViT in Keras 3 on the JAX backend: the model is keras_models.vit's (the code tf_impl runs on TensorFlow).
It holds no recurrent layer, so nothing here needs JAX itself: the model functions (keras_jax_impl.models) and the
Trainer (keras_jax_impl.train) take it as every model, through its code (keras_models.models.code_of), and its
kernel path is None (keras_jax_impl.lstm.kernel_path asks the code)."""

from __future__ import annotations

from keras_models.vit import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
