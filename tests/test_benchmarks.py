"""Every script under benchmarks/ stays runnable: it imports as a module without doing its work, answers --help,
reaches an implementation only through its public names, and imports no test module. The imports and the --help
calls run in one child process (TensorFlow and JAX load once); nothing is timed."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parity.api import SURFACE

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
IMPLEMENTATIONS = ("jax_impl", "tf_impl", "keras_jax_impl", "keras_models")
WITH_SURFACE = ("jax_impl", "tf_impl", "keras_jax_impl")  # whose package's __all__ is parity.api.SURFACE
TEST_MODULES = {"tests", "conftest", *(p.stem for p in (ROOT / "tests").glob("*.py"))}

# Run in a child: each script imported as a module (argparse refuses to parse meanwhile, so a script that does its
# work on import says so), then each run as __main__ with --help. Prints one JSON line: per script, the import's
# error (None) and --help's exit code and output.
CHILD = r"""
import argparse, contextlib, importlib.util, io, json, runpy, sys, traceback


class RanOnImport(Exception):
    pass


def refuse(self, *args, **kwargs):
    raise RanOnImport("parsed its arguments on import: its work is not under `if __name__ == '__main__':`")


def error(e):
    return "".join(traceback.format_exception_only(type(e), e)).strip()


out = {}
parse = argparse.ArgumentParser.parse_known_args
argparse.ArgumentParser.parse_known_args = refuse
for path in json.loads(sys.argv[1]):
    name = path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        out[name] = {"import": None}
    except BaseException as e:
        out[name] = {"import": error(e)}
argparse.ArgumentParser.parse_known_args = parse
for path in json.loads(sys.argv[1]):
    name = path.rsplit("/", 1)[-1][:-3]
    sys.argv, text = [path, "--help"], io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            runpy.run_path(path, run_name="__main__")
        code = "returned without exiting"
    except SystemExit as e:
        code = e.code or 0
    except BaseException as e:
        code = error(e)
    out[name]["help"] = {"code": code, "text": text.getvalue()}
print("RESULT " + json.dumps(out))
"""


def _tree(script: Path) -> ast.Module:
    return ast.parse(script.read_text(), str(script))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imports(tree: ast.Module) -> list[tuple[list[str], str]]:
    """Each import as (the dotted path it names, split; the name it binds)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split("."), a.asname or a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [([*node.module.split("."), a.name], a.asname or a.name) for a in node.names]
    return out


