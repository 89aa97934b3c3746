"""The frameworks the harness drives, in one table: key, label, implementation module, distributions."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Framework:
    """One framework: its key in rows and flags ('tf'), its names in tables and notes, its implementation
    package (which parity imports only in a worker process), and the distributions whose versions a run records."""

    key: str
    label: str  # in progress lines and the table's notes: 'TensorFlow'
    short: str  # in the checks' notes: 'TF'
    module: str  # the implementation package: 'tf_impl'
    distributions: tuple[str, ...]
    color: str  # in charts: matplotlib's name
    # modules its worker never loads: TF's lite converter imports JAX wherever JAX is installed (another
    # framework's runtime in TF's process, and time on each TF worker's start-up); Keras imports matplotlib's
    # pyplot for one plotting helper (keras.src.visualization), which no worker calls: time on each Keras worker's
    # start (its resident memory after the import the same either way)
    keeps_out: tuple[str, ...] = ()
    # frameworks the summary also divides this one by, besides the reference (the table's first): Keras on JAX by
    # Flax, the same runtime under other model code ('is hand-written Flax worth it?')
    versus: tuple[str, ...] = ()
    multiprocess: bool = True  # takes part in a multi-process run (--coordinator)
    # offers variants over several devices: where not, a round over several starts no worker of it (its catalog
    # declares none: tests/test_surface.py) and the run says so
    data_parallel: bool = True
    # its package imports beside every other's that does in one process (the tests' own): Keras on JAX's cannot, Keras's
    # backend being fixed once a process (TensorFlow for tf_impl's Keras)
    shares_process: bool = True
    # what it reads from the environment that changes what its rows measure, recorded with every run
    # (parity.engine.environment.env_flags): by name, and by prefix (a whole family of knobs)
    env_read: tuple[str, ...] = ()
    env_prefixes: tuple[str, ...] = ()
    # refused where it runs, each making a variant's rows something else than their label says: (variable, why)
    env_refused: tuple[tuple[str, str], ...] = ()
    # the variable naming the directory it writes its compilation cache in (parity.cli.argtypes checks it)
    cache_dir_env: str | None = None


# The keys, for code about one framework in particular (TF's multi-worker cluster, JAX's platform names); code about
# frameworks in general reads TABLE and KEYS
TF, JAX, KERAS_JAX, TORCH = "tf", "jax", "keras-jax", "torch"

# What JAX's runtime reads, under JAX and under Keras on JAX alike
_JAX_ENV = ("XLA_FLAGS", "JAX_DEFAULT_MATMUL_PRECISION", "XLA_PYTHON_CLIENT_PREALLOCATE", "JAX_COMPILATION_CACHE_DIR",
            "JAX_ENABLE_X64", "JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")  # fmt: skip
_ONEDNN_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE")
_JIT_OFF = "would run op by op, still labelled compiled"


TABLE = {
    f.key: f
    for f in (
        Framework(
            TF,
            "TensorFlow",
            "TF",
            "tf_impl",
            ("tensorflow", "tensorflow-cpu", "keras"),
            "tab:orange",
            keeps_out=("jax", "matplotlib"),
            env_read=(
                "TF_ENABLE_ONEDNN_OPTS",
                "TF_XLA_FLAGS",
                "TF_NUM_INTRAOP_THREADS",
                "TF_NUM_INTEROP_THREADS",
                "TF_FORCE_GPU_ALLOW_GROWTH",
                "KERAS_BACKEND",
                *_ONEDNN_ENV,
            ),
        ),
        Framework(
            JAX,
            "JAX",
            "JAX",
            "jax_impl",
            ("jax", "jaxlib", "flax", "optax"),
            "tab:blue",
            env_read=_JAX_ENV,
            env_refused=(("JAX_DISABLE_JIT", f"the 'jit' variants {_JIT_OFF}"),),
            cache_dir_env="JAX_COMPILATION_CACHE_DIR",
        ),
        # Keras 3 on JAX: the same Keras model code as TF's, on JAX's runtime. Keras's backend is fixed once a process,
        # so its worker keeps TensorFlow out (Keras would otherwise load it for its data adapters).
        Framework(
            KERAS_JAX,
            "Keras 3 (JAX)",
            "Keras-JAX",
            "keras_jax_impl",
            ("keras", "jax", "jaxlib"),
            "tab:green",
            keeps_out=("tensorflow", "matplotlib"),
            versus=(JAX,),
            multiprocess=False,  # Keras's multi-process DataParallel (keras.distribution.initialize) is not wired
            shares_process=False,
            env_read=(*_JAX_ENV, "KERAS_BACKEND"),
            env_refused=(("JAX_DISABLE_JIT", f"its compiled variants {_JIT_OFF}"),),
            cache_dir_env="JAX_COMPILATION_CACHE_DIR",
        ),
        # PyTorch on its own kernels (eager, or Inductor by torch.compile), one device: its worker keeps the other
        # runtimes out, as each framework's does
        Framework(
            TORCH,
            "PyTorch",
            "PyTorch",
            "torch_impl",
            ("torch",),
            "tab:red",
            keeps_out=("tensorflow", "jax"),
            multiprocess=False,  # its data parallelism (DDP over gloo) starts its own processes, not the launcher's
            env_read=(
                "THP_MEM_ALLOC_ENABLE",  # huge pages for its CPU allocator: its 'thp' setting's, else out of the box
                "ATEN_CPU_CAPABILITY",  # the vector ISA of its own kernels
                "TORCHINDUCTOR_CACHE_DIR",
                "PYTORCH_CUDA_ALLOC_CONF",
                *_ONEDNN_ENV,
            ),
            env_prefixes=("TORCHINDUCTOR_", "TORCH_COMPILE", "TORCHDYNAMO_"),  # Inductor's and Dynamo's knobs
            env_refused=(
                ("TORCH_COMPILE_DISABLE", "the 'compile' variants would run eagerly, still labelled compiled"),
            ),
            cache_dir_env="TORCHINDUCTOR_CACHE_DIR",
        ),
    )
}
KEYS = tuple(TABLE)  # ('tf', 'jax', 'keras-jax', 'torch'): the order workers start and tables list them


def load(key: str) -> ModuleType:
    """The framework's implementation package, imported in this process as its worker imports it: what it keeps out
    first made unimportable (Keras's backend is fixed once a process). Raises ImportError where it is not installed."""
    for name in TABLE[key].keeps_out:  # an import of it now fails, as if not installed
        sys.modules.setdefault(name, None)
    return importlib.import_module(TABLE[key].module)


def on_jax(key: str) -> bool:
    """Whether the framework runs on JAX's runtime (jaxlib among its distributions), so that what JAX reads from the
    environment (JAX_PLATFORMS, XLA_FLAGS, its compilation cache) applies to it."""
    return key in TABLE and "jaxlib" in TABLE[key].distributions


def label(key: str) -> str:
    """'TensorFlow' for 'tf'."""
    return TABLE[key].label


def short(key: str) -> str:
    """'TF' for 'tf'; a key the table does not hold (an older file's framework) is its own name."""
    return TABLE[key].short if key in TABLE else key


def color(key: str) -> str:
    """'tab:orange' for 'tf'; grey for a key the table does not hold."""
    return TABLE[key].color if key in TABLE else "tab:gray"


def ordered(keys: Iterable[str]) -> list[str]:
    """The distinct `keys` in the table's order, then any the table does not hold (an older file's) as given.
    The first is the reference a comparison divides by ('tf' wherever TensorFlow ran)."""
    given = list(dict.fromkeys(keys))
    return [k for k in KEYS if k in given] + [k for k in given if k not in TABLE]


def pairs(keys: Iterable[str]) -> list[tuple[str, str]]:
    """Every pair of the distinct `keys`, each in table order: [('tf', 'jax')] for the keys 'jax' and 'tf'."""
    ks = ordered(keys)
    return [(a, b) for i, a in enumerate(ks) for b in ks[i + 1 :]]


def chosen(name: str, multiprocess: bool) -> tuple[tuple[str, ...], list[str]]:
    """The frameworks `--framework name` runs, in the table's order: 'all' (the table's), one key, or a comma list
    ('jax,torch'); and those 'all' leaves out of a multi-process run (they take no part in one). Raises ValueError
    where one named takes no part in one."""
    if name != "all":
        named = ordered(parse(name))
        absent = [TABLE[k].label for k in named if multiprocess and not TABLE[k].multiprocess]
        if absent:
            raise ValueError(f"{', '.join(absent)} takes no part in a multi-process run: run it without --coordinator")
        return tuple(named), []
    out = tuple(k for k in KEYS if TABLE[k].multiprocess or not multiprocess)
    return out, [k for k in KEYS if k not in out]


def parse(text: str) -> tuple[str, ...]:
    """`--framework`'s value as keys: 'all', one key, or keys joined by commas ('jax,torch'), each once. Raises
    ValueError naming what is not a framework."""
    if text == "all":
        return KEYS
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if n not in TABLE]
    if bad or not names:
        said = ", ".join(repr(b) for b in bad)
        raise ValueError(f"not a framework: {said} (one of {', '.join(KEYS)}, comma-separated, or all)")
    return tuple(dict.fromkeys(names))


def ratios(keys: Iterable[str]) -> list[tuple[str, str]]:
    """The (numerator, denominator) pairs a summary gives for the distinct `keys`: each after the first over the
    first (the reference), then each over those it declares `versus`: [('jax', 'tf'), ('keras-jax', 'tf'),
    ('keras-jax', 'jax')] for the keys 'tf', 'jax' and 'keras-jax'."""
    ks = ordered(keys)
    extra = [(k, d) for k in ks if k in TABLE for d in TABLE[k].versus if d in ks and d != ks[0]]
    return [(k, ks[0]) for k in ks[1:]] + extra


def over(num: str, den: str) -> str:
    """A ratio's name from the frameworks' short names: 'JAX/TF' for over('jax', 'tf')."""
    return f"{short(num)}/{short(den)}"
