"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3 on the TensorFlow backend: the model is keras_models.cnn's
(the code keras_jax_impl runs too). The model functions (tf_impl.models) and the trainer (tf_impl.train)
take it as they take every model."""

from keras_models.cnn import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
