"""The code's layering, read from its source (no framework started): the implementations import from parity only
its contract, the contract imports nothing else of parity's, the layers (contract, common, workloads, record,
judging, output, engine, flags, commands) import only downwards, no package's modules import each other in a
cycle, each module and function stays short enough to read, framework keys are written once, and every workload is
complete."""

import ast
import functools
from pathlib import Path

import pytest

from parity.common.frameworks import TABLE

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK_PACKAGES = tuple(f.module for f in TABLE.values())  # parity.common.frameworks: the one list
IMPLEMENTATIONS = (*FRAMEWORK_PACKAGES, "keras_models")
PACKAGES = ("parity", *IMPLEMENTATIONS)
# what an implementation may import of another: Keras on JAX runs on JAX's runtime (its devices, op reading and
# profiler are jax_impl's), and both Keras implementations build the model from the one Keras model code
SHARED = {
    "keras_jax_impl": ("jax_impl.catalog", "jax_impl.devices", "jax_impl.ops", "jax_impl.profile", "keras_models"),
    "tf_impl": ("keras_models",),
}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 350, 50


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once for all the tests here (which only read it)."""
    return ast.parse(path.read_text())


@functools.cache
def _imports(path: Path, module: str, top_level_only: bool) -> frozenset[str]:
    """The project modules that `module` imports (`from a import b` counts a.b where that is a module); found once
    for all the tests here."""
    tree = _tree(path)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return frozenset(m for m in found if m in MODULES and m != module)


def test_the_implementations_import_only_the_contract_from_parity():
    for module, path in MODULES.items():
        if module.startswith(IMPLEMENTATIONS):
            other = {m for m in _imports(path, module, False) if m.startswith("parity")}
            assert all(m == "parity.api" or m.startswith("parity.api.") for m in other), (module, other)
            pkg = module.split(".")[0]
            allowed = SHARED.get(pkg, ())
            foreign = {
                m
                for m in _imports(path, module, False)
                if m.startswith(IMPLEMENTATIONS)
                and m.split(".")[0] != pkg
                and not any(m == a or m.startswith(a + ".") for a in allowed)
            }
            assert not foreign, f"{module} imports another implementation: {foreign}"


@pytest.mark.parametrize("top_level_only", [True, False], ids=["module-level", "any"])
def test_no_import_cycles(top_level_only):
    graph = {m: _imports(p, m, top_level_only) for m, p in MODULES.items()}
    # a package's __init__ that re-exports its modules is not a cycle with them: drop edges into one's own parent
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, " -> ".join([*path, m, d])
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_modules_and_functions_stay_short():
    long_modules = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long_modules
    long_functions = [
        (m, node.name, node.end_lineno - node.lineno + 1)
        for m, p in MODULES.items()
        for node in ast.walk(_tree(p))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long_functions


def test_framework_keys_are_written_once():
    """'tf' and 'jax' as string literals only in parity/common/frameworks.py (the one table); elsewhere its names."""
    from parity.common import frameworks

    keys = set(frameworks.KEYS)
    found = [
        (m, node.lineno)
        for m, p in MODULES.items()
        if m.startswith("parity") and m != "parity.common.frameworks"
        for node in ast.walk(_tree(p))
        if isinstance(node, ast.Constant) and node.value in keys
    ]
    assert not found


# The layers, bottom up: a module imports only from its own layer and those below it (docs/architecture.md).
LAYERS = (
    ("parity.api",),  # the contract: what the implementations see
    ("parity.common",),  # facts and arithmetic every part shares: frameworks table, float64, tolerances, CPU
    ("parity.workloads",),  # each workload's package: specs, cases, suite, checks
    ("parity.record",),  # a result row's fields and the results file's constants, below all that use them
    ("parity.judging",),  # statistics, rooflines and verdicts over rows
    ("parity.output",),  # what a user reads and tools parse, and the one reader of results files
    ("parity.engine",),  # what a run does: workers, rounds, timing
    ("parity.cli",),  # the flags and their bounds
    ("parity.run", "parity.report", "parity.compare", "parity.launch", "parity.check"),  # the commands
)  # fmt: skip


def _layer(module: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_the_layers_import_only_downwards():
    """The contract imports nothing of the engine's, and the workloads nothing of the harness's: the engine finds
    workloads from their list; a workload never reaches back into the engine."""
    upward = []
    for module, path in MODULES.items():
        mine = _layer(module)
        if mine is None:
            continue
        for dep in _imports(path, module, False):
            theirs = _layer(dep)
            if theirs is not None and theirs > mine:
                upward.append((module, dep))
    assert not upward
    assert all(_layer(m) is not None for m in MODULES if m.startswith("parity.")), "a module outside every layer"


# One role per module name, the same names in every implementation (docs/architecture.md, "Module names by role"):
ROLES = {
    "adapters": "adapter(workload): the workload's module, a trained model's bound to the trainer",
    "catalog": "the variants' options and the settings",
    "devices": "the devices, placement, synchronisation, the cluster",
    "models": "what every trained model shares: loss, gradients, inference, weights",
    "ops": "what the operations share: placing, compiling, reading an output",
    "profile": "traces and their ops",
    "train": "the one trainer",
}
# a framework's own modules, named for what they do (beside the roles and one adapter per workload)
OWN = {
    # the CNN's rewritten gradients; dropout's masks drawn as Keras's; a light workload's generic adapter (the Keras
    # implementations have none: a model on one page is JAX's and PyTorch's, docs/your-workload.md)
    "jax_impl": {"conv_grads", "masks", "light"},
    "torch_impl": {"adam", "ddp", "light"},  # Keras's Adam in PyTorch; DistributedDataParallel's processes; as JAX's
    "keras_models": set(),
}


def test_the_implementations_hold_the_same_modules():
    """Mirror images in files too: each framework's variants and settings, devices, adapters, model functions,
    trainer, profiler and op reading live in modules of the same names; a module is one of those, a workload's
    adapter (the test below), or one of the framework's own listed in OWN. The shared Keras model code holds
    `models` and one module per workload."""
    import ast

    from parity.common import frameworks
    from parity.workloads import WORKLOADS

    for pkg in [fw.module for fw in frameworks.TABLE.values()]:
        stems = {p.stem for p in (ROOT / pkg).glob("*.py")} - {"__init__"}
        assert set(ROLES) <= stems, pkg
        assert stems <= set(ROLES) | set(WORKLOADS) | OWN.get(pkg, set()), (pkg, stems - set(ROLES) - set(WORKLOADS))
        # the same lookups with the same meaning: every variant, those offered here, the one offered by name; settings
        tree = _tree(ROOT / pkg / "catalog.py")
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert {"table", "variants", "variant", "settings"} <= defined, pkg


def test_every_adapter_declares_its_variants():
    """A workload's variants belong to its adapter: each implementation's <workload>.py assigns VARIANTS (read
    without importing the frameworks; what they hold: tests/test_surface.py)."""
    import ast

    from parity.common import frameworks
    from parity.workloads import WORKLOADS

    for name in WORKLOADS:
        for fw in frameworks.TABLE.values():
            tree = _tree(ROOT / fw.module / f"{name}.py")
            targets = [t for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) for t in _targets(n)]
            assert "VARIANTS" in targets, f"{fw.module}/{name}.py declares no VARIANTS"


def test_the_shared_keras_model_code_holds_models_and_one_module_per_workload():
    from parity.workloads import WORKLOADS

    stems = {p.stem for p in (ROOT / "keras_models").glob("*.py")} - {"__init__"}
    assert stems == {"models"} | {n for n, w in WORKLOADS.items() if w.suite is not None}


def _own_workload(module: str, workloads) -> str | None:
    """The workload whose own module `module` is (parity.workloads.<name>..., <implementation>.<name>), or None."""
    parts = module.split(".")
    if parts[:2] == ["parity", "workloads"]:
        return parts[2] if len(parts) > 2 and parts[2] in workloads else None
    return parts[1] if parts[0] in IMPLEMENTATIONS and len(parts) > 1 and parts[1] in workloads else None


def test_shared_code_imports_no_workloads_module():
    """A workload's module (its package under parity/workloads/, its adapter in each implementation, its Keras model
    code) is imported only by that workload's own modules: what several workloads share lives in a shared module
    (an implementation's models, ops, train; keras_models.models). An implementation's adapter imports no other
    workload's either."""
    from parity.workloads import WORKLOADS

    bad = []
    for module, path in MODULES.items():
        mine = _own_workload(module, WORKLOADS)
        for dep in _imports(path, module, False):
            theirs = _own_workload(dep, WORKLOADS)
            if theirs is None or theirs == mine:
                continue
            if mine is None or module.startswith(IMPLEMENTATIONS):
                bad.append((module, dep))
    assert not bad


def test_the_peak_is_measured_by_a_call_a_workload_offers():
    """The engine finds the call that measures a CPU's bfloat16 peak in the workloads' list (Workload.peak_call);
    neither it nor the roofline names a workload or a row kind."""
    from parity.workloads import WORKLOADS

    offered = [w for w in WORKLOADS.values() if w.peak_call]
    assert offered and all(callable(w.calls.get(w.peak_call)) for w in offered)
    names = set(WORKLOADS) | {k.name for w in WORKLOADS.values() for k in w.kinds}
    for module in ("parity.engine.peaks", "parity.judging.roofline"):
        tree = _tree(MODULES[module])
        named = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names]
        assert not named, (module, named)


