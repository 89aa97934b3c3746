"""The JAX-based trainers' and inference programs' `ahead` (parity.engine.ahead calls it on threads): it compiles the
very program the first steps() or call runs, so that XLA does not compile it again there, and it changes no number.
Each implementation in a process of its own (tests/ahead_probe.py), on tiny shapes; the schedule around it is
tests/test_ahead.py's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("ahead_probe.py")


@pytest.mark.parametrize(
    "impl,workload,variant",
    [
        ("jax_impl", "cnn", "jit+scan"),  # several steps a dispatch: the harder
        ("keras_jax_impl", "cnn", "fit+spe"),
        ("jax_impl", "cnn", "predict"),  # an inference program's first call (parity.api.Prepared.ahead)
        ("jax_impl", "lstm", "predict+unroll"),
        ("keras_jax_impl", "lstm", "predict"),
    ],
)
def test_the_first_steps_run_the_program_compiled_ahead(impl, workload, variant):
    p = subprocess.run(
        [sys.executable, str(PROBE), impl, workload, variant],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    done = json.loads(p.stdout.strip().splitlines()[-1])
    ahead, cold = done["ahead"], done["cold"]
    assert ahead["compiled"] is True and ahead["in_ahead"], done
    # the step's program is not compiled again (small helper programs, a stack of the metrics, may be)
    assert not set(ahead["in_ahead"]) & set(ahead["steps"]), done
    step = set(ahead["in_ahead"]) & set(cold["steps"])  # without ahead, the first steps compile it
    assert step and not step & set(ahead["steps"]), done
    assert ahead["losses"] == cold["losses"]  # the same training, to the bit
