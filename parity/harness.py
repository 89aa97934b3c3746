"""The parent side: start one worker process per framework, interleave their timed calls, gather rows."""

from __future__ import annotations

import importlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity import roofline
from parity.cluster import Cluster
from parity.oracle import errors
from parity.workloads import WORKLOADS, RowKind

ROOT = Path(__file__).resolve().parent.parent  # the checkout: parity/, tf_impl/, jax_impl/
FRAMEWORKS = ("tf", "jax")
FRAMEWORK_NAMES = {"tf": "TensorFlow", "jax": "JAX"}


# What a worker's last words mean, where the framework's own are obscure.
DEATH_HINTS = (
    (("RegisterTask", "DEADLINE_EXCEEDED"), ": it could not reach the JAX coordinator in time"),
    (("distributed service detected fatal errors",), ": another process of the run stopped"),
    (("Failed to add port to server",), ": a port it needs is already taken"),
    (("Timeout (", "_initialize_multi_worker"), ": it could not reach the other TensorFlow workers in time"),
    (("TPU is already in use",), ": another process owns the TPU (libtpu allows one per host; docs/tpu.md)"),
)


class HarnessError(RuntimeError):
    """A run that cannot go on; the message is the one line the user sees."""


class WorkerBug(RuntimeError):
    """An unexpected exception inside a worker (a bug, not a bad input): the run stops with its traceback."""

    def __init__(self, message: str, traceback: str):
        super().__init__(message)
        self.traceback = traceback


@dataclass
class Config:
    device: str = "cpu"
    frameworks: tuple[str, ...] = FRAMEWORKS
    workloads: tuple[str, ...] = ("conv",)
    replicas: tuple[int, ...] = ()
    precision: str = "default"
    quick: bool = False
    reps: int = 5  # the minimum; calibrated_reps() adds calls until min_time_s of timed work
    min_time_s: float = 5.0
    max_reps: int = 200
    tuned: bool = True  # also run each implementation's tuned configurations, as rows of their own
    extra_configs: dict = field(default_factory=dict)  # framework -> {name: env}: more configurations to try
    warmup: int = 1
    timeout_s: float = 1800.0
    progress: bool = True
    data: str = "auto"
    data_dir: str | None = None
    validate: str = "auto"  # a trained workload's evaluation: 'epoch', 'end', 'none', or 'auto' (its suite decides)
    overrides: dict = field(default_factory=dict)  # spec fields from the command line (global_batch, epochs, ...)
    parity_steps: int = 20
    seeds: int = 1  # CNN training runs per variant (init, dropout and batch order seeded differently)
    cluster: Cluster | None = None  # one process of a multi-process run (parity.cluster); None: the only one
    command: tuple[str, ...] = ("python", "-m", "parity.run")  # how this run was started, for advice to rerun
    exclusive: bool = False  # one owner of the device at a time (a TPU host: libtpu takes one process)
    pythons: dict = field(default_factory=dict)  # framework -> the interpreter its workers run in (default: this one)

    def spec(self, wl: str):
        """The workload's spec for this run: --quick, the device's default schedule, then overrides."""
        return WORKLOADS[wl].spec(self.quick, self.device, self.overrides)

    def replica_counts(self) -> tuple[int, ...]:
        """What was asked, else 1 and 8 simulated devices on a CPU, else every core (0).

        A multi-process run has one: every process's devices (0)."""
        if self.cluster is not None:
            return (0,)
        if self.replicas:
            return self.replicas
        return (1, 8) if self.device == "cpu" else (0,)


def log(cfg: Config, msg: str) -> None:
    if cfg.progress:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def warn(cfg: Config, lines: list[str]) -> None:
    """A boxed warning on stderr, --quiet or not, about what the run measures (process 0 only)."""
    if cfg.cluster is not None and cfg.cluster.process_id:
        return
    bar = "=" * max(len(ln) for ln in lines)
    print("\n".join([bar, *lines, bar]), file=sys.stderr, flush=True)


