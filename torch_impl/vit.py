"""The small vision transformer (parity.api.vit) as a PyTorch module: a Conv2d patch embedding, pre-norm encoder
blocks whose attention holds Keras's weights as Keras lays them out, written out or by PyTorch's fused attention,
with the conventions where PyTorch's defaults differ set explicitly, and Keras-order weight exchange (mirror image
of jax_impl.vit)."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.flop_counter as flop_counter
from torch import nn
from torch.profiler import record_function as scope

from parity.api import Gradients, Prepared
from parity.api.inputs import check_seed, check_vit
from parity.api.variants import ONE, Variant
from parity.api.vit import LN_EPSILON, PIXEL_SCALE, VitArchitecture, check_vit_weights
from torch_impl.catalog import InferOptions, TrainOptions, autocast_variant, ddp_variants
from torch_impl.catalog import variant as variant_record
from torch_impl.devices import to_numpy
from torch_impl.models import computing, cross_entropy, images, infer_blocks, labels, prepare, to_keras, to_torch

TRAIN, INFER = "vit_train", "vit_infer"  # its row kinds, each with its variants below
WORKLOAD = "vit"  # an adapter (parity.api.adapters): its workload
# attention written out out of the box. torch.compile is the best-known: faster than eager in training
# and inference on zen4 (docs/results/zen4/cpu-levers-vit.json), its first epoch a long compilation; the fused
# attention (sdpa) made no difference there, a lever
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", TRAIN, ONE, rank=1, options=TrainOptions()),
    Variant("eager+sdpa", TRAIN, ONE, tuned=True, options=TrainOptions(sdpa=True)),
    Variant("compile", TRAIN, ONE, tuned=True, rank=0, options=TrainOptions(compile=True)),
    autocast_variant(TRAIN),
    *ddp_variants(TRAIN),
    Variant("predict", INFER, ONE, rank=1, options=InferOptions()),
    Variant("predict+sdpa", INFER, ONE, tuned=True, options=InferOptions(sdpa=True)),
    Variant("predict+compile", INFER, ONE, tuned=True, rank=0, options=InferOptions(compile=True)),
)
BATCHNORM = "none"  # no BatchNorm (LayerNorm's statistics are each token's own)
UNCOUNTED = None  # torch.utils.flop_counter counts every product of it (the CPU's fused attention: _count_attention)
POS_STD = 0.02  # the position embedding's initial normal spread: the ViT paper's


def kernel_path(mixed: bool = False, compiled: bool = False) -> None:
    """Which kernel the model's recurrent layers run: none, it has none."""
    return None


def _count_attention() -> None:
    """torch.utils.flop_counter counts the GPU's fused attention kernels, not the CPU's (torch 2.14): the same
    formulas registered for the CPU's, so that a '+sdpa' variant's counted FLOPs are its products' too."""
    registry, flash = flop_counter.flop_registry, "_scaled_dot_product_flash_attention"
    for end in ("", "_backward"):  # the arguments the formulas read lead alike: (grad_out,) query, key, value
        op, like = (getattr(torch.ops.aten, f"{flash}{cpu}{end}", None) for cpu in ("_for_cpu", ""))
        if op is not None and like in registry and op not in registry:  # another torch: left as it counts
            flop_counter.register_flop_formula(op, get_raw=True)(registry[like])


_count_attention()


def _uniform(shape: tuple[int, ...], fan_in: int, fan_out: int, g: torch.Generator) -> nn.Parameter:
    """Keras's glorot_uniform for a kernel that maps fan_in numbers to fan_out."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return nn.Parameter(nn.init.uniform_(torch.empty(shape), -limit, limit, generator=g))


def _dense(layer: nn.Module, g: torch.Generator) -> nn.Module:
    """Keras's initialisers: kernel glorot_uniform (torch's default: kaiming_uniform), bias zeros."""
    nn.init.xavier_uniform_(layer.weight, generator=g)
    nn.init.zeros_(layer.bias)
    return layer


def _layer_norm(dim: int) -> nn.LayerNorm:
    """LayerNorm over the last axis with parity.api.vit's epsilon, 1e-6 (PyTorch's default 1e-5); its variance the
    biased one, as every side's."""
    return nn.LayerNorm(dim, eps=LN_EPSILON)


def _gelu() -> nn.GELU:
    """GELU in its exact form, x Phi(x) with erf (parity.api.vit.GELU): torch's default, written out (jax.nn.gelu's
    and Flax's is the tanh approximation)."""
    return nn.GELU(approximate="none")


def _tokens(h: torch.Tensor) -> torch.Tensor:
    """The patch embedding's NCHW output (B, D, 7, 7) as tokens (B, 49, D) in (h, w) row-major order, as Keras reads
    its NHWC map (channels moved last first: NCHW's own flattening would run along the channels)."""
    return h.permute(0, 2, 3, 1).flatten(1, 2)


