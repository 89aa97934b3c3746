"""Types shared by the two implementations and the harness (the mirror's frame)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class DeviceUnavailable(RuntimeError):
    """The requested device is absent, or has fewer cores than replicas asked for."""


@dataclass(frozen=True)
class Prepared:
    """A computation with its inputs already placed on the devices, ready to call.

    run: computes and returns the framework's output (not synchronised).
    shape: global shape of an output, whatever its per-device layout.
    rows: copies the given global batch rows of an output to a NumPy array.
    placement: the devices ('cpu:3', 'gpu:0', ...) that computed an output.
    cost: FLOPs of one call as the framework's compiler or profiler counts them, and which counter
        said so; (None, why) where the framework offers no count. Cross-checks the analytic formula.
    """

    run: Callable[[], Any]
    shape: Callable[[Any], tuple[int, ...]]
    rows: Callable[[Any, Sequence[int]], np.ndarray]
    placement: Callable[[Any], list[str]]
    cost: Callable[[], tuple[float | None, str]] = lambda: (None, "no FLOP count offered")


class Gradients(NamedTuple):
    """One training batch's loss and gradients, as both implementations' loss_and_grads return them.

    loss: the mean cross-entropy. grads: every trainable weight's gradient, in Keras's
    trainable_weights order. routing: for each max-pooling layer, the weight the framework's own
    max-pool gradient gives each position of the pooling input in this very pass (1 at the position a
    window's gradient goes to, 0 elsewhere): how it broke that batch's ties and near-ties.
    """

    loss: float
    grads: list[np.ndarray]
    routing: list[np.ndarray]


def save_npz(weights: Sequence[np.ndarray], path) -> None:
    """Weights in Keras's get_weights() order to a .npz file (no pickle), written atomically."""
    import os
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    np.savez(tmp, **{f"w{i:03d}": np.asarray(w) for i, w in enumerate(weights)})
    os.replace(tmp, path)


def load_npz(path) -> list[np.ndarray]:
    """The weight list saved by save_npz. Raises ValueError on a file that is not one."""
    import zipfile

    try:
        f = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: unreadable weight file ({type(e).__name__})") from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: not a weight file (.npz of arrays w000, w001, ...)")
    with f:
        keys = sorted(f.files)
        if not keys or keys != [f"w{i:03d}" for i in range(len(keys))]:
            raise ValueError(f"{path}: not a parity weight file (keys {keys[:3]}...)")
        return [f[k] for k in keys]
