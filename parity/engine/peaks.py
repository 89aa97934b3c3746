"""The run's peaks, measured and measured again in this one place: a CPU's float32 peak and bandwidth before and after
each round of workers, its bfloat16 peak from each framework's highest bfloat16 matrix product (the untimed call a
workload offers for it, Workload.peak_call, or the run's own verified bfloat16 matmul rows), an accelerator's from
its datasheet; and what the run says of them. What a peak is (Peak, the datasheet table, the bfloat16 peak a row is
judged against) and how a row is judged against it: parity.judging.roofline."""

from __future__ import annotations

from dataclasses import replace

from parity.common.cpuinfo import computed_cpu_peak, cpu_info, measure_cpu
from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import Call
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.judging.roofline import CPU_HEADROOM, Peak, accelerator_peak, bf16_peak, native_bf16
from parity.record.rows import Row
from parity.workloads import WORKLOADS, row_kind


def gflops(x: float | None) -> str:
    """FLOP/s as GFLOP/s with one decimal, '?' when unknown."""
    return "?" if x is None else f"{x / 1e9:.1f}"


def before_workers(cfg: Config) -> Peak | None:
    """A CPU's float32 peak and memory bandwidth, measured before any worker starts (an idle machine); None
    elsewhere, or in a multi-process run (the processes' CPUs may be one machine's or several)."""
    if cfg.device != "cpu" or cfg.cluster is not None:
        return None
    log(cfg, "measuring the CPU's float32 peak (matrix product) and memory bandwidth (copy)")
    peak = cpu_peak(n=cfg.matmul_size())
    log(
        cfg,
        f"  computed {gflops(peak.computed_flops)}, measured {gflops(peak.measured_flops)} GFLOP/s; "
        f"copy {gflops(peak.measured_bandwidth)} GB/s",
    )
    return peak


def after_round(cfg: Config, peak: Peak | None) -> Peak | None:
    """The workers are gone: a measured CPU peak is measured again, and the highest kept."""
    if peak is None or not peak.measured_flops:
        return peak
    peak = remeasured(peak, n=cfg.matmul_size())
    log(cfg, f"CPU peak measured again: best so far {gflops(peak.measured_flops)} GFLOP/s")
    return peak


def _peak_call() -> tuple[str, str] | None:
    """The workload and call that measure a CPU's bfloat16 peak (the first workload offering one), or None."""
    return next(((w.name, w.peak_call) for w in WORKLOADS.values() if w.peak_call), None)


def with_workers(
    cfg: Config, peak: Peak | None, workers: dict[str, Worker], hello: dict, rows: list[Row]
) -> Peak | None:
    """The peak once a round's workers have timed their rows (every row is judged after the last round): an
    accelerator's, from the device kind they report; on a CPU with bfloat16 hardware, each framework's highest
    bfloat16 matrix product (untimed), which the bfloat16 peak takes where it beats the computed one. A framework
    whose verified bfloat16 matmul row is among `rows` is not asked: after_rows counts that row's fastest call."""
    if peak is None and not (cfg.device == "cpu" and cfg.cluster is not None):
        peak = device_peak(cfg.device, next(iter(hello.values()))["device_kind"], cfg.precision)
    call = _peak_call()
    if cfg.device != "cpu" or peak is None or not cfg.tuned or call is None:  # "+bf16" rows are tuned variants
        return peak
    done = peak.measured_bf16 = peak.measured_bf16 or {}
    envs = {w.framework: w.env for w in workers.values() if w.setting == "default"}
    n = cfg.matmul_size()
    for fw in bf16_unmeasured(peak, rows, envs):
        got = next(w for w in workers.values() if w.framework == fw).ask(Call(*call, {"n": n}))
        done[fw] = got["flops"]
        log(
            cfg,
            f"  {label(fw)}'s bfloat16 {n}x{n} matmul: "
            + (f"{gflops(got['flops'])} GFLOP/s" if got["flops"] else got.get("why", "none offered")),
        )
    return peak


def after_rows(cfg: Config, peak: Peak | None, rows: list[Row]) -> tuple[Peak | None, list[str]]:
    """Every row measured: the run's own verified bfloat16 matmuls count among a CPU's bfloat16 measurements.
    Returns the peak and a note on the bfloat16 rows' peak, if any ran."""
    peak, bf16 = with_run_bf16(cfg.device, peak, rows)
    if bf16 is None:
        return peak, []
    return peak, [
        f"bfloat16 rows: % peak over the bf16 peak, {gflops(bf16.flops)} GFLOP/s ({bf16.source}); "
        f"their 'err vs other' compares only bfloat16 rows"
    ]


