"""The XLA ops of a trace, as JAX's and TensorFlow's readers give them (jax_impl.profile.trace_ops,
tf_impl.profile.trace_ops), on hand-made XSpaces: an op XLA:CPU runs asynchronously (a oneDNN convolution under
'+onednn') keeps the instants before its completion when no other op ran (parity.api.traces.in_flight)."""

import json

import pytest

from parity.judging.layers import wall_split

STATS = ("hlo_op", "_p", "_c")


def _xspace(events: list[tuple]) -> str:
    """An XSpace's text proto: one host plane, a line per thread; each event (thread, name, start ms, ms, stats)."""
    names = sorted({e[1] for e in events})
    lines: dict[str, list[str]] = {}
    for thread, name, start, ms, stats in events:
        st = "".join(
            f" stats {{ metadata_id: {STATS.index(k) + 1} "
            + (f"str_value: {json.dumps(v)}" if k == "hlo_op" else f"int64_value: {v}")
            + " }"
            for k, v in stats.items()
        )
        off, dur = round(start * 1e9), round(ms * 1e9)
        lines.setdefault(thread, []).append(
            f"events {{ metadata_id: {names.index(name) + 1} offset_ps: {off} duration_ps: {dur}{st} }}"
        )
    text = 'planes { id: 1 name: "/host:CPU"'
    for k, (thread, evs) in enumerate(lines.items(), 1):
        text += f' lines {{ id: {k} name: "{thread}" timestamp_ns: 1000 {" ".join(evs)} }}'
    text += "".join(f' event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for i, n in enumerate(names, 1))
    text += "".join(f' stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for i, n in enumerate(STATS, 1))
    return text + " }"


def _ops(tmp_path, events, reader: str):
    """The ops `reader` ('jax' or 'tf') reads from a trace of `events`."""
    text = _xspace(events)
    if reader == "jax":
        from jax.profiler import ProfileData

        from jax_impl.profile import trace_ops

        data = ProfileData.text_proto_to_serialized_xspace(text)
    else:
        from google.protobuf import text_format
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        from tf_impl.profile import trace_ops

        data = text_format.Parse(text, xplane_pb2.XSpace()).SerializeToString()
    (tmp_path / "host.xplane.pb").write_bytes(data)
    return trace_ops(str(tmp_path))


def _op(thread, name, start, ms, flow, done):
    """An op's event and its completion's ('end: <op>', on another thread), `done` ms after the trace's start."""
    return [(thread, name, start, ms, {"hlo_op": name, "_p": flow}), ("b", f"end: {name}", done, 0, {"_c": flow})]


@pytest.mark.parametrize("reader", ["jax", "tf"])
def test_an_asynchronous_op_keeps_the_idle_instants_before_its_completion(tmp_path, reader):
    """fusion.1 runs 0-1 ms; the convolution is handed over at 1-1.1 ms and completes at 4 ms; fusion.4 runs 2-3 ms
    meanwhile on the other thread; fusion.3 runs 5-6 ms. The convolution gets 1.1-2 and 3-4 ms, fusion.4 its own
    instants, and 4-5 ms (nothing in flight) stays nobody's."""
    events = [
        *_op("a", "fusion.1", 0, 1, 1, 1),
        *_op("a", "custom-call.2", 1, 0.1, 2, 4),
        *_op("b", "fusion.4", 2, 1, 4, 3),
        *_op("a", "fusion.3", 5, 1, 3, 6),
    ]
    ops = _ops(tmp_path, events, reader)
    share: dict[str, float] = {}
    for op, w in zip(ops, wall_split(ops), strict=True):
        share[op[0]] = share.get(op[0], 0.0) + w
    assert share == pytest.approx({"fusion.1": 1e-3, "custom-call.2": 2e-3, "fusion.4": 1e-3, "fusion.3": 1e-3})
    flight = sorted((round(op[2] * 1e3, 6), round(op[1] * 1e3, 6)) for op in ops if "in flight" in op[3])
    assert flight == [(1.1, 0.9), (3.0, 1.0)]  # (start, ms) from the trace's first op


@pytest.mark.parametrize("reader", ["jax", "tf"])
def test_a_completion_recorded_after_other_ops_takes_none_of_their_time(tmp_path, reader):
    """A fusion whose completion a busy thread records late (22 ms after its 0.2 ms event, as XLA:CPU's threads do
    while running the next op): every instant is the op running then; nothing is added."""
    events = [*_op("a", "fusion.1", 0, 0.2, 1, 22), *_op("b", "fusion.2", 0.2, 21.8, 2, 22)]
    ops = _ops(tmp_path, events, reader)
    assert [op[0] for op in ops] == ["fusion.1", "fusion.2"]
    assert sum(wall_split(ops)) == pytest.approx(22e-3)
