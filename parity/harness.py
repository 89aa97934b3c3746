"""The parent side: start one worker process per framework, interleave their timed calls, gather rows."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity import checks, data, roofline
from parity.api import load_npz, save_npz
from parity.cluster import Cluster
from parity.oracle import cnn_forward, compare
from parity.workloads import (
    CNN_CPU,
    CNN_FULL,
    CNN_QUICK,
    SPECS,
    check_divisible,
    cnn_grad_tolerance,
    cnn_loss_tolerance,
    cnn_tolerances,
    tolerance,
)

FRAMEWORKS = ("tf", "jax")
FRAMEWORK_NAMES = {"tf": "TensorFlow", "jax": "JAX"}
# What each workload measures: one timed case kind or several.
KINDS = {"conv": ("conv",), "cnn": ("cnn", "cnn_infer")}
# Process-wide settings that make a framework faster than out of the box, by (framework, device):
# each gets a worker of its own, and its rows' variants carry the name ('jit+ynn'). Measured in
# docs/performance.md. YNNPACK: XLA:CPU's newer kernel library for dots, elementwise ops and
# reductions (in jaxlib 0.10 the convolutions gain too: the full conv ran 2.0x faster here).
TUNED = {("jax", "cpu"): {"ynn": {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce"}}}
ROW_NAMES = {"conv": "conv", "cnn": "cnn_train", "cnn_infer": "cnn_infer"}


# What a worker's last words mean, where the framework's own are obscure.
DEATH_HINTS = (
    (("RegisterTask", "DEADLINE_EXCEEDED"), ": it could not reach the JAX coordinator in time"),
    (("distributed service detected fatal errors",), ": another process of the run stopped"),
    (("Failed to add port to server",), ": a port it needs is already taken"),
    (("Timeout (", "_initialize_multi_worker"), ": it could not reach the other TensorFlow workers in time"),
)


class HarnessError(RuntimeError):
    """A run that cannot go on; the message is the one line the user sees."""


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
    tuned: bool = True  # also run each framework's TUNED configurations, as rows of their own
    warmup: int = 1
    timeout_s: float = 1800.0
    progress: bool = True
    data: str = "auto"
    data_dir: str | None = None
    cnn: dict = field(default_factory=dict)  # overrides of CnnSpec fields (global_batch, epochs, ...)
    parity_steps: int = 20
    seeds: int = 1  # CNN training runs per variant (init, dropout and batch order seeded differently)
    cluster: Cluster | None = None  # one process of a multi-process run (parity.cluster); None: the only one

    def spec(self, wl: str):
        """The workload's spec for this run: --quick, the device's default schedule, then overrides."""
        if wl == "conv":
            return SPECS[wl][1 if self.quick else 0]
        base = CNN_QUICK if self.quick else (CNN_CPU if self.device == "cpu" else CNN_FULL)
        return dataclasses.replace(base, **self.cnn)

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


class Worker:
    """A `parity.worker` process for one framework on one device set."""

    def __init__(self, framework: str, device: str, replicas: int, precision: str, timeout_s: float,
                 config: str = "default", config_env: dict | None = None, cluster: Cluster | None = None):  # fmt: skip
        self.framework, self.timeout_s, self.config = framework, timeout_s, config
        self.config_env = config_env or {}
        self.label = FRAMEWORK_NAMES[framework] + ("" if config == "default" else f" ({config})")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        for k, v in self.config_env.items():  # appended to the user's own flags, never replacing them
            env[k] = f"{env[k]} {v}".strip() if k == "XLA_FLAGS" and k in env else v
        # Both workers live at once: neither may grab the whole accelerator's memory up front.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"parity-{framework}-", suffix=".log")
        cmd = [
            sys.executable,
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
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env
        )
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
            self.proc.wait()
            tail = self.stderr_tail()
            why = next((hint for marks, hint in DEATH_HINTS if all(m in tail for m in marks)), "")
            if why:  # the framework's own words, shortened
                tail = "\n".join(tail.splitlines()[:4])
            raise HarnessError(f"{self.label} worker died (exit code {self.proc.returncode}){why}:\n{tail}")
        return json.loads(line)

    def send(self, **msg) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        resp = self.recv()
        if "error" in resp:
            raise HarnessError(f"{self.label} worker: {resp['error']}")
        return resp

    def ask(self, **msg) -> dict:
        self.send(**msg)
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def start_workers(cfg: Config, replicas: int) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:
    """Start every framework's workers at once (one per tuned configuration too); returns (ready workers,
    their hello, skipped notes), keyed 'tf', 'jax', 'jax+ynn', ...

    Raises:
        HarnessError: the device is absent (one line naming what was asked and what was found).
    """
    workers = {}
    for fw in cfg.frameworks:
        # multi-process: each configuration's JAX workers meet at a coordinator port of their own
        tuned = list(TUNED.get((fw, cfg.device), {}).items()) if cfg.tuned else []
        clusters = [cfg.cluster.for_config(k) if cfg.cluster else None for k in range(len(tuned) + 1)]
        workers[fw] = Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, cluster=clusters[0])
        for k, (name, env) in enumerate(tuned, 1):
            workers[f"{fw}+{name}"] = Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, name, env,
                                             clusters[k])  # fmt: skip
    ready, hello, skipped, absent = {}, {}, [], []
    wait_s = 300 + (cfg.cluster.timeout_s if cfg.cluster else 0)  # joining waits for every process
    try:
        for key, w in workers.items():
            msg = w.recv(timeout_s=wait_s)
            if msg["status"] == "ready":
                ready[key], hello[key] = w, msg
                continue
            w.close()
            if msg["status"] == "missing":
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


def run_suite(cfg: Config, save_dir: Path) -> dict:
    """Run every workload x framework x variant x replica count.

    Returns {"rows", "checks", "hello", "skipped", "notes", "peak"}.
    """
    rows, parity, hello_all, skipped, notes = [], [], {}, [], []
    peak = None
    if cfg.cluster is not None:
        notes.append(multiprocess_note(cfg))
    if cfg.device == "cpu" and cfg.cluster is None:  # measured before any worker starts, on an idle machine
        log(cfg, "measuring the CPU's float32 peak (matrix product) and memory bandwidth (copy)")
        peak = roofline.cpu_peak(n=2048 if cfg.quick else 4096)
        log(cfg, f"  computed {_g(peak.computed_flops)}, measured {_g(peak.measured_flops)} GFLOP/s; "
                 f"copy {_g(peak.measured_bandwidth)} GB/s")  # fmt: skip
    for wl in cfg.workloads:
        for r in cfg.replica_counts():
            if r:
                check_divisible(cfg.spec(wl).batch, r)
    ctx = {}
    if "cnn" in cfg.workloads:
        spec = cfg.spec("cnn")
        ds, note = data.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size)
        ds.save(save_dir / "data.npz")
        ctx = {"data": str(save_dir / "data.npz"), "weights": str(save_dir / f"w0-s{spec.seed}.npz")}
        notes.append(f"cnn: {note}")
        if cfg.device == "cpu" and not cfg.quick and spec.epochs < CNN_FULL.epochs:
            notes.append(
                f"cnn: CPU schedule shortened to {spec.epochs} epochs x {spec.steps_per_epoch} steps at "
                f"global batch {spec.global_batch} (notebook: {CNN_FULL.epochs} x {CNN_FULL.steps_per_epoch}"
                f" at {CNN_FULL.global_batch}); --epochs/--steps-per-epoch/--batch restore it"
            )
    for r in cfg.replica_counts():
        log(
            cfg,
            f"starting {', '.join(FRAMEWORK_NAMES[f] for f in cfg.frameworks)} workers on {cfg.device} x{r or 'all'}",
        )
        workers, hello, skip = start_workers(cfg, r)
        skipped.extend(s for s in skip if s not in skipped)
        if not workers:
            continue
        try:
            for key, h in hello.items():
                hello_all.setdefault(key, h)
            if "cnn" in cfg.workloads:  # untimed, every worker at once: their one-off model set-up
                for w in workers.values():
                    w.send(cmd="warm_cnn")
                for w in workers.values():
                    w.answer()
            if peak is None and not (cfg.device == "cpu" and cfg.cluster is not None):
                h = next(iter(hello.values()))
                peak = roofline.device_peak(cfg.device, h["device_kind"], cfg.precision)
            for wl in cfg.workloads:
                for kind in KINDS[wl]:
                    for k in range(cfg.seeds if kind == "cnn" else 1):
                        rows.extend(_run_workload(cfg, wl, kind, workers, hello, save_dir, ctx, k))
                if wl == "cnn":
                    parity.extend(_cnn_parity(cfg, workers, hello, save_dir, ctx, first=not parity))
        finally:
            for w in workers.values():
                w.close()
        if peak is not None and peak.measured_flops:  # the workers are gone: measure again, keep the best
            peak = roofline.remeasured(peak, n=2048 if cfg.quick else 4096)
            log(cfg, f"CPU peak measured again: best so far {_g(peak.measured_flops)} GFLOP/s")
    for key in ("skipped_bf16", "traj_skipped"):
        if key in ctx:
            notes.append(ctx[key])
    _cross_check(rows)
    for row in rows:
        _judge(row, peak)
    if peak and any(r["dtype"] == "bfloat16" for r in rows):
        bf16 = roofline.bf16_peak(cfg.device, next(r["device_kind"] for r in rows), peak)
        notes.append(f"bfloat16 rows: % peak over the bf16 peak, {_g(bf16.flops)} GFLOP/s ({bf16.source}); their "
                     f"'err vs other' compares only bfloat16 rows")  # fmt: skip
    if "cnn" in cfg.workloads:
        band = cnn_tolerances(cfg.device, cfg.precision)["accuracy_band"]
        parity.extend(checks.accuracy([r for r in rows if r["workload"] == "cnn_train" and r["verified"]], band))
    return {"rows": rows, "checks": parity, "hello": hello_all, "skipped": skipped, "notes": notes,
            "peak": peak.to_dict() if peak else None}  # fmt: skip


def multiprocess_note(cfg: Config) -> str:
    c = cfg.cluster
    note = (f"multi-process run: {c.num_processes or 'auto'} processes (coordinator {c.coordinator}); times are "
            f"process 0's, each row's output gathered from every process and checked; repetitions fixed at "
            f"--reps {cfg.reps} (every process must make the same calls)")  # fmt: skip
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


def _run_workload(cfg: Config, wl: str, kind: str, workers: dict[str, Worker], hello: dict, save_dir: Path,
                  ctx: dict, seed_offset: int = 0) -> list[dict]:  # fmt: skip
    spec = cfg.spec(wl)
    name = ROW_NAMES[kind]
    extra, tag = {}, ""
    if wl == "cnn":
        spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
        weights = save_dir / f"w0-s{spec.seed}.npz"
        if not weights.exists():  # both frameworks start from the same (Keras-initialised) weights
            next(iter(workers.values())).ask(cmd="init_weights", seed=spec.seed, out=str(weights))
        extra, tag = {"data": ctx["data"], "weights": str(weights)}, f"-s{spec.seed}"
    cases, dtypes = [], {}
    for wk, w in workers.items():
        n = hello[wk]["replicas"]
        offered = w.ask(cmd="variants", workload=kind, tuned=cfg.tuned)
        for variant in offered["variants"]:
            dtype = offered["dtypes"][variant]
            if dtype == "bfloat16" and not roofline.native_bf16(cfg.device, hello[wk]["device_kind"]):
                # emulated bfloat16 would only show a slower configuration; the table says why it is absent
                cap = roofline.isa_capped_below_bf16(os.environ) if cfg.device == "cpu" else None
                why = f"{cap} caps the CPU below bfloat16" if cap else f"{hello[wk]['device_kind']} has none"
                ctx["skipped_bf16"] = f"'+bf16' variants not run (no native bfloat16): {why}"
                continue
            shown = variant if w.config == "default" else f"{variant}+{w.config}"
            key = f"{kind}-{wk}-{variant}-r{n}{tag}".replace("+", "_")
            cases.append((wk, shown, n, key, variant))
            dtypes[key] = dtype
    if not cases:
        return []
    first_s = {}
    for fw, variant, n, key, base in cases:  # one at a time: a first call's time is its own
        what = f"first epoch (seed {spec.seed})" if kind == "cnn" else "compiling"
        log(cfg, f"{name}: {what} {FRAMEWORK_NAMES[workers[fw].framework]} {variant} x{n}")
        resp = workers[fw].ask(cmd="prepare", id=key, workload=kind, variant=base, spec=spec.to_dict(),
                               save=str(save_dir / f"{key}.npy"), **extra)  # fmt: skip
        first_s[key] = resp["compile_s"]
        if resp["invalid"]:
            log(cfg, f"  INVALID: {resp['invalid']}")
        else:
            log(cfg, f"  first call {resp['compile_s']:.3f} s, output verified")
    # Training: the first epoch is the first call, each later epoch one repetition.
    warmup = 0 if kind == "cnn" else cfg.warmup
    last_s = dict(first_s)
    for _ in range(warmup):
        for fw, _v, _n, key, _b in cases:
            last_s[key] = workers[fw].ask(cmd="warm", id=key)["time"]
    if kind == "cnn":
        reps = {key: spec.epochs - 1 for _w, _v, _n, key, _b in cases}
    else:  # calibrated: enough calls for min_time_s of timed work, as pytest-benchmark does
        reps = {key: calibrated_reps(last_s[key], cfg) for _w, _v, _n, key, _b in cases}
    said_at = time.monotonic()
    for i in range(max(reps.values())):
        order = cases if i % 2 == 0 else cases[::-1]  # alternate so no case always runs first
        said = []
        for fw, variant, _n, key, _b in order:
            if i >= reps[key]:
                continue
            resp = workers[fw].ask(cmd="rep", id=key)
            t, last = resp["time"], resp.get("last") or {}
            fig = f"{t:.4f}s" if t is not None else f"INVALID ({resp['invalid']})"
            if kind == "cnn" and t is not None:
                fig += f" loss {last['loss']:.4f} acc {last['accuracy']:.3f}"
            said.append(f"{workers[fw].framework} {variant} {fig}")
        what = f"epoch {i + 2}/{spec.epochs}" if kind == "cnn" else f"rep {i + 1}/{max(reps.values())}"
        if kind == "cnn" or time.monotonic() - said_at > 5 or i + 1 == max(reps.values()):  # a line every 5 s
            log(cfg, f"{name} {what}: " + ", ".join(said))
            said_at = time.monotonic()
    rows = []
    # Test accuracy only where the accuracy check will judge it (evaluation compiles, seconds each).
    evaluate = kind != "cnn" or spec.epochs * spec.steps_per_epoch >= checks.MIN_ACCURACY_STEPS
    for fw, _v, _n, key, _b in cases:  # untimed: every worker at once, each answering in order
        workers[fw].send(cmd="result", id=key, evaluate=evaluate)
    results = {key: workers[fw].answer() for fw, _v, _n, key, _b in cases}
    for fw, variant, n, key, _b in cases:
        res = results[key]
        med = res.get("median_s")
        # Training rows are checked for finite losses and placement; their numbers are judged by the checks.
        tol = {"conv": tolerance(cfg.device, cfg.precision, dtypes[key]), "cnn": None,
               "cnn_infer": cnn_tolerances(cfg.device, cfg.precision)["forward"]}[kind]  # fmt: skip
        row = {
            "workload": name, "framework": workers[fw].framework, "variant": variant,
            "config_env": workers[fw].config_env, "device": cfg.device,
            "device_kind": hello[fw]["device_kind"], "replicas": n, "processes": hello[fw].get("num_processes", 1),
            # bfloat16 inputs: the float32 --precision setting does not apply, the format is what the row ran in
            "dtype": dtypes[key], "precision": "bfloat16" if dtypes[key] == "bfloat16" else cfg.precision,
            "quick": cfg.quick, "median_s": med, "iqr_s": res.get("iqr_s"), "q1_s": res.get("q1_s"),
            "q3_s": res.get("q3_s"), "min_s": res.get("min_s"), "reps": res.get("reps"),
            "compile_s": res.get("compile_s"),
            "gflops_per_s": res["flops"] / med / 1e9 if med else None, "flops": res["flops"],
            "flops_unpadded": res.get("flops_unpadded"), "flops_formula": " ".join(res["flops_formula"].split()),
            "compiler_flops": res.get("compiler_flops"),
            "compiler_flops_source": res.get("compiler_flops_source"), "min_bytes": res["min_bytes"],
            "max_abs_err": res.get("max_abs_err"), "max_rel_err": res.get("max_rel_err"), "tolerance": tol,
            "verified": res["invalid"] is None and med is not None, "invalid_reason": res["invalid"],
            "_save": str(save_dir / f"{key}.npy"),
        }  # fmt: skip
        if wl == "cnn":
            row.update(images_per_s=res["images"] / med if med else None, data=res["data"], spec=spec.to_dict(),
                       seed=spec.seed)  # fmt: skip
        if kind == "cnn":
            row.update(time_unit="epoch", first_epoch_s=res.get("compile_s"), test_loss=res.get("test_loss"),
                       test_accuracy=res.get("test_accuracy"))  # fmt: skip
            if med:  # the article's figure: 5 epochs of 100 steps at global batch 1024
                per_step = med / spec.steps_per_epoch * (CNN_FULL.global_batch / spec.global_batch)
                row["est_5_notebook_epochs_s"] = (res["compile_s"] - med) + 5 * CNN_FULL.steps_per_epoch * per_step
        rows.append(row)
    return rows


def calibrated_reps(call_s: float | None, cfg: Config) -> int:
    """Timed calls for one row: at least cfg.reps, more until cfg.min_time_s of timed work, at most cfg.max_reps."""
    # Invalid already: the reps only confirm it. Multi-process: every process must make the same
    # (collective) calls, whatever its own timings say.
    if not call_s or cfg.cluster is not None:
        return cfg.reps
    return max(cfg.reps, min(cfg.max_reps, math.ceil(cfg.min_time_s / call_s)))


def _cnn_parity(cfg: Config, workers: dict[str, Worker], hello: dict, save_dir: Path, ctx: dict,
                first: bool) -> list[dict]:  # fmt: skip
    """Trajectory parity at this replica count; the forward pass and gradients once (first=True)."""
    spec = cfg.spec("cnn")
    tols = cnn_tolerances(cfg.device, cfg.precision)
    counts = {w.framework: hello[k]["replicas"] for k, w in workers.items() if w.config == "default"}
    n = max(counts.values())
    workers = {w.framework: w for w in workers.values() if w.config == "default"}  # parity: out of the box
    ds = data.Dataset.load(Path(ctx["data"]))
    b = max(2 * n, min(spec.global_batch, 64))
    b += -b % math.lcm(*counts.values())  # every framework's replicas get the same share
    x, y = data.batches(ds, data.batch_offsets(spec.seed + 1, cfg.parity_steps, len(ds.x_train), b), b)
    np.savez(save_dir / "parity_batches.npz", x=x, y=y)
    log(cfg, f"cnn parity x{n}: gradients and a {cfg.parity_steps}-step trajectory (dropout off, batch {b})")
    saved = {}
    for fw, w in workers.items():  # untimed: both frameworks at once
        w.send(cmd="cnn_parity", spec=spec.to_dict(), weights=ctx["weights"], tuned=cfg.tuned,
               batches=str(save_dir / "parity_batches.npz"), out=str(save_dir / f"parity-{fw}-r{n}.npz"))  # fmt: skip
    for fw, w in workers.items():
        w.answer()
        saved[fw] = dict(np.load(save_dir / f"parity-{fw}-r{n}.npz"))
    rows = []
    if first:  # one batch on one device: the same at every replica count; judged against float64
        rows += checks.grads(saved, load_npz(ctx["weights"]), x[0], y[0],
                             cnn_grad_tolerance(b, cfg.device, cfg.precision),
                             cnn_loss_tolerance(b, cfg.device, cfg.precision))  # fmt: skip
    if len(saved) == 2:
        tf_v = [k.split("/")[1] for k in saved["tf"] if k.startswith("traj/") and k.endswith("/loss")]
        jx_v = [k.split("/")[1] for k in saved["jax"] if k.startswith("traj/") and k.endswith("/loss")]
        if counts["tf"] != counts["jax"]:  # BatchNorm statistics are per replica: a different split is another model
            tf_v = []
            ctx["traj_skipped"] = (f"cnn: no TF-vs-JAX trajectory check: TensorFlow trained on {counts['tf']} "
                                   f"replicas, JAX on {counts['jax']} (BatchNorm statistics: per replica)")
        for tv in tf_v:
            for jv in jx_v:
                rows += checks.trajectory(saved["tf"], saved["jax"], tv, jv, tols, n)
    if first:
        src = saved.get("tf") or saved["jax"]
        v = next(k.split("/")[1] for k in src if k.startswith("traj/") and k.endswith("/loss"))
        trained = [src[f"traj/{v}/w{i:03d}"] for i in range(len(checks.WEIGHT_NAMES))]
        save_npz(trained, save_dir / "w_fwd.npz")
        xf = ds.x_test[:16].astype(np.float32)
        np.save(save_dir / "fwd_x.npy", xf)
        fwd = {}
        for fw, w in workers.items():
            w.send(cmd="cnn_parity", spec=spec.to_dict(), weights=str(save_dir / "w_fwd.npz"),
                   forward=str(save_dir / "fwd_x.npy"), out=str(save_dir / f"fwd-{fw}.npz"))  # fmt: skip
        for fw, w in workers.items():
            w.answer()
            fwd[fw] = dict(np.load(save_dir / f"fwd-{fw}.npz"))
        rows = checks.forward(fwd, cnn_forward(load_npz(save_dir / "w_fwd.npz"), xf), tols["forward"]) + rows
    for r in rows:
        r.setdefault("replicas", n)
        log(
            cfg,
            f"  {'PASS' if r['passed'] else 'FAIL'} {r['check']}: "
            + ", ".join(f"{k} {v:.2e}" for k, v in r["figures"].items())
            + f" (tolerance {r['tolerance']:.2g})" + (f"; {r['detail']}" if r.get("detail") else ""),
        )
    return rows


def _saved_error(a: str, b: str) -> float | None:
    """Max error between two saved outputs relative to the second's largest value; None if one is missing."""
    if not (Path(a).exists() and Path(b).exists()):
        return None
    return compare(np.load(a), np.load(b))["max_rel_err"]


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
