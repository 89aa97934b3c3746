"""The small ViT in Keras 3 on the TensorFlow backend: the model is keras_models.vit's (the code keras_jax_impl runs on
JAX). It holds no recurrent layer, so nothing here needs TensorFlow itself: the model functions (tf_impl.models) and
the Trainer (tf_impl.train) take it as every model, through its code (keras_models.models.code_of), and its kernel
path is None (tf_impl.lstm.kernel_path asks the code)."""

from __future__ import annotations

from keras_models.vit import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