class Worker:
    """A `parity.worker` process for one framework on one device set."""

    def __init__(self, framework: str, device: str, replicas: int, precision: str, timeout_s: float,
                 config: str = "default", config_env: dict | None = None, cluster: Cluster | None = None,
                 tmp_dir: Path | None = None, python: str | None = None, lock: Path | None = None):  # fmt: skip
        self.framework, self.timeout_s, self.config = framework, timeout_s, config
        self.python = python or sys.executable
        self.config_env = config_env or {}
        self.label = FRAMEWORK_NAMES[framework] + ("" if config == "default" else f" ({config})")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        for k, v in self.config_env.items():  # appended to the user's own flags, never replacing them
            env[k] = f"{env[k]} {v}".strip() if k == "XLA_FLAGS" and k in env else v
        # Both workers live at once: neither may grab the whole accelerator's memory up front.
        if tmp_dir is not None:  # what the frameworks write (autograph's generated files) goes with the run's files
            env["TMPDIR"] = str(tmp_dir)
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        self.env = env  # what the worker runs with
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"parity-{framework}-", suffix=".log")
        if lock is not None:  # one owner at a time, enforced as libtpu does (parity.worker._own_device)
            env["PARITY_DEVICE_LOCK"] = str(lock)
        if python:  # another environment's interpreter: it finds this checkout's parity and the implementations
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        cmd = [
            self.python,
            "-m",
            "parity.worker",
            "--framework",
            framework,
            "--device",
            device,
            "--replicas",
            str(replicas),
            "--precision",
            precision,
        ]
        if cluster is not None:
            cmd += ["--cluster", cluster.to_json()]
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env
            )
        except OSError as e:  # checked before the run; gone since, or not executable
            self.log.close()
            raise HarnessError(f"{self.label}: cannot start {self.python} ({e.strerror or e})") from None
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr_tail(self, n: int = 15) -> str:
        """The last lines the worker wrote, without C++ stack-trace frames."""
        self.log.flush()
        self.log.seek(0)
        lines = [ln for ln in self.log.read().splitlines()
                 if ln.strip() and not ln.lstrip().startswith(("@ ", "*** Check failure"))]  # fmt: skip
        return "\n".join(lines[-n:])

    def recv(self, timeout_s: float | None = None) -> dict:
        try:
            line = self.lines.get(timeout=timeout_s or self.timeout_s)
        except queue.Empty:
            self.close()
            raise HarnessError(
                f"{self.label} worker gave no answer in "
                f"{timeout_s or self.timeout_s:.0f} s; stopped it"
            ) from None
        if line is None:
            raise self._died()
        return json.loads(line)

    def _died(self) -> HarnessError:
        """Which worker died and how: its exit code or the signal that killed it, and its last words."""
        self.proc.wait()
        rc = self.proc.returncode
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals() else f"exit code {rc}"
        tail = self.stderr_tail()
        why = next((hint for marks, hint in DEATH_HINTS if all(m in tail for m in marks)), "")
        if why:  # the framework's own words, shortened
            tail = "\n".join(tail.splitlines()[:4])
        return HarnessError(f"{self.label} worker died ({how}){why}" + (f":\n{tail}" if tail else ""))

    def send(self, **msg) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ConnectionResetError):  # it is gone: say which and how, not "Broken pipe"
            raise self._died() from None

    def answer(self) -> dict:
        resp = self.recv()
        if "error" in resp:
            if resp.get("bug"):
                raise WorkerBug(f"{self.label} worker: {resp['error']}", resp.get("traceback", ""))
            raise HarnessError(f"{self.label} worker: {resp['error']}")
        return resp

    def ask(self, **msg) -> dict:
        self.send(**msg)
        return self.answer()

    def close(self, kill: bool = False) -> None:
        """Ask the worker to quit (kill: stop it at once, as when the run is interrupted); remove its log."""
        if self.proc.poll() is None and kill:
            self.proc.kill()
            self.proc.wait()
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def start_workers(cfg: Config, replicas: int, tmp_dir: Path | None = None
                  ) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:  # fmt: skip
    """Start every framework's workers at once (one per tuned configuration too); returns (ready workers,
    their hello, skipped notes), keyed 'tf', 'jax', 'jax+ynn', ...

    Raises:
        HarnessError: the device is absent (one line naming what was asked and what was found).
    """
    def cluster(k: int):  # multi-process: each configuration's workers meet at a coordinator port of their own
        return cfg.cluster.for_config(k) if cfg.cluster else None

    workers = {fw: Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, cluster=cluster(0), tmp_dir=tmp_dir,
                          python=cfg.pythons.get(fw)) for fw in cfg.frameworks}  # fmt: skip
    ready, hello, skipped = _await_workers(cfg, workers)
    if cfg.tuned:  # each implementation names its own process-wide settings in its hello
        tuned = {}
        for fw in list(ready):
            configs = {**hello[fw].get("tuned_configs", {}), **cfg.extra_configs.get(fw, {})}
            for k, (name, env) in enumerate(configs.items(), 1):
                tuned[f"{fw}+{name}"] = Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, name, env,
                                               cluster(k), tmp_dir, cfg.pythons.get(fw))  # fmt: skip
        try:
            more, more_hello, _ = _await_workers(cfg, tuned)
        except BaseException:
            for w in ready.values():
                w.close()
            raise
        ready.update(more)
        hello.update(more_hello)
    return ready, hello, skipped


