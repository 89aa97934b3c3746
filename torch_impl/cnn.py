"""The notebook's 5-layer Fashion-MNIST CNN as a PyTorch module, with Keras's numerics set explicitly and Keras-order
weight exchange (mirror image of jax_impl.cnn)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function as scope

from parity.api import Gradients, Prepared
from parity.api.cnn import CNN_ARCHITECTURE, Architecture, check_weights
from parity.api.inputs import check_seed
from parity.api.variants import ONE, Variant
from torch_impl.catalog import InferOptions, TrainOptions, autocast_variant, ddp_variants
from torch_impl.catalog import variant as variant_record
from torch_impl.models import (
    computing,
    cross_entropy,
    images,
    infer_blocks,
    labels,
    prepare,
    to_keras,
    to_torch,
)
from torch_impl.ops import same_padding

TRAIN, INFER = "cnn_train", "cnn_infer"  # its row kinds, each with its variants below
WORKLOAD = "cnn"  # an adapter (parity.api.adapters): its workload
# `rank` (catalog.table), on zen4: in training compiled and channels-last each faster than eager, no difference
# between the two, and the compiled step's first epoch is a long compilation, so channels-last is the best-known.
# Inference ('predict' as in every implementation: eagerly, under torch.inference_mode): compiled faster in two runs
# on zen4; on xeon-amx channels-last faster, compiled too, both at once fastest: 'predict+cl+compile' the best-known,
# the others in that order (docs/pytorch.md, "Speed").
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", TRAIN, ONE, rank=1, options=TrainOptions()),
    Variant("eager+cl", TRAIN, ONE, tuned=True, rank=0, options=TrainOptions(channels_last=True)),
    Variant("compile", TRAIN, ONE, tuned=True, options=TrainOptions(compile=True)),
    autocast_variant(TRAIN),
    *ddp_variants(TRAIN),
    Variant("predict", INFER, ONE, rank=3, options=InferOptions()),
    Variant("predict+compile", INFER, ONE, tuned=True, rank=2, options=InferOptions(compile=True)),
    Variant("predict+cl", INFER, ONE, tuned=True, rank=1, options=InferOptions(channels_last=True)),
    Variant(
        "predict+cl+compile", INFER, ONE, tuned=True, rank=0, options=InferOptions(compile=True, channels_last=True)
    ),
)
UNCOUNTED = None  # torch.utils.flop_counter counts every conv and matmul of it
BATCHNORM = "replica"  # BatchNorm's statistics over the (one) replica's batch, as jax_impl and tf_impl at one device


def kernel_path(mixed: bool = False, compiled: bool = False) -> None:
    """Which kernel the model's recurrent layers run: none, it has none."""
    return None


