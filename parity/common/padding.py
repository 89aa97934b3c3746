"""TF's and XLA's padding rules for strided convolutions: output sizes, SAME's pads, taps inside the input."""

from __future__ import annotations


def conv_out_size(size: int, k: int, stride: int, padding: str) -> int:
    """Output length of a strided conv along one axis, TF/XLA convention."""
    if padding == "SAME":
        return -(-size // stride)
    if padding == "VALID":
        return (size - k) // stride + 1
    raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def valid_taps(size: int, k: int, stride: int, padding: str) -> int:
    """Kernel taps that land inside the input, summed over the output positions along one axis."""
    lo = same_pads(size, k, stride)[0] if padding == "SAME" else 0
    out = conv_out_size(size, k, stride, padding)
    return sum(min(o * stride - lo + k, size) - max(o * stride - lo, 0) for o in range(out))


def same_pads(size: int, k: int, stride: int) -> tuple[int, int]:
    """TF's SAME padding: floor(total/2) before, the rest after."""
    total = max((conv_out_size(size, k, stride, "SAME") - 1) * stride + k - size, 0)
    return total // 2, total - total // 2
