"""The example's own adapter module (parity_gru/jax_impl.py), for this variant of it."""

from parity_gru.jax_impl import *  # noqa: F403
