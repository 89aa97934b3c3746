"""What the parent and a worker process say to each other, one JSON line each way: every request and every answer
a declared record that both sides import. A request names its answer's type; `encode` and `decode` are the wire.

A worker's first words (hello) and an untimed call's answer (a workload's own figures) stay mappings: the former
is recorded as it is in the results file (env.frameworks), the latter is the workload's to define.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

# Exceptions that mean this code is wrong, not the input or the machine: an answer's "bug" (the run ends with exit 3
# and the traceback). A framework's own runtime errors (a peer gone, a device refusing) stay one line and exit 2.
PROGRAMMING_ERRORS = (LookupError, TypeError, AttributeError, NameError, ArithmeticError, AssertionError)


@dataclass(frozen=True)
class Offered:
    """The variants of a row kind offered in the worker, as records (parity.api.variants.Variant.wire)."""

    variants: list[dict]


@dataclass(frozen=True)
class Prepared:
    """A row's case built and its first call made (compilation, or a training row's first epoch)."""

    compile_s: float | None
    invalid: str | None
    ahead_s: float | None = None  # of compile_s, the part compiled ahead (Ahead), side by side with other cases


@dataclass(frozen=True)
class Compiled:
    """Cases built, each one's first program compiled ahead (Ahead): its own seconds, side by side with the others,
    or why not (it then compiles at its first call, as without Ahead). A case with nothing to compile ahead is in
    neither."""

    seconds: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Called:
    """One more call of a prepared case: its time (None: invalid from here on) and its verification figures."""

    time: float | None
    invalid: str | None
    last: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """A row's figures, as its worker measured them; the parent makes the Row (parity.engine.assemble.make_row)."""

    invalid: str | None
    compile_s: float | None = None
    ahead_s: float | None = None  # of compile_s, the part compiled ahead (Ahead), side by side with other cases
    median_s: float | None = None
    iqr_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    min_s: float | None = None
    reps: int = 0
    busy_after_s: float | None = None
    times_s: list = field(default_factory=list)
    flops: float | None = None
    flops_unpadded: float | None = None
    flops_formula: str = ""
    min_bytes: float | None = None
    compiler_flops: float | None = None
    compiler_flops_source: str = ""
    program_ops: dict | None = None  # the compiled program's ops a call (parity.judging.roofline.Counted's `ops`)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    peak_memory_bytes: int | None = None
    peak_memory_source: str = ""
    peak_memory_at_least: bool = False  # the figure is a lower bound (the source says why)
    extra: dict = field(default_factory=dict)  # the workload's own figures (images, data, test accuracy, history)


@dataclass(frozen=True)
class Profiled:
    """One more call under the framework's profiler: its ops as (scope, seconds, start_s, thread), or why there is
    no profile."""

    profiled: bool
    ops: list = field(default_factory=list)
    why: str | None = None
    call_s: float | None = None  # the profiled call's own time, as a timed call's is taken (the profiler's overhead in)


@dataclass(frozen=True)
class Request:
    """A request: its command on the wire (`cmd`) and the type of its answer (`answer`; None: a mapping), given in its
    class's header (`class Rep(CaseRequest, cmd="rep", answer=Called)`)."""

    cmd: ClassVar[str]
    answer: ClassVar[type | None]

    def __init_subclass__(cls, cmd: str | None = None, answer: type | None = None, **kw) -> None:
        super().__init_subclass__(**kw)
        if cmd is not None:
            cls.cmd, cls.answer = cmd, answer


@dataclass(frozen=True)
class CaseRequest(Request):
    """A request about case `id`, which a Prepare built."""

    id: str


@dataclass(frozen=True)
class AskVariants(Request, cmd="variants", answer=Offered):
    kind: str


@dataclass(frozen=True)
class Prepare(Request, cmd="prepare", answer=Prepared):
    """Build case `id` of row kind `kind` for `variant` on `spec` (the spec's fields); `save`: where its oracle rows
    go for the cross-framework check; `extra`: what its workload's parent side adds (data, weights, validate)."""

    id: str
    kind: str
    variant: str
    spec: dict
    save: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Ahead(Request, cmd="ahead", answer=Compiled):
    """Build each case (`cases`: Prepare's fields) without calling it, then compile what each first call will run,
    all at once on threads of this process (parity.engine.ahead); each case's Prepare then makes its first call.
    With `wait` False the answer comes once the cases are built (its `failed`: those refused), the compiling going on
    in the background until an AheadDone: only a workload's named calls (Call: its parity round) run beside it, every
    other request waits for it first."""

    cases: list
    wait: bool = True


@dataclass(frozen=True)
class AheadDone(Request, cmd="ahead_done", answer=Compiled):
    """The compiling an Ahead(wait=False) left in the background, waited for: its seconds and failures."""


@dataclass(frozen=True)
class Warm(CaseRequest, cmd="warm", answer=Called):
    """An untimed call of case `id` (what a user's loop makes between two timed ones)."""


@dataclass(frozen=True)
class Rep(CaseRequest, cmd="rep", answer=Called):
    """A timed call of case `id`."""


@dataclass(frozen=True)
class GetResult(CaseRequest, cmd="result", answer=Result):
    """Case `id`'s figures; with `keep`, the case stays for a Profile after it (which releases it)."""

    keep: bool = False


@dataclass(frozen=True)
class Profile(CaseRequest, cmd="profile", answer=Profiled):
    dir: str


@dataclass(frozen=True)
class Call(Request, cmd="call", answer=None):
    """An untimed call a workload's parent side makes: its `workload`'s calls[fn](impl, devices, args); its answer a
    mapping, the workload's own."""

    workload: str
    fn: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Quit(Request, cmd="quit", answer=None):
    """The worker's last request: it answers nothing and exits."""


REQUESTS: dict[str, type[Request]] = {
    c.cmd: c for c in (AskVariants, Prepare, Ahead, AheadDone, Warm, Rep, GetResult, Profile, Call, Quit)
}


class ProtocolError(ValueError):
    """A line that is no request (an unknown command, a missing or unknown field)."""


def encode(msg: Request | Any) -> str:
    """A request or an answer as its JSON line (a request carries its 'cmd')."""
    body = asdict(msg) if hasattr(msg, "__dataclass_fields__") else msg
    return json.dumps({"cmd": msg.cmd, **body} if isinstance(msg, Request) else body)


def decode_request(line: str | dict) -> Request:
    """A request from its line. Raises ProtocolError."""
    d = json.loads(line) if isinstance(line, str) else dict(line)
    if not isinstance(d, dict):
        raise ProtocolError(f"not a request: {line!r}")
    cls = REQUESTS.get(d.pop("cmd", None))
    if cls is None:
        raise ProtocolError(f"unknown command in {line!r}")
    names = {f.name for f in fields(cls)}
    if set(d) - names:
        raise ProtocolError(f"{cls.cmd}: unknown fields {sorted(set(d) - names)}")
    try:
        return cls(**d)
    except TypeError as e:
        raise ProtocolError(f"{cls.cmd}: {e}") from None


def decode_answer(req: Request, d: dict) -> Any:
    """The answer to `req` as its declared record (a mapping where the request declares none)."""
    return d if req.answer is None else req.answer(**d)
