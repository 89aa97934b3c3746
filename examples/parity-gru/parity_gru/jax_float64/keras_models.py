"""The example's own adapter module (parity_gru/keras_models.py), for this variant of it."""

from parity_gru.keras_models import *  # noqa: F403
