"""Roofline figures, the impossible-throughput guard, cross-device reports and regression comparison."""

import dataclasses
import json
import math
import os

import pytest

from parity import compare, report
from parity.api.cnn import CNN_PARAMS
from parity.common import cpuinfo
from parity.engine import peaks
from parity.engine.assemble import cross_check
from parity.engine.config import Config
from parity.engine.repetitions import rule as repetition_rule
from parity.judging import roofline
from parity.judging.judge import judge_row
from parity.judging.settling import Rule
from parity.output import files, notes, tables
from parity.record import schema
from parity.record.rows import Row
from parity.workloads.cnn.spec import CnnSpec, cnn_forward_flops
from parity.workloads.conv import CONV_CPU, CONV_FULL, CONV_QUICK


def test_conv_flops_and_bytes_by_hand():
    # 2 * N * Ho * Wo * Cout * Kh * Kw * Cin, REFERENCE.md's 80.5 GFLOP
    assert CONV_FULL.flops() == 2 * 128 * 128 * 128 * 256 * 5 * 5 * 3 == 80_530_636_800
    # images + kernels + the 2 GiB output, float32: ~2.25 GB, ~36 FLOP/byte
    assert CONV_FULL.min_bytes() == 4 * (128 * 256 * 256 * 3 + 5 * 5 * 3 * 256 + 128 * 128 * 128 * 256)
    assert 35 < CONV_FULL.flops() / CONV_FULL.min_bytes() < 37


def test_cnn_flops_by_hand():
    conv1 = 2 * 28 * 28 * 25 * 1 * 64
    conv2 = 2 * 14 * 14 * 25 * 64 * 128
    conv3 = 2 * 7 * 7 * 25 * 128 * 256
    dense = 2 * (2304 * 256 + 256 * 10)
    assert cnn_forward_flops() == conv1 + conv2 + conv3 + dense == 164_256_768
    assert CnnSpec(global_batch=8).step_flops() == 3 * 8 * 164_256_768
    assert CnnSpec(global_batch=8).step_min_bytes() == 8 * (784 * 4 + 4) + 24 * CNN_PARAMS["trainable"]


def test_computed_cpu_peak_is_the_reference_formula():
    # REFERENCE.md: 2 Zen 3 cores with AVX2 at 2.45 GHz: 2*2*8*2*2.45e9 = 157 GFLOP/s fp32
    info = {"cores": 2, "fma_units": 2, "simd_lanes_fp32": 8, "fma": True, "clock_hz": 2.45e9}
    assert cpuinfo.computed_cpu_peak(info) == pytest.approx(156.8e9)
    assert cpuinfo.computed_cpu_peak({**info, "clock_hz": None}) is None


def test_cpu_peaks_by_class():
    zen3 = {"cores": 2, "fma_units": 2, "simd_lanes_fp32": 8, "fma": True, "clock_hz": 2.45e9, "bf16": False}
    assert roofline.computed_cpu_bf16_peak(zen3) is None
    spr = {**zen3, "simd_lanes_fp32": 16, "clock_hz": 2.1e9, "bf16": True, "amx": True}
    assert cpuinfo.computed_cpu_peak(spr) == pytest.approx(268.8e9)  # REFERENCE.md's Intel class
    assert roofline.computed_cpu_bf16_peak(spr) == pytest.approx(2 * 1024 * 2.1e9)
    assert roofline.computed_cpu_bf16_peak({**spr, "amx": False}) == pytest.approx(2 * 268.8e9)


@pytest.mark.parametrize(
    ("vendor", "family", "model", "flags", "lanes"),
    [
        ("AuthenticAMD", "23", "1", "avx avx2 fma", 4),  # Zen (EPYC 7001): 128-bit units
        ("AuthenticAMD", "23", "24", "avx avx2 fma", 4),  # Zen+ (model 0x18)
        ("AuthenticAMD", "23", "49", "avx avx2 fma", 8),  # Zen 2 (EPYC 7002, model 0x31): 256-bit units
        ("AuthenticAMD", "25", "1", "avx avx2 fma", 8),  # Zen 3
        ("AuthenticAMD", "25", "17", "avx avx2 fma avx512f", 8),  # Zen 4: AVX-512 on 256-bit units
        ("AuthenticAMD", "26", "2", "avx avx2 fma avx512f", 16),  # Zen 5
        ("GenuineIntel", "6", "143", "avx avx2 fma avx512f", 16),
        ("GenuineIntel", "6", "1", "sse2", 4),
    ],
)
def test_the_fp32_lanes_follow_the_units_not_only_the_instructions(vendor, family, model, flags, lanes):
    cpu = {"vendor_id": vendor, "cpu family": family, "model": model}
    assert cpuinfo.fp32_lanes(set(flags.split()), cpu) == lanes


