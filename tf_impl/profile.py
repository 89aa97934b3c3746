"""Profiling for TensorFlow: a trace of what runs, and its ops by Keras's layer name scopes (mirror image of
jax_impl.profile)."""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


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
    ('gradient_tape/.../conv2_1/convolution/Conv2DBackpropInput'); start_s from the trace's first op, thread the
    profiler's line it ran on. Ops run at once on the inter-op threads are each an event: their seconds can add up
    to more than the call's wall time (parity.judging.layers splits each instant among the threads instead)."""
    from pathlib import Path

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(Path(directory).rglob("*.xplane.pb"))
    if not files:
        return []
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[-1].read_bytes())
    ops = []  # (name, duration ps, start ps, thread)
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            thread = f"{plane.name}/{line.name}"
            for ev in line.events:
                name = names.get(ev.metadata_id, "")
                # an op ('scope/op:Type', or 'Conv2D:_MklNativeConv2D' in a one-op function), not the executor's
                # own bookkeeping ('ExecutorState::Process', 'ExecutorDoneCallback')
                if ":" in name and "::" not in name:
                    ops.append(
                        (name.rsplit(":", 1)[0], ev.duration_ps, line.timestamp_ns * 1000 + ev.offset_ps, thread)
                    )
    t0 = min((start for _, _, start, _ in ops), default=0)
    return [(name, ps * 1e-12, (start - t0) * 1e-12, thread) for name, ps, start, thread in ops]
