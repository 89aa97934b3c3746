"""Keras 3 model code written once and run on either backend: tf_impl (Keras on TensorFlow) and keras_jax_impl
(Keras on JAX) build the same model from it. It imports Keras as the importing implementation has loaded it, and
never picks a backend itself."""
