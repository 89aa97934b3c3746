"""The workloads, found from one list: each is a package under parity/workloads/ whose WORKLOAD record declares its
specs, row kinds (with the case a worker builds for each), formulas, tolerances and, for a trained one, its parent
side and untimed calls. A new workload is one package here plus one module per implementation (docs/architecture.md).
"""

from __future__ import annotations

from parity.workloads import cnn, conv, lstm, matmul, vit
from parity.workloads.base import DEVICES, PRECISIONS, RowKind, Workload

__all__ = ["DEVICES", "PRECISIONS", "WORKLOADS", "RowKind", "Workload", "row_kind", "trained"]

WORKLOADS: dict[str, Workload] = {
    w.name: w for w in (conv.WORKLOAD, cnn.WORKLOAD, lstm.WORKLOAD, vit.WORKLOAD, matmul.WORKLOAD)
}


def row_kind(name: str) -> tuple[Workload, RowKind]:
    """The workload and row kind named `name` ('conv', 'cnn_train', ...). Raises KeyError."""
    for w in WORKLOADS.values():
        for k in w.kinds:
            if k.name == name:
                return w, k
    raise KeyError(f"no row kind {name!r}; have {[k.name for w in WORKLOADS.values() for k in w.kinds]}")


def trained(name: str) -> bool:
    """Whether rows of the kind named `name` time training epochs (the first apart) rather than calls."""
    return row_kind(name)[1].epochs
