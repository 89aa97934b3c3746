"""Keras's Adam written out in PyTorch: its slots and its update rule, which every PyTorch trainer steps with (mirror
image of jax_impl.train.keras_adam)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def adam_state(params: Sequence[torch.Tensor]) -> dict:
    """Keras's Adam slots: each parameter's first and second moments at zero, and the step count."""
    zeros = [[torch.zeros_like(p, memory_format=torch.preserve_format) for p in params] for _ in range(2)]
    return {"m": zeros[0], "v": zeros[1], "t": torch.zeros((), dtype=torch.float32, device=params[0].device)}


@torch.no_grad()
def keras_adam(params, grads, state: dict, learning_rate: float, epsilon: float, b1: float = 0.9, b2: float = 0.999):
    """Keras 3's Adam update rule, in place: epsilon added to sqrt(v) before the bias correction is applied to the
    step (lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)). torch.optim.Adam adds it after (and at 1e-8),
    so the two differ slightly at every step; this is Keras's rule (jax_impl.train.keras_adam's)."""
    with torch.profiler.record_function("optimizer"):  # its ops under one scope, as jax_impl's and Keras's
        t = state["t"].add_(1)  # a tensor: under torch.compile the step count is data, not a recompiled constant
        alpha = learning_rate * torch.sqrt(1 - b2**t) / (1 - b1**t)
        # each line over every parameter at once (torch.optim's foreach form: a few ops a step, not a few a tensor)
        m, v = state["m"], state["v"]
        torch._foreach_add_(m, torch._foreach_mul(torch._foreach_sub(grads, m), 1 - b1))  # m += (g - m) (1 - b1)
        torch._foreach_add_(v, torch._foreach_mul(torch._foreach_sub(torch._foreach_mul(grads, grads), v), 1 - b2))
        denominator = torch._foreach_add(torch._foreach_sqrt(v), epsilon)
        torch._foreach_sub_(params, torch._foreach_div(torch._foreach_mul(m, alpha), denominator))