def test_the_peak_divides_by_the_larger_and_keeps_the_best():
    low = roofline.Peak("cpu", "fp32", 157e9, 30e9, "test", computed_flops=157e9, measured_flops=120e9)
    again = peaks.remeasured(low, n=256, copy_mib=16)
    assert again.measured_flops >= 120e9 and again.flops == max(again.measured_flops, 157e9)
    assert peaks.remeasured(again, n=256, copy_mib=16).source.count("best of") == 1
    row = _row(median_s=CONV_FULL.flops() / 150e9)  # 150 GFLOP/s: above the busy measurement, below computed
    row = _judged(row, low)
    assert row["verified"] and row["pct_peak"] <= 100


def test_a_row_above_the_peak_is_flagged_far_above_is_invalid():
    # the necessary arithmetic (no padding zeros) is what is judged; 1.2x a CPU peak: flagged, 2x: impossible
    row = _row(flops=2e11, flops_unpadded=1e11, median_s=1e11 / (1.2 * 180e9))
    row = _judged(row, CPU)
    assert row["verified"] and row["pct_peak"] is None and "1.20x the peak" in row["above_peak"]
    assert "above the peak, no % shown" in " ".join(notes.roofline_notes({"env": {}, "rows": [row]}))
    assert "-" in tables.table([row]).splitlines()[-1]
    row = _row(flops=2e11, flops_unpadded=1e11, median_s=1e11 / (2 * 180e9))
    row = _judged(row, CPU)
    assert not row["verified"] and "cannot have done the work" in row["invalid_reason"]
    row = _row(flops=2e11, flops_unpadded=1e11, median_s=1.0)
    row = _judged(row, CPU)
    assert row["pct_peak"] == pytest.approx(100 * 1e11 / 180e9)


def test_this_cpu_is_described():
    info = roofline.cpu_info()
    assert info["cores"] >= 1 and info["simd_lanes_fp32"] in (4, 8, 16)


def test_measured_cpu_peak_is_checked_and_plausible():
    flops, bw = cpuinfo.measure_cpu(n=512, reps=2, copy_mib=16)
    assert 1e8 < flops < 1e14 and 1e8 < bw < 1e13


@pytest.mark.parametrize(
    ("device", "kind", "precision", "fmt", "peak"),
    [
        ("gpu", "NVIDIA H200", "default", "tf32", 495e12),
        ("gpu", "NVIDIA H200", "highest", "fp32", 67e12),
        ("gpu", "Tesla K80", "default", "fp32", 4.1e12),
        ("tpu", "TPU v2", "default", "bf16", 22.5e12),
        ("gpu", "Some Future GPU", "default", "fp32", None),
    ],
)
def test_accelerator_peaks_are_precision_aware(device, kind, precision, fmt, peak):
    p = roofline.accelerator_peak(device, kind, precision)
    assert p.number_format == fmt and p.flops == (pytest.approx(peak) if peak else None)


def _row(**kw):
    base = {
        "kind": "conv",
        "framework": "tf",
        "variant": "function",
        "device": "cpu",
        "device_kind": "CPU",
        "replicas": 1,
        "precision": "default",
        "dtype": "float32",
        "quick": False,
        "median_s": 1.0,
        "iqr_s": 0.01,
        "q1_s": 0.995,
        "q3_s": 1.005,
        "min_s": 0.99,
        "reps": 5,
        "compile_s": 1.5,
        "flops": CONV_FULL.flops(),
        "compiler_flops": 79.8e9,
        "compiler_flops_source": "XLA cost analysis",
        "min_bytes": CONV_FULL.min_bytes(),
        "gflops_per_s": CONV_FULL.flops() / 1e9,
        "max_rel_err": 1e-7,
        "xfw_max_rel_err": 1e-8,
        "verified": True,
        "invalid_reason": None,
        "seed": None,
    }
    return {**base, **kw}


