"""The example's own adapter module (parity_gru/keras_jax_impl.py), for this variant of it."""

from parity_gru.keras_jax_impl import *  # noqa: F403
