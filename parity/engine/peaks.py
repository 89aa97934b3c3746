"""The device's peaks for the roofline: a CPU's float32 peak measured before and after each round of workers,
its bfloat16 peak from each framework's best bfloat16 matrix product, an accelerator's from its datasheet."""

from __future__ import annotations

from parity.common.frameworks import label
from parity.common.messages import log
from parity.common.protocol import Call
from parity.engine.config import Config, gflops
from parity.engine.workerproc import Worker
from parity.judging import roofline
from parity.record.rows import Row


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


def with_workers(
    cfg: Config, peak: roofline.Peak | None, workers: dict[str, Worker], hello: dict, rows: list[Row]
) -> roofline.Peak | None:
    """The peak once a round's workers have timed their rows (every row is judged after the last round): an
    accelerator's, from the device kind they report; on a CPU with bfloat16 hardware, each framework's best
    bfloat16 matrix product (untimed), which the bfloat16 peak takes where it beats the computed one. A framework
    whose verified bfloat16 matmul row is among `rows` is not asked: after_rows counts that row's fastest call."""
    if peak is None and not (cfg.device == "cpu" and cfg.cluster is not None):
        peak = roofline.device_peak(cfg.device, next(iter(hello.values()))["device_kind"], cfg.precision)
    if cfg.device != "cpu" or peak is None or not cfg.tuned:  # "+bf16" rows are tuned variants
        return peak
    done = peak.measured_bf16 = peak.measured_bf16 or {}
    timed = {r.framework for r in roofline.bf16_ceiling_rows(rows)}
    for w in workers.values():
        if w.framework in timed or w.framework in done or w.setting != "default":
            continue
        if roofline.native_bf16(cfg.device, "cpu", w.env):
            n = cfg.matmul_size()
            got = w.ask(Call("matmul", "bf16_peak", {"n": n}))
            done[w.framework] = got["flops"]
            log(
                cfg,
                f"  {label(w.framework)}'s bfloat16 {n}x{n} matmul: "
                + (f"{gflops(got['flops'])} GFLOP/s" if got["flops"] else got.get("why", "none offered")),
            )
    return peak


def after_rows(cfg: Config, peak: roofline.Peak | None, rows: list[Row]) -> tuple[roofline.Peak | None, list[str]]:
    """Every row measured: the run's own verified bfloat16 matmuls count among a CPU's bfloat16 measurements.
    Returns the peak and a note on the bfloat16 rows' peak, if any ran."""
    if cfg.device == "cpu" and peak is not None:
        peak = roofline.with_bf16_matmul_rows(peak, rows)
    if not (peak and any(r.dtype == "bfloat16" for r in rows)):
        return peak, []
    bf16 = roofline.bf16_peak(cfg.device, next(r.device_kind for r in rows), peak)
    return peak, [
        f"bfloat16 rows: % peak over the bf16 peak, {gflops(bf16.flops)} GFLOP/s ({bf16.source}); "
        f"their 'err vs other' compares only bfloat16 rows"
    ]
