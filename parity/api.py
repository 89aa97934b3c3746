"""Types shared by the two implementations and the harness (the mirror's frame)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from parity.cluster import LOCAL_HOSTS, Cluster, ClusterError, port_free, split_address  # noqa: F401

# A framework's device handle: a jax.Device in jax_impl, a device string ('/device:CPU:0') in tf_impl. Opaque
# to parity/, which only passes what setup_devices returned back to the same implementation; where it needs
# to know where something ran, it asks for a placement: a list of 'cpu:0'-style names.
Device = Any
Placement = list[str]


class DeviceUnavailable(RuntimeError):
    """The requested device is absent, or has fewer cores than replicas asked for."""


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


# The notebook's CNN, declared once. Its 5x5 SAME convs as (input size, channels in, channels out),
# each followed by 2x2 max pooling, and its dense layers' widths (flattened 3x3x256 -> 256 -> 10).
# Everything else is derived: the weight table (Keras's get_weights() order, the exchange format
# of both implementations), parameter counts, FLOPs, the checks' names, the oracle's slicing.
CNN_IMAGE = (28, 28, 1)
CNN_CONVS = ((28, 1, 64), (14, 64, 128), (7, 128, 256))
CNN_DENSE = (2304, 256, 10)
BN_FIELDS = ("gamma", "beta", "moving_mean", "moving_variance")  # the last two: statistics, not trained
# The outputs forward_layers() returns on both sides, in order: what the layer-by-layer check compares.
CNN_BLOCKS = ("block1", "block2", "block3", "dense1", "logits", "probs")
# Training steps per host dispatch in the multi-step variants (TF: steps_per_execution, several steps in one
# tf.function; JAX: lax.scan over stacked batches), the same in both frameworks; an epoch's remainder is a
# shorter last dispatch. On a TPU a small model's step is dominated by the host round trip.
STEPS_PER_DISPATCH = 10


@dataclass(frozen=True)
class Weight:
    """One array of the CNN in Keras's order: its layer, its field (Keras's name) and its shape."""

    layer: str
    field: str
    shape: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.layer}.{self.field}"

    @property
    def trainable(self) -> bool:
        return not self.field.startswith("moving_")


def _cnn_weights() -> tuple[Weight, ...]:
    out = []
    for i, (_, cin, cout) in enumerate(CNN_CONVS, 1):
        out += [Weight(f"bn{i}", f, (cin,)) for f in BN_FIELDS]
        out += [Weight(f"conv{i}", "kernel", (5, 5, cin, cout)), Weight(f"conv{i}", "bias", (cout,))]
    for i, (fan_in, fan_out) in enumerate(zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True), 1):
        out += [Weight(f"dense{i}", "kernel", (fan_in, fan_out)), Weight(f"dense{i}", "bias", (fan_out,))]
    return tuple(out)


CNN_WEIGHTS = _cnn_weights()
CNN_TRAINABLE = tuple(w for w in CNN_WEIGHTS if w.trainable)  # Keras's trainable_weights order: the gradients'
_sizes = {w.name: int(np.prod(w.shape)) for w in CNN_WEIGHTS}
CNN_PARAMS = {"total": sum(_sizes.values()), "trainable": sum(_sizes[w.name] for w in CNN_TRAINABLE),
              "non_trainable": sum(_sizes[w.name] for w in CNN_WEIGHTS if not w.trainable)}  # fmt: skip


def check_weights(weights: Sequence[np.ndarray], dtype=np.float32) -> None:
    """Raise ValueError naming the layer when a weight list does not fit CNN_WEIGHTS (length, shape, dtype)."""
    if len(weights) != len(CNN_WEIGHTS):
        raise ValueError(f"expected {len(CNN_WEIGHTS)} weight arrays (Keras get_weights() order), got {len(weights)}")
    for i, (a, w) in enumerate(zip(weights, CNN_WEIGHTS, strict=True)):
        a = np.asarray(a)
        if tuple(a.shape) != w.shape:
            raise ValueError(f"weight {i} (layer {w.layer}): shape {tuple(a.shape)}, expected {w.shape}")
        if a.dtype != dtype:
            raise ValueError(f"weight {i} (layer {w.layer}): dtype {a.dtype}, expected {np.dtype(dtype)}")


class Trainer(Protocol):
    """What both implementations' make_trainer returns."""

    steps_per_dispatch: int  # training steps per host dispatch: 1, or STEPS_PER_DISPATCH in '+spe'/'+scan'
    loss_every: int  # 1: steps() gives each step's own loss; k: each k-step dispatch's mean, for each of its steps
    compute_dtype: str  # what the layers compute in, read off the built model: 'float32', or 'bfloat16' ('+bf16')

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn; returns (K, 2) float64 per-step [loss, accuracy]."""

    def step_cost(self) -> tuple[float | None, str]:
        """FLOPs of one global training step by the framework's own counter, and which counter (None, why)."""

    def model(self) -> Any:
        """The trained model (the passed-in model, updated in place)."""

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference 'loss' and 'accuracy' of the current weights on (x, y)."""

    def placement(self) -> Placement:
        """The devices ('cpu:0', ...) that hold this process's copies of the parameters."""


