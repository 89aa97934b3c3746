"""Every label a run prints resolves in docs/glossary.md: each part of each variant name and setting name an
implementation declares (its adapters' variants, its catalog's settings: read from their source, since importing them
starts TensorFlow or JAX), and the terms the summary uses. A new lever without an entry fails here. No framework is
imported."""

import ast
import re
from pathlib import Path

import pytest

from parity.common.frameworks import TABLE

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = tuple(f.module for f in TABLE.values())  # every framework's package, from the one table
# the calls that declare a record, its name first: parity.api.variants' own, and the implementations' shorthands for
# it (keras_jax_impl.catalog.declare; jax_impl.cnn._bf16)
RECORDS = {"Variant": ("Variant", "declare", "_bf16"), "Setting": ("Setting",)}
GLOSSARY = (ROOT / "docs/glossary.md").read_text()
ENTRIES = set(re.findall(r"\*\*`?([^*`]+)`?\*\*", GLOSSARY))
TERMS = (
    "workload",
    "kind",
    "configuration",
    "out of the box",
    "best-known configuration",
    "fastest",
    "row LSTM",
    "paired by interleaving round",
    "no difference",
    "not settled",
    "2 modes",
    "not judged",
    "floor",
    "AMX",
    "AVX512_BF16",
)


def _name_parts(arg: ast.expr) -> list[str]:
    """The '+'-separated parts of a declared name: a string, or an f-string's literal pieces ('{p}+bf16+pool':
    bf16, pool; `p` is itself a declared name elsewhere)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        text = arg.value
    elif isinstance(arg, ast.JoinedStr):
        text = "+".join(v.value for v in arg.values if isinstance(v, ast.Constant))
    else:
        return []
    return [p for p in text.split("+") if p]


def _declared(record: str) -> dict[str, set[str]]:
    """Each label part declared by calls making a `record` ('Variant', 'Setting') in each implementation's modules, by
    implementation."""
    out = {}
    for impl in IMPLEMENTATIONS:
        parts = set()
        for path in sorted((ROOT / impl).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) in RECORDS[record] and node.args:
                    parts.update(_name_parts(node.args[0]))
        out[impl] = parts
    return out


VARIANT_PARTS = _declared("Variant")
SETTING_PARTS = _declared("Setting")


def test_the_declarations_are_read():
    assert {"jit", "pool", "wgrad", "masks", "dgrad", "dots", "unroll4", "fused"} <= VARIANT_PARTS["jax_impl"]
    assert {"function", "fit", "spe", "loop", "xla", "unroll"} <= VARIANT_PARTS["tf_impl"]
    assert {"ops", "data_parallel", "fit", "spe", "bf16"} <= VARIANT_PARTS["keras_jax_impl"]
    assert {"eager", "cl", "compile", "autocast", "ddp", "sdpa"} <= VARIANT_PARTS["torch_impl"]
    assert {"ynn", "onednn", "thp", "heap"} <= SETTING_PARTS["jax_impl"]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_every_variant_and_setting_part_has_an_entry(impl):
    missing = (VARIANT_PARTS[impl] | SETTING_PARTS[impl]) - ENTRIES
    assert not missing, f"{impl} declares labels docs/glossary.md does not explain: {sorted(missing)}"


@pytest.mark.parametrize("term", TERMS)
def test_every_term_of_the_summary_has_an_entry(term):
    assert term in ENTRIES


def test_the_help_points_to_the_glossary():
    from parity.cli.flags import EXAMPLES

    assert "docs/glossary.md" in EXAMPLES
