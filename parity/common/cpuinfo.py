"""What this machine's CPU can do: its cores, SIMD lanes, FMA units, clock and bfloat16 units as /proc/cpuinfo
reports them, the float32 and bfloat16 peaks computed from those, a measured matrix-product peak and copy
bandwidth, and whether an ISA cap in a process's environment hides the bfloat16 units."""

from __future__ import annotations

import os
import time
from functools import cache
from pathlib import Path

import numpy as np


def isa_capped_below_bf16(env) -> str | None:
    """The setting that caps the CPU's instruction set below bfloat16 for a framework, if any: oneDNN then
    refuses to create a bfloat16 convolution, and XLA would emulate one in float32."""
    isa = env.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if isa and not any(k in isa for k in ("BF16", "AMX", "AVX10", "ALL")):
        return f"ONEDNN_MAX_CPU_ISA={isa}"
    for flag in env.get("XLA_FLAGS", "").split():
        if flag.startswith("--xla_cpu_max_isa=") and not any(k in flag.upper() for k in ("BF16", "AMX")):
            return flag
    return None


# bfloat16 FLOP per cycle per core. AMX (amx_bf16): one TDPBF16PS multiplies 16x32 by 32x16 bfloat16
# tiles, 16,384 FLOP, issued every 16 cycles: 1,024 FLOP/cycle (Intel's figure for Sapphire Rapids).
# AVX512_BF16 alone: VDPBF16PS does two multiply-adds per float32 lane, twice an FMA's work, at the FMA's
# throughput (Intel: 2 per cycle on 512-bit ports; Zen 4: 256-bit units, as for its float32 FMAs).
AMX_BF16_FLOP_PER_CYCLE = 1024
BF16_SOURCE = (
    "Intel 64 and IA-32 Optimization Reference Manual, AMX and AVX512_BF16 chapters; uops.info's VDPBF16PS throughput"
)


def computed_cpu_bf16_peak(info: dict) -> float | None:
    """cores x bfloat16 FLOP/cycle x clock, from the widest bfloat16 unit the CPU reports; None without one."""
    fp32 = computed_cpu_peak(info)
    if not (fp32 and info.get("bf16")):
        return None
    if info.get("amx"):
        return info["cores"] * AMX_BF16_FLOP_PER_CYCLE * info["clock_hz"]
    return 2 * fp32


def _allowed() -> set[int]:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def processors(text: str | None = None) -> list[dict[str, str]]:
    """/proc/cpuinfo's blocks of the processors this process may use, each as its `key: value` lines ([] where
    there is no /proc/cpuinfo). `text`: another machine's cpuinfo (tests), every processor of it."""
    if text is None:
        try:
            text, allowed = Path("/proc/cpuinfo").read_text(), _allowed()
        except OSError:
            return []
    else:
        allowed = None
    out = []
    for block in text.split("\n\n"):
        cur = dict((s.strip() for s in line.split(":", 1)) for line in block.splitlines() if ":" in line)
        if cur.get("processor", "").isdigit() and (allowed is None or int(cur["processor"]) in allowed):
            out.append(cur)
    return out


def fp32_lanes(flags: set[str], cpu: dict[str, str]) -> int:
    """float32 lanes an FMA unit completes per cycle: the vector width the CPU reports, halved where AMD's units are
    narrower than its instructions. Zen 4 (family 25) runs AVX-512 on 256-bit units; Zen and Zen+ (family 23, models
    below 0x30; Zen 2 from 0x30) run AVX2 on 128-bit units, each 256-bit operation split in two (AMD's Software
    Optimization Guide for family 17h processors, its floating-point unit)."""
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags or "avx" in flags else 4
    if cpu.get("vendor_id") != "AuthenticAMD":
        return lanes
    family, model = cpu.get("cpu family", ""), cpu.get("model", "")
    if lanes == 16 and family == "25":
        return 8
    if lanes == 8 and family == "23" and model.isdigit() and int(model) < 0x30:
        return 4
    return lanes


@cache
def cpu_info() -> dict:
    """Physical cores this process may use, SIMD width, FMA, and the clock /proc/cpuinfo reports."""
    cores, flags, mhz, cpu = set(), set(), [], {}
    for cur in processors():
        cores.add((cur.get("physical id", "0"), cur.get("core id", cur["processor"])))
        flags = set(cur.get("flags", "").split())
        cpu = cur
        if "cpu MHz" in cur:
            mhz.append(float(cur["cpu MHz"]))
    return {
        "cores": len(cores) or len(_allowed()),
        "simd_lanes_fp32": fp32_lanes(flags, cpu),
        "fma_units": 2 if "fma" in flags or "avx512f" in flags else 1,
        "fma": "fma" in flags or "avx512f" in flags,
        "clock_hz": max(mhz) * 1e6 if mhz else None,
        "bf16": bool({"avx512_bf16", "amx_bf16"} & flags),
        "amx": "amx_bf16" in flags,
    }


def computed_cpu_peak(info: dict) -> float | None:
    """cores x FMA units x fp32 SIMD lanes x 2 (multiply + add) x clock; None without a clock."""
    if not info["clock_hz"]:
        return None
    per_cycle = info["fma_units"] * info["simd_lanes_fp32"] * (2 if info["fma"] else 1)
    return info["cores"] * per_cycle * info["clock_hz"]


def measure_cpu(n: int = 4096, reps: int = 5, copy_mib: int = 256) -> tuple[float, float]:
    """(FLOP/s of the quickest n x n float32 matmul, bytes/s of the quickest copy of `copy_mib` MiB), both checked. A
    run copies 256 MiB, more than any CPU's caches hold; tests copy less (they check the arithmetic, not the figure).

    NumPy's BLAS (OpenBLAS in the pinned wheels) is the fastest float32 matmul on most CPUs; the
    product is spot-checked against float64 so a broken BLAS cannot inflate the peak.
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = a @ b
    least = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        c = a @ b
        least = min(least, time.perf_counter() - t0)
    ref = a[:4].astype(np.float64) @ b.astype(np.float64)
    if not np.allclose(c[:4], ref, rtol=1e-3, atol=1e-2 * np.sqrt(n)):
        raise RuntimeError("the peak-measuring matrix product gave wrong numbers; refusing to use it")
    x = np.ones(copy_mib * 2**18, np.float32)
    y = np.empty_like(x)
    copy = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(y, x)
        copy = min(copy, time.perf_counter() - t0)
    if y[-1] != 1.0:
        raise RuntimeError("the bandwidth-measuring copy did not copy")
    return 2 * n**3 / least, 2 * x.nbytes / copy