@dataclass(frozen=True)
class Prepared:
    """A computation with its inputs already placed on the devices, ready to call.

    run: computes and returns the framework's output (not synchronised).
    shape: global shape of an output, whatever its per-device layout.
    rows: copies the given global batch rows of an output to a NumPy array.
    placement: the devices ('cpu:3', 'gpu:0', ...) that computed an output.
    cost: FLOPs of one call as the framework's compiler or profiler counts them, and which counter
        said so; (None, why) where the framework offers no count. Cross-checks the analytic formula.
    """

    run: Callable[[], Any]
    shape: Callable[[Any], tuple[int, ...]]
    rows: Callable[[Any, Sequence[int]], np.ndarray]
    placement: Callable[[Any], list[str]]
    cost: Callable[[], tuple[float | None, str]] = lambda: (None, "no FLOP count offered")


class Gradients(NamedTuple):
    """One training batch's loss and gradients, as both implementations' loss_and_grads return them.

    loss: the mean cross-entropy. grads: every trainable weight's gradient, in Keras's
    trainable_weights order. routing: for each max-pooling layer, the weight the framework's own
    max-pool gradient gives each position of the pooling input in this very pass (1 at the position a
    window's gradient goes to, 0 elsewhere): how it broke that batch's ties and near-ties.
    """

    loss: float
    grads: list[np.ndarray]
    routing: list[np.ndarray]


