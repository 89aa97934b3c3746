"""Profiling for PyTorch: a trace of what runs (torch.profiler), and its ops by the model's layer names (mirror image
of jax_impl.profile and tf_impl.profile).

The models run each layer inside `torch.profiler.record_function(<Keras's layer name>)` (torch_impl.cnn, .lstm), the
trainer its update inside one named 'optimizer'. A forward op takes the innermost such scope around it on its thread;
a backward op (autograd's 'evaluate_function: <Node>' on its own thread) takes its forward op's scope through the
sequence number PyTorch records on both, so it reads '<layer>/gradient/<Node>'."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

TRACE = "torch-trace.json"  # the Chrome trace one `trace` writes (Perfetto and chrome://tracing read it)
_BACKWARD = "autograd::engine::evaluate_function: "


@contextlib.contextmanager
def trace(directory: str):
    """A context manager: what runs inside is traced by torch.profiler (CPU activity, and CUDA where a GPU runs)
    into `directory`/torch-trace.json."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        yield
    Path(directory).mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(Path(directory) / TRACE))


def _events(directory: str) -> list[dict]:
    path = Path(directory) / TRACE
    if not path.exists():
        return []
    return [e for e in json.loads(path.read_text()).get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]


def _outermost(ops: list[dict]) -> list[dict]:
    """The ops no other op of the same thread contains (an aten op calls others: each counted once, at the top)."""
    out, end = [], {}
    for e in sorted(ops, key=lambda e: (e["tid"], e["ts"], -e["dur"])):
        if e["ts"] + e["dur"] <= end.get(e["tid"], -1.0):
            continue
        out.append(e)
        end[e["tid"]] = e["ts"] + e["dur"]
    return out


def _scope(op: dict, marks: list[dict]) -> str:
    """The names of the record_function scopes around `op` on its thread, outermost first ('' for none)."""
    inside = [
        m for m in marks if m["tid"] == op["tid"] and m["ts"] <= op["ts"] and op["ts"] + op["dur"] <= m["ts"] + m["dur"]
    ]
    return "/".join(m["name"] for m in sorted(inside, key=lambda m: (m["ts"], -m["dur"])))


def trace_ops(directory: str, program: str | None = None) -> list[tuple[str, float, float, str]]:
    """The ops of the trace in `directory` as (scope/op name, seconds, start_s, thread), one per outermost op of each
    thread: forward ops under their layer's scope ('conv1/aten::conv2d'), backward ones under their forward op's
    ('conv1/gradient/ConvolutionBackward0'), the update under 'optimizer'; start_s from the trace's first op.
    `program` is unused: PyTorch's trace names the scopes itself."""
    events = _events(directory)
    marks = [e for e in events if e.get("cat") == "user_annotation"]
    every = [e for e in events if e.get("cat") == "cpu_op"]
    ops = _outermost(every)
    forward_scope = {}  # sequence number -> the forward op's scope (an inner op's too: aten::linear's addmm)
    for e in every:
        seq = e.get("args", {}).get("Sequence number")
        if seq is not None and not e["name"].startswith(_BACKWARD):
            forward_scope.setdefault(seq, _scope(e, marks))
    out = []
    for e in ops:
        if e["name"].startswith(_BACKWARD):
            node = e["name"][len(_BACKWARD) :]
            scope = forward_scope.get(e.get("args", {}).get("Sequence number"), "")
            name = f"{scope}/gradient/{node}" if scope else f"gradient/{node}"
        else:
            scope = _scope(e, marks)
            name = f"{scope}/{e['name']}" if scope else e["name"]
        out.append((name, e["dur"] * 1e-6, e["ts"] * 1e-6, f"{e.get('pid')}/{e['tid']}"))
    t0 = min((start for _, _, start, _ in out), default=0.0)
    return [(name, s, start - t0, thread) for name, s, start, thread in out]
