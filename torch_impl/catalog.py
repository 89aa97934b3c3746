"""PyTorch's variants, each declared once as a record (parity.api.variants): what the harness runs, and the options
this implementation's builders read (never the names). Over several devices, the trained models only: DDP over
gloo, one process per replica (torch_impl.ddp), out of the box and under autocast. The conv and the matmul have none
there: DDP wraps a training step, and one op split over processes would time the processes' hand-offs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def _autocast(kind: str) -> Variant:
    """A trained model's mixed precision: its float32 counterpart the eager step."""
    return Variant(
        "eager+autocast", kind, ONE, "bfloat16", tuned=True, best=0, float32="eager", options=TrainOptions(mixed=True)
    )


def _ddp(kind: str) -> tuple[Variant, ...]:
    """A trained model over several devices: DDP over gloo out of the box (its eager step on each rank), and under
    autocast; not in a multi-process run (DDP's processes are its own, not the launcher's)."""
    return (
        Variant("ddp", kind, MANY, best=0, multiprocess=False, options=TrainOptions()),
        Variant(
            "ddp+autocast", kind, MANY, "bfloat16", tuned=True, best=0, multiprocess=False, float32="ddp",
            options=TrainOptions(mixed=True),
        ),
    )  # fmt: skip


# Every variant, in the order rows are listed. `best`: the best-known configuration's order of preference within a
# row kind and number format (lower first), by `--preset levers` on zen4 for PyTorch alone
# (docs/results/zen4/cpu-levers-pytorch.json, each figure a variant's median over eager's, its 95% interval):
# - the conv: channels-last strides ('eager+cl', what oneDNN's convolution prefers) 0.56x (0.45-0.57); compiled
#   ('compile': Inductor calls the same convolution) 0.96x, no difference; a lever;
# - the matmul: one aten call whether compiled or not (Inductor's extern mm), so eager only, and bfloat16 operands;
# - CNN training: compiled 0.89x (0.88-0.93) and channels-last 0.91x (0.88-0.95), no difference between the two; the
#   compiled step's first epoch took 20 s (its compilation), so channels-last is the best-known;
# - CNN inference: compiled 0.88x (0.87-0.88), a first call of 3.7 s; then on xeon-amx
#   (docs/results/xeon-amx/cpu-levers-pytorch-cnn.json, over 'predict') channels-last 0.75x (0.73-0.85), compiled
#   0.88x (0.88-0.96), both 0.61x (0.59-0.61): 'predict+cl+compile' the best-known, the others in that order;
# - LSTM training: compiled 0.85x (0.77-0.92) there, 1.17x (1.05-1.26) in the next default run
#   (docs/results/zen4/cpu-default-pytorch.json): no steady gain (Dynamo does not trace nn.LSTM, whose layers run
#   eagerly between compiled pieces), a lever; LSTM inference: compiled 1.03x, no difference: a lever. CNN inference's
#   0.88x held in that default run too (0.87x, 0.80-0.89).
VARIANTS: tuple[Variant, ...] = (
    Variant("eager", "conv", ONE, options=OpOptions()),
    Variant("eager+cl", "conv", ONE, tuned=True, best=0, options=OpOptions(channels_last=True)),
    Variant("compile", "conv", ONE, tuned=True, options=OpOptions(compile=True)),
    Variant(
        "eager+cl+bf16",
        "conv",
        ONE,
        "bfloat16",
        tuned=True,
        best=0,
        float32="eager+cl",
        options=OpOptions(channels_last=True, bfloat16=True),
    ),
    Variant("eager", "matmul", ONE, best=0, options=OpOptions()),
    Variant(
        "eager+bf16", "matmul", ONE, "bfloat16", tuned=True, best=0, float32="eager", options=OpOptions(bfloat16=True)
    ),
    Variant("eager", "cnn_train", ONE, best=1, options=TrainOptions()),
    Variant("eager+cl", "cnn_train", ONE, tuned=True, best=0, options=TrainOptions(channels_last=True)),
    Variant("compile", "cnn_train", ONE, tuned=True, options=TrainOptions(compile=True)),
    _autocast("cnn_train"),
    *_ddp("cnn_train"),
    # inference: 'predict' as in every implementation (eagerly, under torch.inference_mode), compiled or not,
    # channels-last or not
    Variant("predict", "cnn_infer", ONE, best=3, options=InferOptions()),
    Variant("predict+compile", "cnn_infer", ONE, tuned=True, best=2, options=InferOptions(compile=True)),
    Variant("predict+cl", "cnn_infer", ONE, tuned=True, best=1, options=InferOptions(channels_last=True)),
    Variant(
        "predict+cl+compile",
        "cnn_infer",
        ONE,
        tuned=True,
        best=0,
        options=InferOptions(compile=True, channels_last=True),
    ),
    Variant("eager", "lstm_train", ONE, best=0, options=TrainOptions()),
    Variant("compile", "lstm_train", ONE, tuned=True, options=TrainOptions(compile=True)),
    _autocast("lstm_train"),
    *_ddp("lstm_train"),
    Variant("predict", "lstm_infer", ONE, best=0, options=InferOptions()),
    Variant("predict+compile", "lstm_infer", ONE, tuned=True, options=InferOptions(compile=True)),
    # the ViT: attention written out out of the box. torch.compile is the best-known: compile / eager 0.81x
    # (0.79-0.86), predict+compile / predict 0.78x (0.75-0.84) on zen4 (docs/results/zen4/cpu-levers-vit.json), its
    # first epoch 42 s of compiling; the fused attention (sdpa) made no difference there, a lever
    Variant("eager", "vit_train", ONE, best=1, options=TrainOptions()),
    Variant("eager+sdpa", "vit_train", ONE, tuned=True, options=TrainOptions(sdpa=True)),
    Variant("compile", "vit_train", ONE, tuned=True, best=0, options=TrainOptions(compile=True)),
    _autocast("vit_train"),
    *_ddp("vit_train"),
    Variant("predict", "vit_infer", ONE, best=1, options=InferOptions()),
    Variant("predict+sdpa", "vit_infer", ONE, tuned=True, options=InferOptions(sdpa=True)),
    Variant("predict+compile", "vit_infer", ONE, tuned=True, best=0, options=InferOptions(compile=True)),
)
# Huge pages for PyTorch's own CPU allocator (c10's alloc_cpu: THP_MEM_ALLOC_ENABLE=1 aligns each allocation of 2 MB
# or more to 2 MB and asks the kernel for huge pages there), process-wide, as JAX's 'thp'. Out of the box every call
# faults its output in anew in 4 KB pages: the article's conv writes 2.1 GB a call, and its PyTorch `eager+cl` call
# took 1.032 s against 482 ms with huge pages (below), running oneDNN's brg_conv_fwd:avx512_core kernel on the same
# layouts as TF's conv (ONEDNN_VERBOSE=1), whose allocator keeps its buffers (docs/pytorch.md). It acts on every
# buffer: both formats.
# `--configs levers` for PyTorch (docs/results/zen4/cpu-levers-pytorch-thp.json, zen4, the class measured): the conv
# 0.35-0.52x of each variant without it, LSTM training 0.69-0.76x; slower for the ViT's training (`compile+thp` /
# `compile` 1.23x, `eager+autocast+thp` / `eager+autocast` 1.39x), the LSTM's inference (1.08x) and the matmul
# (1.11x): `best` runs those without it.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "thp", {"THP_MEM_ALLOC_ENABLE": "1"}, ("float32", "bfloat16"), best=0, needs=("thp",),
        slows=("vit_train", "lstm_infer", "matmul"),
    ),
)  # fmt: skip
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices (over several: the trained models', above)."""
    return offered(VARIANTS, kind, replicas)


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