def _targets(node) -> list[str]:
    return [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]


def test_reading_a_results_file_loads_nothing_of_the_engine():
    """parity.report and parity.compare read files: they start no worker, so they load no scheduler."""
    import subprocess
    import sys

    code = "import sys, parity.report, parity.compare; print(sorted(m for m in sys.modules if 'engine' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_every_workload_is_one_package_plus_one_module_per_implementation():
    """A workload is parity/workloads/<name>/ whose WORKLOAD is the one the list holds, with each row kind's case
    and tolerance, and an adapter <impl>/<name>.py in every implementation (a module that declares WORKLOAD = its
    name, read without importing the frameworks); an operation's prepare is its adapter's. (Each implementation's
    variants of each row kind: tests/test_surface.py; adapters found by listing: tests/test_adapters.py.)"""
    import importlib
    from types import SimpleNamespace

    from parity.common import frameworks
    from parity.workloads import WORKLOADS

    for name, w in WORKLOADS.items():
        assert (ROOT / "parity" / "workloads" / name / "__init__.py").exists(), name
        assert importlib.import_module(f"parity.workloads.{name}").WORKLOAD is w, name
        for fw in frameworks.TABLE.values():
            assert _declared_workload(_tree(ROOT / fw.module / f"{name}.py")) == name, fw.module
        for kind in w.kinds:
            assert callable(kind.case) and callable(kind.tolerance), kind.name
            if kind.prepare is not None:
                adapter = SimpleNamespace(prepare=object())
                probe = SimpleNamespace(adapter=lambda workload, a=adapter, n=name: a if workload == n else None)
                assert kind.prepare(probe) is adapter.prepare, f"{kind.name}'s prepare is not its adapter's"
        assert all(callable(f) for f in w.calls.values()), name


def test_the_workloads_are_found_by_listing():
    """Every package under parity/workloads/ that declares a Workload record (as a Workload, or a trained model's
    made by parity.workloads.trained.model_workload.workload) is one of WORKLOADS, no other, in the order of the
    records' ranks (the order a run takes them)."""
    from parity.workloads import WORKLOADS

    packages = (ROOT / "parity" / "workloads").glob("*/__init__.py")
    declared = ("WORKLOAD = Workload(", "WORKLOAD = workload(")
    assert sorted(WORKLOADS) == sorted(p.parent.name for p in packages if any(d in p.read_text() for d in declared))
    ranks = [w.rank for w in WORKLOADS.values()]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


def _declared_workload(tree: ast.Module) -> str | None:
    """The value a module assigns to WORKLOAD at its top level (alone, or first of a tuple), or imports by that name
    from the shared Keras model code (whose module is named as the workload)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(isinstance(t, ast.Name) and t.id == "WORKLOAD" for t in node.targets):
                return node.value.value
        if isinstance(node, ast.ImportFrom) and any(a.name == "WORKLOAD" for a in node.names):
            return (node.module or "").rsplit(".", 1)[-1]
    return None
