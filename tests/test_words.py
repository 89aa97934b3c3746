"""One meaning per word in the harness's code, as docs/architecture.md's names of choice give them: `trained` is the
subpackage, `best` what `--configs best` runs, `configs` a selection mode, `wl` a workload's name, and a row kind's
record beside its name is `rkind`. Read from the source with ast; nothing is imported."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the --configs code, where `best` is the best-known configuration's variant by number format
CONFIGS_CODE = {"parity/engine/selection.py"}
# modules whose words are not mended yet (issue 108): left out until they are
PENDING: set[str] = set()  # modules still to mend, each with why


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted((ROOT / "parity").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in PENDING:
            out[rel] = ast.parse(path.read_text())
    return out


MODULES = _modules()


def _bound(tree: ast.AST) -> list[tuple[str, int]]:
    """Every name `tree` binds (assigned, a loop's or a comprehension's target, a parameter), with its line."""
    out = [(n.id, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return out + [(a.arg, a.lineno) for a in ast.walk(tree) if isinstance(a, ast.arg)]


def _named(word: str, skip: set[str] = frozenset()) -> list[str]:
    return [f"{m}:{line}" for m, tree in MODULES.items() if m not in skip for n, line in _bound(tree) if n == word]


def test_trained_names_the_subpackage_alone():
    assert not _named("trained"), "`trained` is the subpackage parity.workloads.trained: name this otherwise"
    assert "trained = " not in (ROOT / "parity/workloads/__init__.py").read_text()  # the old alias of times_epochs


def test_best_names_what_configs_best_runs_alone():
    found = _named("best", CONFIGS_CODE)
    assert not found, f"`best` is --configs best's; a largest measurement is `highest`, a least time `least`: {found}"


def test_configs_is_a_selection_mode_not_a_table():
    found = []
    for m, tree in MODULES.items():
        for n in ast.walk(tree):
            if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.value, ast.Name):
                if n.value.id == "configs":  # a mode is a string: nothing is looked up in it
                    found.append(f"{m}:{n.lineno}")
            if isinstance(n, ast.arg) and n.arg == "configs" and ast.unparse(n.annotation or ast.Name("str")) != "str":
                found.append(f"{m}:{n.lineno}")
    assert not found, f"`configs` is --configs' mode (a string); settings by name are `envs`: {found}"


def _row_kind_targets(tree: ast.AST) -> list[tuple[list[str], int]]:
    """The names each `... = row_kind(...)` binds, with its line."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "row_kind":
            names = [t.id for t in ast.walk(n.targets[0]) if isinstance(t, ast.Name)]
            out.append((names, n.lineno))
    return out


def test_wl_is_a_workloads_name_and_kind_a_row_kinds():
    found = []
    for m, tree in MODULES.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "wl":
                found.append(f"{m}:{n.lineno}: wl.{n.attr} (a record's field: name the record `workload`)")
        for names, line in _row_kind_targets(tree):
            if {"wl", "kind"} & set(names):
                found.append(f"{m}:{line}: row_kind(...) into {names} (`workload`, `rkind`)")
    assert not found, "`wl` is a workload's name and `kind` a row kind's, both strings\n" + "\n".join(found)


def test_the_glossary_gives_each_word_its_meaning():
    words = (ROOT / "docs/glossary.md").read_text().split("## Words in the code", 1)[-1]
    for word in ("trained", "best", "configs", "wl", "kind"):
        assert f"| `{word}` |" in words, f"docs/glossary.md's 'Words in the code' gives `{word}` no row"


def test_each_pending_module_still_needs_it():
    for module in PENDING:
        tree = ast.parse((ROOT / module).read_text())
        assert any(n == "best" for n, _ in _bound(tree)), f"{module} is mended: drop it from PENDING"
