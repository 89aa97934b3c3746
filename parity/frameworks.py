"""The frameworks the harness drives, in one table: key, label, implementation module, distributions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    """One framework: its key in rows and flags ('tf'), its names in tables and notes, its implementation
    package (which parity imports only in a worker process), and the distributions whose versions a run records."""

    key: str
    label: str  # in progress lines and the table's notes: 'TensorFlow'
    short: str  # in the checks' notes: 'TF'
    module: str  # the implementation package: 'tf_impl'
    distributions: tuple[str, ...]


TABLE = {
    f.key: f
    for f in (
        Framework("tf", "TensorFlow", "TF", "tf_impl", ("tensorflow", "tensorflow-cpu", "keras")),
        Framework("jax", "JAX", "JAX", "jax_impl", ("jax", "jaxlib", "flax", "optax")),
    )
}
KEYS = tuple(TABLE)  # ('tf', 'jax'): the order workers start and tables list them


def label(key: str) -> str:
    """'TensorFlow' for 'tf'."""
    return TABLE[key].label


def short(key: str) -> str:
    """'TF' for 'tf'."""
    return TABLE[key].short
