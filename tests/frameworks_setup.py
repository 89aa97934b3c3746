"""The in-process frameworks started for the tests that need them: each framework of the table that shares a process
(IN_PROCESS), with 8 simulated CPU devices where its runtime simulates them (TF, JAX) and its one device
where it does not (PyTorch), float32 at highest precision.

The device counts must be fixed before either runtime starts, so importing this module is what first starts them
in a test process: tests that use a framework import their devices from here (`from frameworks_setup import
JAX_DEVICES`), the `impl` fixture imports it when first requested, and `conftest.py` imports it after collection
in any process whose test modules imported a framework. Engine tests never import it (nor any framework).
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["JAX_NUM_CPU_DEVICES"] = "8"

from parity.common.frameworks import JAX, TABLE, TF, TORCH  # noqa: E402

REPLICAS = 8
IN_PROCESS = tuple(k for k, f in TABLE.items() if f.shares_process)  # as conftest.IN_PROCESS (which starts none)


def _started(key: str) -> tuple:
    """(implementation package, its CPU devices): REPLICAS of them where they are distinct devices; where the
    runtime hands out REPLICAS handles of its one device (PyTorch: a trainer over them runs one process a replica,
    DDP over 2 processes is test_torch_ddp.py's), that one. Correctness tests compare against float64: float32 is
    pinned (no TF32 / bf16 passes on any backend)."""
    impl = importlib.import_module(TABLE[key].module)
    devices = impl.setup_devices("cpu", REPLICAS)
    impl.set_precision("highest")
    return impl, devices if len(set(map(str, devices))) == len(devices) else devices[:1]


IMPLS = {key: _started(key) for key in sorted(IN_PROCESS)}  # JAX's first: its device count fixed before TF starts
JAX_DEVICES, TF_DEVICES, TORCH_DEVICES = (IMPLS[k][1] for k in (JAX, TF, TORCH))