class Attention(nn.Module):
    """Keras MultiHeadAttention's self-attention, no mask, no dropout: its weights held in Keras's layout, not
    nn.MultiheadAttention's packed in_proj_weight (3D, D), so that they are exchanged as they are and the queries,
    keys and values are the three products every side computes (no packing on each exchange)."""

    def __init__(self, dim: int, heads: int, g: torch.Generator):
        super().__init__()
        self.head_dim = k = dim // heads
        for name in ("query", "key", "value"):  # glorot as a dense layer dim -> dim; biases zeros
            setattr(self, f"{name}_kernel", _uniform((dim, heads, k), dim, dim, g))
            setattr(self, f"{name}_bias", nn.Parameter(torch.zeros(heads, k)))
        self.output_kernel = _uniform((heads, k, dim), dim, dim, g)
        self.output_bias = nn.Parameter(torch.zeros(dim))

    def _heads(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """x (B, T, D) -> (B, H, T, hd): Keras's einsum 'btd,dhk->bthk' plus the bias, heads before tokens."""
        kernel, bias = getattr(self, f"{name}_kernel"), getattr(self, f"{name}_bias")
        return torch.einsum("btd,dhk->bhtk", x, kernel) + bias[:, None]

    def forward(self, x: torch.Tensor, fused: bool) -> torch.Tensor:
        q, k, v = (self._heads(x, name) for name in ("query", "key", "value"))
        scale = 1.0 / math.sqrt(self.head_dim)
        if fused:  # one op (the CPU's flash-attention kernel where it applies); its scale set, not left to default
            out = F.scaled_dot_product_attention(q, k, v, scale=scale)
        else:  # written out, as Keras: the queries scaled, the scores, softmax over the keys, the weighted values
            out = torch.softmax((q * scale) @ k.transpose(-2, -1), dim=-1) @ v
        return torch.einsum("bhtk,hkd->btd", out, self.output_kernel) + self.output_bias


class PositionEmbedding(nn.Module):
    """A learned (tokens, dim) table added to the tokens: Keras's layer of one weight, 'embeddings'."""

    def __init__(self, tokens: int, dim: int, g: torch.Generator):
        super().__init__()
        self.embeddings = nn.Parameter(nn.init.normal_(torch.empty(tokens, dim), std=POS_STD, generator=g))


class ViT(nn.Module):
    """Layer for layer the Keras ViT, built from its declaration (parity.api.vit.VitArchitecture): each layer with
    weights an attribute of its Keras name (patch_embed, pos_embed, block1_ln1, block1_attn, ..., norm, dense).
    Takes NHWC images, as Keras; the patch embedding computes NCHW."""

    def __init__(self, arch: VitArchitecture, seed: int):
        super().__init__()
        self.arch, g = arch, torch.Generator().manual_seed(seed)
        d, p = arch.dim, arch.patch
        self.patch_embed = _dense(nn.Conv2d(1, d, p, stride=p), g)  # VALID (no padding): torch's default, Keras's
        self.pos_embed = PositionEmbedding(arch.tokens, d, g)
        for b in arch.block_names:  # in Keras's order: each layer draws the generator's next numbers
            setattr(self, f"{b}_ln1", _layer_norm(d))
            setattr(self, f"{b}_attn", Attention(d, arch.heads, g))
            setattr(self, f"{b}_ln2", _layer_norm(d))
            setattr(self, f"{b}_mlp1", _dense(nn.Linear(d, arch.mlp), g))
            setattr(self, f"{b}_mlp2", _dense(nn.Linear(arch.mlp, d), g))
        self.norm = _layer_norm(d)
        self.dense = _dense(nn.Linear(d, arch.classes), g)
        self.gelu = _gelu()
        self.mixed = False  # mixed_precision's copy: bfloat16 compute under autocast
        self.fused = False  # the '+sdpa' variants: torch.nn.functional.scaled_dot_product_attention

    def _block(self, b: str, x: torch.Tensor) -> torch.Tensor:
        """One pre-norm encoder block: x + attention(LN1(x)), then that + mlp2(gelu(mlp1(LN2(that))))."""
        layer = lambda name: getattr(self, f"{b}_{name}")  # noqa: E731
        with scope(f"{b}_ln1"):
            h = layer("ln1")(x)
        with scope(f"{b}_attn"):
            x = x + layer("attn")(h, self.fused)
        with scope(f"{b}_ln2"):
            h = layer("ln2")(x)
        with scope(f"{b}_mlp1"):
            h = self.gelu(layer("mlp1")(h))
        with scope(f"{b}_mlp2"):
            return x + layer("mlp2")(h)

    def blocks(self, x: torch.Tensor, train: bool = False) -> dict[str, torch.Tensor]:
        """Every block's output ('embed', 'block1'.., 'pool', 'logits', 'probs') from float32 NHWC images. train as
        the CNN's takes it: no dropout, no BatchNorm, one pass either way."""
        arch, out = self.arch, {}
        scale, patch, pos, *blocks, norm, pool, dense, probs = arch.names
        # Each layer in a profiler scope of Keras's layer name, as the CNN's (a block's layers inside its own)
        with scope(scale):
            h = x.permute(0, 3, 1, 2) * PIXEL_SCALE  # NCHW; float32 (autocast leaves an elementwise product alone)
        with scope(patch):
            h = _tokens(self.patch_embed(h))
        with scope(pos):
            h = out["embed"] = h + self.pos_embed.embeddings
        for b in blocks:
            with scope(b):
                h = out[b] = self._block(b, h)
        with scope(norm):
            h = self.norm(h)
        with scope(pool):
            h = out["pool"] = h.mean(1)  # the tokens' mean (no class token)
        # Softmax and loss in float32 whatever the compute dtype: Keras's mixed-precision rule, as the CNN's
        with scope(dense):
            out["logits"] = self.dense(h).float()
        with scope(probs):
            out["probs"] = torch.softmax(out["logits"], -1)
        return out

    def logits(self, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        return self.blocks(x, train)["logits"]


MODEL = ViT  # what `build` returns: the surface's model functions find this adapter by it


def build(dim: int, depth: int, heads: int, mlp: int, seed: int = 0) -> ViT:
    """The ViT of parity.api.vit at these sizes: LayerNorm's epsilon 1e-6, exact GELU, Keras's attention layout.
    Initial weights its own (every check loads shared ones): kernels glorot_uniform (an attention kernel's fans a
    dense layer D -> D's; Keras's reads a (D, H, hd) kernel's as D·H and D·hd), biases zeros, LayerNorms ones and
    zeros, the position embedding normal(0, 0.02). Raises ValueError on sizes or a seed out of their bounds
    (parity.api.inputs: check_vit, check_seed)."""
    return ViT(check_vit(dim, depth, heads, mlp), check_seed(seed))


def mixed_precision(model: ViT) -> ViT:
    """A bfloat16-compute copy of `model` (float32 parameters, the same values): autocast's way."""
    out = copy.deepcopy(model)
    out.mixed = True
    return out


def train_with(model: ViT, o) -> None:
    """Set a training variant's options (catalog.TrainOptions) on the model: the fused attention."""
    model.fused = o.sdpa


# Keras's field names -> PyTorch's (LayerNorm's gamma and beta: weight and bias; a conv's or dense kernel: weight);
# the attention's and the position embedding's are Keras's own
_FIELDS = {"gamma": "weight", "beta": "bias", "kernel": "weight"}


def slots(model: ViT):
    """(declared Weight, tensor) in the order Keras's Model.get_weights() lists them (parity.api.vit's table)."""
    for w in model.arch.weights:
        yield w, getattr(getattr(model, w.layer), _FIELDS.get(w.field, w.field))


def _keras(w, t: torch.Tensor) -> np.ndarray:
    """A weight (or its gradient) in Keras's layout, a copy: the conv's and dense layers' kernels transposed (OIHW ->
    HWIO, (out, in) -> (in, out)), every other array held as Keras holds it (copied: .numpy() would share the
    parameter's memory, which training overwrites)."""
    return to_keras(t) if w.field == "kernel" else np.array(to_numpy(t))


def get_weights(model: ViT) -> list[np.ndarray]:
    """All weights as NumPy arrays in Keras's order and layouts."""
    return [_keras(w, t) for w, t in slots(model)]


def set_weights(model: ViT, weights: Sequence[np.ndarray]) -> None:
    """Load weights in Keras's order and layouts. Raises ValueError naming the array on a length/shape/dtype
    mismatch or a value not finite (a list for other sizes included)."""
    check_vit_weights(weights, model.arch)
    with torch.no_grad():
        for (w, t), a in zip(slots(model), weights, strict=True):
            t.copy_(to_torch(a) if w.field == "kernel" else torch.tensor(np.asarray(a)))


def count_params(model: ViT) -> dict[str, int]:
    """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them: every weight trains."""
    n = sum(t.numel() for _, t in slots(model))
    return {"total": n, "trainable": n, "non_trainable": 0}


def forward_layers(model: ViT, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every block's output as NumPy, by block name (inference)."""
    return infer_blocks(model, x)


def loss_and_grads(model: ViT, x: np.ndarray, y: np.ndarray) -> Gradients:
    """One batch's loss and gradients, grads in Keras's trainable_weights order and layouts; no max pooling, so no
    routing. The model is not changed."""
    table = list(slots(model))
    device = table[0][1].device
    with computing(model.mixed, device):
        logits = model.logits(images(x, device), train=True)
    loss = cross_entropy(logits, labels(y, device))
    grads = torch.autograd.grad(loss, [t for _, t in table])
    return Gradients(float(loss.detach()), [_keras(w, g) for (w, _), g in zip(table, grads, strict=True)], [])


def prepare_inference(model: ViT, x: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of images `x` on devices[0], inputs placed beforehand.

    Raises:
        ValueError: a variant not among variants("vit_infer", 1).
    """
    o = variant_record(INFER, variant, 1).options  # torch_impl.catalog.InferOptions
    if o.sdpa != model.fused:
        model = copy.deepcopy(model)
        model.fused = o.sdpa
    return prepare(model, x, devices, o.compile, kernel_path(model.mixed, o.compile), UNCOUNTED)