class BatchNorm(nn.BatchNorm2d):
    """nn.BatchNorm2d with Keras's numerics: its epsilon and momentum, and its moving variance the batch's biased
    variance (torch's running_var takes the unbiased one, n/(n-1) larger)."""

    def __init__(self, channels: int, epsilon: float, momentum: float):
        # Keras's epsilon 1e-3 (torch's default 1e-5); torch's momentum weighs the batch, Keras's the moving value
        super().__init__(channels, eps=epsilon, momentum=1.0 - momentum)
        self.keras_momentum = momentum

    def normalise(self, h: torch.Tensor, train: bool) -> torch.Tensor:
        """The batch's statistics in training (and the moving ones updated, Keras's way), the moving ones else."""
        if not train:
            return F.batch_norm(h, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        with torch.no_grad():  # Keras's update: moving = m * moving + (1 - m) * batch, the variance biased
            var, mean = torch.var_mean(h.float(), dim=(0, 2, 3), correction=0)
            m = self.keras_momentum
            self.running_mean.mul_(m).add_(mean, alpha=1.0 - m)
            self.running_var.mul_(m).add_(var, alpha=1.0 - m)
        return F.batch_norm(h, None, None, self.weight, self.bias, True, 0.0, self.eps)


def _glorot(layer: nn.Module, g: torch.Generator) -> nn.Module:
    """Keras's initialisers: kernel glorot_uniform (torch's default: kaiming_uniform), bias zeros."""
    nn.init.xavier_uniform_(layer.weight, generator=g)
    nn.init.zeros_(layer.bias)
    return layer


def _flat(h: torch.Tensor) -> torch.Tensor:
    """NCHW activations flattened in Keras's order, (h, w, c) (NCHW's own would be (c, h, w)); others as they are."""
    return h.permute(0, 2, 3, 1).flatten(1) if h.dim() == 4 else h


class CNN(nn.Module):
    """Layer for layer the Keras Sequential model of the tensorflow/tpu notebook, built from its declaration
    (parity.api.cnn.CNN_ARCHITECTURE): each layer with weights an attribute of its Keras name (bn1, conv1, ...).
    Computes NCHW (channels-last strides where asked); takes and gives NHWC, Keras's layout."""

    def __init__(self, arch: Architecture, seed: int, dropout: bool = True):
        super().__init__()
        self.arch, g = arch, torch.Generator().manual_seed(seed)
        for b in arch.convs:  # in Keras's order: each layer's parameters draw the generator's next numbers
            bn, conv = b.names[:2]
            setattr(self, bn, BatchNorm(b.channels, arch.bn_epsilon, arch.bn_momentum))
            setattr(self, conv, _glorot(nn.Conv2d(b.channels, b.filters, b.kernel), g))
        for d in (*arch.dense, arch.output):
            setattr(self, d.names[0], _glorot(nn.Linear(d.units_in, d.units), g))
        self.rates = arch.dropout_rates if dropout else (0.0,) * len(arch.dropout_rates)
        self.mixed = False  # mixed_precision's copy: bfloat16 compute under autocast
        self.memory_format = torch.contiguous_format  # the '+cl' variants: torch.channels_last

    def to_channels_last(self) -> None:
        """Activations and conv kernels in channels-last memory format (NHWC strides): the '+cl' variants."""
        self.memory_format = torch.channels_last
        self.to(memory_format=torch.channels_last)

    @staticmethod
    def _conv(layer: nn.Conv2d, h: torch.Tensor) -> torch.Tensor:
        """Keras's SAME convolution of stride 1: the conv's own padding where it is symmetric (an odd kernel),
        else padded explicitly as TF does (the extra row and column after)."""
        before, after = same_padding(h.shape[2], layer.kernel_size[0], 1)  # at stride 1: kernel - 1 in all
        if before == after:
            return F.conv2d(h, layer.weight, layer.bias, padding=before)
        return F.conv2d(F.pad(h, (before, after, before, after)), layer.weight, layer.bias)

    def blocks(self, x: torch.Tensor, train: bool = False) -> dict[str, torch.Tensor]:
        """Every block's output (NHWC views), and each pooling layer's input ('pool1_input', ...; NCHW) from float32
        NHWC images. train: batch statistics (moving ones updated) and dropout."""
        # Each layer in a profiler scope of Keras's layer name (torch_impl.profile maps a trace's ops onto the same
        # names in every framework; the conv's ELU is in its scope, as Keras's Conv2D(activation=))
        arch, out = self.arch, {}
        ends = arch.blocks  # which layer's output is which block
        h = x.permute(0, 3, 1, 2).contiguous(memory_format=self.memory_format)
        for i, b in enumerate(arch.convs):
            bn, conv, pool, dropout = b.names
            with scope(bn):
                h = getattr(self, bn).normalise(h, train)
            with scope(conv):
                h = out[f"{pool}_input"] = F.elu(self._conv(getattr(self, conv), h))
            with scope(pool):
                h = F.max_pool2d(h, b.pool, b.pool)  # VALID: an odd last row or column left out, as Keras's
            with scope(dropout):
                h = F.dropout(h, self.rates[i], train)
            out[ends[dropout]] = h.permute(0, 2, 3, 1)
        for i, d in enumerate(arch.dense, len(arch.convs)):
            dense, elu, dropout = d.names
            with scope(dense):
                h = getattr(self, dense)(_flat(h))
            with scope(elu):
                h = out[ends[elu]] = F.elu(h)
            with scope(dropout):
                h = F.dropout(h, self.rates[i], train)
        # Softmax and loss in float32 whatever the compute dtype: Keras's mixed-precision rule for the output layer
        dense, softmax = arch.output.names
        with scope(dense):
            out["logits"] = getattr(self, dense)(_flat(h)).float()
        with scope(softmax):
            out["probs"] = torch.softmax(out["logits"], -1)
        return out

    def logits(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.blocks(x, train)["logits"]


MODEL = CNN  # what `build` returns: the surface's model functions find this adapter by it


def build(seed: int = 0, dropout: bool = True) -> CNN:
    """The CNN with Keras's initialisers; dropout=False keeps the layers at rate 0 (for parity). Raises ValueError on
    a seed other than an integer from 0 to parity.api.inputs.MAX_SEED."""
    return CNN(CNN_ARCHITECTURE, check_seed(seed), dropout)


def mixed_precision(model: CNN) -> CNN:
    """A bfloat16-compute copy of `model` (float32 parameters and statistics, the same values): autocast's way."""
    out = copy.deepcopy(model)
    out.mixed = True
    return out


def train_with(model: CNN, o) -> None:
    """Set a training variant's options (catalog.TrainOptions) on the model: channels-last memory format."""
    if o.channels_last:
        model.to_channels_last()


# Keras's field names -> PyTorch's (BatchNorm's: weight, bias, running_mean, running_var; a layer's kernel: weight)
_FIELDS = {
    "gamma": "weight",
    "beta": "bias",
    "moving_mean": "running_mean",
    "moving_variance": "running_var",
    "kernel": "weight",
}


def slots(model: CNN):
    """(declared Weight, tensor) in the order Keras's Model.get_weights() lists them."""
    for w in model.arch.weights:
        yield w, getattr(getattr(model, w.layer), _FIELDS.get(w.field, w.field))


def get_weights(model: CNN) -> list[np.ndarray]:
    """All weights as NumPy arrays in Keras's order and layouts (conv HWIO, dense (in, out))."""
    return [to_keras(t) for _, t in slots(model)]


def set_weights(model: CNN, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order and layouts. Raises ValueError naming the layer on a length/shape/dtype
    mismatch."""
    check_weights(weights)
    with torch.no_grad():
        for (_, t), w in zip(slots(model), weights, strict=True):
            t.copy_(to_torch(w))


def count_params(model: CNN) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them (torch's num_batches_tracked is no
    weight of Keras's)."""
    sizes = [(w.trainable, t.numel()) for w, t in slots(model)]
    trainable = sum(n for k, n in sizes if k)
    stats = sum(n for k, n in sizes if not k)
    return {"total": trainable + stats, "trainable": trainable, "non_trainable": stats}


def forward_layers(model: CNN, x: np.ndarray) -> dict[str, np.ndarray]:
    """Inference (BatchNorm on moving statistics): every block's output as NumPy, by block name (NHWC)."""
    return infer_blocks(model, x)


def routing(a: torch.Tensor, size: int) -> np.ndarray:
    """Max pooling's own gradient at `a` (NCHW) for a cotangent of ones: where each window's gradient goes (NHWC)."""
    a = a.detach().requires_grad_(True)
    out = F.max_pool2d(a, size, size)
    (g,) = torch.autograd.grad(out, a, torch.ones_like(out))
    return g.permute(0, 2, 3, 1).float().numpy()


def loss_and_grads(model: CNN, x: np.ndarray, y: np.ndarray) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order and layouts, and how
    each max-pooling layer routed its gradient in this pass. Batch statistics as in training, dropout off (build
    the model with dropout=False); the model itself is not changed (its moving statistics are put back)."""
    if any(model.rates):
        raise ValueError("loss_and_grads compares without dropout: build the model with dropout=False")
    trained = [t for w, t in slots(model) if w.trainable]
    stats = [t for w, t in slots(model) if not w.trainable]
    kept = [t.clone() for t in stats]
    device = trained[0].device
    with computing(model.mixed, device):
        out = model.blocks(images(x, device), train=True)
    loss = cross_entropy(out["logits"], labels(y, device))
    grads = torch.autograd.grad(loss, trained)
    with torch.no_grad():
        for t, k in zip(stats, kept, strict=True):
            t.copy_(k)
    pools = [(out[f"{b.names[2]}_input"], b.pool) for b in model.arch.convs]
    return Gradients(float(loss.detach()), [to_keras(g) for g in grads], [routing(a, p) for a, p in pools])


def prepare_inference(model: CNN, x: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of images `x` (inference mode) on devices[0], inputs placed beforehand.

    Raises:
        ValueError: a variant not among variants("cnn_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # torch_impl.catalog.InferOptions
    if o.channels_last:
        model = copy.deepcopy(model)
        model.to_channels_last()
    return prepare(model, x, devices, o.compile, kernel_path(model.mixed, o.compile), UNCOUNTED)