class FrameworkImpl(Protocol):
    """The surface each implementation (`jax_impl`, `tf_impl`) exposes, with the same names and arguments;
    parity talks to nothing else. Written here once: each package's __all__ is SURFACE, and a test checks
    both packages against it. Model, Device and array types are the framework's own (opaque to parity)."""

    TUNED_VARIANTS: tuple[str, ...]  # not the framework out of the box: tuned variants
    BFLOAT16_VARIANTS: tuple[str, ...]  # variants that compute in bfloat16 (a row's number format)

    # devices
    def setup_devices(self, device: str, replicas: int, cluster: Cluster | None = None) -> list[Device]:
        """`replicas` devices of kind `device` (0: all); raises DeviceUnavailable."""

    def set_precision(self, precision: str) -> None:
        """'default' or 'highest' for float32 products (TF32 / bfloat16 passes on accelerators)."""

    def tuned_configs(self, device: str, native_bf16: bool = False) -> dict[str, dict[str, str]]:
        """Process-wide settings worth a worker of their own: {name: environment variables}."""

    def device_kind(self) -> str: ...
    def describe_devices(self) -> str: ...
    def list_devices(self) -> list[str]: ...
    def process_info(self, devices: Sequence[Device]) -> dict: ...
    def placement(self, out: Any) -> Placement: ...
    def block(self, out: Any) -> None: ...
    def slowest(self, seconds: float) -> float: ...

    # the conv and the matmul
    def conv_op(self, images: Any, kernels: Any, stride: int = 2, padding: str = "SAME") -> Any: ...
    def conv_variants(self, replicas: int) -> tuple[str, ...]: ...

    def prepare_conv(self, variant: str, images: np.ndarray, kernels: np.ndarray, devices: Sequence[Device],
                     stride: int = 2, padding: str = "SAME") -> Prepared: ...  # fmt: skip

    def matmul_variants(self, replicas: int) -> tuple[str, ...]: ...
    def prepare_matmul(self, variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[Device]) -> Prepared: ...

    # the CNN
    def build_cnn(self, seed: int = 0, dropout: bool = True) -> Any: ...
    def mixed_precision(self, model: Any) -> Any: ...
    def count_params(self, model: Any) -> dict[str, int]: ...
    def get_weights(self, model: Any) -> list[np.ndarray]: ...
    def set_weights(self, model: Any, weights: Sequence[np.ndarray]) -> None: ...
    def save_weights(self, model: Any, path: Any) -> None: ...
    def load_weights(self, model: Any, path: Any) -> None: ...
    def forward_layers(self, model: Any, x: np.ndarray) -> dict[str, np.ndarray]: ...
    def loss_and_grads(self, model: Any, x: np.ndarray, y: np.ndarray) -> Gradients: ...
    def cnn_variants(self, replicas: int) -> tuple[str, ...]: ...

    def make_trainer(self, model: Any, devices: Sequence[Device], variant: str, learning_rate: float = 1e-3,
                     adam_epsilon: float = 1e-7, seed: int = 0) -> Trainer: ...  # fmt: skip

    def infer_variants(self, replicas: int) -> tuple[str, ...]: ...
    def prepare_inference(self, model: Any, images: np.ndarray, devices: Sequence[Device]) -> Prepared: ...


def _surface() -> tuple[str, ...]:
    names = [n for n in FrameworkImpl.__dict__ if not n.startswith("_")]
    return tuple(sorted({*names, *FrameworkImpl.__annotations__}))


SURFACE = _surface()  # every name of FrameworkImpl: each implementation's __all__


def save_npz(weights: Sequence[np.ndarray], path) -> None:
    """Weights in Keras's get_weights() order to a .npz file (no pickle), written atomically."""
    import os
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    np.savez(tmp, **{f"w{i:03d}": np.asarray(w) for i, w in enumerate(weights)})
    os.replace(tmp, path)


MAX_WEIGHT_BYTES = 64 * 2**20  # one array of a weight file: the CNN's largest is 2.4 MB


def load_npz(path) -> list[np.ndarray]:
    """The weight list saved by save_npz. Raises ValueError naming the file on anything that is not one:
    not a zip, a bad CRC, a pickled (object) array, an array header asking for more than MAX_WEIGHT_BYTES."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = sorted(n.removesuffix(".npy") for n in z.namelist())
            if not names or names != [f"w{i:03d}" for i in range(len(names))]:
                raise ValueError(f"{path}: not a parity weight file (arrays {names[:3]}..., expected w000, w001, ...)")
            return [_read_member(z, f"{n}.npy", path) for n in names]
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise ValueError(f"{path}: unreadable weight file ({type(e).__name__}: {e})") from None


def _read_member(z, name: str, path) -> np.ndarray:
    """One array of the zip, its header checked before its body is read."""
    with z.open(name) as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                raise ValueError(f"array format version {version}")
            shape, fortran, dtype = read_header[version](f, max_header_size=10000)
        except ValueError as e:
            raise ValueError(f"{path}: {name}: not an array file ({e})") from None
        if dtype.hasobject:
            raise ValueError(f"{path}: {name}: holds Python objects (a pickle); refused without loading it")
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize  # Python integers: no wrap-around
        if size > MAX_WEIGHT_BYTES:
            raise ValueError(f"{path}: {name}: header asks for {size} bytes, more than a weight array can hold")
        body = f.read(size + 1)
    if len(body) != size:
        raise ValueError(f"{path}: {name}: {len(body)} bytes of data where the header says {size}")
    return np.frombuffer(body, dtype).reshape(shape, order="F" if fortran else "C").copy()
