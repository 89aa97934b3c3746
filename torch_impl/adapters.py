"""The implementation's adapters (parity.api.adapters): an operation's module as it is, a trained model's
(torch_impl.cnn, torch_impl.lstm, torch_impl.vit) bound to the one trainer (torch_impl.train), which takes the adapter
(mirror image of jax_impl.adapters)."""

from __future__ import annotations

from typing import Any

from parity.api import adapters


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's bound to torch_impl.train's trainer. Raises ValueError for a workload it has none for."""
    return adapters.bound(__package__, workload, lambda code: adapters.Trained(code, "torch_impl.train"))
