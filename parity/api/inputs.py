"""Inputs checked where they enter an implementation, the same for every framework: one ValueError that names the
problem, before any framework sees them (a framework's own error would come later, as its own type, or never).

Each entry point of the surface calls these once, where it prepares or builds (never inside a timed call): a
trained model's adapter's `build` (check_seed, check_units, check_vit), make_trainer (check_training), a trainer's
steps and evaluate, forward_layers and loss_and_grads (check_examples, check_images, check_count), prepare_inference
(check_images), an operation's adapter's `prepare` (check_operands with check_conv or check_matmul). Numbers are
only checked, never converted (but for NumPy integers, returned as Python ints): an accepted input computes what it
computed before, in every implementation alike."""

from __future__ import annotations

import math
import numbers
from functools import cache

import numpy as np

from parity.api.cnn import CNN_ARCHITECTURE
from parity.api.lstm import LstmArchitecture
from parity.api.vit import VitArchitecture

PADDINGS = ("SAME", "VALID")  # TF's convention, which every implementation's conv takes
# Keras's initialisers draw their seeds from seed * 1000 onwards (keras_models), and Keras on JAX takes a seed only as
# a uint32: the largest seed whose every draw fits, for every implementation alike
MAX_SEED = (2**32 - 1000) // 1000
# A parameter trained costs 16 bytes at least: its float32 value, its gradient and Adam's two moments
TRAINED_BYTES_PER_PARAM = 16
FLOATS = ("float16", "bfloat16", "float32", "float64")  # what an operation's operands may hold


def _integer(value) -> bool:
    """A Python or NumPy integer, not a bool (True would count as 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def check_count(name: str, value, most: int | None = None) -> int:
    """A whole number from 1 to `most` (no bound where None), as a Python int: units, a batch size."""
    if not _integer(value) or value < 1 or (most is not None and value > most):
        bound = f"from 1 to {most:,}" if most is not None else "of 1 or more"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def check_seed(seed) -> int:
    """A seed: an integer from 0 to MAX_SEED, as a Python int (NumPy integers taken; bools refused)."""
    if not _integer(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer from 0 to {MAX_SEED:,}, got {seed!r}")
    return int(seed)


def physical_memory() -> int:
    """This machine's physical memory in bytes (pages x page size; 1 TiB where the system does not say)."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 2**40


@cache
def max_units() -> int:
    """The widest row LSTM whose training state (TRAINED_BYTES_PER_PARAM a parameter) fits in this machine's
    physical memory: a wider one could only fail later, out of memory."""
    budget, lo, hi = physical_memory() // TRAINED_BYTES_PER_PARAM, 1, 2**32
    while lo < hi:  # the largest u with params(u) <= budget (params grows with u)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if LstmArchitecture(mid).params() <= budget else (lo, mid - 1)
    return lo


def check_units(units) -> int:
    """The row LSTM's width: an integer from 1 to max_units(), as a Python int."""
    return check_count("units", units, max_units())


def check_vit(dim, depth, heads, mlp) -> VitArchitecture:
    """The ViT's sizes, each a whole number of 1 or more (Python or NumPy integers; bools refused), whose training
    state (TRAINED_BYTES_PER_PARAM a parameter) fits in this machine's physical memory, as VitArchitecture (its
    sizes Python ints). Raises ValueError."""
    memory = physical_memory()
    budget = memory // TRAINED_BYTES_PER_PARAM
    sizes = {n: check_count(n, v) for n, v in (("dim", dim), ("depth", depth), ("heads", heads), ("mlp", mlp))}
    said = f"a ViT of {', '.join(f'{n}={v}' for n, v in sizes.items())}"
    d, depth, m = sizes["dim"], sizes["depth"], sizes["mlp"]
    # at least each block's query kernel (dim x heads x dim/heads) and first MLP kernel (dim x mlp), in Python's
    # integers: within the budget, every product params() takes in NumPy's int64 is too
    params, least = depth * (d * d + d * m), "at least "
    if params <= budget:
        one, two = VitArchitecture(**{**sizes, "depth": 1}), VitArchitecture(**{**sizes, "depth": 2})
        params, least = one.params() + (depth - 1) * (two.params() - one.params()), ""  # linear in depth: no table
    if params > budget:
        raise ValueError(
            f"{said} has {least}{params:,} parameters, more than this machine's {memory / 2**30:.1f} GiB holds "
            f"trained ({budget:,} parameters at {TRAINED_BYTES_PER_PARAM} bytes each)"
        )
    return VitArchitecture(**sizes)


def check_training(learning_rate, adam_epsilon, seed) -> int:
    """make_trainer's numbers: a finite learning rate and Adam epsilon above 0, and a seed (check_seed, returned)."""
    for name, value in (("learning_rate", learning_rate), ("adam_epsilon", adam_epsilon)):
        real = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
        if not real or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number above 0, got {value!r}")
    return check_seed(seed)