def _judged(row: dict, peak) -> dict:
    """The row as results.json holds it after judging."""
    r = Row(**row)
    judge_row(r, peak)
    return r.to_dict()


CPU = roofline.Peak("cpu", "fp32", 180e9, 30e9, "test", computed_flops=157e9, measured_flops=180e9, headroom=1.5)


def test_roofline_columns():
    row = _row()
    row = _judged(row, CPU)
    assert row["verified"]
    assert row["pct_peak"] == pytest.approx(100 * 80.53 / 180, rel=1e-3)
    assert row["arith_intensity"] == pytest.approx(CONV_FULL.flops() / CONV_FULL.min_bytes())
    assert row["bound"] == "compute"  # 36 FLOP/byte against a ridge of 6
    assert row["compiler_flops_ratio"] == pytest.approx(79.8e9 / CONV_FULL.flops())


def test_impossible_throughput_is_invalid():
    # the article's TPU figure on this CPU: 80.5 GFLOP in 1.22 ms
    row = _row(median_s=1.22e-3)
    row = _judged(row, CPU)
    assert not row["verified"]
    assert "exceeds the device's peak" in row["invalid_reason"]
    assert "INVALID" in tables.table([row])


def test_one_tpu_v2_core_cannot_do_the_conv_in_1_22_ms():
    row = _row(device="tpu", device_kind="TPU v2", median_s=1.22e-3)
    row = _judged(row, roofline.accelerator_peak("tpu", "TPU v2", "default"))
    assert not row["verified"]


def test_large_spread_is_flagged():
    row = _row(iqr_s=0.3)
    row = _judged(row, CPU)
    assert row["noisy"] and row["verified"]
    assert "!" in tables.table([row])


def test_each_kind_of_row_gets_its_minimum_then_the_budget_and_a_multiprocess_run_exactly_its_minimum():
    from types import SimpleNamespace

    cfg, spec = Config(reps=5, budget_s=2.0, max_reps=50), SimpleNamespace(epochs=6)
    op, epochs = SimpleNamespace(epochs=False), SimpleNamespace(epochs=True)
    assert repetition_rule(cfg, op, spec) == Rule(5, 2.0, 50, 2)  # two timed calls a turn
    assert repetition_rule(cfg, epochs, spec) == Rule(5, 2.0, 50, 1)  # the epochs after the first, one a turn
    assert repetition_rule(Config(reps=9, max_reps=3), op, spec).max_calls == 9  # the minimum wins over a cap
    assert repetition_rule(Config(reps=3, cluster=object()), op, spec) == Rule(3, 0.0, 3, 2)  # the same everywhere
    quick = SimpleNamespace(epochs=2)  # a training schedule too short for an interval: its epochs, no more
    assert repetition_rule(cfg, epochs, quick) == Rule(1, 0.0, 1, 1)


def _doc(rows, device="cpu", kind="CPU", host="Test CPU"):
    return {
        "env": {
            "schema_version": schema.SCHEMA_VERSION,
            "device": device,
            "host_cpu": host,
            "precision": "default",
            "frameworks": {"tf": {"device_kind": kind, "versions": {"tensorflow": "x"}}},
        },
        "rows": rows,
        "checks": [],
    }


