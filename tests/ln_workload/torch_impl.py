"""The test model (ln_workload) in PyTorch, its weights in Keras's layout; its epsilon a build option, so that a test
can build a model with another (the planted mismatch)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ln_workload import EPSILON, INFER, PIXEL_SCALE, TRAIN, WORKLOAD, initial  # noqa: F401

VARIANTS = ()  # no rows of its own: only its model functions are called


class LnMlp(nn.Module):
    def __init__(self, hidden: int, seed: int = 0, epsilon: float = EPSILON):
        super().__init__()
        self.epsilon = epsilon
        self.slots = nn.ParameterList([nn.Parameter(torch.from_numpy(w)) for w in initial(hidden, seed)])

    def blocks(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        k1, b1, gamma, beta, k2, b2 = self.slots
        h = x.reshape(x.shape[0], -1).to(k1.dtype) * PIXEL_SCALE @ k1 + b1
        norm = nn.functional.layer_norm(h, h.shape[-1:], gamma, beta, self.epsilon)
        logits = nn.functional.gelu(norm) @ k2 + b2  # the exact form (erf): PyTorch's default
        return {"dense1": h, "norm": norm, "logits": logits, "probs": torch.softmax(logits, -1)}


MODEL = LnMlp


def build(hidden: int, seed: int = 0, epsilon: float = EPSILON) -> LnMlp:
    return LnMlp(hidden, seed, epsilon)


def float64(model: LnMlp) -> LnMlp:
    return model.double()


def get_weights(model: LnMlp) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in model.slots]


def set_weights(model: LnMlp, weights) -> None:
    with torch.no_grad():
        for p, w in zip(model.slots, weights, strict=True):
            p.copy_(torch.from_numpy(np.asarray(w, np.float32)))


def forward_layers(model: LnMlp, x: np.ndarray) -> dict[str, np.ndarray]:
    with torch.inference_mode():
        return {k: v.numpy() for k, v in model.blocks(torch.as_tensor(np.asarray(x, np.float32))).items()}


def loss_and_grads(model: LnMlp, x: np.ndarray, y: np.ndarray):
    from parity.api import Gradients

    logits = model.blocks(torch.as_tensor(np.asarray(x, np.float32)))["logits"]
    loss = nn.functional.cross_entropy(logits, torch.as_tensor(np.asarray(y), dtype=torch.long))
    grads = torch.autograd.grad(loss, list(model.slots))
    return Gradients(float(loss.detach()), [g.numpy() for g in grads], [])