def private_uses(tree: ast.Module) -> list[str]:
    """Where a script names something of an implementation whose name starts with '_': in an import, as an attribute
    of a name bound to an implementation's module or object, or through getattr/setattr with a constant name."""
    found, bound = [], set()
    for path, name in _imports(tree):
        if path[0] in IMPLEMENTATIONS:
            bound.add(name)
            if any(map(_private, path)):
                found.append("import of " + ".".join(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and _root(node) in bound:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) > 1
            and _root(node.args[0]) in bound
            and isinstance(node.args[1], ast.Constant)
            and _private(str(node.args[1].value))
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def off_surface(tree: ast.Module) -> list[str]:
    """Where a script takes from an implementation's package itself a name that is neither in parity.api.SURFACE
    (the package's __all__) nor one of its modules."""

    def known(package: str, name: str) -> bool:
        return name in SURFACE or (ROOT / package / f"{name}.py").exists()

    found, packages = [], {}
    for path, name in _imports(tree):
        if path[0] in WITH_SURFACE and len(path) == 1:
            packages[name] = path[0]
        elif path[0] in WITH_SURFACE and len(path) == 2 and not known(path[0], path[1]):
            found.append("import of " + ".".join(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in packages:
            if not known(packages[node.value.id], node.attr):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def imported_test_modules(tree: ast.Module) -> list[str]:
    """The test modules (tests/*.py, conftest) a script imports."""
    return [".".join(path) for path, _ in _imports(tree) if path[0] in TEST_MODULES]


def guarded(tree: ast.Module) -> bool:
    """Whether the script's top level has `if __name__ == "__main__":`."""
    return any(
        isinstance(node, ast.If) and ast.unparse(node.test) in ('__name__ == "__main__"', "__name__ == '__main__'")
        for node in tree.body
    )


def parses_with_argparse(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr == "ArgumentParser" for node in ast.walk(tree))


# ---- the checks catch what they look for -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "from jax_impl.cnn import _pool",
        "import jax_impl.profile as p\np._hlo_op({})",
        "import jax_impl\njax_impl.cnn._pool(x)",
        "from tf_impl import train\ntrain._copy(m, o)",
        "import keras_models.cnn\nsetattr(keras_models.cnn, '_x', 1)",
        "from keras_jax_impl._internal import thing",
    ],
)
def test_a_private_name_of_an_implementation_is_found(source):
    assert private_uses(ast.parse(source))


@pytest.mark.parametrize(
    "source",
    [
        "from jax_impl.cnn import pool_elementwise",
        "import jax_impl\njax_impl.adapter('cnn').build(0).__class__",
        "import numpy as np\nnp._private",
        "from tensorflow.python.data.ops import multi_device_iterator_ops as m\nm._create_device_dataset",
    ],
)
def test_public_names_and_other_libraries_privates_are_not_flagged(source):
    assert private_uses(ast.parse(source)) == []


def test_an_implementation_name_off_its_surface_is_found():
    assert off_surface(ast.parse("import jax_impl as impl\nimpl.SURFACE")) == ["line 2: impl.SURFACE"]
    assert off_surface(ast.parse("from tf_impl import catalog_of_things")) == ["import of tf_impl.catalog_of_things"]
    assert off_surface(ast.parse("import tf_impl as impl\nimpl.adapter\nimpl.catalog\nimpl.SETTINGS")) == []
    assert off_surface(ast.parse("import tf_impl as impl\nimpl.make_trainer")) == ["line 2: impl.make_trainer"]


def test_a_test_module_import_is_found():
    tree = ast.parse("import test_multiprocess as tm\nfrom multiproc_case import case\nimport numpy")
    assert imported_test_modules(tree) == ["test_multiprocess", "multiproc_case.case"]


def test_a_missing_guard_is_found():
    assert not guarded(ast.parse("def main():\n    pass\nmain()"))
    assert guarded(ast.parse('def main():\n    pass\nif __name__ == "__main__":\n    main()'))


# ---- every script --------------------------------------------------------------------------------------------------


def test_there_are_benchmarks():
    assert len(SCRIPTS) > 10 and ROOT / "benchmarks/run_phases.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_benchmark_keeps_its_work_under_a_main_guard_and_parses_with_argparse(script):
    tree = _tree(script)
    assert guarded(tree), f"{script.name}: its work is not under `if __name__ == '__main__':`"
    # --help below runs each script as __main__: one that reads sys.argv by hand would start its work
    assert parses_with_argparse(tree), f"{script.name}: takes its arguments without argparse (no --help)"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_benchmark_uses_a_private_name_of_an_implementation(script):
    assert private_uses(_tree(script)) == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_benchmark_reaches_an_implementation_package_off_its_surface(script):
    assert off_surface(_tree(script)) == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_benchmark_imports_a_test_module(script):
    assert imported_test_modules(_tree(script)) == []


def run_child(scripts: list[Path]) -> dict:
    """CHILD's answer for `scripts`, by name: each import's error (None) and --help's exit code and output."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    paths = json.dumps([str(s) for s in scripts])
    p = subprocess.run(
        [sys.executable, "-c", CHILD, paths], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT ") :])


def test_the_child_reports_work_done_on_import_and_a_script_that_does_not_exit_on_help(tmp_path):
    eager, silent = tmp_path / "eager.py", tmp_path / "silent.py"
    eager.write_text("import argparse\n\nargparse.ArgumentParser().parse_args()\n")
    silent.write_text('def main():\n    pass\n\n\nif __name__ == "__main__":\n    main()\n')
    answer = run_child([eager, silent])
    assert "parsed its arguments on import" in answer["eager"]["import"]
    assert answer["eager"]["help"]["code"] == 0
    assert answer["silent"] == {"import": None, "help": {"code": "returned without exiting", "text": ""}}


@pytest.fixture(scope="module")
def ran() -> dict:
    """The child's answer for every script that passes the static checks (the others could start their work)."""
    return run_child([s for s in SCRIPTS if guarded(_tree(s)) and parses_with_argparse(_tree(s))])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_benchmark_imports_without_doing_its_work(ran, script):
    assert script.stem in ran, f"{script.name} was not imported: it fails the static checks above"
    assert ran[script.stem]["import"] is None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_benchmark_answers_help(ran, script):
    assert script.stem in ran, f"{script.name} was not run: it fails the static checks above"
    answer = ran[script.stem]["help"]
    assert answer["code"] == 0, answer
    assert "usage:" in answer["text"] and "--help" in answer["text"]