def _await_workers(cfg: Config, workers: dict[str, Worker]) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:
    """Each worker's first words: ready, missing (its framework is not installed) or unavailable (the device)."""
    ready, hello, skipped, absent = {}, {}, [], []
    wait_s = 300 + (cfg.cluster.timeout_s if cfg.cluster else 0)  # joining waits for every process
    try:
        for key, w in workers.items():
            msg = w.recv(timeout_s=wait_s)
            if msg["status"] == "ready":
                ready[key], hello[key] = w, msg
                continue
            w.close()
            if msg["status"] == "missing" and w.python != sys.executable:  # an interpreter chosen for it
                absent.append(f"{w.label}: {msg['error']} (--python {w.framework}={w.python})")
            elif msg["status"] == "missing":
                if w.config == "default":
                    skipped.append({"framework": w.framework, "reason": msg["error"]})
            else:
                absent.append(f"{w.label}: {msg['error']}")
    except BaseException:
        for w in workers.values():
            w.close()
        raise
    if absent:
        for w in ready.values():
            w.close()
        raise HarnessError("; ".join(absent))
    return ready, hello, skipped


@dataclass
class _Run:
    """What a run gathers as it goes."""

    suites: dict  # workload -> its parent-side module (parity.training), for workloads that have one
    ctxs: dict  # workload -> what its suite keeps between rounds (data file, initial weights)
    rows: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    hello: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    said: dict = field(default_factory=dict)  # notes said once, however often their cause recurs
    peak: roofline.Peak | None = None


def run_suite(cfg: Config, save_dir: Path) -> dict:
    """Run every workload x framework x variant x replica count.

    Returns {"rows", "checks", "hello", "skipped", "notes", "peak"}.
    """
    for wl in cfg.workloads:  # before anything starts: a batch that does not split is the user's to fix
        batch = cfg.spec(wl).batch
        for r in cfg.replica_counts():
            if r and batch % r:
                fits = [d for d in (1, 2, 4, 8, 16, 32) if batch % d == 0]
                how = "a --batch that divides, or " if "global_batch" in WORKLOADS[wl].options else ""
                raise HarnessError(f"{wl}: global batch {batch} does not divide by {r} replicas; choose {how}"
                                   f"--replicas among {', '.join(map(str, fits))}")  # fmt: skip
    suites = {wl: importlib.import_module(WORKLOADS[wl].suite) for wl in cfg.workloads if WORKLOADS[wl].suite}
    run = _Run(suites, {wl: {} for wl in cfg.workloads})
    if cfg.cluster is not None:
        run.notes.append(multiprocess_note(cfg))
    if cfg.device == "cpu" and cfg.cluster is None:  # measured before any worker starts, on an idle machine
        log(cfg, "measuring the CPU's float32 peak (matrix product) and memory bandwidth (copy)")
        run.peak = roofline.cpu_peak(n=2048 if cfg.quick else 4096)
        log(cfg, f"  computed {_g(run.peak.computed_flops)}, measured {_g(run.peak.measured_flops)} GFLOP/s; "
                 f"copy {_g(run.peak.measured_bandwidth)} GB/s")  # fmt: skip
    for wl, suite in suites.items():
        run.ctxs[wl], more = suite.prepare(cfg, cfg.spec(wl), save_dir)
        run.notes += more
    for r in cfg.replica_counts():
        _round(cfg, run, r, save_dir)
    _judge_all(cfg, run)
    return {"rows": run.rows, "checks": run.checks, "hello": run.hello, "skipped": run.skipped,
            "notes": run.notes, "peak": run.peak.to_dict() if run.peak else None}  # fmt: skip


