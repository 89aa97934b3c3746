"""Profiling for JAX: a trace of what runs, and its XLA ops mapped back to the code's named scopes through the
compiled program's HLO (mirror image of tf_impl.profile)."""

from __future__ import annotations

import re

import jax

from parity.api.traces import in_flight


def trace(directory: str):
    """A context manager: what runs inside is traced by JAX's profiler into `directory` (an XSpace `.xplane.pb`
    for TensorBoard's profile plugin or xprof, and a `.trace.json.gz` for Perfetto)."""
    return jax.profiler.trace(directory, create_perfetto_trace=True)


_HLO_HEADER = re.compile(r"^\s*(?:ENTRY\s+)?%([\w.\-]+)\s*\(.*\{\s*$")  # a computation's first line
_HLO_INST = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CALLS = re.compile(r"calls=%([\w.\-]+)")


_NAME_REF = re.compile(r"%([\w.\-]+)")
_LEAF = re.compile(r"=\s*\S+\s+(?:constant|parameter)\(")
_BACKWARD = re.compile(r"transpose\(jvp\((\w+)\)\)")  # JAX's scope for a named scope's backward pass


def hlo_scopes(program: str) -> dict[str, str]:
    """Each HLO instruction's op_name metadata (its named scopes) from a compiled program's text. An instruction
    without metadata (XLA's fusions, 'wrapped_*' ops) takes that of the computation it calls: its root's, else
    its first instruction's that has one. What is still without one then is inferred from the dataflow
    (_backward_by_dataflow)."""
    own, comp_scope, calls, comp, graph = {}, {}, {}, None, {}
    for line in program.splitlines():
        if (h := _HLO_HEADER.match(line)) and " = " not in line.split("(", 1)[0]:
            comp = h.group(1)
            continue
        if not (m := _HLO_INST.match(line)):
            continue
        name, op = m.group(2), _OP_NAME.search(line)
        if not _LEAF.search(line):  # constants and parameters join nothing: shared, they would bridge every group
            graph.setdefault(comp, {})[name] = _NAME_REF.findall(line.split("=", 1)[1])
        if op:
            own[name] = op.group(1)
            if m.group(1) or comp not in comp_scope:  # the root's wins
                comp_scope[comp] = op.group(1)
        if c := _CALLS.search(line):
            calls[name] = c.group(1)
    scopes = {**{n: comp_scope[c] for n, c in calls.items() if c in comp_scope}, **own}
    for instructions in graph.values():
        scopes.update(_backward_by_dataflow(instructions, scopes))
    return scopes


def _backward_by_dataflow(instructions: dict[str, list[str]], scopes: dict[str, str]) -> dict[str, str]:
    """Scopes for one computation's instructions that XLA's rewrites left without metadata: YNNPACK's
    weight-gradient convolutions, the max-pool gradient's reduce-window and its iotas. Such instructions, taken
    with their neighbours (operands and users) that have no scope either, form groups; a group whose scoped
    neighbours include the backward pass of exactly one layer ('transpose(jvp(conv3))') takes that backward scope:
    a weight gradient reads its layer's output gradient, a pooling gradient's indices feed its layer's scatter.
    Every other group keeps no scope ('other'): none is guessed from shapes or names."""
    near = {n: set() for n in instructions}
    for n, refs in instructions.items():
        for r in refs:
            if r in near and r != n:  # an instruction of this computation (not a called computation's name)
                near[n].add(r)
                near[r].add(n)
    found, seen = {}, set()
    for start in instructions:
        if start in scopes or start in seen:
            continue
        group, frontier, stack = [], set(), [start]
        seen.add(start)
        while stack:
            group.append(n := stack.pop())
            for m in near[n]:
                if m in scopes:
                    frontier.add(scopes[m])
                elif m not in seen:
                    seen.add(m)
                    stack.append(m)
        backward = {b[-1]: s for s in sorted(frontier) if (b := _BACKWARD.findall(s))}
        if len(backward) == 1:
            found.update(dict.fromkeys(group, next(iter(backward.values()))))
    return found


_KERNEL_NAME = re.compile(r"[.\-]")  # XLA:GPU names a fusion's kernel after it, '.' and '-' made '_'
_ANNOTATED_OP = re.compile(r"hlo_op=([\w.\-]+)")


