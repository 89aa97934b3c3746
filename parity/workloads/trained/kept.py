"""A worker's trainers kept from its timed training rows for its parity round: a trajectory the round takes with the
same variant, devices, model, starting weights, numbers and batch shape as a row timed before it trains that row's
trainer, rewound to where it started (its `rewind`: the weights, optimizer state and step count it was made with),
instead of a new one whose programs compile again. Only where the rows come before the round (a CPU: an
accelerator's host takes its parity rounds first, parity.engine.ahead; a row finished after its kind's round keeps
nothing), and only a trainer that can rewind."""

from __future__ import annotations

from typing import Any

KEPT: dict[tuple, Any] = {}  # key() -> the trainer a finished row left
TAKEN: set[str] = set()  # the row kinds whose parity round this worker has taken: their rows keep nothing after it


def key(kind: str, variant: str, devices, model: Any, weights: str, spec, batch: int) -> tuple:
    """What a trainer's trajectory depends on: its row kind and variant, how many devices, the model (`model`: what
    tells it from another of the kind, e.g. its sizes, or whether its dropout is on), the starting weights' file, the
    spec's learning rate, Adam's epsilon and seed, and the global batch its programs were compiled for."""
    return (kind, variant, len(devices), model, weights, spec.learning_rate, spec.adam_epsilon, spec.seed, batch)


def keep(k: tuple, trainer: Any) -> None:
    """A finished row's trainer, kept for the round's trajectory of the same key (one that cannot rewind is not, nor
    one whose kind's round has been taken)."""
    if callable(getattr(trainer, "rewind", None)) and k[0] not in TAKEN:
        KEPT[k] = trainer


def take(k: tuple) -> Any | None:
    """The trainer kept under `k`, rewound to its start (and no longer kept), or None."""
    trainer = KEPT.pop(k, None)
    if trainer is not None:
        trainer.rewind()
    return trainer


def drop(kind: str) -> None:
    """Release every trainer of row kind `kind` the round did not take; its rows keep none from now on."""
    TAKEN.add(kind)
    for k in [k for k in KEPT if k[0] == kind]:
        del KEPT[k]
