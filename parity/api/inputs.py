"""Inputs checked where they enter an implementation, the same for every framework: one ValueError that names the
problem, before any framework sees them (a framework's own error would come later, as its own type, or never)."""

from __future__ import annotations

import numpy as np

from parity.api.cnn import CNN_ARCHITECTURE

PADDINGS = ("SAME", "VALID")  # TF's convention, which every implementation's conv takes


def check_conv(images, kernels, stride, padding: str) -> None:
    """NHWC images and HWIO kernels whose input channels match, a stride of 1 or more, SAME or VALID."""
    x, w = _shape(images), _shape(kernels)
    if len(x) != 4 or len(w) != 4:
        raise ValueError(f"conv: images must be NHWC and kernels HWIO (4 dimensions), got {x} and {w}")
    if x[3] != w[2]:
        raise ValueError(f"conv: images have {x[3]} channels, the kernels take {w[2]} (HWIO's third dimension)")
    if isinstance(stride, bool) or not isinstance(stride, int | np.integer) or stride < 1:
        raise ValueError(f"conv: stride must be an integer of 1 or more, got {stride!r}")
    if padding not in PADDINGS:
        raise ValueError(f"conv: padding must be one of {PADDINGS}, got {padding!r}")


def _shape(a) -> tuple:
    """An array's or a framework tensor's shape, without copying it to the host."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def check_examples(x: np.ndarray, y: np.ndarray, lead: int) -> None:
    """Images of the CNN's declared shape after `lead` leading axes (2: steps x batch for training, 1: a set to
    evaluate), finite, none missing; integer labels of the same leading shape, each a class the model has."""
    x, y = np.asarray(x), np.asarray(y)
    image, classes = CNN_ARCHITECTURE.image, CNN_ARCHITECTURE.output.units
    if x.ndim != lead + 3 or tuple(x.shape[lead:]) != image:
        raise ValueError(f"images of shape {image} expected after {lead} leading axes, got {x.shape}")
    if y.shape != x.shape[:lead]:
        raise ValueError(f"labels of shape {x.shape[:lead]} expected (one per image), got {y.shape}")
    if x.size == 0:
        raise ValueError("no images: nothing to train on or evaluate")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers (class indices), got {y.dtype}")
    if y.min() < 0 or y.max() >= classes:
        raise ValueError(f"labels must lie in 0..{classes - 1}, got {int(y.min())}..{int(y.max())}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{int(x.size - np.count_nonzero(np.isfinite(x)))} pixel(s) not finite (NaN or infinity)")
