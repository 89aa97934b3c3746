"""benchmarks/run_phases.py loaded as a module (it is a script, not a package's), for the tests that read a run's
phases and floor from its shipped log."""

import importlib.util
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@cache
def run_phases():
    spec = importlib.util.spec_from_file_location("run_phases", ROOT / "benchmarks/run_phases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
