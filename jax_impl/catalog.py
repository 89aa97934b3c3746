"""JAX's process-wide settings, each declared once as a record (parity.api.variants), the options its builders read
(never the variants' names), and the lookup of the variants its adapters declare (jax_impl.cnn's VARIANTS, ...)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import jax

from parity.api.adapters import variants_of
from parity.api.variants import MANY, ONE, Setting, Variant, lookup, offered


@dataclass(frozen=True)
class OpOptions:
    """How an operation (the conv, the matmul) runs: 'jit' on one device, 'pmap' or 'shard_map' over several;
    bfloat16 operands (cast once, beforehand; bfloat16 out, as Flax's dtype=bfloat16); its output in the layout the
    compiler picks (`layout`: jax.jit's out_shardings=Format(Layout.AUTO)), not the row-major one a transpose gives."""

    parallel: str = "jit"
    bfloat16: bool = False
    layout: bool = False


# The '+prefetch' training variants: each batch put on the device this many steps ahead of the step that takes it,
# while the steps before it run (double-buffered, as flax's prefetch_to_device(size=2)); 0, out of the box: the
# epoch's batches sliced on the host first, each put on the device just before its step (the notebook's feed).
PREFETCH = 2


@dataclass(frozen=True)
class CnnOptions:
    """How the CNN trains: 'jit', 'pmap' or 'shard_map'; several steps in one dispatch (lax.scan over stacked batches);
    mixed precision (bfloat16 compute, float32 parameters and Adam state); max pooling's gradient 'elementwise'
    (jax_impl.conv_grads.pool_elementwise, the same gradient without XLA:CPU's reduce-window and scatter) or
    'reduce_window' (JAX's own); each convolution's bias gradient 'jax' (JAX's own: in bfloat16 compute a bfloat16 sum,
    which XLA:CPU emits as a loop reduce-window) or 'float32' (jax_impl.conv_grads.bias_add: a float32 sum); each
    convolution's input gradient 'jax' (JAX's own: in bfloat16 compute XLA:CPU computes it on float32 operands) or
    'flipped' (jax_impl.conv_grads.conv_flipped_grad: a forward convolution with the flipped kernel, in bfloat16; with
    bias='float32'); each convolution's kernel gradient JAX's own over the whole batch (wgrad 0) or summed over chunks
    of `wgrad` images (jax_impl.conv_grads.conv_chunked_kernel_grad); dropout's masks 'jax' (jax.random.bernoulli: on
    CPU threefry as a rolled loop) or 'straight-line' (jax_impl.masks.keep_mask: the same masks, threefry as
    straight-line code); `prefetch`: batches put on the device ahead of their steps (PREFETCH; 0: the host's feed)."""

    parallel: str = "jit"
    steps_per_dispatch: int = 1
    mixed: bool = False
    pool: str = "reduce_window"
    bias: str = "jax"
    dgrad: str = "jax"
    wgrad: int = 0
    masks: str = "jax"
    prefetch: int = 0


@dataclass(frozen=True)
class InferOptions:
    """Inference's program: XLA compiler options for it alone (jax.jit's compiler_options)."""

    compiler_options: dict = field(default_factory=dict)


def release(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".")[:2] if p.isdigit())


def op_variants(kind: str, pmap: bool = False, layout: bool = False) -> tuple[Variant, ...]:
    """An operation's (the conv's, the matmul's): jit, in bfloat16, pmap (`pmap`), shard_map; on one device with its
    output in the compiler's layout ('+layout', where `layout`); their other lever is the setting.

    '+layout' is the best-known on a TPU: there XLA writes the conv's output batch-minor and then transposes all
    2.1 GB of it to the row-major layout a jax.Array has by default (docs/tpu.md); on a CPU the layouts agree and it is
    not ranked."""
    on_tpu = (("tpu", 1),) if layout else ()  # second on a TPU, after '+layout'
    return (
        Variant("jit", kind, ONE, rank=0, ranks=on_tpu, options=OpOptions()),
        Variant(
            "jit+bf16",
            kind,
            ONE,
            "bfloat16",
            tuned=True,
            rank=0,
            ranks=on_tpu,
            float32="jit",
            options=OpOptions(bfloat16=True),
        ),
        *(
            (
                Variant("jit+layout", kind, ONE, tuned=True, ranks=(("tpu", 0),), options=OpOptions(layout=True)),
                Variant(
                    "jit+bf16+layout",
                    kind,
                    ONE,
                    "bfloat16",
                    tuned=True,
                    ranks=(("tpu", 0),),
                    float32="jit+layout",
                    options=OpOptions(bfloat16=True, layout=True),
                ),
            )
            if layout
            else ()
        ),
        *((Variant("pmap", kind, MANY, options=OpOptions("pmap")),) if pmap else ()),
        Variant("shard_map", kind, MANY, rank=0, options=OpOptions("shard_map")),
    )


# Every variant is declared by its workload's adapter (jax_impl.cnn's VARIANTS, ...), in the order rows are listed.
# `rank`: the best-known configuration's order of preference within a row kind, replica count and number format
# (lower first); each adapter says why its order is what it is. `--preset levers` times every lever on its own to
# check the order elsewhere: on zen5 and xeon-avx512 (docs/results/<class>/cpu-levers.json; xeon-avx512's: one
# device, float32), where the order named the fastest row but for the LSTM's inference, unrolled since.
def table() -> tuple[Variant, ...]:
    """Every variant JAX offers: its adapters' (parity.api.adapters.variants_of)."""
    return variants_of(__package__)


def variants(kind: str, replicas: int) -> tuple[Variant, ...]:
    """The variants of row kind `kind` over `replicas` devices."""
    return offered(table(), kind, replicas)


def variant(kind: str, name: str, replicas: int) -> Variant:
    """The record named `name`. Raises ValueError naming the variants there are."""
    return lookup(table(), kind, name, replicas, "JAX")


# YNNPACK: XLA:CPU's newer kernel library. The list below replaces XLA's default one (no '+'/'-' modifiers): YNNPACK
# for dots and reductions, XLA's own convolutions (out of the box, JAX 0.12 sends float32 convolutions to YNNPACK).
# Not 'eltwise': YNNPACK's elementwise fusions take a convolution in with the bias add after it (every conv of the
# CNN), which keeps oneDNN (below) from it; alone, the list with or without 'eltwise' times the same
# (docs/tuning.md, "JAX process-wide settings"). Rows: '...+ynn'.
YNN = {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot,reduce"}
# oneDNN: from jaxlib 0.11, XLA:CPU's oneDNN rewriter turns bfloat16 convolutions into oneDNN's own bfloat16
# kernels (the library TensorFlow's CPU kernels use). Out of the box XLA:CPU computes a bfloat16 conv as a float32
# one between two conversions, slower than float32 itself; float32 convs YNNPACK takes first. So a setting for CPUs
# with bfloat16 hardware only (rows '...+onednn'). Float32 convolutions reach it only with YNNPACK's list emptied or
# replaced: both at once ('+ynn+onednn': oneDNN then takes every convolution, with its bias add).
ONEDNN = {"XLA_FLAGS": "--xla_cpu_experimental_onednn_custom_call=true"}
YNN_ONEDNN = {"XLA_FLAGS": f"{YNN['XLA_FLAGS']} {ONEDNN['XLA_FLAGS']}"}
# Transparent huge pages for XLA:CPU's buffers. XLA:CPU takes each large buffer (the conv's 2.1 GB output) from a
# fresh mapping and unmaps it when freed, so each call faults its memory in 4 KB at a time; glibc 2.35+ asks the
# kernel for 2 MB pages for such mappings with this tunable, which a kernel whose THP mode is 'madvise' grants
# ('always' grants them out of the box, 'never' refuses: no setting then). Where it is offered, every setting runs
# with it ('...+thp'), and it alone ('thp'). TensorFlow's allocator keeps its buffers and gains nothing.
THP = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
# Huge pages, and malloc keeping freed memory for the next buffer, as TensorFlow's allocator does: with mmap off
# (mmap_max=0) a large buffer comes from the heap, and a trim threshold of 1 TiB never gives the heap's top back,
# so a call's 2.1 GB output lands on pages the last call's already faulted in. The process holds the freed memory:
# its rows' peak memory is a lower bound (parity.engine.memory). Not in the best-known order: in one default run
# some of its calls took several times the others (why was not established; docs/tuning.md, "JAX process-wide
# settings"), so it is a lever `levers` measures.
HEAP = {"GLIBC_TUNABLES": f"{THP['GLIBC_TUNABLES']}:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776"}

F32, BF16, BOTH = ("float32",), ("bfloat16",), ("float32", "bfloat16")
# YNNPACK's list slowed the row LSTM's inference on every class that ran it (docs/tuning.md, "The row LSTM's
# variants"), and the ViT's on zen4 (docs/results/zen4/cpu-levers-vit.json). `best` runs their best-known variants
# without them.
SLOWS = ("lstm_infer", "vit_infer")
# Every process-wide setting, in the order its workers start. `formats`, by mechanism: YNNPACK's fusions are float32
# dots and reductions; oneDNN's rewriter takes bfloat16 convolutions and dots, and with YNNPACK's list float32
# convolutions too; huge pages and the heap act on every buffer and run with the kernels' settings (huge pages
# alone only under `--configs all`, as every combination). `rank`: for each number format, `--configs best` runs
# the first offered that acts on it. `needs`: 'bf16' (bfloat16 hardware, and jaxlib 0.11+), 'thp' (huge pages on
# request), 'no-thp' (none: the setting without them). Ranked on zen5's `--preset levers` run; on xeon-avx512's
# 'ynn+thp' was the fastest for the conv, the CNN and the matmul, and slowed the row LSTM (a run's summary then reads
# its rows without a setting: docs/tuning.md).
SETTINGS: tuple[Setting, ...] = (
    Setting("ynn", YNN, F32, rank=4, needs=("no-thp",), slows=SLOWS),
    Setting("onednn", ONEDNN, BF16, rank=5, needs=("bf16", "no-thp")),
    Setting("ynn+onednn", YNN_ONEDNN, BOTH, rank=3, needs=("bf16", "no-thp"), slows=SLOWS),
    Setting("thp", THP, (), needs=("thp",)),
    Setting("ynn+thp", {**YNN, **THP}, F32, rank=1, needs=("thp",), slows=SLOWS),
    Setting("onednn+thp", {**ONEDNN, **THP}, BF16, rank=2, needs=("bf16", "thp")),
    Setting("ynn+onednn+thp", {**YNN_ONEDNN, **THP}, BOTH, rank=0, needs=("bf16", "thp"), slows=SLOWS),
    Setting("ynn+onednn+thp+heap", {**YNN_ONEDNN, **HEAP}, BOTH, needs=("bf16", "thp"), slows=SLOWS),
)


THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def settings(device: str, native_bf16: bool = False) -> tuple[Setting, ...]:
    """The process-wide settings (SETTINGS) that make a difference on `device`: those whose needs
    this machine meets. native_bf16: the device multiplies bfloat16 in hardware (the caller knows:
    parity.judging.roofline.native_bf16); oneDNN's bfloat16 kernels also need jaxlib 0.11 or later."""
    if device != "cpu":
        return ()
    thp = huge_pages_on_request()
    have = {"thp" if thp else "no-thp"} | ({"bf16"} if native_bf16 and release(jax.__version__) >= (0, 11) else set())
    return tuple(s for s in SETTINGS if set(s.needs) <= have)


def huge_pages_on_request(mode_file: Path = THP_MODE) -> bool:
    """Whether glibc's hugetlb tunable changes anything here: glibc 2.35 or later, and a kernel that grants
    transparent huge pages to the mappings that ask ('madvise')."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # 'glibc 2.36'; absent on other C libraries
        mode = mode_file.read_text()  # 'always [madvise] never'
    except (AttributeError, ValueError, OSError):
        return False
    name, _, version = libc.partition(" ")
    return name == "glibc" and release(version) >= (2, 35) and "[madvise]" in mode