def _hlo_op(stats: dict) -> str | None:
    """The HLO instruction an event ran: XLA:CPU's events carry it as the stat 'hlo_op'; a GPU kernel's (CUPTI's)
    carry the launch's annotation, 'fusion.3:#hlo_op=fusion.3,hlo_module=jit_step,program_id=7#'."""
    if "hlo_op" in stats:
        return str(stats["hlo_op"])
    m = _ANNOTATED_OP.search(str(stats.get("annotation", "")))
    return m.group(1) if m else None


_TPU_OP = re.compile(r"^%([\w.\-]+) = ")  # a TPU's op event is named by its instruction's text


def event_op(line: str, name: str, stats: dict) -> str | None:
    """The HLO instruction an event of the profiler's line `line` ran, if it ran one. A TPU's device plane names
    each op on its line 'XLA Ops' by the instruction's text ('%fusion.3 = (f32[64]{0}) fusion(...)', no stat), and
    shows on 'Async XLA Ops' each asynchronous copy from its start to its completion, beside the ops it overlaps:
    those spans are left out, the XLA Ops line holds the time. Elsewhere the stats name it (_hlo_op)."""
    if line == "Async XLA Ops":
        return None
    if line == "XLA Ops" and (m := _TPU_OP.match(name)):
        return m.group(1)
    return _hlo_op(stats)


def _scope(op: str, scopes: dict[str, str]) -> str:
    """The named scopes of the op an event ran (the op's name where its program has none). XLA:CPU names a library
    call's event after its instruction and the call's target: 'custom-call.10.clone__onednn$convolution' ran
    '%custom-call.10.clone'."""
    return scopes[op] if op in scopes else scopes.get(op.partition("__")[0], op)


def trace_ops(directory: str, program: str | None = None) -> list[tuple[str, float, float, str]]:
    """The XLA ops of the trace in `directory` as (scope, seconds, start_s, thread), one per event: start_s from
    the trace's first op, thread the profiler's line it ran on. XLA:CPU's trace names each op by its HLO
    instruction ('fusion.12', 'convolution.3'); `program` (the compiled HLO's text) maps each to its metadata
    op_name, which holds the named scopes ('jit(_train_step)/transpose(jvp(conv2))/conv_general_dilated'). An op
    run piecewise on several threads is an event on each: their seconds can add up to more than the call's wall
    time (parity.judging.layers splits each instant among the threads instead). Where a device plane
    ('/device:GPU:0', '/device:TPU:0') holds ops, only its ops count (event_op): the host's events for the same
    ops are launches. A kernel run inside a command buffer (a CUDA graph) is annotated with the buffer, not its op:
    its kernel name, which XLA:GPU derives from the fusion's ('loop_add_fusion.17' -> 'loop_add_fusion_17'), maps
    it. An op XLA:CPU runs asynchronously (a oneDNN convolution under '+onednn') is an event that ends when it is
    handed over, and its completion is an event of its own ('end: <op>', linked by the flow id the two share): the
    instants between when no op's event ran are the op's too (in_flight)."""
    from pathlib import Path

    from jax.profiler import ProfileData

    files = sorted(Path(directory).rglob("*.xplane.pb"))
    if not files:
        return []
    scopes = hlo_scopes(program or "")
    kernels = {_KERNEL_NAME.sub("_", name): scope for name, scope in scopes.items()}
    host, device = [], []  # (scope, duration ns, start ns, thread)
    flows, ends = {}, {}  # a host op's index -> its flow id; a flow id -> its completion's time (ns)
    for plane in ProfileData.from_file(str(files[-1])).planes:
        ops = device if plane.name.startswith("/device:") else host
        for line in plane.lines:
            thread = f"{plane.name}/{line.name}"
            for ev in line.events:
                stats = dict(ev.stats)
                if ev.name.startswith("end: ") and "_c" in stats:
                    ends[stats["_c"]] = ev.start_ns
                if not (op := event_op(line.name, ev.name, stats)):
                    continue
                if op.startswith("command_buffer"):  # a CUDA graph's kernel: its own name is its fusion's
                    scope = kernels.get(ev.name, op)
                else:
                    scope = _scope(op, scopes)
                if ops is host and "_p" in stats:
                    flows[len(host)] = stats["_p"]
                ops.append((scope, ev.duration_ns, ev.start_ns, thread))
    ops = device or host + in_flight(host, flows, ends)
    t0 = min((start for _, _, start, _ in ops), default=0)
    return [(scope, ns * 1e-9, (start - t0) * 1e-9, thread) for scope, ns, start, thread in ops]