def _round(cfg: Config, run: _Run, replicas: int, save_dir: Path) -> None:
    """Every workload at one replica count: start the workers, run the rows and the parity checks, stop them.
    On a device that takes one owner at a time (cfg.exclusive), the workers run one after another."""
    (save_dir / "tmp").mkdir(exist_ok=True)
    if cfg.exclusive:
        _round_one_owner_at_a_time(cfg, run, replicas, save_dir)
    else:
        log(cfg, f"starting {', '.join(FRAMEWORK_NAMES[f] for f in cfg.frameworks)} workers on {cfg.device} "
                 f"x{replicas or 'all'}")  # fmt: skip
        workers, hello, skip = start_workers(cfg, replicas, save_dir / "tmp")
        run.skipped.extend(s for s in skip if s not in run.skipped)
        if workers:
            run.rows += _with_workers(workers, lambda: _rows(cfg, run, workers, hello, replicas, save_dir))
    _judge_parity(cfg, run, replicas, save_dir)
    if run.peak is not None and run.peak.measured_flops:  # the workers are gone: measure again, keep the best
        run.peak = roofline.remeasured(run.peak, n=2048 if cfg.quick else 4096)
        log(cfg, f"CPU peak measured again: best so far {_g(run.peak.measured_flops)} GFLOP/s")


def _with_workers(workers: dict[str, Worker], work):
    """work() with `workers` running; then they are stopped (at once, if work was interrupted or failed)."""
    stopped = False
    try:
        return work()
    except BaseException:  # interrupted or failed: the workers are stopped now, not asked to finish
        stopped = True
        raise
    finally:
        for w in workers.values():
            w.close(kill=stopped)


def _rows(cfg: Config, run: _Run, workers: dict[str, Worker], hello: dict, replicas: int, save_dir: Path,
          parity: bool = True) -> list[dict]:  # fmt: skip
    """The running workers' rows of every workload (added to the run; also returned), and their parity arrays."""
    for key, h in hello.items():
        run.hello.setdefault(key, h)
    for wl, suite in run.suites.items():
        suite.warm(cfg, workers, run.ctxs[wl])
    if run.peak is None and not (cfg.device == "cpu" and cfg.cluster is not None):
        run.peak = roofline.device_peak(cfg.device, next(iter(hello.values()))["device_kind"], cfg.precision)
    _measure_bf16_peak(cfg, run, workers)
    rows = []
    for wl in cfg.workloads:
        for kind in WORKLOADS[wl].kinds:
            for k in range(cfg.seeds if kind.seeded else 1):
                rows += _run_kind(cfg, run, wl, kind, workers, hello, save_dir, k)
        if wl in run.suites and parity:
            first = not any(c["workload"] == wl for c in run.checks)
            run.suites[wl].parity_collect(cfg, cfg.spec(wl), workers, hello, save_dir, run.ctxs[wl], first, log,
                                          replicas)  # fmt: skip
    return rows


def _measure_bf16_peak(cfg: Config, run: _Run, workers: dict[str, Worker]) -> None:
    """On a CPU with bfloat16 hardware, once per framework (its out-of-the-box worker): the best bfloat16 matrix
    product it runs, which the bfloat16 peak takes where it beats the computed one. Untimed, before any row."""
    if cfg.device != "cpu" or run.peak is None or not cfg.tuned:  # "+bf16" rows are tuned variants
        return
    done = run.peak.measured_bf16 = run.peak.measured_bf16 or {}
    for w in workers.values():
        if w.config == "default" and w.framework not in done and roofline.native_bf16(cfg.device, "cpu", w.env):
            n = 2048 if cfg.quick else 4096
            got = w.ask(cmd="call", fn="bf16_matmul_peak", n=n)
            done[w.framework] = got["flops"]
            log(cfg, f"  {FRAMEWORK_NAMES[w.framework]}'s bfloat16 {n}x{n} matmul: "
                     + (f"{_g(got['flops'])} GFLOP/s" if got["flops"] else got.get("why", "none offered")))


def _judge_parity(cfg: Config, run: _Run, replicas: int, save_dir: Path) -> None:
    for wl, suite in run.suites.items():
        first = not any(c["workload"] == wl for c in run.checks)
        run.checks += [{**c, "workload": wl}
                       for c in suite.parity_judge(cfg, cfg.spec(wl), save_dir, run.ctxs[wl], first, log, replicas)]


