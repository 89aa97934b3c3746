"""When a run takes the device's peaks for the roofline, and what it says of them: a CPU's float32 peak measured
before and after each round of workers, its bfloat16 peak from each framework's best bfloat16 matrix product (the
untimed call a workload offers for it, Workload.peak_call), an accelerator's from its datasheet. What a peak is, how it
is measured and how a row is judged against it: parity.judging.roofline."""

from __future__ import annotations

from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import Call
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.judging import roofline
from parity.record.rows import Row
from parity.workloads import WORKLOADS


def gflops(x: float | None) -> str:
    """FLOP/s as GFLOP/s with one decimal, '?' when unknown."""
    return "?" if x is None else f"{x / 1e9:.1f}"


def before_workers(cfg: Config) -> roofline.Peak | None:
    """A CPU's float32 peak and memory bandwidth, measured before any worker starts (an idle machine); None
    elsewhere, or in a multi-process run (the processes' CPUs may be one machine's or several)."""
    if cfg.device != "cpu" or cfg.cluster is not None:
        return None
    log(cfg, "measuring the CPU's float32 peak (matrix product) and memory bandwidth (copy)")
    peak = roofline.cpu_peak(n=cfg.matmul_size())
    log(
        cfg,
        f"  computed {gflops(peak.computed_flops)}, measured {gflops(peak.measured_flops)} GFLOP/s; "
        f"copy {gflops(peak.measured_bandwidth)} GB/s",
    )
    return peak


def after_round(cfg: Config, peak: roofline.Peak | None) -> roofline.Peak | None:
    """The workers are gone: a measured CPU peak is measured again, and the best kept."""
    if peak is None or not peak.measured_flops:
        return peak
    peak = roofline.remeasured(peak, n=cfg.matmul_size())
    log(cfg, f"CPU peak measured again: best so far {gflops(peak.measured_flops)} GFLOP/s")
    return peak


def _peak_call() -> tuple[str, str] | None:
    """The workload and call that measure a CPU's bfloat16 peak (the first workload offering one), or None."""
    return next(((w.name, w.peak_call) for w in WORKLOADS.values() if w.peak_call), None)


def with_workers(
    cfg: Config, peak: roofline.Peak | None, workers: dict[str, Worker], hello: dict, rows: list[Row]
) -> roofline.Peak | None:
    """The peak once a round's workers have timed their rows (every row is judged after the last round): an
    accelerator's, from the device kind they report; on a CPU with bfloat16 hardware, each framework's best
    bfloat16 matrix product (untimed), which the bfloat16 peak takes where it beats the computed one. A framework
    whose verified bfloat16 matmul row is among `rows` is not asked: after_rows counts that row's fastest call."""
    if peak is None and not (cfg.device == "cpu" and cfg.cluster is not None):
        peak = roofline.device_peak(cfg.device, next(iter(hello.values()))["device_kind"], cfg.precision)
    call = _peak_call()
    if cfg.device != "cpu" or peak is None or not cfg.tuned or call is None:  # "+bf16" rows are tuned variants
        return peak
    done = peak.measured_bf16 = peak.measured_bf16 or {}
    envs = {w.framework: w.env for w in workers.values() if w.setting == "default"}
    n = cfg.matmul_size()
    for fw in roofline.bf16_unmeasured(peak, rows, envs):
        got = next(w for w in workers.values() if w.framework == fw).ask(Call(*call, {"n": n}))
        done[fw] = got["flops"]
        log(
            cfg,
            f"  {label(fw)}'s bfloat16 {n}x{n} matmul: "
            + (f"{gflops(got['flops'])} GFLOP/s" if got["flops"] else got.get("why", "none offered")),
        )
    return peak


def after_rows(cfg: Config, peak: roofline.Peak | None, rows: list[Row]) -> tuple[roofline.Peak | None, list[str]]:
    """Every row measured: the run's own verified bfloat16 matmuls count among a CPU's bfloat16 measurements.
    Returns the peak and a note on the bfloat16 rows' peak, if any ran."""
    peak, bf16 = roofline.with_run_bf16(cfg.device, peak, rows)
    if bf16 is None:
        return peak, []
    return peak, [
        f"bfloat16 rows: % peak over the bf16 peak, {gflops(bf16.flops)} GFLOP/s ({bf16.source}); "
        f"their 'err vs other' compares only bfloat16 rows"
    ]
