"""Device peaks and roofline figures: what "% of peak" means on this machine, and which rows are impossible.

Accelerators: a table of published dense peaks keyed by device kind, per framework device (a TPU v2/v3
device is one core, half a chip; later TPUs and GPUs are one chip). CPUs: a computed peak from what
the machine reports (cores x FMA units x SIMD lanes x 2 x clock) and a measured one (a large float32
matrix product timed in the same run), because the reported clock is often the base clock and turbo
runs faster. A row faster than every peak it could run at is a broken measurement, never a result.

Beside % of peak, each row's share of its attainable time: the compiled program's ops, each at the larger of its
FLOPs at the peak and its bytes at the memory bandwidth, summed (attainable(); the ops as parity.judging.program reads
them from the program's text, on a TPU with the matrix unit's 128-wide tiles counted as the chip runs them).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from parity.common.cpuinfo import (
    BF16_SOURCE,
    computed_cpu_bf16_peak,
    cpu_info,
    isa_capped_below_bf16,
)
from parity.record.rows import Row

T, G = 1e12, 1e9
CPU_HEADROOM = 2.0  # see Peak.headroom

# device-kind substring (lower case) -> published dense peak FLOP/s per framework device by number
# format, and memory bandwidth in bytes/s. First match wins, so longer names come first.
ACCELERATORS: tuple[tuple[str, dict[str, float], float], ...] = (
    ("tpu v2", {"bf16": 22.5 * T}, 300 * G),  # v2-8: 4 chips x 45 TFLOP/s, 8 cores
    ("tpu v3", {"bf16": 61.5 * T}, 450 * G),  # 123 TFLOP/s per 2-core chip
    ("tpu v4", {"bf16": 275 * T}, 1200 * G),
    ("tpu v5 lite", {"bf16": 197 * T}, 819 * G),
    ("tpu v5e", {"bf16": 197 * T}, 819 * G),
    ("tpu v6 lite", {"bf16": 918 * T}, 1638 * G),
    ("tpu v6e", {"bf16": 918 * T}, 1638 * G),
    ("h200", {"fp32": 67 * T, "tf32": 495 * T, "bf16": 989 * T}, 4800 * G),
    ("h100", {"fp32": 67 * T, "tf32": 495 * T, "bf16": 989 * T}, 3350 * G),
    ("a100", {"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T}, 1555 * G),
    ("t4", {"fp32": 8.1 * T}, 320 * G),
    ("k80", {"fp32": 4.1 * T}, 240 * G),
)


@dataclass
class Peak:
    """Peak FLOP/s and memory bandwidth of one framework device, and where the figures come from."""

    device_kind: str
    number_format: str  # the format the peak is quoted for: fp32, tf32, bf16
    flops: float | None  # the peak "% of peak" divides by (CPU: the larger of measured and computed)
    bandwidth: float | None  # bytes/s
    source: str
    computed_flops: float | None = None  # CPU: from the reported clock and SIMD width
    measured_flops: float | None = None  # CPU: a timed float32 matrix product
    measured_bandwidth: float | None = None
    # CPU: the highest bfloat16 matrix product a framework ran in this run (parity.workloads.matmul.bf16_matmul_peak),
    # by framework
    measured_bf16: dict | None = None
    # How far above limit() a row may be before it is impossible rather than a sign that the peak is
    # low. Accelerator tables quote boost-clock peaks (1.0); a CPU's computed peak uses the clock
    # /proc/cpuinfo reports, usually the base clock, which a core's maximum turbo exceeds by up to about 2x on
    # today's server CPUs (Xeon Platinum 8480+ 2.0 -> 3.8 GHz, Xeon 6980P 2.0 -> 3.9, EPYC 9575F 3.3 -> 5.0;
    # a run on 2 of many cores may run them at that turbo), and its measured peak is one library's matmul.
    headroom: float = 1.0

    def limit(self) -> float | None:
        """The most any honest row can achieve per device: the larger of every peak known."""
        known = [f for f in (self.flops, self.computed_flops, self.measured_flops) if f]
        return max(known) if known else None

    def to_dict(self) -> dict:
        return asdict(self)


def number_format(device: str, device_kind: str, precision: str) -> str:
    """The arithmetic a float32 matmul/conv really runs in, by device and --precision."""
    kind = device_kind.lower()
    if device == "tpu":
        return "bf16"  # default: one bfloat16 pass; 'highest' several passes on the same units
    if device == "gpu" and precision == "default" and any(k in kind for k in ("a100", "h100", "h200")):
        return "tf32"
    return "fp32"


def accelerator_peak(device: str, device_kind: str, precision: str) -> Peak:
    """The table's peak for a GPU/TPU device kind; figures are None for a kind the table lacks."""
    fmt = number_format(device, device_kind, precision)
    for key, flops, bw in ACCELERATORS:
        if key in device_kind.lower():
            peak = flops.get(fmt) or flops.get("bf16")
            note = "" if fmt in flops else f" (no {fmt} figure; bf16 peak used)"
            return Peak(device_kind, fmt, peak, bw, f"published dense {fmt} peak for {key!r}{note}")
    return Peak(device_kind, fmt, None, None, f"no peak on record for device kind {device_kind!r}")


