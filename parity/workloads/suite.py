"""The parent side of a trained workload, as a declared protocol (parity.engine.registry.SUITES names them).

The engine calls these hooks for a workload that has a suite, and knows nothing else about training. A suite's
state (what it keeps between rounds) is its own type; the engine only passes it back. Worker-side counterparts
are the registered calls of parity.engine.registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from parity.engine.config import Config
from parity.workloads import RowKind


class Suite(Protocol):
    """Hooks, in the order a run calls them. `workers` and `hello` are the round's (workerproc.Worker, its
    first words) by key; `key` names the round (its replica count)."""

    def prepare(self, cfg: Config, spec: Any, save_dir: Path) -> tuple[Any, list[str]]:
        """Once, before any worker: the state, and notes for the table."""

    def warm(self, cfg: Config, workers: dict, state: Any) -> None:
        """Each round, before anything is timed: one-off set-up in the workers."""

    def case_args(
        self, spec: Any, seed_offset: int, workers: dict, save_dir: Path, state: Any
    ) -> tuple[Any, dict, str]:
        """Per seed: its spec, the extra fields of its 'prepare' requests, and a tag for its keys."""

    def row_extra(self, kind: RowKind, res: dict, spec: Any) -> dict:
        """A row's own figures (parity.output.rows.Row fields) from the worker's result."""

    def parity_collect(
        self, cfg: Config, spec: Any, workers: dict, hello: dict, save_dir: Path, state: Any, first: bool, log, key: int
    ) -> None:
        """After a round's rows: the workers' parity arrays (untimed)."""

    def parity_judge(
        self, cfg: Config, spec: Any, save_dir: Path, state: Any, first: bool, log, key: int
    ) -> list[dict]:
        """When a round's workers are gone: its parity checks."""

    def summary(self, cfg: Config, rows: list[dict], state: Any) -> tuple[list[dict], list[str]]:
        """After every round: closing checks over the rows (as results.json holds them), and notes."""
