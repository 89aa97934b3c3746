"""Every row against what its device can attain (parity.judging.roofline.attainable): the compiled program's ops,
each at the larger of its FLOPs at the peak and its bytes at the bandwidth, read from the program's text
(parity.judging.program), on a TPU with the matrix unit's 128-wide tiles. Programs the chip compiled
(docs/results/tpu-v5e/*.hlo.txt) and tiny ones compiled here."""

from pathlib import Path

import pytest

from parity.api import Counted
from parity.judging import program
from parity.judging.roofline import Peak, attainable
from parity.record.rows import COLUMNS, Row

TPU = Path(__file__).resolve().parent.parent / "docs/results/tpu-v5e"
V5E = Peak("TPU v5 lite", "bf16", 197e12, 819e9, "published")


def _ops(text: str, tile: int = 1) -> list[tuple[float, float]]:
    return program.program_ops(text, tile).ops


def test_the_chips_conv_programs_read_op_by_op():
    """The conv written row-major: a conversion of the input, the convolution (its 75-deep contraction run as one
    128-wide tile), then a copy of its 2.1 GB output; in the compiler's layout, no copy."""
    row_major = _ops((TPU / "conv-row-major.hlo.txt").read_text(), 128)
    layout = _ops((TPU / "conv-layout.hlo.txt").read_text(), 128)
    conv = 2 * 128 * 128 * 128 * 128 * 256  # 128 taps x channels, 256 output features
    assert [f for f, _ in row_major if f] == [conv] and [f for f, _ in layout if f] == [conv]
    out = 128 * 128 * 128 * 256 * 4
    assert max(b for _, b in row_major) == 2 * out  # the copy: read and written
    assert max(b for _, b in layout) == out  # the convolution's output, written once
    ms = {
        n: attainable(program.summary((TPU / n).read_text(), 1, 128), V5E)[0] * 1e3
        for n in ("conv-row-major.hlo.txt", "conv-layout.hlo.txt")
    }
    assert ms["conv-row-major.hlo.txt"] == pytest.approx(7.99, abs=0.01)
    assert ms["conv-layout.hlo.txt"] == pytest.approx(2.75, abs=0.01)


DOT = """HloModule m, entry_computation_layout={(f32[8,28]{1,0}, f32[28,300]{1,0})->f32[8,300]{1,0}}

ENTRY %main (a: f32[8,28], b: f32[28,300]) -> f32[8,300] {
  %a = f32[8,28]{1,0:T(8,128)} parameter(0)
  %b = f32[28,300]{1,0:T(8,128)} parameter(1)
  ROOT %dot = f32[8,300]{1,0:T(8,128)} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_dot_runs_whole_tiles_of_the_matrix_unit():
    """28-deep and 300 wide: on a 128-wide unit 128 deep and 384 wide; its operands as stored in (8, 128) tiles."""
    ((flops, moved),) = _ops(DOT, 128)
    assert flops == 2 * 8 * 128 * 384
    assert moved == 4 * (8 * 128 + 32 * 384 + 8 * 384)
    ((flops, moved),) = _ops(DOT)
    assert flops == 2 * 8 * 28 * 300


LOOP = """HloModule m

%update (p0: f32[28,64,128], p1: s32[], p2: f32[64,128]) -> f32[28,64,128] {
  %p0 = f32[28,64,128]{2,1,0} parameter(0)
  %p2 = f32[64,128]{1,0} parameter(2)
  %b = f32[1,64,128]{2,1,0} bitcast(%p2)
  %p1 = s32[] parameter(1)
  %z = s32[] constant(0)
  ROOT %dus = f32[28,64,128]{2,1,0} dynamic-update-slice(%p0, %b, %p1, %z, %z)
}

%body (t: (f32[28,64,128], s32[], f32[64,128])) -> (f32[28,64,128], s32[], f32[64,128]) {
  %t = (f32[28,64,128]{2,1,0}, s32[], f32[64,128]{1,0}) parameter(0)
  %buf = f32[28,64,128]{2,1,0} get-tuple-element(%t), index=0
  %i = s32[] get-tuple-element(%t), index=1
  %h = f32[64,128]{1,0} get-tuple-element(%t), index=2
  %f = f32[28,64,128]{2,1,0} fusion(%buf, %i, %h), kind=kLoop, calls=%update
  ROOT %r = (f32[28,64,128]{2,1,0}, s32[], f32[64,128]{1,0}) tuple(%f, %i, %h)
}

