"""The example's own adapter module (parity_gru/tf_impl.py), for this variant of it."""

from parity_gru.tf_impl import *  # noqa: F403