LIBTPU_LOCKFILE = Path("/tmp/libtpu_lockfile")  # what libtpu leaves while (and, if killed, after) it owns the TPU


def holders(paths: list[Path]) -> dict[int, str]:
    """Live processes with one of `paths` open: pid -> command line (from /proc; those this user may read)."""
    want = {str(p) for p in paths}
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if any(os.readlink(fd) in want for fd in (proc / "fd").iterdir()):
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def lock_state(lock: Path, devices: list[Path]) -> tuple[str, str]:
    """('free' | 'held' | 'stale', one line saying what to do). Never removes anything."""
    if not lock.exists():
        return "free", ""
    live = holders([lock, *devices])
    if live:
        pid, cmd = next(iter(live.items()))
        return "held", (f"the TPU is in use by process {pid} ({cmd[:80]}): wait for it to end or stop it; "
                        f"{lock} is its lock and must not be removed while it runs")  # fmt: skip
    return "stale", (f"{lock} is left over from a process that has ended (no live process holds it or a TPU "
                     f"device); libtpu may refuse the TPU until it is removed: rm {lock}")  # fmt: skip


def _check_libtpu_lock() -> None:
    """Before the first TPU owner starts: a live owner is an error, a stale lockfile one line of advice."""
    state, say = lock_state(LIBTPU_LOCKFILE, sorted(Path("/dev").glob("accel*")) + sorted(Path("/dev").glob("vfio/*")))
    if state == "held":
        raise HarnessError(say)
    if state == "stale":
        print(f"warning: {say}", file=sys.stderr, flush=True)


DRIFT_NOTED = 0.10  # a re-measured row whose median moved more than this is named in the notes


def _round_one_owner_at_a_time(cfg: Config, run: _Run, replicas: int, save_dir: Path) -> None:
    """A TPU host takes one owning process (libtpu): each worker runs all its rows alone and releases the device
    before the next starts. Interleaving cannot spread drift over the frameworks here, so the first worker's rows
    are measured again at the end and the change is reported (the table keeps the first measurement)."""
    if cfg.device == "tpu":
        _check_libtpu_lock()
    owners = [(fw, "default", {}, 0) for fw in cfg.frameworks]  # (framework, configuration, its env, port offset)
    order, first_rows = [], None
    k = 0
    while k < len(owners):
        fw, name, env, offset = owners[k]
        log(cfg, f"starting the {FRAMEWORK_NAMES[fw]}{'' if name == 'default' else f' ({name})'} worker alone on "
                 f"{cfg.device} x{replicas or 'all'} (one owner at a time)")  # fmt: skip
        workers, hello, skip = _start_owner(cfg, replicas, fw, name, env, offset, save_dir)
        run.skipped.extend(s for s in skip if s not in run.skipped)
        k += 1
        if not workers:
            continue
        key = next(iter(workers))
        if name == "default" and cfg.tuned:  # its tuned configurations follow it, each an owner of its own
            configs = {**hello[key].get("tuned_configs", {}), **cfg.extra_configs.get(fw, {})}
            owners[k:k] = [(fw, n, e, i) for i, (n, e) in enumerate(configs.items(), 1)]
        rows = _with_workers(workers, lambda w=workers, h=hello: _rows(cfg, run, w, h, replicas, save_dir))
        run.rows += rows
        order.append(workers[key].label)
        if first_rows is None:
            first_rows, first_owner = rows, owners[k - 1]
    if first_rows is None or len(order) < 2:
        return
    log(cfg, f"measuring the {order[0]} rows again, after the others (drift)")
    workers, hello, _ = _start_owner(cfg, replicas, *first_owner, save_dir)
    again = _with_workers(workers, lambda: _rows(cfg, run, workers, hello, replicas, save_dir, parity=False))
    run.notes.append(_drift_note(order, first_rows, again))


