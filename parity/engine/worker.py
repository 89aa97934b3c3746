"""One framework on one device set, in its own process, driven by the parent over JSON lines.

`python -m parity.engine.worker --framework jax --device cpu --replicas 8 --precision default`
says hello ({"status": "ready" | "missing" | "not offered" | "unavailable", ...}) on its original stdout (the
framework's own chatter goes to stderr), then answers each request of parity.common.protocol with the record it
names, or with {"error", "traceback", "bug"}, until Quit or the end of stdin. A row kind or workload is one of
parity.workloads.WORKLOADS; this module knows no workload by name.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import traceback
from concurrent.futures import ThreadPoolExecutor

from parity.api import DeviceNotOffered, DeviceUnavailable
from parity.api.cluster import Cluster
from parity.api.variants import lookup
from parity.common import frameworks, protocol
from parity.common.threads import side_by_side
from parity.engine import memory
from parity.engine.devicelock import DEVICE_LOCK, DEVICE_LOCK_WAIT, own_device
from parity.engine.environment import env_flags
from parity.engine.timing import Timer
from parity.judging import roofline
from parity.judging.program import ops_of
from parity.workloads import WORKLOADS, row_kind

PROGRAMMING_ERRORS = protocol.PROGRAMMING_ERRORS


def versions(framework: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in frameworks.TABLE[framework].distributions:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def serve(args, out) -> None:
    """Say hello (or why not), then answer the parent's requests until 'quit' or the end of stdin."""

    def say(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    lock = os.environ.get(DEVICE_LOCK)  # the harness's (parity.engine.workerproc drops a user's)
    waits = os.environ.get(DEVICE_LOCK_WAIT) == "1"  # a next owner started early: its imports first, then the lock
    if lock and not waits and not _took(lock, args, say):  # before the framework touches the device
        return
    try:
        impl = frameworks.load(args.framework)
    except ImportError as e:
        say({"status": "missing", "error": f"{args.framework} is not installed for {sys.executable} ({e})"})
        return
    if lock and waits and not _took(lock, args, say, wait=True):
        return
    try:
        cluster = Cluster.from_json(args.cluster) if args.cluster else None
        devices = impl.setup_devices(args.device, 0 if cluster else args.replicas, cluster)
    except DeviceNotOffered as e:
        say({"status": "not offered", "error": str(e)})
        return
    except DeviceUnavailable as e:
        say({"status": "unavailable", "error": str(e)})
        return
    impl.set_precision(args.precision)
    args.memory = memory.source_for(impl, devices, args.device)  # where rows' peak memory is read (or None)
    args.compiling = None  # an Ahead(wait=False)'s compiling in the background, then its answer (_compiled)
    say(hello(impl, devices, args))
    timers: dict[str, tuple[Timer, dict, object]] = {}
    for line in sys.stdin:
        try:
            req = protocol.decode_request(line)
        except (ValueError, TypeError) as e:  # not a request: answered, and the worker goes on
            say({"error": f"{type(e).__name__}: {e}", "bug": False})
            continue
        if isinstance(req, protocol.Quit):
            return
        answer = respond(impl, devices, args, timers, req)
        say(answer if isinstance(answer, dict) else json.loads(protocol.encode(answer)))


def _took(lock: str, args, say, wait: bool = False) -> bool:
    """The device's lock taken (devicelock.own_device), else why not said as this worker's first words."""
    try:
        holder = own_device(lock, wait)
    except OSError as e:  # one line, as every refusal: not a traceback
        say({"status": "unavailable", "error": f"the {args.device} device's lock {lock}: {e.strerror or e}"})
        return False
    if holder is not None:
        error = f"the {args.device} device is already in use by process {holder} (lock {lock}): one owner at a time"
        say({"status": "unavailable", "error": error})
    return holder is None


def hello(impl, devices, args) -> dict:
    """A ready worker's first words: its devices, its tuned configurations, its versions and settings."""
    bf16 = roofline.native_bf16(args.device, impl.device_kind())  # under this process's ISA settings
    return {
        "status": "ready",
        "native_bf16": bf16,
        "settings": [s.wire() for s in impl.settings(args.device, bf16)],  # those that make a difference here
        "replicas": len(devices),
        **impl.process_info(devices),
        "device_kind": impl.device_kind(),
        "devices": impl.list_devices(),
        "check_compiler": impl.check_compiler(devices)[1],  # how its parity programs compile ('' as the timed ones)
        "versions": versions(args.framework),
        "python": platform.python_version(),
        "executable": sys.executable,
        # what this process really ran with (the harness and setup_devices add settings of their own)
        "env_flags": env_flags([args.framework]),
    }


def respond(impl, devices, args, timers: dict, req: protocol.Request):
    """One request's answer (its declared record), or the error it raised as a mapping (a bug's with its
    traceback)."""
    try:
        if not isinstance(req, (protocol.Call, protocol.AheadDone)):
            _compiled(args, timers)  # nothing but a parity round's calls beside the background compiling
        return _HANDLERS[type(req)](impl, devices, args, timers, req)
    except Exception as e:
        return {
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(),
            "bug": isinstance(e, PROGRAMMING_ERRORS),
        }


def _variants(impl, devices, args, timers: dict, req: protocol.AskVariants) -> protocol.Offered:
    """Every variant of a row kind offered here, as records (the parent chooses: parity.engine.selection)."""
    return protocol.Offered([v.wire() for v in impl.variants(req.kind, len(devices))])


def _call(impl, devices, args, timers: dict, req: protocol.Warm | protocol.Rep) -> protocol.Called:
    """One call of a prepared case, untimed (Warm) or timed (Rep)."""
    timer = timers[req.id][0]
    try:
        t = timer.rep() if isinstance(req, protocol.Rep) else timer.warm()
    except PROGRAMMING_ERRORS:
        raise
    except Exception as e:  # as in _prepare, at a later call: the row is INVALID from here on
        timer.m.invalid = f"{type(e).__name__}: {_one_line(e)}"
        t = None
    return protocol.Called(t, timer.m.invalid, timer.m.last)


def _result(impl, devices, args, timers: dict, req: protocol.GetResult) -> protocol.Result:
    """A case's figures; with `keep`, the case stays for a Profile after it (which releases it)."""
    timer, info, finish = timers[req.id] if req.keep else timers.pop(req.id)
    m = timer.m
    done = finish() if m.invalid is None else {}
    figures = {k: info.pop(k) for k in RESULT_FIGURES if k in info}
    return protocol.Result(
        invalid=m.invalid,
        compile_s=m.compile_s,
        ahead_s=timer.ahead_s or None,
        **m.stats(),
        **m.errors,
        **figures,
        times_s=list(m.times),
        **memory.figures(timer.memory, args.memory, info.pop("output_bytes", None), timer.ahead_s > 0),
        extra={**info, **done},  # the workload's own figures
    )


RESULT_FIGURES = ("flops", "flops_unpadded", "flops_formula", "min_bytes", "compiler_flops", "compiler_flops_source")
RESULT_FIGURES += ("program_ops",)  # the compiled program's ops (parity.judging.program), judged into attainable_s


def _profile(impl, devices, args, timers: dict, req: protocol.Profile) -> protocol.Profiled:
    """One more call, after the row's result, under the framework's profiler. A traced call before it is thrown
    away: the first call a profiler traces pays a start-up of its own (TF's float32 `fit` of the row LSTM ran several
    times its median so; docs/layers.md, "The profiler's first call, thrown away", gives the figures)."""
    timer = timers.pop(req.id)[0]
    if timer.m.invalid is not None:
        return protocol.Profiled(False)
    try:
        with tempfile.TemporaryDirectory() as first, impl.trace(first):
            timer.untimed()
        with impl.trace(req.dir):
            call_s = timer.untimed()
        program = timer.program() if timer.program else None
        if program:  # beside the trace: what maps its op names to the layers, for a later reading
            with open(os.path.join(req.dir, "program.hlo.txt"), "w") as f:
                f.write(program)
        return protocol.Profiled(True, impl.trace_ops(req.dir, program), call_s=call_s)
    except PROGRAMMING_ERRORS:
        raise
    except Exception as e:  # a profiler that fails costs the row its profile, never the run
        return protocol.Profiled(False, why=f"{type(e).__name__}: {_one_line(e)}")


def _named_call(impl, devices, args, timers: dict, req: protocol.Call) -> dict:
    """An untimed request a workload's parent side makes by name."""
    return WORKLOADS[req.workload].calls[req.fn](impl, devices, req.args)


def _build(impl, devices, args, timers: dict, req: protocol.Prepare):
    """Build a row's case (its Timed, timed by a Timer) into `timers`; returns its `ahead` (None: it has none)."""
    workload, rkind = row_kind(req.kind)
    spec = type(workload.full)(**req.spec)
    n = len(devices)
    variant = lookup(impl.variants(rkind.name, n), rkind.name, req.variant, n, args.framework)
    timed = rkind.case(impl, devices, rkind, spec, variant, args.device, args.precision, req.save, **req.extra)
    timers[req.id] = (Timer(timed.run, impl.block, timed.verify, impl.slowest), timed.info, timed.finish)
    return timed.ahead


def _ahead(impl, devices, args, timers: dict, req: protocol.Ahead) -> protocol.Compiled:
    """Build each case without calling it, then compile each one's first program, side by side
    (parity.engine.ahead); its Prepare makes the first call. A case refused here is built again by its Prepare.
    With req.wait False the compiling goes on in the background (args.compiling) until AheadDone."""
    jobs, refused = {}, {}
    for d in req.cases:
        p = protocol.Prepare(**d)
        try:
            jobs[p.id] = _build(impl, devices, args, timers, p)
        except PROGRAMMING_ERRORS:
            raise
        except Exception as e:
            refused[p.id] = f"{type(e).__name__}: {_one_line(e, 200)}"
    jobs = {k: j for k, j in jobs.items() if j}
    if not req.wait:
        pool = ThreadPoolExecutor(1)
        args.compiling = (pool.submit(side_by_side, jobs, PROGRAMMING_ERRORS), refused)
        pool.shutdown(wait=False)  # the job runs on
        return protocol.Compiled({}, refused)
    seconds, failed = side_by_side(jobs, PROGRAMMING_ERRORS)
    for k, s in seconds.items():
        timers[k][0].ahead_s = s
    return protocol.Compiled(seconds, {**refused, **failed})


def _ahead_done(impl, devices, args, timers: dict, req: protocol.AheadDone) -> protocol.Compiled:
    """The background compiling of an Ahead(wait=False), waited for (none: nothing was left compiling)."""
    done, args.compiling = _compiled(args, timers), None
    return done or protocol.Compiled()


def _compiled(args, timers: dict) -> protocol.Compiled | None:
    """Wait for the background compiling (args.compiling: its future and the cases refused), each case's seconds
    into its timer; kept as its answer, for AheadDone."""
    if isinstance(args.compiling, tuple):
        pending = args.compiling
        seconds, failed = pending[0].result()  # a programming error in a job is raised here
        for k, s in seconds.items():
            timers[k][0].ahead_s = s
        args.compiling = protocol.Compiled(seconds, {**pending[1], **failed})
    return args.compiling


def _prepare(impl, devices, args, timers: dict, req: protocol.Prepare) -> protocol.Prepared:
    """Make a row's first call, its case built first unless Ahead built it; the compiler's FLOP count after."""
    mem = memory.RowMemory(args.memory) if args.memory else None
    try:
        if req.id not in timers:
            _build(impl, devices, args, timers, req)
        timer, info, _ = timers[req.id]
        if mem:
            mem.built()
        timer.memory = mem
        compile_s = timer.first()
        if mem:
            mem.settled()
    except PROGRAMMING_ERRORS:
        raise
    except Exception as e:  # the framework refused this variant (Keras's fit under TPUStrategy, keras#19448):
        return _refused(timers, req.id, e)  # an INVALID row with the reason; the other variants still run
    cost = info.pop("cost")
    timer.program = info.pop("program", None)  # the compiled program's text, for a profile's op names
    # after the first call: the compiler's own FLOP count, to cross-check the formula
    counted = cost() if compile_s is not None else (None, "")
    info["compiler_flops"], info["compiler_flops_source"] = counted
    info["program_ops"] = ops_of(counted, args.device)  # its compiled program's ops, where the count brings it
    return protocol.Prepared(compile_s, timer.m.invalid, timer.ahead_s or None)


_HANDLERS = {
    protocol.AskVariants: _variants,
    protocol.Prepare: _prepare,
    protocol.Ahead: _ahead,
    protocol.AheadDone: _ahead_done,
    protocol.Warm: _call,
    protocol.Rep: _call,
    protocol.GetResult: _result,
    protocol.Profile: _profile,
    protocol.Call: _named_call,
}


def _one_line(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _refused(timers: dict, key: str, e: Exception) -> protocol.Prepared:
    """A variant the framework failed to build or run: kept as a timer that is invalid from the start, so the
    harness's later requests for it get answers (no times, the reason) like any other invalid row."""
    timer = Timer(lambda: None, lambda out: None, lambda out: {})
    timer.m.invalid = f"the framework failed: {type(e).__name__}: {_one_line(e)}"
    timers[key] = (
        timer,
        {
            "flops": None,
            "flops_unpadded": None,
            "flops_formula": "",
            "min_bytes": None,
            "compiler_flops": None,
            "compiler_flops_source": "",
        },
        dict,
    )
    return protocol.Prepared(None, timer.m.invalid)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--framework", choices=sorted(frameworks.KEYS), required=True)
    ap.add_argument("--device", choices=("cpu", "gpu", "tpu"), required=True)
    ap.add_argument("--replicas", type=int, default=1, help="0: every core of the device")
    ap.add_argument("--precision", choices=("default", "highest"), default="default")
    ap.add_argument(
        "--cluster", help="JSON of parity.api.cluster.Cluster: join a multi-process run (--replicas ignored)"
    )
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # keep the frameworks' prints off the answer channel
    print(f"worker {args.framework} {args.device} x{args.replicas} on {platform.node()}", file=sys.stderr)
    serve(args, out)
    out.close()
    if args.cluster is None:  # gone without the interpreter's teardown (TensorFlow's is slow, and on every round's
        sys.stdout.flush()  # path); a process of a multi-process run exits in full, so that its runtime leaves in step
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
