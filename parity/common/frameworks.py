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
    color: str  # in charts: matplotlib's name
    # modules its worker never loads: TF's lite converter imports JAX wherever JAX is installed (another
    # framework's runtime in TF's process, and 0.5-0.6 s of each TF worker's start-up)
    keeps_out: tuple[str, ...] = ()


# The two keys, for code that pairs one framework against the other (TF's best row against JAX's)
TF, JAX = "tf", "jax"


TABLE = {
    f.key: f
    for f in (
        Framework(
            TF,
            "TensorFlow",
            "TF",
            "tf_impl",
            ("tensorflow", "tensorflow-cpu", "keras"),
            "tab:orange",
            keeps_out=("jax",),
        ),
        Framework(JAX, "JAX", "JAX", "jax_impl", ("jax", "jaxlib", "flax", "optax"), "tab:blue"),
    )
}
KEYS = tuple(TABLE)  # ('tf', 'jax'): the order workers start and tables list them


def label(key: str) -> str:
    """'TensorFlow' for 'tf'."""
    return TABLE[key].label


def short(key: str) -> str:
    """'TF' for 'tf'."""
    return TABLE[key].short


def color(key: str) -> str:
    """'tab:orange' for 'tf'."""
    return TABLE[key].color
