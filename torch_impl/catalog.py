"""PyTorch's options, those its builders read (never the variants' names), and the lookup of the variants its adapters
declare (torch_impl.cnn's VARIANTS, ...), each a record (parity.api.variants). Over several devices, the trained models
only: DDP over gloo, one process per replica (torch_impl.ddp), out of the box and under autocast. The conv and the
matmul have none there: DDP wraps a training step, and one op split over processes would time the processes'
hand-offs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from parity.api.adapters import variants_of
from parity.api.variants import MANY, ONE, Setting, Variant, lookup, offered


@dataclass(frozen=True)
class OpOptions:
    """How an operation (the conv, the matmul) runs: eagerly, op by op ('eager', PyTorch out of the box), or as one
    program compiled by `torch.compile` (Inductor; its first calls are compile time, kept apart); the conv's tensors
    in channels-last memory format (`channels_last`: NHWC strides, what oneDNN's convolutions prefer); bfloat16
    operands (cast once, beforehand; bfloat16 out, as the other implementations' bfloat16 variants)."""

    compile: bool = False
    channels_last: bool = False
    bfloat16: bool = False


@dataclass(frozen=True)
class TrainOptions:
    """How a trained model (the CNN, the row LSTM, the ViT) trains: eagerly (PyTorch out of the box) or its step
    compiled by `torch.compile`; the CNN's activations in channels-last memory format; the ViT's attention by the
    fused `torch.nn.functional.scaled_dot_product_attention` (`sdpa`; else written out: matmul, softmax, matmul);
    mixed precision by autocast (bfloat16 compute on the CPU, float32 parameters and Adam state, float32 loss)."""

    compile: bool = False
    channels_last: bool = False
    mixed: bool = False
    sdpa: bool = False


@dataclass(frozen=True)
class InferOptions:
    """How a model infers: eagerly under `torch.inference_mode` or compiled by `torch.compile`; channels-last (the
    CNN); the fused attention (the ViT: `sdpa`, as TrainOptions')."""

    compile: bool = False
    channels_last: bool = False
    sdpa: bool = False


def autocast_variant(kind: str) -> Variant:
    """A trained model's mixed precision: its float32 counterpart the eager step."""
    return Variant(
        "eager+autocast", kind, ONE, "bfloat16", tuned=True, rank=0, float32="eager", options=TrainOptions(mixed=True)
    )


def ddp_variants(kind: str) -> tuple[Variant, ...]:
    """A trained model over several devices: DDP over gloo out of the box (its eager step on each rank), and under
    autocast; not in a multi-process run (DDP's processes are its own, not the launcher's)."""
    return (
        Variant("ddp", kind, MANY, rank=0, multiprocess=False, options=TrainOptions()),
        Variant(
            "ddp+autocast", kind, MANY, "bfloat16", tuned=True, rank=0, multiprocess=False, float32="ddp",
            options=TrainOptions(mixed=True),
        ),
    )  # fmt: skip


# Every variant is declared by its workload's adapter (torch_impl.cnn's VARIANTS, ...), in the order rows are listed.
# `rank`: the best-known configuration's order of preference within a row kind and number format (lower first), by
# `--preset levers` on zen4 for PyTorch alone (docs/results/zen4/cpu-levers-pytorch.json); each adapter says why its
# order is what it is, and docs/pytorch.md ("Speed") gives the figures.
def table() -> tuple[Variant, ...]:
    """Every variant PyTorch declares: its adapters' (parity.api.adapters.variants_of)."""
    return variants_of(__package__)


# Huge pages for PyTorch's own CPU allocator (c10's alloc_cpu: THP_MEM_ALLOC_ENABLE=1 aligns each allocation of 2 MB
# or more to 2 MB and asks the kernel for huge pages there), process-wide, as JAX's 'thp'. Out of the box every call
# faults its output in anew in 4 KB pages: the article's conv writes 2.1 GB a call, and its PyTorch `eager+cl` call
# runs oneDNN's brg_conv_fwd:avx512_core kernel on the same layouts as TF's conv (ONEDNN_VERBOSE=1), whose allocator
# keeps its buffers: huge pages close most of that gap (docs/pytorch.md, "Speed"). It acts on every buffer: both
# formats. `--configs levers` for PyTorch (docs/results/zen4/cpu-levers-pytorch-thp.json, zen4, the class measured):
# faster for the conv and the LSTM's training; slower for the ViT's training, the LSTM's inference and the matmul
# (`slows`): `best` runs those without it.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "thp", {"THP_MEM_ALLOC_ENABLE": "1"}, ("float32", "bfloat16"), rank=0, needs=("thp",),
        slows=("vit_train", "lstm_infer", "matmul"),
    ),
)  # fmt: skip
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (over several: the trained models', above)."""
    return offered(table(), kind, replicas)


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name` among those offered. Raises ValueError naming the variants there are."""
    return lookup(variants(kind, replicas), kind, name, replicas, "PyTorch")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """Process-wide settings worth a worker of their own on `device`: huge pages on a CPU whose kernel grants them to
    the allocations that ask ('madvise'; with 'always' every allocation has them already, with 'never' none can)."""
    if device != "cpu" or not huge_pages_on_request(THP_MODE):
        return ()
    return SETTINGS


def huge_pages_on_request(mode_file: Path = THP_MODE) -> bool:
    """Whether the kernel grants transparent huge pages to the mappings that ask for them ('madvise')."""
    try:
        return "[madvise]" in mode_file.read_text()  # 'always [madvise] never'
    except OSError:
        return False
