"""The implementation's adapters (parity.api.adapters): an operation's module as it is, a trained model's (jax_impl.cnn,
jax_impl.lstm, jax_impl.vit) bound to the one trainer (jax_impl.train), which takes the adapter: a new trained
workload's module is found here without a line of this file, and no function here asks which model it holds."""

from __future__ import annotations

from typing import Any

from jax_impl.models import abstract
from parity.api import adapters


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's bound to jax_impl.train's trainer, a model given its weights (build_with) built abstract first
    (jax_impl.models.abstract). Raises ValueError for a workload it has none for."""
    return adapters.bound(
        __package__, workload, lambda code: adapters.Trained(code, "jax_impl.train", unfilled=abstract)
    )
