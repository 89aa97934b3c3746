"""Every label a run prints resolves in docs/glossary.md: each part of each variant name and setting name declared in
the catalogs (read from their source: importing them starts TensorFlow or JAX), and the terms the summary
uses. A new lever without an entry fails here. No framework is imported."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ("jax_impl/catalog.py", "tf_impl/catalog.py", "keras_jax_impl/catalog.py", "torch_impl/catalog.py")
GLOSSARY = (ROOT / "docs/glossary.md").read_text()
ENTRIES = set(re.findall(r"\*\*`?([^*`]+)`?\*\*", GLOSSARY))
TERMS = (
    "out of the box",
    "best-known configuration",
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
    """Each label part declared by `record(...)` calls ('Variant', 'Setting') in each catalog, by catalog."""
    out = {}
    for path in CATALOGS:
        parts = set()
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == record and node.args:
                parts.update(_name_parts(node.args[0]))
        out[path] = parts
    return out


VARIANT_PARTS = _declared("Variant")
SETTING_PARTS = _declared("Setting")


def test_the_catalogs_are_read():
    assert {"jit", "pool", "wgrad", "masks"} <= VARIANT_PARTS["jax_impl/catalog.py"]
    assert {"function", "fit", "spe", "loop", "xla"} <= VARIANT_PARTS["tf_impl/catalog.py"]
    assert {"ops", "data_parallel", "fit", "spe"} <= VARIANT_PARTS["keras_jax_impl/catalog.py"]
    assert {"ynn", "onednn", "thp", "heap"} <= SETTING_PARTS["jax_impl/catalog.py"]


@pytest.mark.parametrize("catalog", CATALOGS)
def test_every_variant_and_setting_part_has_an_entry(catalog):
    missing = (VARIANT_PARTS[catalog] | SETTING_PARTS[catalog]) - ENTRIES
    assert not missing, f"{catalog} declares labels docs/glossary.md does not explain: {sorted(missing)}"


@pytest.mark.parametrize("term", TERMS)
def test_every_term_of_the_summary_has_an_entry(term):
    assert term in ENTRIES


def test_the_help_points_to_the_glossary():
    from parity.cli.flags import EXAMPLES

    assert "docs/glossary.md" in EXAMPLES