def _shape(a) -> tuple:
    """An array's or a framework tensor's shape, without copying it to the host."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def check_operands(op: str, **operands) -> None:
    """An operation's operands, by name: NumPy arrays of one real floating dtype (FLOATS)."""
    for name, a in operands.items():
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{op}: {name} must be a NumPy array, got {type(a).__name__}")
        if a.dtype.name not in FLOATS:
            raise ValueError(f"{op}: {name} must hold real floating-point numbers ({', '.join(FLOATS)}), got {a.dtype}")
    dtypes = {a.dtype.name for a in operands.values()}
    if len(dtypes) > 1:
        raise ValueError(f"{op}: operands of one dtype expected, got {' and '.join(sorted(dtypes))}")


def _no_empty(op: str, **shapes) -> None:
    if any(0 in s for s in shapes.values()):
        said = " and ".join(f"{name} {s}" for name, s in shapes.items())
        raise ValueError(f"{op}: {said}: a dimension of 0 (nothing to compute)")


def check_conv(images, kernels, stride, padding: str) -> int:
    """NHWC images and HWIO kernels whose input channels match, none of their dimensions 0, SAME or VALID (VALID: a
    kernel that fits in the image: a larger one leaves no output), a stride from 1 to the image's larger side (a
    larger one takes the same one window a row as that side). Returns the stride as a Python int (a NumPy integer's
    value: Keras takes no other)."""
    x, w = _shape(images), _shape(kernels)
    if len(x) != 4 or len(w) != 4:
        raise ValueError(f"conv: images must be NHWC and kernels HWIO (4 dimensions), got {x} and {w}")
    if x[3] != w[2]:
        raise ValueError(f"conv: images have {x[3]} channels, the kernels take {w[2]} (HWIO's third dimension)")
    _no_empty("conv", images=x, kernels=w)
    if not _integer(stride) or stride < 1:
        raise ValueError(f"conv: stride must be an integer of 1 or more, got {stride!r}")
    if stride > (side := max(x[1], x[2])):
        raise ValueError(f"conv: stride {stride} is beyond the images' larger side, {side}: at most {side}")
    if padding not in PADDINGS:
        raise ValueError(f"conv: padding must be one of {PADDINGS}, got {padding!r}")
    if padding == "VALID" and (w[0] > x[1] or w[1] > x[2]):
        raise ValueError(
            f"conv: a {w[0]}x{w[1]} kernel does not fit in {x[1]}x{x[2]} images: VALID padding leaves no output"
        )
    return int(stride)


def check_matmul(a, b) -> None:
    """Two matrices whose inner dimensions match, none of their dimensions 0."""
    x, w = _shape(a), _shape(b)
    if len(x) != 2 or len(w) != 2:
        raise ValueError(f"matmul: two matrices (2 dimensions each) expected, got {x} and {w}")
    if x[1] != w[0]:
        raise ValueError(f"matmul: a has {x[1]} columns, b {w[0]} rows: they must match")
    _no_empty("matmul", a=x, b=w)


def check_images(x, lead: int = 1) -> None:
    """Images of the trained models' declared shape (Fashion-MNIST's, the CNN's and the LSTM's alike) after `lead`
    leading axes (1: a set of images; 2: steps x batch for training), a NumPy array of real numbers (integer pixels
    or floating point), all finite, at least one."""
    image = CNN_ARCHITECTURE.image
    if not isinstance(x, np.ndarray):
        raise ValueError(f"images must be a NumPy array, got {type(x).__name__}")
    if x.ndim != lead + 3 or tuple(x.shape[lead:]) != image:
        raise ValueError(f"images of shape {image} expected after {lead} leading axes, got {x.shape}")
    if x.size == 0:
        raise ValueError("no images: nothing to train on, evaluate or infer")
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise ValueError(f"images must hold real numbers (integer pixels or floating point), got {x.dtype}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{int(x.size - np.count_nonzero(np.isfinite(x)))} pixel(s) not finite (NaN or infinity)")


def check_examples(x: np.ndarray, y: np.ndarray, lead: int) -> None:
    """Images as check_images takes them after `lead` leading axes (2: steps x batch for training, 1: a set to
    evaluate or one batch's gradients); integer labels of the same leading shape, each a class the model has."""
    classes = CNN_ARCHITECTURE.output.units  # the LSTM's too: Fashion-MNIST's 10
    if not isinstance(y, np.ndarray):
        raise ValueError(f"labels must be a NumPy array, got {type(y).__name__}")
    if isinstance(x, np.ndarray) and y.shape != x.shape[:lead]:
        raise ValueError(f"labels of shape {x.shape[:lead]} expected (one per image), got {y.shape}")
    check_images(x, lead)
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers (class indices), got {y.dtype}")
    if y.min() < 0 or y.max() >= classes:
        raise ValueError(f"labels must lie in 0..{classes - 1}, got {int(y.min())}..{int(y.max())}")