def _drift_note(order: list[str], first: list[dict], again: list[dict]) -> str:
    """What the first owner's rows did when measured again at the end; each first row gets its `drift`."""
    ident = ("workload", "variant", "replicas", "seed")
    later = {tuple(r.get(k) for k in ident): r for r in again}
    moved = []
    for r in first:
        a = later.get(tuple(r.get(k) for k in ident))
        if r["verified"] and a and a["verified"]:
            r["drift"] = a["median_s"] / r["median_s"] - 1
            moved.append((r["drift"], f"{r['workload']} {r['framework']} {r['variant']} x{r['replicas']}"))
    text = (f"one owner of the device at a time: {' -> '.join(order)}, then {order[0]} again; its rows' "
            f"medians moved ")
    if not moved:
        return text + "(no verified row to compare)"
    lo, hi = min(d for d, _ in moved), max(d for d, _ in moved)
    big = [f"{what} {d:+.1%}" for d, what in moved if abs(d) > DRIFT_NOTED]
    return (text + f"{lo:+.1%} to {hi:+.1%} between the first and the last measurement (the table shows the first)"
            + (f"; more than {DRIFT_NOTED:.0%}, compare with care: " + ", ".join(big) if big else ""))


def _start_owner(cfg: Config, replicas: int, fw: str, name: str, env: dict, k: int, save_dir: Path
                 ) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:  # fmt: skip
    """One worker (a framework in one configuration; k: its coordinator port offset), alone on the device."""
    key = fw if name == "default" else f"{fw}+{name}"
    w = Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, name, env,
               cfg.cluster.for_config(k) if cfg.cluster else None, save_dir / "tmp", cfg.pythons.get(fw),
               save_dir / "device.lock")  # fmt: skip
    return _await_workers(cfg, {key: w})


def _judge_all(cfg: Config, run: _Run) -> None:
    """After every round: rows against each other and the peak, then each workload's closing checks."""
    run.notes += run.said.values()
    _cross_check(run.rows)
    if cfg.device == "cpu" and run.peak is not None:  # the run's own verified bfloat16 matmuls measure the peak too
        run.peak = roofline.with_bf16_matmul_rows(run.peak, run.rows)
    for row in run.rows:
        _judge(row, run.peak)
    if run.peak and any(r["dtype"] == "bfloat16" for r in run.rows):
        bf16 = roofline.bf16_peak(cfg.device, next(r["device_kind"] for r in run.rows), run.peak)
        run.notes.append(f"bfloat16 rows: % peak over the bf16 peak, {_g(bf16.flops)} GFLOP/s ({bf16.source}); "
                         f"their 'err vs other' compares only bfloat16 rows")  # fmt: skip
    for wl, suite in run.suites.items():
        more, notes = suite.summary(cfg, run.rows, run.ctxs[wl])
        run.checks += [{**c, "workload": wl} for c in more]
        run.notes += notes


def multiprocess_note(cfg: Config) -> str:
    c = cfg.cluster
    note = (f"multi-process run: {c.num_processes or 'auto'} processes (coordinator {c.coordinator}); each call's "
            f"time is the slowest process's (agreed after the call, outside the timed interval), each row's output "
            f"gathered from every process and checked; repetitions fixed at --reps {cfg.reps} (every process must "
            f"make the same calls)")  # fmt: skip
    if cfg.device == "cpu":
        note += ("; no % of peak: the processes' CPUs may be one machine's or several, and a peak measured "
                 "while the others start would be wrong")
        if "tf" in cfg.frameworks:
            note += "; TensorFlow's MultiWorkerMirroredStrategy gives each worker one CPU replica"
    return note


SPREAD_WARN = 0.10  # IQR / median above this: the machine was too noisy for the median to be trusted


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x / 1e9:.1f}"


def _judge(row: dict, peak) -> None:
    """Roofline fields, the impossible-throughput guard, and the spread warning for one row."""
    if peak and row["dtype"] == "bfloat16":  # judged against the device's bfloat16 peak
        peak = roofline.bf16_peak(row["device"], row["device_kind"], peak)
    row.update(roofline.roofline(row, peak, row["replicas"]) if peak else {})
    if row.get("impossible"):
        row.update(verified=False, invalid_reason=row["impossible"])
    med, iqr = row.get("median_s"), row.get("iqr_s")
    row["noisy"] = bool(med and iqr is not None and row["reps"] > 1 and iqr / med > SPREAD_WARN)
    row["compiler_flops_ratio"], row["compiler_flops_ratio_unpadded"] = roofline.compiler_ratios(row)


