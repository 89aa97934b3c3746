"""The example's own adapter module (parity_gru/torch_impl.py), for this variant of it."""

from parity_gru.torch_impl import *  # noqa: F403
