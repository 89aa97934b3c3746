"""Each op of a compiled XLA program, read from the program's text (JAX's `Compiled.as_text()`, which an
implementation's cost brings: parity.api.Counted): the FLOPs of its matrix units' work as the device runs them and
the bytes it moves in the device's main memory. XLA's cost analysis through JAX gives the whole program's totals only
(`Compiled.cost_analysis()`: one 'flops', one 'bytes accessed'); the text gives each op's shapes, their layouts (on a
TPU with the tiles the chip stores them in) and their memory spaces. parity.judging.roofline sums them.

* FLOPs: each convolution's and dot's multiply-adds (2 FLOPs each), wherever they sit (inside a fusion, a loop's
  body times its known trip count). With `tile` > 1 (a TPU's matrix unit, 128 wide) the output features and the
  contraction are counted rounded up to whole tiles, as the unit runs them: a convolution's contraction is its
  window's taps times its input features (XLA packs the taps), a dot's its contracting dimensions. Elementwise work
  and reductions count no FLOPs: they run beside the matrix unit, and their cost is the bytes they move.
* Bytes: every operand and result of an op that is in the device's main memory (on a TPU, not in VMEM or SMEM:
  layouts marked S(1) and up), each as stored (a TPU layout's tiles padded to whole tiles), read or written once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from parity.api import Counted

MATRIX_TILE = {"tpu": 128}  # the matrix unit's width a device's FLOPs are counted in; elsewhere 1
BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8,
    "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5, "s2": 0.25, "u2": 0.25,
}  # fmt: skip
_F8 = re.compile(r"f8e\w+")
_ARRAY = re.compile(r"(\w+)\[([\d,]*)\](?:\{([^}]*)\})?")
_TILE = re.compile(r"T\(([\d,]+)\)")
_SPACE = re.compile(r"S\((\d+)\)")
_NAME = re.compile(r"%?([\w.\-]+)")
# ops that move nothing of their own (an async copy is counted at its start)
NO_WORK = {
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id", "replica-id",
    "opt-barrier", "add-dependency", "domain", "async-update", "get-dimension-size",
}  # fmt: skip
# custom calls that are a library's kernel (their FLOPs unknown here); others move data (a TPU's ConcatBitcast)
_KERNELS = re.compile(r"custom_call_target=\"[^\"]*(onednn|mkl|cublas|cudnn|tpu_custom_call|mosaic|triton|ynn)", re.I)


@dataclass(frozen=True)
class Array:
    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None
    tile: tuple[int, ...]
    space: int

    def bytes(self) -> float:
        """As stored: the minor dimensions rounded up to the layout's first tile."""
        size = BYTES.get(self.dtype, 1 if _F8.fullmatch(self.dtype) else 0)
        dims = list(self.dims)
        if self.tile and self.minor_to_major:
            for t, d in zip(reversed(self.tile), self.minor_to_major, strict=False):
                dims[d] = -(-dims[d] // t) * t
        return size * math.prod(dims)


@lru_cache(maxsize=4096)
def arrays(shape: str) -> tuple[Array, ...]:
    """The arrays of a shape's text (a tuple's each), e.g. 'f32[8,128]{1,0:T(8,128)S(1)}'."""
    out = []
    for dtype, dims, layout in _ARRAY.findall(shape):
        if dtype not in BYTES and not _F8.fullmatch(dtype):
            continue
        order, _, marks = (layout or "").partition(":")
        tile, space = _TILE.search(marks), _SPACE.search(marks)
        m2m = tuple(int(x) for x in order.split(",") if x.strip().isdigit()) or None
        tiles = tuple(int(x) for x in tile.group(1).split(",")) if tile else ()
        out.append(
            Array(dtype, tuple(int(x) for x in dims.split(",") if x), m2m, tiles, int(space.group(1)) if space else 0)
        )
    return tuple(out)


@dataclass
class Instr:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    root: bool = False


@dataclass
class Computation:
    name: str
    instrs: list[Instr] = field(default_factory=list)
    shapes: dict[str, str] = field(default_factory=dict)


def _closing(text: str, start: int) -> int:
    """The index just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] in "({[") - (text[i] in ")}]")
        if depth == 0:
            return i + 1
    return len(text)


def _instr(line: str) -> Instr | None:
    head, eq, rest = line.partition(" = ")
    if not eq:
        return None
    name = head.strip().removeprefix("ROOT ").strip().lstrip("%")
    rest = rest.strip()
    end = _closing(rest, 0) if rest.startswith("(") else rest.find(" ")
    shape, rest = rest[:end], rest[end:].strip()
    paren = rest.find("(")
    if end <= 0 or paren <= 0:
        return None
    opcode = rest[:paren]
    close = _closing(rest, paren)
    inside = rest[paren + 1 : close - 1]
    operands = [m.group(1) for m in re.finditer(r"%([\w.\-]+)", inside)]
    if opcode == "parameter":  # its index
        operands = [inside.strip()]
    elif not operands and opcode not in ("constant", "iota", "rng", "partition-id", "replica-id"):
        operands = [t.strip() for t in inside.split(",") if _NAME.fullmatch(t.strip())]  # names printed without %
    return Instr(name, shape, opcode, operands, rest[close:], head.strip().startswith("ROOT "))


def parse(text: str) -> tuple[dict[str, Computation], str | None]:
    """The program's computations by name, and its entry computation's name."""
    comps: dict[str, Computation] = {}
    entry, cur = None, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if line.endswith("{") and "(" in line and " = " not in line.split("(")[0]:
            is_entry = line.startswith("ENTRY ")
            name = line.removeprefix("ENTRY ").split(" ")[0].split("(")[0].lstrip("%")
            cur = comps.setdefault(name, Computation(name))
            if is_entry:
                entry = name
            continue
        if line == "}":
            cur = None
            continue
        if cur is None:
            continue
        ins = _instr(line)
        if ins:
            cur.instrs.append(ins)
            cur.shapes[ins.name] = ins.shape
    return comps, entry


def _called(attrs: str, key: str) -> list[str]:
    m = re.search(rf"\b(?:{key})=(\{{[^}}]*\}}|%?[\w.\-]+)", attrs)
    if not m:
        return []
    return [n.lstrip("%") for n in re.findall(r"%?[\w.\-]+", m.group(1))]


def _dims(attrs: str, key: str) -> list[int]:
    m = re.search(rf"\b{key}=\{{([\d,]*)\}}", attrs)
    return [int(x) for x in m.group(1).split(",") if x] if m else []


def _up(n: int, tile: int) -> int:
    return -(-n // tile) * tile if tile > 1 else n


def matrix_flops(ins: Instr, shapes: dict[str, str], tile: int = 1) -> float:
    """A convolution's or dot's FLOPs (2 a multiply-add), its output features and contraction rounded up to whole
    tiles of `tile`; 0 for any other op."""
    if ins.opcode not in ("convolution", "dot") or len(ins.operands) < 2:
        return 0.0
    out = arrays(ins.shape)
    lhs, rhs = (arrays(shapes.get(o, "")) for o in ins.operands[:2])
    if not (out and lhs and rhs):
        return 0.0
    o, a, b = out[0].dims, lhs[0].dims, rhs[0].dims
    elems = math.prod(o)
    if ins.opcode == "dot":
        contract = _dims(ins.attrs, "lhs_contracting_dims")
        k = math.prod(a[i] for i in contract)
        rb = set(_dims(ins.attrs, "rhs_batch_dims")) | set(_dims(ins.attrs, "rhs_contracting_dims"))
        n = math.prod(d for i, d in enumerate(b) if i not in rb)
    else:
        labels = re.search(r"dim_labels=(\w+)_(\w+)->(\w+)", ins.attrs)
        if not labels:
            return 0.0
        _, kl, ol = labels.groups()
        # each output's taps: a dilated input (a transposed convolution, or a batch of products written as a window
        # over the batch, as XLA writes a batched dot on a TPU) meets a tap of the window only every dilation'th
        window = re.search(r"window=\{size=([\dx]+)", ins.attrs)
        dilate = re.search(r"lhs_dilate=([\dx]+)", ins.attrs)
        size = [int(x) for x in window.group(1).split("x")] if window else []
        step = [int(x) for x in dilate.group(1).split("x")] if dilate else [1] * len(size)
        taps = math.prod(-(-w // d) for w, d in zip(size, step, strict=False))
        k = taps * (b[kl.index("i")] if "i" in kl and kl.index("i") < len(b) else 1)
        n = o[ol.index("f")] if "f" in ol and ol.index("f") < len(o) else 1
    if not (k and n):
        return 0.0
    m = elems // n  # the matrix unit holds a tile of k x n or of k x m, whichever runs fewer passes
    return 2.0 * _up(k, tile) * min(_up(n, tile) * m, n * _up(m, tile))


def _fused_flops(comps: dict[str, Computation], name: str, tile: int, seen: frozenset = frozenset()) -> float:
    c = comps.get(name)
    if c is None or name in seen:
        return 0.0
    total = sum(matrix_flops(ins, c.shapes, tile) for ins in c.instrs)
    for ins in (i for i in c.instrs if i.opcode in ("fusion", "call")):  # not a reduction's scalar computation
        total += sum(_fused_flops(comps, sub, tile, seen | {name}) for sub in _called(ins.attrs, "calls|to_apply"))
    return total


@lru_cache(maxsize=4096)
def _bytes(shape: str) -> float:
    return sum(a.bytes() for a in arrays(shape) if a.space == 0)


def _trips(attrs: str) -> int | None:
    m = re.search(r"\"known_trip_count\":\{\"n\":\"(\d+)\"", attrs)
    return int(m.group(1)) if m else None


@dataclass
class Ops:
    """One call's ops: [FLOPs as run, bytes] of each op run (a loop's body once a trip), and what is not counted."""

    ops: list[tuple[float, float]] = field(default_factory=list)
    unknown_calls: int = 0  # custom calls (a library's kernel): their bytes are counted, their FLOPs are not
    unknown_loops: int = 0  # loops of no known trip count: their body counted once

    def add(self, other: Ops, times: int) -> None:
        self.ops.extend(other.ops * times)
        self.unknown_calls += other.unknown_calls * times
        self.unknown_loops += other.unknown_loops * times


SLICES = ("dynamic-slice", "slice")  # read a part of their operand
IN_PLACE = "dynamic-update-slice"  # writes a part of its operand 0, in place: the update's bytes


def _moved(comps: dict[str, Computation], c: Computation, ins: Instr) -> float:
    """The bytes op `ins` of computation `c` reads and writes in main memory: its operands and results, but a slice's
    part only, an in-place update's update only (also where a fusion slices an operand or updates one in place)."""
    shapes = [c.shapes.get(o, "") for o in ins.operands]
    if ins.opcode in SLICES:
        return 2 * _bytes(ins.shape) if _bytes(shapes[0]) else _bytes(ins.shape)
    if ins.opcode == IN_PLACE:
        return 2 * _bytes(shapes[1]) if len(shapes) > 1 and _bytes(shapes[0]) else _bytes(ins.shape)
    if ins.opcode.endswith("-start"):  # an asynchronous copy or slice: (destination, source, ...) or ((source), ...)
        parts = arrays(ins.shape)
        dest = parts[1] if ins.shape.startswith("((") and len(parts) > 1 else parts[0]
        read = (dest.bytes() if ins.opcode == "slice-start" else _bytes(shapes[0])) if _bytes(shapes[0]) else 0.0
        return read + (dest.bytes() if dest.space == 0 else 0.0)  # the part read, and written where in main memory
    fused = comps.get(next(iter(_called(ins.attrs, "calls")), "")) if ins.opcode == "fusion" else None
    if fused is None:
        return sum(_bytes(s) for s in shapes) + _bytes(ins.shape)
    params = {i.operands[0]: i.name for i in fused.instrs if i.opcode == "parameter" and i.operands}
    users: dict[str, list[Instr]] = {}
    for i in fused.instrs:
        for o in i.operands:
            users.setdefault(o, []).append(i)
    root = next((i for i in fused.instrs if i.root), None)
    updated = {root.operands[0]} if root and root.opcode == IN_PLACE else set()
    moved = 0.0
    for k, shape in enumerate(shapes):
        if not _bytes(shape):  # not in main memory
            continue
        name = params.get(str(k))
        use = users.get(name, []) if name else []
        if name in updated:
            continue  # the buffer updated in place: neither read nor written whole
        if use and all(u.opcode in SLICES for u in use):
            moved += sum(_bytes(u.shape) for u in use)
        else:
            moved += _bytes(shape)
    written = _bytes(fused.shapes.get(root.operands[1], "")) if updated and len(root.operands) > 1 else None
    return moved + (written if written is not None else _bytes(ins.shape))


