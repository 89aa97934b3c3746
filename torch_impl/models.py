"""The implementation's adapters (parity.api.adapters): an operation's module as it is, a trained model's
(torch_impl.cnn, torch_impl.lstm, torch_impl.vit) bound to the one trainer (torch_impl.train), which takes the adapter
(mirror image of jax_impl.models)."""

from __future__ import annotations

from typing import Any

from parity.api import adapters


def _trained(code) -> adapters.Trained:
    from torch_impl.train import make_trainer  # the trainer imports the adapters' model code: imported at first use

    return adapters.Trained(code, make_trainer)


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's with its model functions and trainer (parity.api.adapters.Trained). Raises ValueError for a
    workload it has none for."""
    return adapters.bound(__package__, workload, _trained)