%cond (t: (f32[28,64,128], s32[], f32[64,128])) -> pred[] {
  %t = (f32[28,64,128]{2,1,0}, s32[], f32[64,128]{1,0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

ENTRY %main (x: (f32[28,64,128], s32[], f32[64,128])) -> (f32[28,64,128], s32[], f32[64,128]) {
  %x = (f32[28,64,128]{2,1,0}, s32[], f32[64,128]{1,0}) parameter(0)
  ROOT %w = (f32[28,64,128]{2,1,0}, s32[], f32[64,128]{1,0}) while(%x), condition=%cond, body=%body, TRIPS
}
""".replace("TRIPS", 'backend_config={"known_trip_count":{"n":"28"}}')


def test_a_loops_body_runs_its_trip_count_and_an_update_in_place_moves_its_update():
    ops = _ops(LOOP)
    assert len(ops) == 28
    assert ops[0] == (0.0, 64 * 128 * 4 * 2 + 4)  # the update read and written, the index read


def test_attainable_sums_each_op_at_its_own_limit():
    ops = {"ops": [[197e9, 0.0, 2], [0.0, 819e6, 1], [197e9, 819e6, 1]], "unknown_calls": 0, "unknown_loops": 0}
    seconds, said = attainable(ops, V5E)
    assert seconds == pytest.approx(4e-3) and "4 ops a call" in said
    cpu = Peak("cpu", "fp32", 197e9, 819e6, "computed")
    assert attainable(ops, cpu, replicas=8)[0] == pytest.approx(8 * 4.0)  # 8 simulated devices share the CPU
    seconds, said = attainable({**ops, "unknown_calls": 2}, V5E)
    assert seconds is None and "a library's kernel" in said
    assert attainable(None, V5E) == (None, None)


def test_a_rows_share_of_its_attainable_time_is_judged_beside_its_percent_of_peak():
    from parity.judging.judge import judge_row

    row = Row(kind="conv", framework="jax", variant="jit", device="tpu", device_kind="TPU v5 lite", replicas=1)
    row.update({"median_s": 0.010, "reps": 5, "verified": True, "flops": 80.5e9, "min_bytes": 2.25e9})
    row.program_ops = {"ops": [[0.0, 4.095e9, 1]], "unknown_calls": 0, "unknown_loops": 0, "tile": 128}
    judge_row(row, V5E)
    assert row.attainable_s == pytest.approx(5e-3) and row.pct_attainable == pytest.approx(50.0)
    assert "program_ops" not in row.to_dict() and "attainable_s" in row.to_dict()
    assert COLUMNS[COLUMNS.index("% peak") + 1] == "% attain"


def test_a_jax_programs_count_brings_its_compiled_text_on_a_cpu():
    """Where XLA's cost analysis gives the FLOPs, the count carries the compiled program: a matmul is one dot."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np

    from jax_impl.devices import lowered_flops

    f = jax.jit(jnp.matmul)
    a = jnp.asarray(np.ones((32, 48), np.float32))
    b = jnp.asarray(np.ones((48, 16), np.float32))
    f(a, b).block_until_ready()
    counted = lowered_flops(f, a, b)
    flops, source = counted
    assert isinstance(counted, Counted) and flops == 2 * 32 * 48 * 16 and source == "XLA cost analysis"
    ops = program.ops_of(counted, "cpu")
    assert [f for f, _, _ in ops["ops"] if f] == [2 * 32 * 48 * 16] and ops["tile"] == 1
    assert program.ops_of((flops, source), "cpu") is None  # a plain pair: a framework without its program
    assert counted.times(20).calls == 20 and counted.times(20)[0] == 20 * flops


def test_the_speed_table_shows_the_share_where_a_row_has_it():
    """'% attain' beside '% peak' where some row has its share; a file written before the field reads as it did."""
    from parity.output.tables import table

    row = Row(kind="conv", framework="jax", variant="jit", device="tpu", device_kind="TPU v5 lite", replicas=1)
    row.update({"median_s": 0.010, "reps": 5, "verified": True, "precision": "default", "max_rel_err": 0.0})
    row.update({"gflops_per_s": 1.0, "iqr_s": 0.0})
    older = row.to_dict()
    row.update({"pct_attainable": 50.0})
    assert "% attain" in table([row.to_dict()]) and "50.0" in table([row.to_dict()])
    assert "% attain" not in table([older]) and "% peak" in table([older])
