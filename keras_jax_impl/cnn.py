"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3 on the JAX backend: the model is keras_models.cnn's
(the code tf_impl runs too). The model functions (keras_jax_impl.models) and the trainer (keras_jax_impl.train)
take it as they take every model."""

from keras_models.cnn import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
