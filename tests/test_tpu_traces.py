"""A TPU's trace as JAX's reader gives its ops (jax_impl.profile.trace_ops): the device plane's line 'XLA Ops' names
each op by its instruction's text and carries no 'hlo_op' stat; its line 'Async XLA Ops' spans each copy in flight
beside them. On a hand-made XSpace of that form, and on a trace the v5e chip wrote (docs/results/tpu-v5e/)."""

import json
from pathlib import Path

import pytest

TRACE = Path(__file__).parent.parent / "docs" / "results" / "tpu-v5e" / "profile-cnn-infer.xplane.pb"
PROGRAM = """HloModule jit_step

ENTRY %main.9 (p.1: f32[8]) -> f32[8] {
  %p.1 = f32[8]{0} parameter(0)
  %fusion.1 = f32[8]{0} fusion(f32[8]{0} %p.1), kind=kLoop, calls=%fused_add, metadata={op_name="jit(step)/dense1/add"}
  ROOT %convolution.2 = f32[8]{0} convolution(f32[8]{0} %fusion.1), metadata={op_name="jit(step)/conv1/conv"}
}
"""


def _device_plane(lines: dict[str, list[tuple]]) -> bytes:
    """A TPU device plane's XSpace: each line's events (name, start ms, ms, hlo_op stat or None)."""
    from jax.profiler import ProfileData

    names = sorted({e[0] for evs in lines.values() for e in evs})
    text = 'planes { id: 1 name: "/device:TPU:0"'
    for k, (line, evs) in enumerate(lines.items(), 1):
        body = ""
        for name, start, ms, op in evs:
            stat = f" stats {{ metadata_id: 1 str_value: {json.dumps(op)} }}" if op else ""
            body += f" events {{ metadata_id: {names.index(name) + 1} offset_ps: {round(start * 1e9)}"
            body += f" duration_ps: {round(ms * 1e9)}{stat} }}"
        text += f' lines {{ id: {k} name: "{line}" timestamp_ns: 1000{body} }}'
    text += "".join(
        f" event_metadata {{ key: {i} value {{ id: {i} name: {json.dumps(n)} }} }}" for i, n in enumerate(names, 1)
    )
    text += ' stat_metadata { key: 1 value { id: 1 name: "hlo_op" } } }'
    return ProfileData.text_proto_to_serialized_xspace(text)


def test_a_tpu_op_is_read_from_its_instruction_text_and_the_copies_in_flight_are_left_out(tmp_path):
    from jax_impl.profile import trace_ops

    ops = {
        "XLA Modules": [("jit_step(42)", 0, 4.2, None)],
        "XLA Ops": [
            ("%fusion.1 = f32[8]{0:T(128)} fusion(f32[8]{0} %p.1), kind=kLoop", 0, 1, None),
            ("%convolution.2 = f32[8]{0:T(128)} convolution(f32[8]{0} %fusion.1)", 1, 3, None),
            ("%copy-done = f32[8]{0} copy-done((f32[8]{0}, u32[]) %copy-start)", 4, 0.2, None),
        ],
        "Async XLA Ops": [("%copy-start = (f32[8]{0}, u32[]) copy-start(f32[8]{0} %p.1)", 0.5, 3.7, "copy-start")],
    }
    (tmp_path / "tpu.xplane.pb").write_bytes(_device_plane(ops))
    got = [
        (scope, round(s * 1e3, 6), round(t * 1e3, 6), line) for scope, s, t, line in trace_ops(str(tmp_path), PROGRAM)
    ]
    line = "/device:TPU:0/XLA Ops"
    assert got == [
        ("jit(step)/dense1/add", 1.0, 0.0, line),
        ("jit(step)/conv1/conv", 3.0, 1.0, line),
        ("copy-done", 0.2, 4.0, line),
    ]


def test_the_chips_own_trace_gives_its_ops_within_the_programs_time(tmp_path):
    """JAX's CNN inference program, one call at the quick preset's batch, traced on the v5e chip: 52 ops on the XLA
    Ops line (none from the copies' line), taking 52.2 of the 54.3 microseconds between the first op's start and the
    last op's end."""
    from jax_impl.profile import trace_ops

    (tmp_path / "chip.xplane.pb").write_bytes(TRACE.read_bytes())
    ops = trace_ops(str(tmp_path))
    assert len(ops) == 52
    assert {op[3] for op in ops} == {"/device:TPU:0/XLA Ops"}
    assert {"convert_reduce_fusion", "custom-call", "fusion.15"} <= {op[0] for op in ops}
    span = max(start + s for _, s, start, _ in ops)
    assert sum(s for _, s, _, _ in ops) == pytest.approx(52.208e-6, abs=1e-9)
    assert span == pytest.approx(54.289e-6, abs=1e-9)