def _run_kind(cfg: Config, run: _Run, wl: str, kind: RowKind, workers: dict[str, Worker], hello: dict,
              save_dir: Path, seed_offset: int = 0) -> list[dict]:  # fmt: skip
    """One row kind of a workload: every worker's variants, first calls one at a time, then interleaved
    timed repetitions, then the rows."""
    suite = run.suites.get(wl)
    spec, extra, tag = cfg.spec(wl), {}, ""
    if suite:
        spec, extra, tag = suite.case_args(spec, seed_offset, workers, save_dir, run.ctxs[wl])
    cases = _cases(cfg, kind, workers, hello, tag, run.said)
    if not cases:
        return []
    first_s = {}
    for c in cases:  # one at a time: a first call's time is its own
        what = f"first epoch (seed {spec.seed})" if kind.epochs else "compiling"
        log(cfg, f"{kind.name}: {what} {FRAMEWORK_NAMES[workers[c.worker].framework]} {c.shown} x{c.replicas}")
        resp = workers[c.worker].ask(cmd="prepare", id=c.key, workload=kind.name, variant=c.variant,
                                     spec=spec.to_dict(), save=str(save_dir / f"{c.key}.npy"), **extra)  # fmt: skip
        first_s[c.key] = resp["compile_s"]
        log(cfg, f"  INVALID: {resp['invalid']}" if resp["invalid"] else
                 f"  first call {resp['compile_s']:.3f} s, output verified")  # fmt: skip
    _timed_reps(cfg, kind, spec, cases, workers, first_s)
    for c in cases:  # untimed: every worker at once, each answering in order
        workers[c.worker].send(cmd="result", id=c.key)
    results = {c.key: workers[c.worker].answer() for c in cases}
    rows = []
    for c in cases:
        row = _row(cfg, kind, c, results[c.key], workers[c.worker], hello[c.worker], save_dir)
        if suite:
            row.update(suite.row_extra(kind, results[c.key], spec))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Case:
    """One timed case: a worker's variant at its replica count, the name it is shown by, its number format."""

    worker: str  # 'tf', 'jax', 'jax+ynn', ...
    shown: str  # the variant, with the worker's configuration appended ('jit+ynn')
    replicas: int
    key: str  # unique in the run: the worker's id for it and the stem of its saved output
    variant: str  # the implementation's own name
    dtype: str
    tuned: bool  # not the framework out of the box: a tuned variant, or a worker with a tuned configuration


def _cases(cfg: Config, kind: RowKind, workers: dict[str, Worker], hello: dict, tag: str, said: dict) -> list[Case]:
    """Every worker's variants of this row kind; bfloat16 ones only where the hardware has bfloat16."""
    cases = []
    for wk, w in workers.items():
        n = hello[wk]["replicas"]
        offered = w.ask(cmd="variants", workload=kind.name, tuned=cfg.tuned)
        for variant in offered["variants"]:
            dtype = offered["dtypes"][variant]
            if dtype == "bfloat16" and not roofline.native_bf16(cfg.device, hello[wk]["device_kind"], w.env):
                # emulated bfloat16 would only show a slower configuration; the table says why it is absent
                cap = roofline.isa_capped_below_bf16(w.env) if cfg.device == "cpu" else None
                why = f"{cap} caps the CPU below bfloat16" if cap else f"{hello[wk]['device_kind']} has none"
                said["skipped_bf16"] = f"'+bf16' variants not run (no native bfloat16): {why}"
                continue
            shown = variant if w.config == "default" else f"{variant}+{w.config}"
            key = f"{kind.name}-{wk}-{variant}-r{n}{tag}".replace("+", "_")
            tuned = variant in offered["tuned"] or w.config != "default"
            cases.append(Case(wk, shown, n, key, variant, dtype, tuned))
    return cases


