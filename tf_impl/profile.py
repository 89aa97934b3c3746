"""Profiling for TensorFlow: a trace of what runs, and its ops by Keras's layer name scopes (mirror image of
jax_impl.profile)."""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from parity.api.traces import in_flight  # noqa: E402


@contextlib.contextmanager
def trace(directory: str):
    """A context manager: what runs inside is traced by TensorFlow's profiler into `directory` (an XSpace
    `.xplane.pb` under plugins/profile/, for TensorBoard's profile plugin or xprof)."""
    tf.profiler.experimental.start(directory)
    try:
        yield
    finally:
        tf.profiler.experimental.stop()


def trace_ops(directory: str, program: str | None = None) -> list[tuple[str, float, float, str]]:
    """The TensorFlow ops of the trace in `directory` as (op name, seconds, start_s, thread), one per event: the
    executor's events, named 'scope/op:Type' after Keras's layer name scopes
    ('gradient_tape/.../conv2_1/convolution/Conv2DBackpropInput'), and the ops of what XLA compiled (jit_compile:
    'fit+xla', 'predict+xla'), named by their HLO instruction's op_name metadata, the same scopes
    ('sequential_1/conv1_1/convolution'), from the compiled module the trace holds. An executor event that encloses
    XLA's ops on its thread (the compiled cluster's launch) is not counted beside them; an XLA op run
    asynchronously keeps the instants before its completion when no other op ran (parity.api.traces.in_flight).
    start_s from the trace's first op, thread the profiler's line it ran on. Ops run at once on the inter-op threads
    are each an event: their seconds can add up to more than the call's wall time (parity.judging.layers splits each
    instant among the threads instead)."""
    from pathlib import Path

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(Path(directory).rglob("*.xplane.pb"))
    if not files:
        return []
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[-1].read_bytes())
    scopes = _xla_scopes(space)
    ops = []  # (name, duration ps, start ps, thread)
    flows, ends = {}, {}  # an XLA op's index in ops -> its flow id; a flow id -> its completion's start (ps)
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        stats = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            thread, executor, xla = f"{plane.name}/{line.name}", [], []
            for ev in line.events:
                name, start = names.get(ev.metadata_id, ""), line.timestamp_ns * 1000 + ev.offset_ps
                refs = {stats.get(st.metadata_id): st for st in ev.stats}
                said = {k: _text(st, stats) for k, st in refs.items()}
                if name.startswith("end: ") and "_c" in refs:  # an asynchronous XLA op's completion
                    ends[_number(refs["_c"])] = start
                if "hlo_op" in said:  # an op XLA compiled: its instruction, in its module
                    scope = scopes.get((said.get("hlo_module"), said["hlo_op"]), said["hlo_op"])
                    if "_p" in refs:
                        flows[len(ops) + len(xla)] = _number(refs["_p"])
                    xla.append((scope, ev.duration_ps, start, thread))
                # an op ('scope/op:Type', or 'Conv2D:_MklNativeConv2D' in a one-op function), not the executor's
                # own bookkeeping ('ExecutorState::Process', 'ExecutorDoneCallback')
                elif line.name.startswith("tf_Compute") and ":" in name and "::" not in name:
                    executor.append((name.rsplit(":", 1)[0], ev.duration_ps, start, thread))
            starts = sorted(start for _, _, start, _ in xla)
            ops += xla + [op for op in executor if not _encloses(op, starts)]
    ops += in_flight(ops, flows, ends)
    t0 = min((start for _, _, start, _ in ops), default=0)
    return [(name, ps * 1e-12, (start - t0) * 1e-12, thread) for name, ps, start, thread in ops]


def _number(stat) -> int:
    """A numeric stat's value (a flow id: '_p' on an op, '_c' on its completion)."""
    return getattr(stat, stat.WhichOneof("value"))


def _text(stat, names: dict[int, str]) -> str:
    """A stat's text: a reference's (to a stat name, as XLA's 'hlo_op' and 'hlo_module' are), else its string."""
    return names.get(stat.ref_value, "") if stat.WhichOneof("value") == "ref_value" else stat.str_value


def _encloses(op: tuple, starts: list[int]) -> bool:
    """Whether an executor event (name, duration, start, thread) holds an XLA op's start on its thread."""
    import bisect

    _, duration, start, _ = op
    k = bisect.bisect_left(starts, start)
    return k < len(starts) and starts[k] < start + duration


def _xla_scopes(space) -> dict[tuple[str, str], str]:
    """(module, instruction) -> op_name for every module XLA compiled in the trace (its '/host:metadata' plane holds
    each as an HloProto): an instruction without metadata (a fusion's) takes its called computation root's."""
    from tensorflow.compiler.xla.service import hlo_pb2

    scopes = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        for meta in plane.event_metadata.values():
            for stat in meta.stats:
                proto = hlo_pb2.HloProto()
                proto.ParseFromString(stat.bytes_value)
                module = proto.hlo_module
                roots = {
                    c.id: next((i.metadata.op_name for i in c.instructions if i.id == c.root_id), "")
                    for c in module.computations
                }
                for c in module.computations:
                    for i in c.instructions:
                        called = [roots[k] for k in i.called_computation_ids if roots.get(k)]
                        if op_name := i.metadata.op_name or (called[0] if called else ""):
                            scopes[(module.name, i.name)] = op_name
    return scopes