def native_bf16(device: str, device_kind: str, env=None) -> bool:
    """Whether the device multiplies bfloat16 in hardware (elsewhere '+bf16' rows would be emulation), for a
    process with environment `env` (default: this one's)."""
    if device == "tpu":
        return True
    if device == "gpu":
        return any(key in device_kind.lower() and "bf16" in flops for key, flops, _ in ACCELERATORS)
    return cpu_info()["bf16"] and not isa_capped_below_bf16(os.environ if env is None else env)


def bf16_peak(device: str, device_kind: str, run_peak: Peak) -> Peak:
    """The peak a bfloat16 row is judged against: the table's bf16 figure; on a CPU the larger of the one computed
    from its bfloat16 unit and the highest bfloat16 matrix product measured in the run (each framework's, on one
    device; the float32 peak measured in the run bounds it from below too)."""
    if device == "cpu":
        info = cpu_info()
        bf16 = computed_cpu_bf16_peak(info)
        unit = "AMX tiles" if info.get("amx") else "AVX512_BF16 dot products"
        said = [f"computed from {unit} ({BF16_SOURCE})" if bf16 else "no bfloat16 unit reported"]
        # a measurement beyond every clock the computed figure allows would defeat the impossible-throughput guard
        measured = {
            fw: f for fw, f in (run_peak.measured_bf16 or {}).items() if f and (not bf16 or f <= bf16 * CPU_HEADROOM)
        }
        if measured:
            said.append(
                "measured: best bfloat16 matmul "
                + ", ".join(f"{fw} {f / G:.1f}" for fw, f in measured.items())
                + " GFLOP/s"
            )
        highest = max([f for f in (bf16, *measured.values()) if f], default=None)
        # the run's CPU, whatever a framework calls it ('CPU', 'cpu'): roofline() judges simulated devices together
        return Peak(
            run_peak.device_kind,
            "bf16",
            highest,
            run_peak.bandwidth,
            "; ".join(said),
            computed_flops=bf16,
            measured_flops=max([run_peak.measured_flops or 0.0, *measured.values()]) or None,
            headroom=CPU_HEADROOM,
        )
    for key, flops, bw in ACCELERATORS:
        if key in device_kind.lower() and "bf16" in flops:
            return Peak(device_kind, "bf16", flops["bf16"], bw, f"published dense bf16 peak for {key!r}")
    return Peak(device_kind, "bf16", None, None, f"no bf16 peak on record for device kind {device_kind!r}")


def _margin(peak: Peak) -> str:
    return f" (x{peak.headroom:g} for turbo clocks)" if peak.headroom > 1 else ""


def compiler_ratios(compiler: float | None, flops: float | None, unpadded: float | None) -> tuple[float | None, ...]:
    """The compiler's FLOP count over the formula's, with and without SAME padding's zeros."""
    unpadded = unpadded or flops
    return (compiler / flops if compiler and flops else None), (compiler / unpadded if compiler and unpadded else None)


MIN_CALL_S = 1e-9  # one tick of the clock a call is timed with (time.perf_counter_ns): no timed call is shorter


def _devices(peak: Peak, devices: int) -> int:
    """How many of the peak's devices a row is judged against: simulated CPU devices share the same cores."""
    return 1 if peak.device_kind == "cpu" else max(devices, 1)


