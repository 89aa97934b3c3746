"""The engine's tests need neither framework: they pass in a process where TensorFlow, JAX, Flax, Keras and both
implementations cannot be imported at all.

The test files below run in a fresh pytest process that sets each of those modules to None in `sys.modules` before
pytest starts (any `import` of one then raises ImportError, at any depth and at any time, in the test modules, in
parity's modules and in conftest.py). That proves they never start a framework's runtime, and that conftest.py
leaves the frameworks to the tests that ask for them. `test_structure.py` is not among them: it reads the source
and imports no project module. Tests that use a framework take it from `frameworks_setup.py`.

In a whole-suite run this is where the engine's test files run, once (conftest.py leaves them out of the suite's
own collection); a failure among them fails this test with the child's report. Named on the command line, a file
runs as any other.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = ("tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "torch", "tf_impl", "jax_impl", "torch_impl")
ENGINE_TESTS = (
    "tests/test_engine.py",
    "tests/test_stats.py",
    "tests/test_compare_stats.py",
    "tests/test_report.py",
    "tests/test_hostile.py",
    "tests/test_memory.py",
    "tests/test_readme.py",
    "tests/test_html.py",
    "tests/test_new_workload.py",
    "tests/test_ahead.py",
)

# Run in the child: block the frameworks, run the files in this one process, print what ran per file.
_CHILD = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None
import pytest

class Count:
    def __init__(self):
        self.ran = {{}}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.passed:
            path = report.nodeid.split("::")[0]
            self.ran[path] = self.ran.get(path, 0) + 1

count = Count()
rc = pytest.main({args!r}, plugins=[count])
leaked = sorted(n for n in {blocked!r} if sys.modules.get(n) is not None)
print("RESULT " + json.dumps({{"rc": int(rc), "ran": count.ran, "leaked": leaked}}))
"""


def test_the_engine_tests_pass_with_every_framework_unimportable(tmp_path):
    args = ["-q", "-n", "0", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "basetemp"), *ENGINE_TESTS]
    code = _CHILD.format(blocked=BLOCKED, args=args)
    # a device lock of its own: the engine's one-owner-at-a-time runs take it there, not in the one every run of this
    # user shares (another test's real run may hold that now)
    env = {**os.environ, "PARITY_LOCK_DIR": str(tmp_path / "locks")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the child printed no result (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["rc"] == 0, f"the engine tests failed without the frameworks:\n{proc.stdout[-6000:]}"
    assert not result["leaked"], result["leaked"]
    assert all(result["ran"].get(path, 0) > 0 for path in ENGINE_TESTS), result["ran"]
