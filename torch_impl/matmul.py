"""A large matrix product in PyTorch: the framework's ceiling on the machine, on one device."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from parity.api import Prepared
from parity.api.inputs import check_matmul, check_operands
from parity.api.variants import ONE, Variant
from torch_impl.catalog import OpOptions
from torch_impl.catalog import variant as variant_record
from torch_impl.ops import prepare_op

WORKLOAD = "matmul"  # an adapter (parity.api.adapters): an operation's
# one aten call whether compiled or not (Inductor's extern mm), so eager only, and bfloat16 operands
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", WORKLOAD, ONE, rank=0, options=OpOptions()),
    Variant(
        "eager+bf16", WORKLOAD, ONE, "bfloat16", tuned=True, rank=0, float32="eager", options=OpOptions(bfloat16=True)
    ),
)


def prepare(variant: str, a: np.ndarray, b: np.ndarray, devices: Sequence[torch.device]) -> Prepared:
    """Place the operands on the device and return the callable (the variant's options: torch_impl.catalog).

    Raises:
        ValueError: unknown variant; operands that are not NumPy arrays of one real floating dtype, or matrices that
            do not multiply (parity.api.inputs).
    """
    check_operands("matmul", a=a, b=b)
    check_matmul(a, b)
    v = variant_record("matmul", variant, len(devices))
    return prepare_op(torch.matmul, v, a, b, devices, lambda p, q, o: (p, q))