def _run(comps: dict[str, Computation], name: str, tile: int, depth: int = 0) -> Ops:
    out, c = Ops(), comps.get(name)
    if c is None or depth > 16:
        return out
    for ins in c.instrs:
        op = ins.opcode
        if op in NO_WORK or op.endswith("-done"):  # an asynchronous op is counted at its start
            continue
        if op == "while":
            trips = _trips(ins.attrs)
            if trips is None:
                out.unknown_loops += 1
            for body in _called(ins.attrs, "body"):
                out.add(_run(comps, body, tile, depth + 1), trips or 1)
            continue
        if op in ("call", "conditional", "async-start"):
            for key in ("to_apply", "calls", "branch_computations", "true_computation", "false_computation"):
                for sub in _called(ins.attrs, key):
                    out.add(_run(comps, sub, tile, depth + 1), 1)
            continue
        moved = _moved(comps, c, ins)
        flops = matrix_flops(ins, c.shapes, tile)
        if op == "fusion":
            flops = sum(_fused_flops(comps, s, tile) for s in _called(ins.attrs, "calls"))
        elif op == "custom-call" and _KERNELS.search(ins.attrs):
            out.unknown_calls += 1
        out.ops.append((flops, moved))
    return out


def program_ops(text: str, tile: int = 1) -> Ops:
    """The ops one call of the compiled program `text` runs, from its entry computation (Ops). tile: the matrix
    unit's width the FLOPs are rounded to (128 on a TPU, 1 elsewhere)."""
    comps, entry = parse(text)
    return _run(comps, entry, tile) if entry else Ops()


