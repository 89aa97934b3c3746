"""The workloads, found by listing: each is a package under parity/workloads/ whose WORKLOAD record (named as the
package) declares its specs, row kinds (with the case a worker builds for each), formulas, tolerances, its rank among
the others and, for a trained one, its parent side and untimed calls. A new workload is one package here plus one
module per implementation (docs/architecture.md); nothing here names it.
"""

from __future__ import annotations

from parity.api.adapters import declaring
from parity.workloads.base import DEVICES, PRECISIONS, RowKind, Workload

__all__ = ["DEVICES", "PRECISIONS", "WORKLOADS", "RowKind", "Workload", "row_kind", "trained"]


def _listed() -> dict[str, Workload]:
    """Every package here whose WORKLOAD is a Workload record of its own name (not `trained`, the machinery the trained
    ones share), by rank."""

    def declares(name: str, module) -> bool:
        record = getattr(module, "WORKLOAD", None)
        return isinstance(record, Workload) and record.name == name

    found = [m.WORKLOAD for m in declaring(__name__, declares)]
    return {w.name: w for w in sorted(found, key=lambda w: (w.rank, w.name))}


WORKLOADS: dict[str, Workload] = _listed()


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
