"""The parent side: start one worker process per framework, interleave their timed calls, gather rows."""

from __future__ import annotations

import json
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

from parity.oracle import compare
from parity.workloads import SPECS, check_divisible, tolerance

FRAMEWORKS = ("tf", "jax")
FRAMEWORK_NAMES = {"tf": "TensorFlow", "jax": "JAX"}


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
    reps: int = 5
    warmup: int = 1
    timeout_s: float = 1800.0
    progress: bool = True
    extra: dict = field(default_factory=dict)

    def replica_counts(self) -> tuple[int, ...]:
        """What was asked, else 1 and 8 simulated devices on a CPU, else every core (0)."""
        if self.replicas:
            return self.replicas
        return (1, 8) if self.device == "cpu" else (0,)


def log(cfg: Config, msg: str) -> None:
    if cfg.progress:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Worker:
    """A `parity.worker` process for one framework on one device set."""

    def __init__(self, framework: str, device: str, replicas: int, precision: str, timeout_s: float):
        self.framework, self.timeout_s = framework, timeout_s
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
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
        self.log.flush()
        self.log.seek(0)
        lines = [ln for ln in self.log.read().splitlines() if ln.strip()]
        return "\n".join(lines[-n:])

    def recv(self, timeout_s: float | None = None) -> dict:
        try:
            line = self.lines.get(timeout=timeout_s or self.timeout_s)
        except queue.Empty:
            self.close()
            raise HarnessError(
                f"{FRAMEWORK_NAMES[self.framework]} worker gave no answer in "
                f"{timeout_s or self.timeout_s:.0f} s; stopped it"
            ) from None
        if line is None:
            self.proc.wait()
            raise HarnessError(
                f"{FRAMEWORK_NAMES[self.framework]} worker died (exit code "
                f"{self.proc.returncode}):\n{self.stderr_tail()}"
            )
        return json.loads(line)

    def ask(self, **msg) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        resp = self.recv()
        if "error" in resp:
            raise HarnessError(f"{FRAMEWORK_NAMES[self.framework]} worker: {resp['error']}")
        return resp

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
    """Start every framework's worker at once; returns (ready workers, their hello, skipped notes).

    Raises:
        HarnessError: the device is absent (one line naming what was asked and what was found).
    """
    workers = {fw: Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s) for fw in cfg.frameworks}
    ready, hello, skipped, absent = {}, {}, [], []
    try:
        for fw, w in workers.items():
            msg = w.recv(timeout_s=300)
            if msg["status"] == "ready":
                ready[fw], hello[fw] = w, msg
                continue
            w.close()
            if msg["status"] == "missing":
                skipped.append({"framework": fw, "reason": msg["error"]})
            else:
                absent.append(f"{FRAMEWORK_NAMES[fw]}: {msg['error']}")
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
    """Run every workload x framework x variant x replica count; returns {"rows", "hello", "skipped"}."""
    rows, hello_all, skipped = [], {}, []
    for wl in cfg.workloads:
        spec = SPECS[wl][1 if cfg.quick else 0]
        for r in cfg.replica_counts():
            if r:
                check_divisible(spec.batch, r)
    for r in cfg.replica_counts():
        log(
            cfg,
            f"starting {', '.join(FRAMEWORK_NAMES[f] for f in cfg.frameworks)} workers on {cfg.device} x{r or 'all'}",
        )
        workers, hello, skip = start_workers(cfg, r)
        skipped.extend(s for s in skip if s not in skipped)
        try:
            for fw, h in hello.items():
                hello_all.setdefault(fw, h)
            for wl in cfg.workloads:
                rows.extend(_run_workload(cfg, wl, workers, hello, save_dir))
        finally:
            for w in workers.values():
                w.close()
    _cross_check(rows, save_dir)
    return {"rows": rows, "hello": hello_all, "skipped": skipped}


def _run_workload(cfg: Config, wl: str, workers: dict[str, Worker], hello: dict, save_dir: Path) -> list[dict]:
    spec = SPECS[wl][1 if cfg.quick else 0]
    cases = []
    for fw, w in workers.items():
        n = hello[fw]["replicas"]
        for variant in w.ask(cmd="variants", workload=wl)["variants"]:
            key = f"{wl}-{fw}-{variant}-r{n}".replace("+", "_")
            cases.append((fw, variant, n, key))
    for fw, variant, n, key in cases:
        log(cfg, f"{wl}: compiling {FRAMEWORK_NAMES[fw]} {variant} x{n}")
        resp = workers[fw].ask(
            cmd="prepare", id=key, workload=wl, variant=variant, spec=spec.to_dict(), save=str(save_dir / f"{key}.npy")
        )
        if resp["invalid"]:
            log(cfg, f"  INVALID: {resp['invalid']}")
        else:
            log(cfg, f"  first call {resp['compile_s']:.3f} s, output verified")
    for _ in range(cfg.warmup):
        for fw, _v, _n, key in cases:
            workers[fw].ask(cmd="warm", id=key)
    for i in range(cfg.reps):
        order = cases if i % 2 == 0 else cases[::-1]  # alternate so no case always runs first
        times = []
        for fw, variant, _n, key in order:
            t = workers[fw].ask(cmd="rep", id=key)["time"]
            times.append(f"{fw} {variant} {t:.4f}s" if t is not None else f"{fw} {variant} invalid")
        log(cfg, f"{wl} rep {i + 1}/{cfg.reps}: " + ", ".join(times))
    rows = []
    for fw, variant, n, key in cases:
        res = workers[fw].ask(cmd="result", id=key)
        med = res.get("median_s")
        row = {
            "workload": wl,
            "framework": fw,
            "variant": variant,
            "device": cfg.device,
            "device_kind": hello[fw]["device_kind"],
            "replicas": n,
            "precision": cfg.precision,
            "quick": cfg.quick,
            "median_s": med,
            "iqr_s": res.get("iqr_s"),
            "min_s": res.get("min_s"),
            "reps": res.get("reps"),
            "compile_s": res.get("compile_s"),
            "gflops_per_s": res["flops"] / med / 1e9 if med else None,
            "flops": res["flops"],
            "min_bytes": res["min_bytes"],
            "max_abs_err": res.get("max_abs_err"),
            "max_rel_err": res.get("max_rel_err"),
            "tolerance": tolerance(cfg.device, cfg.precision),
            "verified": res["invalid"] is None and med is not None,
            "invalid_reason": res["invalid"],
            "_save": str(save_dir / f"{key}.npy"),
        }
        rows.append(row)
    return rows


def _cross_check(rows: list[dict], save_dir: Path) -> None:
    """Each row's oracle rows against every other framework's, same workload: max relative error."""
    for row in rows:
        worst = None
        for other in rows:
            if other["framework"] == row["framework"] or other["workload"] != row["workload"]:
                continue
            if not (row["verified"] and other["verified"]):
                continue
            a, b = np.load(row["_save"]), np.load(other["_save"])
            err = compare(a, b)["max_rel_err"]
            worst = err if worst is None else max(worst, err)
        row["xfw_max_rel_err"] = worst
    for row in rows:
        row.pop("_save")