def summary(text: str | None, calls: float = 1.0, tile: int = 1) -> dict | None:
    """One timed call's ops of the program `text` (run `calls` times a call) as a row carries them: each distinct
    [FLOPs as run, bytes] once with its count, what was not counted, and the tile; None without a program."""
    if not text:
        return None
    ops = program_ops(text, tile)
    if not ops.ops:
        return None
    counts: dict[tuple[float, float], int] = {}
    for op in ops.ops:
        counts[op] = counts.get(op, 0) + 1
    return {
        "ops": [[f, b, n * calls] for (f, b), n in sorted(counts.items())],
        "unknown_calls": ops.unknown_calls * calls,
        "unknown_loops": ops.unknown_loops,
        "tile": tile,
    }


def ops_of(counted: tuple, device: str) -> dict | None:
    """The ops of the compiled program a cost callable's count brings (a parity.api.Counted; None for a plain pair),
    on `device` (its matrix tile: MATRIX_TILE)."""
    if not isinstance(counted, Counted):
        return None
    try:
        return summary(counted.program, counted.calls, MATRIX_TILE.get(device, 1))
    except (ValueError, IndexError, KeyError) as e:  # a text this reader does not follow costs the figure, not the row
        return {"unreadable": f"{type(e).__name__}: {e}"[:200]}