def _timed_reps(cfg: Config, kind: RowKind, spec, cases: list[Case], workers: dict[str, Worker],
                first_s: dict) -> None:  # fmt: skip
    """Warm-up, then the timed repetitions, interleaved across cases with alternating order. A training
    kind's first epoch was its first call; each later epoch is one repetition."""
    last_s = dict(first_s)
    for _ in range(0 if kind.epochs else cfg.warmup):
        for c in cases:
            last_s[c.key] = workers[c.worker].ask(cmd="warm", id=c.key)["time"]
    if kind.epochs:
        reps = {c.key: spec.epochs - 1 for c in cases}
    else:  # calibrated: enough calls for min_time_s of timed work, as pytest-benchmark does
        reps = {c.key: calibrated_reps(last_s[c.key], cfg) for c in cases}
    most, said_at = max(reps.values()), time.monotonic()
    for i in range(most):
        said = []
        for c in cases if i % 2 == 0 else cases[::-1]:  # alternate so no case always runs first
            if i >= reps[c.key]:
                continue
            resp = workers[c.worker].ask(cmd="rep", id=c.key)
            t, last = resp["time"], resp.get("last") or {}
            fig = f"{t:.4f}s" if t is not None else f"INVALID ({resp['invalid']})"
            if t is not None and kind.epochs:  # a training epoch's last step: its loss and accuracy
                fig += "".join(f" {k} {v:.4f}" for k, v in last.items())
            said.append(f"{workers[c.worker].framework} {c.shown} {fig}")
        what = f"epoch {i + 2}/{spec.epochs}" if kind.epochs else f"rep {i + 1}/{most}"
        if kind.epochs or time.monotonic() - said_at > 5 or i + 1 == most:  # a line every 5 s
            log(cfg, f"{kind.name} {what}: " + ", ".join(said))
            said_at = time.monotonic()


def _row(cfg: Config, kind: RowKind, c: Case, res: dict, worker: Worker, hello: dict, save_dir: Path) -> dict:
    """A result row: what ran where, its times, its figures and its verdict."""
    med = res.get("median_s")
    return {
        "workload": kind.name, "framework": worker.framework, "variant": c.shown,
        "config_env": worker.config_env, "device": cfg.device,
        "device_kind": hello["device_kind"], "replicas": c.replicas, "processes": hello.get("num_processes", 1),
        # bfloat16 inputs: the float32 --precision setting does not apply, the format is what the row ran in
        "dtype": c.dtype, "precision": "bfloat16" if c.dtype == "bfloat16" else cfg.precision, "tuned": c.tuned,
        "quick": cfg.quick, "median_s": med, "iqr_s": res.get("iqr_s"), "q1_s": res.get("q1_s"),
        "q3_s": res.get("q3_s"), "min_s": res.get("min_s"), "reps": res.get("reps"),
        # an operation's first call (tracing, compilation, one execution); a training row's first epoch is
        # first_epoch_s instead (schema 2), never called a compile time
        "compile_s": None if kind.epochs else res.get("compile_s"),
        "gflops_per_s": res["flops"] / med / 1e9 if med and res.get("flops") else None, "flops": res.get("flops"),
        "flops_unpadded": res.get("flops_unpadded"), "flops_formula": " ".join(res.get("flops_formula", "").split()),
        "compiler_flops": res.get("compiler_flops"),
        "compiler_flops_source": res.get("compiler_flops_source"), "min_bytes": res.get("min_bytes"),
        "max_abs_err": res.get("max_abs_err"), "max_rel_err": res.get("max_rel_err"),
        # a training row is checked for finite losses and placement; its numbers are judged by the checks
        "tolerance": kind.tolerance(cfg.device, cfg.precision, c.dtype),
        "verified": res["invalid"] is None and med is not None, "invalid_reason": res["invalid"],
        "_save": str(save_dir / f"{c.key}.npy"),
    }  # fmt: skip


def calibrated_reps(call_s: float | None, cfg: Config) -> int:
    """Timed calls for one row: at least cfg.reps, more until cfg.min_time_s of timed work, at most cfg.max_reps."""
    # Invalid already: the reps only confirm it. Multi-process: every process must make the same
    # (collective) calls, whatever its own timings say.
    if not call_s or cfg.cluster is not None:
        return cfg.reps
    return max(cfg.reps, min(cfg.max_reps, math.ceil(cfg.min_time_s / call_s)))


def _saved_error(a: str, b: str) -> float | None:
    """Max error between two saved outputs relative to the second's largest value; None if one is missing."""
    if not (Path(a).exists() and Path(b).exists()):
        return None
    return errors(np.load(a), np.load(b))["max_rel_err"]


def _cross_check(rows: list[dict], error=_saved_error) -> None:
    """Each row's oracle rows against every other framework's, same workload and number format (dtype)."""
    for row in rows:
        errs = [error(row["_save"], other["_save"]) for other in rows
                if other["framework"] != row["framework"] and other["workload"] == row["workload"]
                and other["dtype"] == row["dtype"] and row["verified"] and other["verified"]]  # fmt: skip
        errs = [e for e in errs if e is not None]
        row["xfw_max_rel_err"] = max(errs) if errs else None
    for row in rows:
        row.pop("_save")
