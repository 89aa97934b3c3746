"""Test session set-up, cheap enough for the engine tests: neither framework is imported here.

The frameworks are started by `frameworks_setup.py` (8 simulated CPU devices each, float32 at highest precision),
imported only where a test needs them: by the `impl` fixture, by test modules that import their devices from it,
and after collection wherever a collected module imported a framework, so that it still runs before any test.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["JAX_NUM_CPU_DEVICES"] = "8"  # for a framework started anywhere in a test process, even by mistake
# One compute thread per test process and per run a test starts: the test processes already fill the cores, and a
# pool of a core's size in each oversubscribes them (on xeon-amx's 2 cores the suite took 7 min 3-8 s with the
# pools, 6 min 16 s without: docs/tests.md). No verdict depends on it: every tolerance holds for any summation order.
# TF's inter-op pool keeps its size (its collectives wait on it). The caller's own settings win.
for _name, _value in (("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1"), ("TF_NUM_INTRAOP_THREADS", "1")):
    os.environ.setdefault(_name, _value)
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
# XLA:CPU's LLVM at -O0 for the test processes and every run they start: the suite compiles hundreds of small programs
# and runs each a few steps (zen4, JAX's tests alternated in one process: 82-86 s at XLA's default level, 68-80 s at
# 0; docs/tests.md). No verdict depends on it: the HLO passes, the fusions and the
# library kernels (Eigen, oneDNN, YNNPACK) are the same; only the fused loops' machine code is less optimised, with
# IEEE semantics at every level (no fast-math), and every tolerance holds for any order of summation and any
# contraction into FMAs. .ci/run's capped pass runs the numerics tests again at XLA's default level (on a machine
# with AVX-512, AVX-VNNI or AMX; an AVX2-only one has no capped pass, so no default-level run). The caller's level wins.
if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_backend_optimization_level=0"
# One JAX compilation cache for a pytest run's test processes and every run they start, fresh each time: the same
# program at the same shapes is compiled by several tests and runs (the quick CNN's step, Keras's probes), and XLA's
# compilation took a tenth of the suite's CPU time (xeon-amx: 6 min 47-56 s without, 5 min 53 s to 6 min 10 s with;
# docs/tests.md).
# No verdict depends on it: a cached executable is the one XLA compiled from the same program, flags and backend, and
# no test judges a compile time. The controller makes the folder before its test processes start (they inherit it)
# and removes it at the end; a size limit turns on JAX's file lock, so that no process reads another's half-written
# entry. A caller's own JAX_COMPILATION_CACHE_DIR wins (and is kept).
_OWN_JAX_CACHE: str | None = None  # the folder this process made (the controller's), which it removes
if "PYTEST_XDIST_WORKER" not in os.environ and "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import tempfile

    _OWN_JAX_CACHE = tempfile.mkdtemp(prefix="parity-tests-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_JAX_CACHE
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2**31))
    # every compilation of 0.2 s or more (JAX's default, 1 s, left out the LSTM's and the operations' programs)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# The same for Inductor (PyTorch's compiled variants), whose runs would otherwise each make a fresh cache
# (torch_impl.ops.private_compile_cache): one for the session, fresh each session, removed with JAX's.
_OWN_TORCH_CACHE: str | None = None
if "PYTEST_XDIST_WORKER" not in os.environ and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    import tempfile

    _OWN_TORCH_CACHE = tempfile.mkdtemp(prefix="parity-tests-inductor-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _OWN_TORCH_CACHE

import pytest  # noqa: E402

from parity.common.frameworks import TABLE  # noqa: E402

# the frameworks whose implementations this process imports (frameworks_setup.IMPLS): each that shares a process
IN_PROCESS = tuple(k for k, f in TABLE.items() if f.shares_process)
# a test module that imported one of these at its top started a framework (its package, or a runtime among its
# distributions that is a module's name: 'tensorflow', 'jax', 'torch'; not 'tensorflow-cpu')
_FRAMEWORK_MODULES = tuple(
    dict.fromkeys(m for k in IN_PROCESS for m in (TABLE[k].module, *TABLE[k].distributions) if m.isidentifier())
)


def pytest_ignore_collect(collection_path, config):
    """The engine's test files (test_no_frameworks.ENGINE_TESTS) run once in a whole-suite run: in the child process
    of test_no_frameworks, where no framework can be imported (a failure there fails that test, with the child's
    report). Under the fast tier's `-m "not slow"`, a file whose every test is slow (all_slow) is not imported: the
    same tests are selected, and each test process is spared its imports (about a second of the tier's collecting).
    Named on the command line, a file is collected: `pytest tests/test_engine.py` is the quick loop."""
    from pathlib import Path

    from test_no_frameworks import ENGINE_TESTS, ROOT

    engine = collection_path in {(ROOT / f).resolve() for f in ENGINE_TESTS}
    fast_tier = all_slow(collection_path.name) and (config.getoption("markexpr") or "").strip() == "not slow"
    if not (engine or fast_tier):
        return None
    named = {Path(a.split("::")[0]).resolve() for a in config.args}
    return True if collection_path not in named else None


# The test files whose tests go one by one to whichever test process is free (their module fixtures are cheap, their
# tests long); every other file runs whole in one process, so that a module fixture (a Keras-on-JAX probe: 45 s) is
# built once. pyproject's --dist=loadfile asks for this; pytest_xdist_make_scheduler gives it.
SPREAD = ("test_cnn.py",)
# The files that take longest whole (1.5-4 minutes on 2 cores: end-to-end runs, the engine's framework-free child)
# start first, the spread tests come last and fill the processes' ends: the suite ends when its last file does.
FIRST = (
    "test_no_frameworks.py",
    "test_multiprocess.py",
    "test_cli.py",
    "test_cnn_training.py",
    "test_lstm_jax.py",
    "test_lstm_keras.py",
)


# The tests left out of the fast tier (`python -m pytest -q -m "not slow"`, a minute at most on zen4: docs/tests.md):
# whole files that train, start runs or several processes (but for FAST_TESTS of theirs), and single long tests of
# files that are fast otherwise (SLOW_TESTS). The fast tier keeps the engine on the fake clock and the results files
# (test_no_frameworks' child), the contract and each implementation's surface, the float64 oracles and the derived
# tolerances, and one tiny run end to end through real workers (test_cli.py::test_a_tiny_run_end_to_end).
SLOW_FILES = (
    "test_ahead_trainers.py",
    "test_cli.py",
    "test_cnn.py",
    "test_cnn_training.py",
    "test_ddp_ranks.py",
    "test_faults.py",
    "test_html_browser.py",
    "test_keras_jax.py",
    "test_lstm_jax.py",
    "test_lstm_keras.py",
    "test_lstm_torch.py",
    "test_multiprocess.py",
    "test_notebook.py",
    "test_owners.py",
    "test_torch_conventions.py",
    "test_torch_ddp.py",
    "test_vit_jax.py",
    "test_vit_keras.py",
    "test_vit_keras_jax.py",
    "test_vit_torch.py",
)
SLOW_TESTS = (  # by name, or with its parameters: the CNN's training, its notebook-size build, every input case
    "test_timing.py::test_a_diverging_training_run_names_the_step",
    # each implementation's refusals at its entry points stay in the fast tier (test_inputs.py's first tests); the
    # 42 cases each implementation must take or refuse alike, 2 x 42 tests, run in the whole suite
    "test_inputs.py::test_every_implementation_takes_or_refuses_an_input_alike",
    "test_weights.py::test_both_implementations_build_the_declared_cnn[jax-notebook]",
    "test_weights.py::test_both_implementations_build_the_declared_cnn[tf-notebook]",
    # runs end to end through an installed plugin's workers, and three frameworks' float64 runs in child processes;
    # the float64 oracle's refusals and its planted-error tests stay in the fast tier
    "test_example_gru.py::test_the_example_runs_end_to_end_every_row_verified",
    "test_example_gru.py::test_the_example_judged_by_jax_in_float64_runs_end_to_end",
    "test_float64_oracle.py::test_jax_pytorch_and_tensorflow_in_float64_are_the_gru_examples_numpy_oracle",
    # a rewound trainer against a new one: TF's and the CNN's compile for seconds; JAX's LSTM stays in the fast tier
    *(
        f"test_rewind.py::test_a_rewound_trainer_trains_as_a_new_one[{c}]"
        for c in ("jax-cnn-1", "jax-cnn-2", "tf-cnn-1", "tf-cnn-2", "tf-lstm-1", "tf-lstm-2")
    ),
    # a model on one page: its example and four of its planted bugs judged in-process (a float64 child each), and a
    # run of two; the padding bug and the record's checks stay in the fast tier
    "test_light.py::test_the_example_passes_every_check_against_float64",
    *(
        f"test_light.py::test_a_planted_bug_is_caught_and_named[{b}]"
        for b in ("dw_kernel_transposed", "groups_1", "missing_bias", "dropout_in_inference")
    ),
    "test_light.py::test_a_run_times_both_and_does_not_verify_the_training_row_of_a_framework_that_fails",
    # PyTorch's conv variants against the oracle, torch.compile's among them (each compiles for seconds); every other
    # implementation's stay in the fast tier
    "test_conv.py::test_every_variant_matches_oracle[torch-1]",
)
FAST_TESTS = ("test_cli.py::test_a_tiny_run_end_to_end", "test_cli.py::test_help_explains_every_flag")


def all_slow(name: str) -> bool:
    """Whether every test of the test file `name` is marked slow (_slow): one of SLOW_FILES with no FAST_TESTS."""
    return name in SLOW_FILES and not any(t.startswith(f"{name}::") for t in FAST_TESTS)


def _slow(item) -> bool:
    test = f"{item.path.name}::{item.originalname}"
    named = test in SLOW_TESTS or f"{item.path.name}::{item.name}" in SLOW_TESTS
    return test not in FAST_TESTS and (item.path.name in SLOW_FILES or named)


def pytest_collection_modifyitems(items):
    """The order the test processes take the files in (FIRST, the others, SPREAD); a file's tests keep theirs. Each
    test of SLOW_FILES but for FAST_TESTS, and each of SLOW_TESTS, is marked `slow` (pyproject.toml's markers)."""

    def rank(item) -> int:
        name = item.path.name
        return FIRST.index(name) if name in FIRST else len(FIRST) + (name in SPREAD)

    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=rank)


def pytest_xdist_make_scheduler(config, log):
    """Under --dist=loadfile: each file one unit of work, but SPREAD's tests one unit each, in the collection's order
    (pytest_collection_modifyitems). (xdist_group marks cannot do it under pytest 9.2: pytest-xdist 3.8 renames the
    nodes through an attribute pytest no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the collection's order, not the most tests first

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path.rsplit("/", 1)[-1] in SPREAD else path

    return ByFile(config, log)


def pytest_collection_finish(session):
    # A module that imports a framework (and not frameworks_setup) at its top must still run with its devices
    # and precision fixed: set both frameworks up now, before this process runs its first test.
    if any(sys.modules.get(m) is not None for m in _FRAMEWORK_MODULES):
        import frameworks_setup  # noqa: F401


@pytest.fixture(params=sorted(IN_PROCESS))
def impl(request):
    """(implementation module, its 8 CPU devices), once per framework that shares the test process: Keras on JAX
    cannot (Keras's backend is fixed once a process, and tf_impl's is TensorFlow), so its tests run it in a process
    of its own (tests/test_keras_jax.py, and every end-to-end run)."""
    from frameworks_setup import IMPLS

    return IMPLS[request.param]


def pytest_unconfigure(config):
    """The controller removes this pytest run's JAX and Inductor compilation caches (above), when it made them."""
    import shutil

    for own in (_OWN_JAX_CACHE, _OWN_TORCH_CACHE):
        if own:
            shutil.rmtree(own, ignore_errors=True)
