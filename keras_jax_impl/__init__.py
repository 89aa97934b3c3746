"""Keras 3 on the JAX backend: the article's workloads as a Keras user writes them (the CNN from the same model code
as tf_impl, keras_models), run on JAX's runtime (mirror image of `tf_impl` and `jax_impl`)."""

import importlib.machinery
import os
import sys

# Before Keras loads: the backend is fixed when Keras is first imported, once a process. A Keras already loaded on
# another backend (tf_impl's, TensorFlow) cannot be switched: this package then refuses to load.
if "keras" in sys.modules and os.environ.get("KERAS_BACKEND") != "jax":
    raise ImportError(
        "keras_jax_impl needs Keras on the JAX backend, but keras is already loaded on "
        f"{os.environ.get('KERAS_BACKEND', 'tensorflow')!r}; run it in a process of its own (the harness's worker)"
    )
os.environ["KERAS_BACKEND"] = "jax"


class _KeptOut:
    """An import hook that refuses `name` and its submodules: importing one fails (ModuleNotFoundError, and no entry
    left in sys.modules), while a look-up (`importlib.util.find_spec`) finds it, as it is installed, without failing:
    etils makes one for each path it opens, JAX's compilation cache's among them, and a look-up that raised turned
    that cache off in this process."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name or fullname.startswith(self.name + "."):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"import of {spec.name} halted: kept out of Keras on JAX's process", name=spec.name)

    def exec_module(self, module):  # never called: create_module refuses first
        raise ModuleNotFoundError(module.__name__)


# A caller that keeps TensorFlow out with a None entry in sys.modules (the harness's worker, the tests' probes) makes
# Keras's preprocessing layers (the LSTM's Rescaling) fail: they ask `"tensorflow" in sys.modules` to tell a tf.data
# graph from an eager call, read the entry as TensorFlow loaded, and import it. The same refusal as an import hook
# leaves no entry.
if "tensorflow" in sys.modules and sys.modules["tensorflow"] is None:
    del sys.modules["tensorflow"]
    sys.meta_path.insert(0, _KeptOut("tensorflow"))

from jax_impl.devices import (  # noqa: E402 (Keras on JAX runs on JAX's runtime: its devices are JAX's)
    block,
    check_compiler,
    describe_devices,
    device_kind,
    list_devices,
    memory_stats,
    placement,
    process_info,
    reset_memory_peak,
    set_precision,
    setup_devices,
    slowest,
)
from keras_jax_impl.adapters import adapter  # noqa: E402
from keras_jax_impl.catalog import SETTINGS, settings, table, variants  # noqa: E402
from keras_jax_impl.profile import trace, trace_ops  # noqa: E402
from parity.api import SURFACE  # noqa: E402

VARIANTS = table()  # every variant, as its adapters declare them (all importable by now)

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