def impossible(row: Row, peak: Peak | None, devices: int) -> str | None:
    """Why `row`'s time cannot be real, or None: a median shorter than one tick of the clock, or (where a peak is
    known) necessary arithmetic faster than every known peak of its `devices` beyond the peak's headroom. The one
    plausibility rule, for a run's own rows and for a results file's (parity.output.loading)."""
    med = row.median_s
    if med is not None and med < MIN_CALL_S:  # a clock that did not move: no rate, and no work either
        return f"a median of {med} s, below one tick of the clock: the timed call cannot have done the work"
    flops = row.flops_unpadded or row.flops
    limit = (peak.limit() or 0.0) * _devices(peak, devices) if peak else 0.0
    # Judged on the arithmetic the hardware cannot skip: kernels (oneDNN's, XLA's) leave out the
    # multiply-adds against SAME padding's zeros, so the padded formula would overstate their rate.
    if not (flops and med and limit) or flops / med <= limit * peak.headroom:
        return None
    return (
        f"{flops / med / 1e9:.1f} GFLOP/s of necessary arithmetic exceeds the device's peak of "
        f"{limit / 1e9:.1f} GFLOP/s{_margin(peak)}: the timed call cannot have done the work"
    )


def attainable(ops: dict | None, peak: Peak, replicas: int = 1) -> tuple[float | None, str | None]:
    """The seconds one call of a compiled program takes at best on `peak`'s device: over its ops (program.summary),
    each at the larger of its FLOPs at the peak and its bytes at the bandwidth; and how it was counted, or why there
    is none. Simulated CPU devices share the CPU whose peak it is: `replicas` programs, one after another."""
    if not ops:
        return None, None
    if "unreadable" in ops:
        return None, f"the compiled program's text could not be read ({ops['unreadable']})"
    if not (peak.flops and peak.bandwidth):
        return None, "no peak or bandwidth on record for this device"
    if ops.get("unknown_calls"):
        return None, (
            f"not counted: {ops['unknown_calls']} of the program's ops call a library's kernel, whose FLOPs its text "
            "does not give"
        )
    share = replicas if peak.device_kind == "cpu" else 1
    seconds = share * sum(n * max(f / peak.flops, b / peak.bandwidth) for f, b, n in ops["ops"])
    tile = ops.get("tile", 1)
    said = (
        f"the compiled program's {sum(n for *_, n in ops['ops']):g} ops a call, each at the larger of its FLOPs at "
        f"{peak.flops / T:.4g} TFLOP/s and its bytes at {peak.bandwidth / G:.4g} GB/s; FLOPs of its convolutions and "
        "dots" + (f" in whole {tile}-wide tiles" if tile > 1 else "") + ", bytes of its operands and results in main "
        "memory" + (" as stored (tiles)" if tile > 1 else "")
    )
    if ops.get("unknown_loops"):
        said += f"; {ops['unknown_loops']} loop(s) of unknown trip count counted once"
    return (seconds or None), said


def roofline(row: Row, peak: Peak, devices: int) -> dict:
    """Achieved throughput against the peak of the `devices` the row ran on (simulated CPU devices share
    the same cores, so a CPU row is judged against the whole CPU whatever its replica count).

    Returns the row's roofline fields; `impossible` is a reason when the row cannot be real (impossible()).
    """
    flops, bytes_, med = row.flops, row.min_bytes, row.median_s
    n = _devices(peak, devices)
    out = {
        "peak_flops": peak.flops * n if peak.flops else None,
        "peak_format": peak.number_format,
        "arith_intensity": flops / bytes_ if flops and bytes_ else None,
        "pct_peak": None,
        "bound": None,
        "above_peak": None,
        "impossible": impossible(row, peak, devices),
    }
    out["attainable_s"], out["attainable_source"] = attainable(row.program_ops, peak, devices)
    if out["attainable_s"] and med and not out["impossible"]:
        out["pct_attainable"] = 100 * out["attainable_s"] / med
    if out["impossible"] or not (flops and med):
        return out
    achieved = (row.flops_unpadded or flops) / med
    limit = (peak.limit() or 0.0) * n
    if limit and achieved > limit:
        out["above_peak"] = (
            f"{achieved / 1e9:.1f} GFLOP/s of necessary arithmetic, {achieved / limit:.2f}x the "
            f"peak: the peak underestimates this {peak.device_kind} (a clock above the reported "
            f"one, or a faster kernel than the measuring one); no % of peak shown"
        )
    elif out["peak_flops"]:
        out["pct_peak"] = 100 * achieved / out["peak_flops"]
    if out["arith_intensity"] and peak.flops and peak.bandwidth:
        ridge = peak.flops / peak.bandwidth  # FLOP/byte where the roofline's two limits meet
        out["bound"] = "compute" if out["arith_intensity"] >= ridge else "memory"
    return out
