"""The contract between the harness and the implementations: the types they exchange and the surface each exposes
(FrameworkImpl), with one adapter per workload (parity.api.adapters). The CNN's declared architecture is
parity.api.cnn, the weight files parity.api.weights."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from parity.api.cluster import LOCAL_HOSTS, Cluster, ClusterError, port_free, split_address  # noqa: F401
from parity.api.variants import Setting, Variant

# A framework's device handle: a jax.Device in jax_impl, a device string ('/device:CPU:0') in tf_impl. Opaque
# to parity/, which only passes what setup_devices returned back to the same implementation; where it needs
# to know where something ran, it asks for a placement: a list of 'cpu:0'-style names.
Device = Any
Placement = list[str]


class DeviceUnavailable(RuntimeError):
    """The requested device is absent, or has fewer cores than replicas asked for."""


class DeviceNotOffered(DeviceUnavailable):
    """The implementation has no code path for this kind of device (PyTorch on a TPU): beside other frameworks its
    rows are left out and the run says why in one line; asked for alone, it is the run's error."""


def check_divisible(batch: int, replicas: int) -> int:
    """Per-replica batch; a batch that does not split evenly is an error, never padded or dropped."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if batch % replicas:
        raise ValueError(
            f"global batch {batch} does not divide by {replicas} replicas "
            f"({batch} = {batch // replicas} x {replicas} + {batch % replicas}); choose a batch that does"
        )
    return batch // replicas


class Trainer(Protocol):
    """What a trained adapter's make_trainer returns (parity.api.adapters.Trained), in every implementation. A trainer
    whose programs compile may also offer `rewind()`: back to its first weights, optimizer state and step count, its
    compiled programs kept (parity.workloads.trained.kept gives it a parity trajectory; PyTorch's compile nothing to
    keep and offer none)."""

    steps_per_dispatch: int  # training steps per host dispatch: 1, or STEPS_PER_DISPATCH in '+spe'/'+scan'
    loss_every: int  # 1: steps() gives each step's own loss; k: each k-step dispatch's mean, for each of its steps
    compute_dtype: str  # what the layers compute in, read off the built model: 'float32', or 'bfloat16' ('+bf16')
    # BatchNorm's statistics in training over several replicas: 'replica' (each replica's share of the batch: TF's
    # strategies, Flax's pmap and shard_map) or 'global' (the global batch: Keras's DataParallel, one SPMD program)
    batchnorm: str
    # which kernel the model's recurrent layers run ('lax.scan', 'unrolled', "Keras's generic loop", 'cuDNN', ...),
    # where a framework chooses among several (Keras picks cuDNN's on a GPU when its conditions hold, silently); None
    # for a model without recurrent layers
    kernel_path: str | None

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn; returns (K, 2) float64 per-step [loss, accuracy]."""

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Compile, without running it, what steps(x, y) would run first, so that its first call finds it compiled;
        True, or False where the framework compiles at a first call only (parity.engine.ahead calls it on threads)."""

    def step_cost(self) -> tuple[float | None, str]:
        """FLOPs of one global training step by the framework's own counter, and which counter (None, why)."""

    def program_text(self) -> str | None:
        """The compiled step's text (XLA's HLO with op metadata) after at least one step; None where the
        framework's profiled op names carry the code's scopes already."""

    def model(self) -> Any:
        """The trained model (the passed-in model, updated in place)."""

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference 'loss' and 'accuracy' of the current weights on (x, y)."""

    def placement(self) -> Placement:
        """The devices ('cpu:0', ...) that hold this process's copies of the parameters."""


class Counted(tuple):
    """What a cost callable may return (Prepared.cost, Trainer.step_cost): the pair (FLOPs or None, which counter),
    and beside it, where the framework compiles one program for the call, that program's text as its compiler
    optimised it (`program`: XLA's HLO) and how many times one call runs it (`calls`). The harness reads each op's
    FLOPs and bytes from the text (parity.judging.program): the row's attainable time."""

    program: str | None
    calls: float

    def __new__(cls, flops: float | None, source: str, program: str | None = None, calls: float = 1.0):
        self = super().__new__(cls, (flops, source))
        self.program, self.calls = program, calls
        return self

    def times(self, k: float) -> Counted:
        """The count of `k` runs of the program (a training epoch's steps)."""
        flops, source = self
        return Counted(flops * k if flops else None, source, self.program, self.calls * k)


@dataclass(frozen=True)
class Prepared:
    """A computation with its inputs already placed on the devices, ready to call.

    run: computes and returns the framework's output (not synchronised).
    shape: global shape of an output, whatever its per-device layout.
    rows: copies the given global batch rows of an output to a NumPy array.
    placement: the devices ('cpu:3', 'gpu:0', ...) that computed an output.
    cost: FLOPs of one call as the framework's compiler or profiler counts them, and which counter
        said so; (None, why) where the framework offers no count. Cross-checks the analytic formula. A Counted
        brings the compiled program's text beside them.
    program: the compiled program's text (XLA's HLO, with each op's metadata), which maps a profile's ops
        back to the code's scopes; None where the framework's op names carry them already (TensorFlow).
    ahead: compiles, without running it, the program run() will run, so that the first call finds it compiled
        (True); False where the framework has nothing to compile ahead. Threads may call several at once.
    """

    run: Callable[[], Any]
    shape: Callable[[Any], tuple[int, ...]]
    rows: Callable[[Any, Sequence[int]], np.ndarray]
    placement: Callable[[Any], list[str]]
    cost: Callable[[], tuple[float | None, str]] = lambda: (None, "no FLOP count offered")
    program: Callable[[], str | None] = lambda: None
    kernel_path: str | None = None  # as Trainer.kernel_path, for an inference program
    ahead: Callable[[], bool] = lambda: False


