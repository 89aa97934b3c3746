"""The row LSTM (parity.api.lstm) as a PyTorch module: two torch.nn.LSTM layers with Keras's numerics and one bias
set explicitly, and Keras-order weight exchange (mirror image of jax_impl.lstm)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.profiler import record_function as scope

from parity.api import DeviceUnavailable, Gradients, Prepared
from parity.api.inputs import check_seed, check_units
from parity.api.lstm import GATES, PIXEL_SCALE, LstmArchitecture, check_lstm_weights
from parity.api.variants import ONE, Variant
from torch_impl.catalog import InferOptions, TrainOptions, autocast_variant, ddp_variants
from torch_impl.catalog import variant as variant_record
from torch_impl.models import computing, cross_entropy, images, infer_blocks, labels, prepare, to_keras, to_torch

TRAIN, INFER = "lstm_train", "lstm_infer"  # its row kinds, each with its variants below
WORKLOAD = "lstm"  # an adapter (parity.api.adapters): its workload
# `rank` (catalog.table): training compiled faster than eager in one zen4 run and slower in the next (docs/pytorch.md,
# "Speed"): no steady gain (Dynamo does not trace nn.LSTM, whose layers run eagerly between compiled pieces), a lever;
# inference compiled no different (docs/results/zen4/cpu-levers-pytorch.json): a lever.
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", TRAIN, ONE, rank=0, options=TrainOptions()),
    Variant("compile", TRAIN, ONE, tuned=True, options=TrainOptions(compile=True)),
    autocast_variant(TRAIN),
    *ddp_variants(TRAIN),
    Variant("predict", INFER, ONE, rank=0, options=InferOptions()),
    Variant("predict+compile", INFER, ONE, tuned=True, options=InferOptions(compile=True)),
)
BATCHNORM = "none"  # no BatchNorm
UNCOUNTED = "torch.utils.flop_counter: not counted (oneDNN's fused LSTM layer is no matmul it counts)"


def kernel_path(mixed: bool = False, compiled: bool = False) -> str:
    """Which kernel torch.nn.LSTM runs on the CPU: oneDNN's fused LSTM layer where ATen takes it, else (float32 only)
    ATen's own loop over the time steps. Compiled, the same: Dynamo breaks the graph at an LSTM layer
    (torch._dynamo.config.allow_rnn is off; on, Inductor failed on oneDNN's layer, torch 2.14), so the layers run
    eagerly between compiled pieces.

    Raises:
        DeviceUnavailable: bfloat16 (mixed) where oneDNN does not multiply it: autocast's LSTM goes to oneDNN's layer
            alone, which refuses the primitive on an AVX2 CPU (AMD family 25 model 1, torch 2.14.1).
    """
    onednn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    if mixed and not (onednn and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        raise DeviceUnavailable(
            "a bfloat16 LSTM in PyTorch needs oneDNN's bfloat16 LSTM, which this CPU does not have (AVX-512 and up)"
        )
    path = "oneDNN's LSTM (torch.nn.LSTM)" if onednn else "ATen's LSTM loop (torch.nn.LSTM)"
    return f"{path}, eager between compiled pieces" if compiled else path


def _init_lstm(layer: nn.LSTM, forget_bias: float, g: torch.Generator) -> nn.LSTM:
    """Keras's initialisers and its one bias: kernel glorot_uniform, recurrent kernel orthogonal, the bias zeros but
    the forget gate's quarter (unit_forget_bias); torch's second bias (bias_hh) held at zero and not trained."""
    nn.init.xavier_uniform_(layer.weight_ih_l0, generator=g)  # Keras's glorot_uniform (torch's: uniform(1/sqrt(U)))
    nn.init.orthogonal_(layer.weight_hh_l0, generator=g)  # Keras's Orthogonal(gain=1)
    u, f = layer.hidden_size, GATES.index("f")  # torch's gate rows i, f, g, o: Keras's i, f, c, o
    with torch.no_grad():
        layer.bias_ih_l0.zero_()[f * u : (f + 1) * u] = forget_bias
        layer.bias_hh_l0.zero_()
    layer.bias_hh_l0.requires_grad_(False)  # Keras has one bias: bias_ih carries it
    return layer


class LSTM(nn.Module):
    """Layer for layer the Keras Sequential row LSTM, built from its declaration (parity.api.lstm.LstmArchitecture):
    each layer with weights an attribute of its Keras name (lstm1, lstm2, dense)."""

    def __init__(self, units: int, seed: int):
        super().__init__()
        self.arch = arch = LstmArchitecture(units)
        g = torch.Generator().manual_seed(seed)
        for name, inputs in arch.lstm_layers:  # in Keras's order: each layer draws the generator's next numbers
            setattr(self, name, _init_lstm(nn.LSTM(inputs, units, batch_first=True), arch.forget_bias, g))
        dense = nn.Linear(units, arch.classes)
        nn.init.xavier_uniform_(dense.weight, generator=g)  # Keras's glorot_uniform, bias zeros
        nn.init.zeros_(dense.bias)
        setattr(self, arch.names[4], dense)
        self.mixed = False  # mixed_precision's copy: bfloat16 compute under autocast

    def blocks(self, x: torch.Tensor, train: bool = False) -> dict[str, torch.Tensor]:
        """Every block's output ('lstm1' the first layer's sequence, 'lstm2' the second's last hidden state,
        'logits', 'probs') from float32 images. train as the CNN's takes it: no dropout, no BatchNorm, one pass."""
        arch, out = self.arch, {}
        rows, scale, lstm1, lstm2, dense, probs = arch.names
        # Each layer in a profiler scope of Keras's layer name, as the CNN's
        with scope(rows):
            h = x.reshape(x.shape[0], arch.steps, arch.features)  # an image row per time step
        with scope(scale):
            # in float32 (autocast leaves a product of tensors in float32, as the Keras model keeps its Rescaling
            # layer float32 under mixed precision)
            h = h * PIXEL_SCALE
        with scope(lstm1):
            out[lstm1], _ = getattr(self, lstm1)(h)  # every step's h (return_sequences=True); h_0 = c_0 = 0
        with scope(lstm2):
            _, (last, _) = getattr(self, lstm2)(out[lstm1])
            out[lstm2] = last[0]  # the last step's h: Keras's return_sequences=False
        # Softmax and loss in float32 whatever the compute dtype: Keras's mixed-precision rule, as the CNN's
        with scope(dense):
            out["logits"] = getattr(self, dense)(out[lstm2]).float()
        with scope(probs):
            out["probs"] = torch.softmax(out["logits"], -1)
        return out

    def logits(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.blocks(x, train)["logits"]


MODEL = LSTM  # what `build` returns: the surface's model functions find this adapter by it


def build(units: int, seed: int = 0) -> LSTM:
    """The row LSTM at `units` per LSTM layer, with Keras's initialisers and gate order. Raises ValueError on units
    or a seed out of their bounds (parity.api.inputs: check_units, check_seed)."""
    return LSTM(check_units(units), check_seed(seed))


def mixed_precision(model: LSTM) -> LSTM:
    """A bfloat16-compute copy of `model` (float32 parameters, the same values): autocast's way. Raises
    DeviceUnavailable where the CPU has no bfloat16 LSTM (kernel_path)."""
    kernel_path(mixed=True)
    out = copy.deepcopy(model)
    out.mixed = True
    return out


def train_with(model: LSTM, o) -> None:
    """A training variant's options (catalog.TrainOptions) that act on the model: none for the LSTM."""


# Keras's field of an LSTM layer -> torch.nn.LSTM's (and of the dense layer -> torch.nn.Linear's)
_FIELDS = {"kernel": "weight_ih_l0", "recurrent_kernel": "weight_hh_l0", "bias": "bias_ih_l0"}
_DENSE = {"kernel": "weight", "bias": "bias"}


def slots(model: LSTM):
    """(declared Weight, tensor) in the order Keras's Model.get_weights() lists them (parity.api.lstm's table)."""
    for w in model.arch.weights:
        layer = getattr(model, w.layer)
        yield w, getattr(layer, (_FIELDS if isinstance(layer, nn.LSTM) else _DENSE)[w.field])


def get_weights(model: LSTM) -> list[np.ndarray]:
    """All weights as NumPy arrays in Keras's order and layouts (kernels (in, 4U), gates i, f, c, o)."""
    return [to_keras(t) for _, t in slots(model)]


def set_weights(model: LSTM, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order and layouts. Raises ValueError naming the layer on a length/shape/dtype
    mismatch (a list for another width included)."""
    check_lstm_weights(weights, model.arch.units)
    with torch.no_grad():
        for (_, t), w in zip(slots(model), weights, strict=True):
            t.copy_(to_torch(w))


def count_params(model: LSTM) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them: every weight trains (torch's second
    bias, held at zero, is no weight of Keras's)."""
    n = sum(t.numel() for _, t in slots(model))
    return {"total": n, "trainable": n, "non_trainable": 0}


def forward_layers(model: LSTM, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block's output as NumPy, by block name (inference)."""
    return infer_blocks(model, x)


def loss_and_grads(model: LSTM, x: np.ndarray, y: np.ndarray) -> Gradients:
    """One batch's loss and gradients, grads in Keras's trainable_weights order and layouts (all 8 arrays); no max
    pooling, so no routing. The model is not changed."""
    weights = [t for _, t in slots(model)]
    device = weights[0].device
    with computing(model.mixed, device):
        logits = model.logits(images(x, device), train=True)
    loss = cross_entropy(logits, labels(y, device))
    return Gradients(float(loss.detach()), [to_keras(g) for g in torch.autograd.grad(loss, weights)], [])


def prepare_inference(model: LSTM, x: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of images `x` on devices[0], inputs placed beforehand.

    Raises:
        ValueError: a variant not among variants("lstm_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # torch_impl.catalog.InferOptions
    return prepare(model, x, devices, o.compile, kernel_path(model.mixed, o.compile), UNCOUNTED)