def _write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_csv_and_chart(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [
        _row(),
        _row(framework="jax", variant="jit", median_s=2.0),
        _row(kind="cnn_train", variant="fit", images_per_s=128.0, median_s=10.0),
    ]
    doc = _full_doc(rows)
    paths = files.write_all(doc, tmp_path)
    ratios = ["results_ratios.png"] if "results_ratios.png" in files.RESULT_FILES else []  # two frameworks: a ratio
    made = ["results.json", "results.csv", "results.md", "results.png", *ratios, "results.html"]  # the page last
    assert [p.name for p in paths] == made
    csv_lines = (tmp_path / "results.csv").read_text().splitlines()
    assert csv_lines[0].startswith("kind,framework,variant") and len(csv_lines) == 4
    png = (tmp_path / "results.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def _timed(framework: str, variant: str, scale: float, **kw) -> dict:
    """A row with raw times (6 calls): its ratios have intervals."""
    t = [scale * (1 + 0.01 * k) for k in range(6)]
    return _row(
        framework=framework, variant=variant, median_s=(t[2] + t[3]) / 2, reps=6, times_s=t, rounds=list(range(6)), **kw
    )


def test_the_summary_ratios_chart(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from parity.output.charts import ratio_chart

    rows = [
        _timed("tf", "function", 1.0),
        _timed("jax", "jit", 1.5),
        _timed("tf", "function+bf16", 0.6, dtype="bfloat16", tuned=True),
        _timed("jax", "jit+bf16", 0.5, dtype="bfloat16", tuned=True),
        _timed("tf", "fit", 2.0, kind="cnn_train", images_per_s=128.0),
        {**_row(framework="jax", variant="jit", kind="cnn_train", median_s=1.0)},  # no raw times: no interval
    ]
    f = _write(tmp_path, "d.json", _full_doc(rows))
    assert report.report_main([str(f), "--no-article", "--ratios", str(tmp_path / "ratios.png")]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {tmp_path / 'ratios.png'}\n")
    png = (tmp_path / "ratios.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    # one framework: nothing to divide, nothing written
    assert not ratio_chart(_full_doc([_row()]), tmp_path / "none.png") and not (tmp_path / "none.png").exists()
    g = _write(tmp_path, "g.json", _full_doc(rows[:2]))
    assert report.report_main([str(f), str(g), "--ratios", str(tmp_path / "two.png")]) == 2
    assert "--ratios draws one file's summary" in capsys.readouterr().err


def test_report_merges_machines_with_speedups_and_article_rows(tmp_path, capsys):
    cpu = _write(tmp_path, "cpu.json", _doc([_row(median_s=2.0)]))
    gpu = _write(
        tmp_path,
        "gpu.json",
        _doc(
            [_row(device="gpu", device_kind="NVIDIA H200", median_s=0.01)], device="gpu", kind="NVIDIA H200", host="Box"
        ),
    )
    assert report.report_main([str(cpu), str(gpu), "--baseline", "cpu:tf:function", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "200.00x" in out  # 2 s / 10 ms
    assert "2018 article" in out and "measured nothing" in out
    merged = json.loads((tmp_path / "merged.json").read_text())
    ref = [r for r in merged["rows"] if r["reference"]]
    assert ref and all(r["median_s"] is None for r in ref)  # never mixed up with measured rows
    tpu = next(r for r in ref if r["time"] == 1.22e-3)
    assert not tpu["verified"] and tpu["speedup"] is None
    k80 = next(r for r in ref if r["kind"] == "conv" and r["device_kind"] == "Tesla K80")
    assert k80["speedup"] == pytest.approx(2.0 / 0.28)


def test_report_article_baseline(tmp_path, capsys):
    cpu = _write(tmp_path, "cpu.json", _doc([_row(median_s=1.22)]))
    assert report.report_main([str(cpu), "--baseline", "article:cpu", "--workload", "conv"]) == 0
    assert "2.00x" in capsys.readouterr().out  # 2.44 s / 1.22 s


def test_report_sets_a_smaller_conv_beside_the_article_at_its_size(tmp_path, capsys):
    # the CPU's default conv (32 images): its call scaled by the FLOPs to the article's 128, said to be an estimate;
    # a --quick row (cache-sized) is given no time to compare
    rows = [
        _row(median_s=0.305, flops=CONV_CPU.flops()),
        _row(variant="function+bf16", median_s=0.5, flops=CONV_QUICK.flops(), quick=True),
    ]
    cpu = _write(tmp_path, "cpu.json", _doc(rows))
    assert (
        report.report_main([str(cpu), "--baseline", "article:cpu", "--workload", "conv", "--out", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "1.220 s (est.)" in out and "2.00x" in out  # 0.305 s x 4 against the article's 2.44 s
    merged = {r["variant"]: r for r in json.loads((tmp_path / "merged.json").read_text())["rows"]}
    assert merged["function"]["estimated"] and merged["function"]["time"] == pytest.approx(1.22)
    assert merged["function+bf16"]["time"] is None and merged["function+bf16"]["speedup"] is None


def test_a_run_says_an_operation_ran_below_its_full_size():
    from parity.engine.config import Config

    conv, matmul = Config(workloads=("conv", "matmul", "cnn")).size_notes()  # the CNN's parent side says its own
    assert conv.startswith("conv: CPU size, 20.1 GFLOP a call (full size: 80.5 GFLOP;")
    assert matmul.startswith("matmul: CPU size, 17.2 GFLOP a call (full size: 137.4 GFLOP;")
    assert Config(workloads=("conv",), quick=True).size_notes() == []
    assert Config(workloads=("conv",), device="gpu").size_notes() == []


def test_report_selects_by_workload_as_parity_run_names_it_or_by_row_kind(tmp_path, capsys):
    # --workload cnn means what it means to parity.run: every kind of row the CNN has
    rows = [
        _row(),
        _row(kind="cnn_train", variant="fit", median_s=3.0),
        _row(kind="cnn_infer", variant="predict", median_s=0.5),
    ]
    doc = _write(tmp_path, "d.json", _doc(rows))
    assert report.report_main([str(doc), "--workload", "cnn", "--no-article"]) == 0
    out = capsys.readouterr().out
    assert "cnn_train" in out and "cnn_infer" in out and "\nconv " not in out
    assert report.report_main([str(doc), "--kind", "cnn_infer", "--no-article"]) == 0
    assert "cnn_train" not in capsys.readouterr().out
    # one word per flag: a row kind given to --workload is refused, naming the flag that takes it
    assert report.report_main([str(doc), "--workload", "cnn_infer", "--no-article"]) == 2
    assert "cnn_infer is a row kind, not a workload: --kind cnn_infer" in capsys.readouterr().err
    assert report.report_main([str(doc), "--workload", "cnn", "--kind", "cnn_train", "--no-article"]) == 0
    assert "cnn_infer" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "msg"),
    [
        ("{not json", "not JSON"),
        ('{"rows": []}', "not a parity.run results file"),
        ('{"env": {"schema_version": 99}, "rows": []}', "schema_version"),
    ],
)
def test_report_bad_file_is_one_line(tmp_path, capsys, content, msg):
    p = tmp_path / "bad.json"
    p.write_text(content)
    assert report.report_main([str(p)]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_compare_passes_within_threshold_and_fails_a_regression(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _doc([_row(), _row(framework="jax", variant="jit", median_s=3.0)]))
    ok = _write(tmp_path, "ok.json", _doc([_row(median_s=1.05), _row(framework="jax", variant="jit", median_s=2.0)]))
    slow = _write(tmp_path, "slow.json", _doc([_row(median_s=1.25), _row(framework="jax", variant="jit", median_s=3)]))
    assert compare.main([str(old), str(ok), "--fail-over", "10%"]) == 0
    out = capsys.readouterr().out
    assert "faster by 33.3%" in out and "no regression" in out
    assert compare.main([str(old), str(slow), "--fail-over", "10%"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 25.0% slower" in out
    assert compare.main([str(old), str(slow), "--fail-over", "30"]) == 0


def test_compare_fails_a_row_that_became_invalid(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _doc([_row()]))
    new = _write(tmp_path, "new.json", _doc([_row(verified=False, median_s=None, invalid_reason="output shape")]))
    assert compare.main([str(old), str(new)]) == 1
    assert "now invalid" in capsys.readouterr().out


def test_compare_bad_input(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _doc([_row()]))
    other = _write(tmp_path, "other.json", _doc([_row(kind="cnn_infer")]))
    assert compare.main([str(old), str(other)]) == 2
    assert "no row" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        compare.main([str(old), str(old), "--fail-over", "ten"])
    assert e.value.code == 2
    assert compare.main([str(old), str(tmp_path / "missing.json")]) == 2


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"median_s": float("nan")}, "NaN"),
        ({"median_s": float("inf")}, "Infinity"),
        ({"median_s": "1.0"}, "median_s"),
        ({"median_s": None}, "median_s is None"),
        ({"median_s": 0.0}, "median_s is 0.0"),
        ({"replicas": "8"}, "replicas"),
        ({"flops": "8e10"}, "flops"),
        ({"verified": "no"}, "verified"),
        ({"median_s": True}, "median_s"),
    ],
)
def test_malformed_rows_are_one_line_never_ok(tmp_path, capsys, row, said):
    # a CI gate that passes garbage is worse than none: NaN, wrong types, a zero time are unreadable input (2)
    good = _write(tmp_path, "good.json", _doc([_row()]))
    bad = _write(tmp_path, "bad.json", _doc([_row(**row)]))
    for old, new in ((good, bad), (bad, good)):
        assert compare.main([str(old), str(new)]) == 2
        err = capsys.readouterr().err
        assert said in err and "bad.json: " in err and err.count("\n") == 1
    assert report.report_main([str(bad)]) == 2
    assert said in capsys.readouterr().err


def test_rows_that_are_not_objects_are_refused(tmp_path, capsys):
    doc = _doc([])
    doc["rows"] = [["conv", "tf"]]
    bad = _write(tmp_path, "bad.json", doc)
    assert compare.main([str(bad), str(bad)]) == 2
    assert "not an object" in capsys.readouterr().err


def test_threshold_parsing():
    assert compare.threshold("10%") == pytest.approx(0.10)
    assert compare.threshold("2.5") == pytest.approx(0.025)
    assert math.isclose(compare.threshold("0%"), 0.0)


def test_unpadded_flops_match_xla_cost_analysis_convention():
    # REFERENCE.md: XLA's cost analysis reports 79.8 GFLOP for the 80.5 GFLOP conv (SAME padding's zeros)
    assert CONV_FULL.flops_unpadded() / 1e9 == pytest.approx(79.8, abs=0.05)
    # per axis, 256 -> 128 with k=5, s=2, pads (1, 2): 4 + 126 * 5 + 3 taps
    from parity.common.padding import valid_taps

    assert valid_taps(256, 5, 2, "SAME") == 637 and valid_taps(7, 5, 1, "SAME") == 29
    assert valid_taps(9, 3, 1, "VALID") == 7 * 3


def test_compare_never_matches_different_cnn_schedules(tmp_path, capsys):
    three = _row(kind="cnn_train", variant="fit", spec={"global_batch": 256, "steps_per_epoch": 3})
    five = _row(kind="cnn_train", variant="fit", spec={"global_batch": 256, "steps_per_epoch": 5}, median_s=2.0)
    old, new = _write(tmp_path, "old.json", _doc([three])), _write(tmp_path, "new.json", _doc([five]))
    assert compare.main([str(old), str(new)]) == 2  # nothing comparable, not a 100% regression
    assert "no row" in capsys.readouterr().err


def test_compare_never_matches_an_operation_at_other_shapes(tmp_path, capsys):
    # the conv on 128 images and on 32: a quarter of the work, not a 4x speed-up
    full = _row(spec=CONV_FULL.to_dict())
    cpu = _row(spec=CONV_CPU.to_dict(), median_s=0.25, flops=CONV_CPU.flops())
    old, new = _write(tmp_path, "old.json", _doc([full])), _write(tmp_path, "new.json", _doc([cpu]))
    assert compare.main([str(old), str(new)]) == 2
    assert "no row" in capsys.readouterr().err


def test_a_compiler_count_far_from_both_formulas_is_shown():
    rows = [_row(), _row(variant="jit", compiler_flops=50e9, flops_unpadded=CONV_FULL.flops_unpadded())]
    doc = _doc(rows)
    said = [n for n in notes.roofline_notes(doc) if "FLOPs" in n]
    assert len(said) == 1 and "DISAGREES by more than 10% in: jit x1" in said[0]
    rows[1]["compiler_flops"] = CONV_FULL.flops_unpadded()  # XLA's convention: no padding zeros
    assert "all within 10%" in notes.roofline_notes(_doc(rows))[0]


def test_bf16_rows_only_where_the_hardware_has_it(monkeypatch):
    assert roofline.native_bf16("tpu", "TPU v2")
    assert roofline.native_bf16("gpu", "NVIDIA H200") and not roofline.native_bf16("gpu", "Tesla K80")
    assert roofline.native_bf16("cpu", "cpu") == (
        roofline.cpu_info()["bf16"] and not roofline.isa_capped_below_bf16(os.environ)
    )
    assert roofline.isa_capped_below_bf16({"ONEDNN_MAX_CPU_ISA": "AVX2"}) == "ONEDNN_MAX_CPU_ISA=AVX2"
    assert roofline.isa_capped_below_bf16({"XLA_FLAGS": "--xla_cpu_max_isa=AVX2 --foo"}) == "--xla_cpu_max_isa=AVX2"
    assert roofline.isa_capped_below_bf16({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "XLA_FLAGS": "--foo"}) is None
    h200 = roofline.accelerator_peak("gpu", "NVIDIA H200", "default")
    assert roofline.bf16_peak("gpu", "NVIDIA H200", h200).flops == pytest.approx(989e12)
    bf16 = roofline.bf16_peak("cpu", "cpu", CPU)
    assert bf16.flops == roofline.computed_cpu_bf16_peak(roofline.cpu_info())  # None without a bfloat16 unit
    assert bf16.limit() >= CPU.measured_flops  # never below the float32 peak measured in the run
    # a bfloat16 matmul measured in the run that beats the computed figure sets the peak, and says so
    monkeypatch.setattr(roofline, "computed_cpu_bf16_peak", lambda info: 6e14)  # whatever this machine has
    run = dataclasses.replace(CPU, measured_bf16={"tf": 7.2e14, "jax": None})
    fast = roofline.bf16_peak("cpu", "cpu", run)
    assert fast.flops == 7.2e14 and fast.measured_flops == 7.2e14 and "tf 720000.0 GFLOP/s" in fast.source
    # beyond the turbo headroom over the computed figure a "measurement" is not believed: it would lift the guard
    # over a broken row
    beyond = 6e14 * roofline.CPU_HEADROOM * 1.01
    absurd = roofline.bf16_peak("cpu", "cpu", dataclasses.replace(CPU, measured_bf16={"tf": beyond}))
    assert absurd.flops == 6e14
    slow = roofline.bf16_peak("cpu", "cpu", dataclasses.replace(CPU, measured_bf16={"jax": 1e9}))
    assert slow.flops == 6e14 and slow.limit() >= CPU.measured_flops
    # the run's own verified bfloat16 matmul rows count as measurements (their fastest call); unverified ones do not
    mm = [
        Row(**_row(kind="matmul", variant="function+bf16", dtype="bfloat16", flops=1.4e14, min_s=0.2)),
        Row(
            **_row(
                kind="matmul",
                framework="jax",
                variant="jit+bf16",
                dtype="bfloat16",
                flops=1.4e14,
                min_s=0.1,
                verified=False,
            )
        ),
        Row(**_row(kind="conv", dtype="bfloat16", flops=1.4e14, min_s=0.1)),
    ]
    with_rows = peaks.with_bf16_matmul_rows(run, mm)
    assert with_rows.measured_bf16 == {"tf": 7.2e14, "jax": None, "tf function+bf16 row": 7e14}
    assert peaks.with_bf16_matmul_rows(CPU, mm[1:]) is CPU
    # the same variant at several replica counts: its fastest, whichever came last
    x8 = Row(**_row(kind="matmul", variant="function+bf16", dtype="bfloat16", replicas=8, flops=1.4e14, min_s=1))
    assert peaks.with_bf16_matmul_rows(CPU, [mm[0], x8]).measured_bf16 == {"tf function+bf16 row": 7e14}
    # a framework whose bfloat16 matmul row the round verified is not asked for a matmul of its own; the others are
    asked = []

    class _Worker:
        def __init__(self, framework):
            self.framework, self.setting, self.env = framework, "default", {}

        def ask(self, call):
            asked.append(self.framework)
            return {"flops": 3e11}

    monkeypatch.setattr(roofline, "native_bf16", lambda *a: True)
    cfg = Config(device="cpu")
    workers = {"tf": _Worker("tf"), "jax": _Worker("jax")}
    got = peaks.with_workers(cfg, dataclasses.replace(CPU, measured_bf16=None), workers, {}, mm)
    assert asked == ["jax"] and got.measured_bf16 == {"jax": 3e11}
    # TF calls its CPU 'CPU': an 8-replica bfloat16 row is still judged against the one CPU, not 8 of them
    tf8 = Row(**_row(device_kind="CPU", variant="strategy+bf16", dtype="bfloat16", replicas=8, median_s=1.0))
    assert roofline.roofline(tf8, roofline.bf16_peak("cpu", "CPU", run), 8)["peak_flops"] == 7.2e14
    again = peaks.remeasured(dataclasses.replace(CPU, measured_bf16={"tf": 9e14}), n=256, copy_mib=16)
    assert again.measured_bf16 == {"tf": 9e14}  # re-measuring the float32 peak keeps it


def test_number_format_is_data_not_a_name():
    # a tuned worker's suffix must not hide a bfloat16 row (the old endswith('+bf16') test did)
    rows = [
        Row(**_row(framework="tf", variant="function", saved="tf32")),
        Row(**_row(framework="jax", variant="jit", saved="j32")),
        Row(**_row(framework="tf", variant="function+bf16", dtype="bfloat16", saved="tf16")),
        Row(**_row(framework="jax", variant="jit+bf16+ynn", dtype="bfloat16", saved="j16")),
    ]
    pairs = []
    cross_check(rows, lambda a, b: pairs.append((a, b)) or 0.0)
    assert sorted(pairs) == [("j16", "tf16"), ("j32", "tf32"), ("tf16", "j16"), ("tf32", "j32")]
    assert all(r.xfw_max_rel_err == 0.0 and "saved" not in r.to_dict() for r in rows)


def test_bf16_row_is_judged_against_the_bf16_peak():
    row = _row(device="gpu", device_kind="NVIDIA H200", variant="jit+bf16", dtype="bfloat16", median_s=80.53e9 / 600e12)
    row = _judged(row, roofline.accelerator_peak("gpu", "NVIDIA H200", "default"))  # 600 TFLOP/s: > TF32 peak
    assert row["verified"] and row["peak_format"] == "bf16"
    assert row["pct_peak"] == pytest.approx(100 * 600 / 989, rel=1e-3)


@pytest.mark.parametrize("where", ["a file", "under a file", "results.json a directory"])
def test_an_unusable_out_is_refused_before_any_work(tmp_path, capsys, where):
    from parity import run

    (tmp_path / "f").write_text("x")
    out = {"a file": tmp_path / "f", "under a file": tmp_path / "f" / "sub", "results.json a directory": tmp_path / "d"}
    (tmp_path / "d" / "results.json").mkdir(parents=True)
    assert run.main(["--device", "cpu", "--quick", "--workload", "conv", "--out", str(out[where])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and err.count("\n") == 1
    assert "measuring" not in err  # refused before the peak measurement, the first work a run does


def _full_doc(rows: list[dict]) -> dict:
    """A results document with the environment fields the tables print."""
    doc = _doc(rows)
    doc["env"].update(reps=5, budget_s=5.0, timestamp="t", git_commit=None, python="3", host_cores=2, notes=[])
    doc["env"].update(skipped=[], peak=CPU.to_dict())
    return doc


def _results_doc():
    doc = _full_doc([_row()])
    return doc


def test_results_are_written_as_a_unit(tmp_path, monkeypatch):
    files.write_all(_results_doc(), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken(doc):
        raise OSError("disk full")

    monkeypatch.setattr(files, "markdown", broken)
    with pytest.raises(OSError, match="disk full"):
        files.write_all(_results_doc(), tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # untouched, no staging left behind


def test_a_stale_chart_is_removed(tmp_path, monkeypatch):
    (tmp_path / "results.png").write_bytes(b"old chart")
    monkeypatch.setattr(files, "chart", lambda rows, path, title="": False)  # e.g. no row verified
    paths = files.write_all(_results_doc(), tmp_path)
    assert [p.name for p in paths] == ["results.json", "results.csv", "results.md", "results.html"]
    assert not (tmp_path / "results.png").exists()


def test_a_ratio_point_beyond_the_fixed_range_is_an_arrow_at_its_edge_and_two_modes_a_black_rim():
    from parity.judging.stats import Ratio
    from parity.output.charts import REACH, ratio_point

    class Axis:
        def errorbar(self, x, y, **kw):
            self.x, self.kw = x, kw

    ax = Axis()
    ratio_point(ax, Ratio(9.0, 8.0, 10.0, 5, (5, 5)), 0, "tab:green", "tab:orange")
    assert ax.x == [REACH] and ax.kw["fmt"] == ">" and ax.kw["clip_on"] is False and ax.kw["alpha"] == 1
    assert ax.kw["xerr"] == [[0], [0]]  # the interval, beyond the range too, is drawn to the edge only
    ratio_point(ax, Ratio(1.2, 0.9, 1.5, 5, (5, 5)), 0, "tab:green", "tab:orange", filled=False, bimodal=True)
    assert ax.x == [1.2] and ax.kw["fmt"] == "D" and ax.kw["markerfacecolor"] == "white"
    assert ax.kw["markeredgecolor"] == "black" and ax.kw["alpha"] == 0.45  # two modes; the interval holds 1
    ratio_point(ax, Ratio(0.1, None, None, 0, (1, 1)), 0, "tab:green", "tab:orange")
    assert ax.x == [1 / REACH] and ax.kw["fmt"] == "<" and ax.kw["xerr"] is None and ax.kw["alpha"] == 0.45