class Gradients(NamedTuple):
    """One training batch's loss and gradients, as every trained adapter's loss_and_grads returns them.

    loss: the mean cross-entropy. grads: every trainable weight's gradient, in Keras's
    trainable_weights order. routing: for each max-pooling layer, the weight the framework's own
    max-pool gradient gives each position of the pooling input in this very pass (1 at the position a
    window's gradient goes to, 0 elsewhere): how it broke that batch's ties and near-ties.
    """

    loss: float
    grads: list[np.ndarray]
    routing: list[np.ndarray]


class FrameworkImpl(Protocol):
    """The surface each implementation (`jax_impl`, `tf_impl`, ...) exposes, with the same names and arguments: what
    is the framework's (devices, memory, profiling, settings, variants) and its adapters; parity talks to nothing
    else. Written here once: each package's __all__ is SURFACE, and a test checks every package against it. Model,
    Device and array types are the framework's own (opaque to parity)."""

    VARIANTS: tuple[Variant, ...]  # every variant of every row kind, each a declared record (parity.api.variants)
    SETTINGS: tuple[Setting, ...]  # every process-wide setting worth a worker of its own

    def variants(self, kind: str, replicas: int) -> tuple[Variant, ...]:
        """The variants of row kind `kind` ('conv', 'cnn_train', ...) offered over `replicas` devices, in order."""

    def settings(self, device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
        """The SETTINGS that make a difference on `device` here (native_bf16: it multiplies bfloat16 in hardware)."""

    # devices
    def setup_devices(self, device: str, replicas: int, cluster: Cluster | None = None) -> list[Device]:
        """`replicas` devices of kind `device` (0: all); raises DeviceUnavailable."""

    def set_precision(self, precision: str) -> None:
        """'default' or 'highest' for float32 products (TF32 / bfloat16 passes on accelerators)."""

    def check_compiler(self, devices: Sequence[Device]) -> tuple[Any, str]:
        """How the untimed parity programs (forward blocks, gradients, trajectories) compile on `devices`: a context
        manager to build them in, and what it sets, in words ('' where nothing: they compile as the timed ones)."""

    def device_kind(self) -> str: ...
    def describe_devices(self) -> str: ...
    def list_devices(self) -> list[str]: ...
    def process_info(self, devices: Sequence[Device]) -> dict: ...
    def placement(self, out: Any) -> Placement: ...
    def block(self, out: Any) -> None: ...
    def slowest(self, seconds: float) -> float: ...

    def memory_stats(self, devices: Sequence[Device]) -> list[dict] | None:
        """Per device of this process {'in_use', 'peak'} bytes; None where there are none (a CPU: parity reads
        the process's resident set instead)."""

    def reset_memory_peak(self, devices: Sequence[Device]) -> bool:
        """Reset the devices' peak; False where the framework cannot."""

    def trace(self, directory: str) -> Any:
        """A context manager: what runs inside is traced by the framework's own profiler into `directory`."""

    def trace_ops(self, directory: str, program: str | None = None) -> list[tuple[str, float, float, str]]:
        """The ops of the trace in `directory`: (the op's framework name, with its layer scope; seconds; its start in
        seconds; the thread it ran on), one per executed op (empty where the trace holds none). program: the traced
        program's text (Prepared.program, Trainer.program_text), where the trace names ops without their scopes."""

    # the workloads: one adapter each, `<package>.<workload>` (parity.api.adapters), found by listing
    def adapter(self, workload: str) -> Any:
        """The implementation's adapter for `workload`: an operation's prepares its one call (`prepare`; the conv's
        also `conv_op`, one call in the framework's own arrays); a trained model's (parity.api.adapters.Trained) builds
        it (`build`: the CNN's `build(seed, dropout)`, the row LSTM's `build(units, seed)` with Keras's initialisers and
        gate order set explicitly, the ViT's `build(dim, depth, heads, mlp, seed)` with LayerNorm epsilon LN_EPSILON,
        exact GELU and Keras's attention layout) and holds every model function: weights in and out, forward by
        layer, loss and gradients, the trainer and inference. Raises ValueError for a workload it has no adapter for."""


def _surface() -> tuple[str, ...]:
    names = [n for n in FrameworkImpl.__dict__ if not n.startswith("_")]
    return tuple(sorted({*names, *FrameworkImpl.__annotations__}))


SURFACE = _surface()  # every name of FrameworkImpl: each implementation's __all__
