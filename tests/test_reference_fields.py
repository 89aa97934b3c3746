"""docs/your-workload-full.md's Reference names every field of the full road's records, as the code declares them:
each table's first column lists its record's fields in their order, a signature written out names its fields in
theirs, and every key the checks read of a TrainedModel's bounds and tolerances is in their rows. Read from the
records and the checks' source; no framework is imported."""

import dataclasses
import re
from pathlib import Path

import pytest

from parity.api import Gradients, Prepared
from parity.workloads.base import Workload
from parity.workloads.trained import checks, model_checks, model_suite
from parity.workloads.trained.float64 import FrameworkOracle
from parity.workloads.trained.model import TrainedModel

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "your-workload-full.md").read_text()
REFERENCE = PAGE[PAGE.index("\n## Reference\n") :]


def _table(heading: str) -> list[str]:
    """The names in the first column of the table under `### heading` (or under the line `heading`), in order:
    '`full`, `cpu`, `quick`' gives three."""
    start = REFERENCE.index(heading)
    rows = re.search(r"\n\|[^\n]*\n\|[-|]+\|\n((?:\|[^\n]*\n)+)", REFERENCE[start:])[1]
    return [n for row in rows.splitlines() for n in re.findall(r"`(\w+)`", row.split("|")[1])]


def _row(table: str, name: str) -> str:
    start = REFERENCE.index(table)
    return next(r for r in REFERENCE[start:].splitlines() if r.startswith(f"| `{name}` |"))


@pytest.mark.parametrize(
    "heading,record",
    [("### `TrainedModel`", TrainedModel), ("### `Workload`", Workload), ("`Prepared`'s fields", Prepared)],
)
def test_each_records_table_lists_its_fields_in_order(heading, record):
    assert _table(heading) == [f.name for f in dataclasses.fields(record)]


def test_a_signature_written_out_names_its_fields_in_order():
    oracle = ", ".join(f.name for f in dataclasses.fields(FrameworkOracle))
    assert f"`FrameworkOracle({oracle})`" in REFERENCE
    assert f"-> parity.api.Gradients({', '.join(Gradients._fields)})`" in REFERENCE


def _read(module, name: str) -> set[str]:
    """The keys `module`'s source reads of the dict it holds as `name` ('derived["loss"]')."""
    return set(re.findall(rf'\b{name}\["(\w+)"\]', Path(module.__file__).read_text()))


def test_every_key_the_checks_read_of_bounds_and_tolerances_is_in_its_row():
    bounds = _read(model_checks, "derived")
    assert bounds == {"loss", "grads", "grad_abs"}
    assert all(f"`{k}`" in _row("### `TrainedModel`", "bounds") for k in bounds)
    suite = Path(model_suite.__file__).read_text()
    tolerances = _read(checks, "tols") | set(re.findall(r'tolerances\([^)]*\)\["(\w+)"\]', suite))
    assert tolerances == {"trajectory_loss", "trajectory_params", "accuracy_band"}
    assert all(f"`{k}`" in _row("### `TrainedModel`", "tolerances") for k in tolerances)