# --- measuring ---------------------------------------------------------------------------------------------------


def bf16_ceiling_rows(rows: list[Row]) -> list[Row]:
    """The verified bfloat16 rows of a ceiling kind (the matmul) with a fastest call: bfloat16 peak measurements."""
    return [r for r in rows if row_kind(r.kind)[1].ceiling and r.dtype == "bfloat16" and r.verified and r.min_s]


def with_bf16_matmul_rows(peak: Peak, rows: list[Row]) -> Peak:
    """The CPU peak with the run's verified bfloat16 rows of a ceiling kind (the matmul) among its bfloat16
    measurements (each row's fastest call), as NumPy's matmul measures the float32 peak: the highest bfloat16 matrix
    product measured in the run."""
    rows_said = {}
    for r in bf16_ceiling_rows(rows):
        key = f"{r.framework} {r.variant} row"  # at several replica counts: the fastest
        rows_said[key] = max(rows_said.get(key, 0.0), r.flops / r.min_s)
    return replace(peak, measured_bf16={**(peak.measured_bf16 or {}), **rows_said}) if rows_said else peak


def bf16_unmeasured(peak: Peak, rows: list[Row], envs: dict[str, dict]) -> list[str]:
    """The frameworks (by their process's environment, `envs`) whose bfloat16 matrix product a CPU's bfloat16 peak
    still lacks: those that multiply bfloat16 in hardware there, with no measurement yet and no verified bfloat16 row
    of a ceiling kind among `rows` (with_bf16_matmul_rows counts that row's fastest call instead)."""
    timed = {r.framework for r in bf16_ceiling_rows(rows)}
    done = peak.measured_bf16 or {}
    return [fw for fw, env in envs.items() if fw not in timed and fw not in done and native_bf16("cpu", "cpu", env)]


def with_run_bf16(device: str, peak: Peak | None, rows: list[Row]) -> tuple[Peak | None, Peak | None]:
    """Every row measured: the run's peak with its verified bfloat16 ceiling rows among a CPU's bfloat16 measurements,
    and the peak its bfloat16 rows are judged against (None where no bfloat16 row ran, or no peak is known)."""
    if device == "cpu" and peak is not None:
        peak = with_bf16_matmul_rows(peak, rows)
    if not (peak and any(r.dtype == "bfloat16" for r in rows)):
        return peak, None
    return peak, bf16_peak(device, next(r.device_kind for r in rows), peak)


def cpu_peak(measure: bool = True, n: int = 4096) -> Peak:
    """Computed and (when `measure`) measured fp32 peak of the CPU cores this process may use."""
    info = cpu_info()
    computed = computed_cpu_peak(info)
    measured = bw = None
    if measure:
        measured, bw = measure_cpu(n)
    clock = f"{info['clock_hz'] / 1e9:.2f} GHz" if info["clock_hz"] else "no clock reported"
    source = (
        f"computed: {info['cores']} cores x {info['fma_units']} FMA x {info['simd_lanes_fp32']} lanes x 2 x "
        f"{clock}; measured: best {n}x{n} float32 NumPy matmul and 256 MiB copy"
    )
    return Peak(
        "cpu",
        "fp32",
        max(f for f in (measured, computed, 0.0) if f is not None) or None,
        bw,
        source,
        computed,
        measured,
        bw,
        headroom=CPU_HEADROOM,
    )


def remeasured(peak: Peak, n: int = 4096, copy_mib: int = 256) -> Peak:
    """The CPU peak with one more measurement (measure_cpu's): the highest of all taken so far. A machine that was busy
    for one measurement (another job, a frequency dip) would otherwise set a peak that honest rows exceed."""
    measured, bw = measure_cpu(n, copy_mib=copy_mib)
    m = max(measured, peak.measured_flops or 0.0)
    b = max(bw, peak.measured_bandwidth or 0.0)
    tag = " (best of measurements before and after each round of workers)"
    source = peak.source if peak.source.endswith(tag) else peak.source + tag
    return Peak(
        peak.device_kind,
        peak.number_format,
        max(m, peak.computed_flops or 0.0),
        b,
        source,
        peak.computed_flops,
        m,
        b,
        headroom=peak.headroom,
        measured_bf16=peak.measured_bf16,
    )


def device_peak(device: str, device_kind: str, precision: str, measure: bool = True, n: int = 4096) -> Peak:
    """The peak every row on this device is judged against."""
    if device == "cpu":
        return cpu_peak(measure, n)
    return accelerator_peak(device, device_kind, precision)
