"""The article's conv op in PyTorch, on one device. PyTorch's conv takes NCHW images and OIHW kernels and refuses
padding='same' at stride 2, so the harness's NHWC/HWIO operands are transposed once, beforehand, and TF's SAME
padding (asymmetric where its total is odd: the extra row and column after) is padded explicitly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from parity.api import Prepared
from parity.api.inputs import check_conv, check_operands
from parity.api.variants import ONE, Variant
from torch_impl.catalog import OpOptions
from torch_impl.catalog import variant as variant_record
from torch_impl.ops import prepare_op, same_padding


def conv_nchw(x: torch.Tensor, w: torch.Tensor, stride: int, padding: str) -> torch.Tensor:
    """NCHW images x OIHW kernels with TF's SAME/VALID convention; an NCHW output."""
    if padding == "SAME":
        (top, bottom), (left, right) = (same_padding(x.shape[i], w.shape[i], stride) for i in (2, 3))
        x = F.pad(x, (left, right, top, bottom))
    return F.conv2d(x, w, stride=stride)


def to_torch_layout(x: torch.Tensor, w: torch.Tensor, channels_last: bool = False):
    """NHWC images and HWIO kernels as PyTorch's NCHW and OIHW (channels-last strides where asked)."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return x.permute(0, 3, 1, 2).contiguous(memory_format=fmt), w.permute(3, 2, 0, 1).contiguous(memory_format=fmt)


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> torch.Tensor:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns an NHWC torch.Tensor."""
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    x, w = to_torch_layout(torch.as_tensor(np.asarray(images)), torch.as_tensor(np.asarray(kernels)))
    with torch.inference_mode():
        return conv_nchw(x, w, stride, padding).permute(0, 2, 3, 1)


WORKLOAD = "conv"  # an adapter (parity.api.adapters): an operation's
# `rank` (catalog.table): channels-last strides ('eager+cl', what oneDNN's convolution prefers) faster than eager on
# zen4; compiled ('compile': Inductor calls the same convolution) no different, a lever (docs/pytorch.md, "Speed")
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", WORKLOAD, ONE, options=OpOptions()),
    Variant("eager+cl", WORKLOAD, ONE, tuned=True, rank=0, options=OpOptions(channels_last=True)),
    Variant("compile", WORKLOAD, ONE, tuned=True, options=OpOptions(compile=True)),
    Variant(
        "eager+cl+bf16",
        WORKLOAD,
        ONE,
        "bfloat16",
        tuned=True,
        rank=0,
        float32="eager+cl",
        options=OpOptions(channels_last=True, bfloat16=True),
    ),
)


def prepare(
    variant: str,
    images: np.ndarray,
    kernels: np.ndarray,
    devices: Sequence[torch.device],
    stride: int = 2,
    padding: str = "SAME",
) -> Prepared:
    """Place the inputs on the device in PyTorch's layout (torch_impl.catalog's options: channels-last or not) and
    return the callable, whose output is read in NHWC (a view: PyTorch computes NCHW).

    Raises:
        ValueError: unknown variant; operands that are not NumPy arrays of one real floating dtype, or shapes no conv
            computes (parity.api.inputs).
    """
    check_operands("conv", images=images, kernels=kernels)
    stride = check_conv(images, kernels, stride, padding)  # a Python int
    v = variant_record("conv", variant, len(devices))
    return prepare_op(
        lambda a, b: conv_nchw(a, b, stride, padding).permute(0, 2, 3, 1),
        v,
        images,
        kernels,
        devices,
        lambda a, b, o: to_torch_layout(a, b, o.channels_last),
    )
