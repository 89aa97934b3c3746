"""A device orders the variants its own way (parity.api.variants.Variant.ranks): what `--configs best` times on a TPU
is what won there, checked here on a CPU with 'tpu' as a stand-in device (CI has no TPU)."""

import pytest

from parity.api.variants import ONE, Variant, from_wire
from parity.common.protocol import Offered
from parity.engine import selection
from parity.engine.assemble import cases
from parity.engine.config import Config
from parity.workloads import WORKLOADS

PLAIN = Variant("jit", "cnn_train", ONE, rank=3, ranks=(("tpu", 0),))
POOL = Variant("jit+pool", "cnn_train", ONE, tuned=True, rank=0, ranks=(("tpu", None),))
BF16 = Variant("jit+bf16", "cnn_train", ONE, "bfloat16", tuned=True, rank=5, ranks=(("tpu", 0),))
BF16_POOL = Variant("jit+bf16+pool", "cnn_train", ONE, "bfloat16", tuned=True, rank=0, ranks=(("tpu", None),))
TABLE = (PLAIN, POOL, BF16, BF16_POOL)


def test_each_device_has_its_own_best_known():
    on = lambda device: {f: v.name for f, v in selection.best_known([v.on(device) for v in TABLE]).items()}  # noqa: E731
    assert on("cpu") == {"float32": "jit+pool", "bfloat16": "jit+bf16+pool"}
    assert on("tpu") == {"float32": "jit", "bfloat16": "jit+bf16"}
    assert on("gpu") == on("cpu")  # a device the table names no order for keeps the CPUs'


def test_a_devices_order_survives_the_wire():
    back = from_wire(POOL.wire())
    assert back.ranks == POOL.ranks and back.on("tpu").rank is None and back.on("cpu").rank == 0


class _Worker:
    """What `cases` asks of a worker: its framework, setting, and the variants it offers."""

    def __init__(self, variants):
        self.framework, self.setting, self.env, self.variants = "jax", "default", {}, variants

    def ask(self, req):
        return Offered([v.wire() for v in self.variants if v.kind == req.kind])


@pytest.mark.parametrize("device, timed", [("cpu", {"jit", "jit+pool", "jit+bf16+pool"}), ("tpu", {"jit", "jit+bf16"})])
def test_the_run_times_the_devices_own_best_known(device, timed):
    """The schedule's cases: out of the box and, per format, the device's best-known (a TPU's: JAX's own step)."""
    hello = {"jax": {"replicas": 1, "native_bf16": True, "device_kind": "stand-in", "settings": []}}
    kind = next(k for k in WORKLOADS["cnn"].kinds if k.name == "cnn_train")
    got = cases(Config(device=device, frameworks=("jax",)), kind, {"jax": _Worker(TABLE)}, hello, "", {})
    assert {c.variant for c in got} == timed


def test_jaxs_tables_on_a_tpu_are_what_won_on_the_chip():
    """docs/tpu.md's "Best-known on the chip": the conv with its output in the compiler's layout; the CNN's and the
    ViT's own steps, the LSTM's unrolled in float32, each with its batches put on the chip ahead ('+prefetch')."""
    import jax_impl

    best = {
        kind: {f: v.name for f, v in selection.best_known([v.on("tpu") for v in jax_impl.variants(kind, 1)]).items()}
        for kind in ("conv", "cnn_train", "lstm_train", "vit_train")
    }
    assert best["conv"] == {"float32": "jit+layout", "bfloat16": "jit+bf16+layout"}
    assert best["cnn_train"] == {"float32": "jit+prefetch", "bfloat16": "jit+bf16+prefetch"}
    assert best["lstm_train"] == {"float32": "jit+unroll+prefetch", "bfloat16": "jit+bf16+prefetch"}
    assert best["vit_train"] == {"float32": "jit+prefetch", "bfloat16": "jit+bf16+prefetch"}


def test_an_accelerator_times_the_matmul_where_a_call_is_its_kernel():
    """On a GPU or TPU the matmul's default is 8192 on a side (a call's launch a few percent of it), said in the run's
    notes; the CPU's default, --quick's and the CPU's tolerance stay as they were."""
    from parity.common.tolerances import rounding_bound
    from parity.workloads.matmul import MATMUL_FULL, matmul_tolerance

    matmul = WORKLOADS["matmul"]
    assert {d: matmul.spec(False, d).m for d in ("cpu", "gpu", "tpu")} == {"cpu": 2048, "gpu": 8192, "tpu": 8192}
    assert matmul.spec(True, "tpu") == matmul.quick
    assert matmul.size_note(matmul.spec(False, "tpu"))[0].startswith("matmul: accelerator size, 1099.5 GFLOP a call")
    assert matmul_tolerance("cpu", "default", "float32") == max(1e-5, rounding_bound([MATMUL_FULL.k]))
    assert matmul_tolerance("gpu", "highest", "float32") == rounding_bound([8192])
