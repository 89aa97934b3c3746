"""Types shared by the two implementations and the harness (the mirror's frame)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


class DeviceUnavailable(RuntimeError):
    """The requested device is absent, or has fewer cores than replicas asked for."""


class FrameworkMissing(ImportError):
    """A framework the run needs is not installed."""


@dataclass(frozen=True)
class Prepared:
    """A computation with its inputs already placed on the devices, ready to call.

    run: computes and returns the framework's output (not synchronised).
    shape: global shape of an output, whatever its per-device layout.
    rows: copies the given global batch rows of an output to a NumPy array.
    placement: the devices ('cpu:3', 'gpu:0', ...) that computed an output.
    """

    run: Callable[[], Any]
    shape: Callable[[Any], tuple[int, ...]]
    rows: Callable[[Any, Sequence[int]], np.ndarray]
    placement: Callable[[Any], list[str]]
