"""The worker processes: one `parity.engine.worker` per framework and configuration, started, asked and stopped."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path

from parity.api.cluster import Cluster
from parity.api.variants import Setting, setting_from_wire
from parity.common import protocol
from parity.common.frameworks import label
from parity.common.messages import HarnessError, WorkerBug
from parity.engine import devicelock, selection
from parity.engine.config import Config
from parity.engine.devicelock import DEVICE_LOCK, DEVICE_LOCK_WAIT

ROOT = Path(__file__).resolve().parent.parent  # the checkout: parity/, tf_impl/, jax_impl/

# What a worker's last words mean, where the framework's own are obscure.
DEATH_HINTS = (
    (("RegisterTask", "DEADLINE_EXCEEDED"), ": it could not reach the JAX coordinator in time"),
    (("distributed service detected fatal errors",), ": another process of the run stopped"),
    (("Failed to add port to server",), ": a port it needs is already taken"),
    (("Timeout (", "_initialize_multi_worker"), ": it could not reach the other TensorFlow workers in time"),
    (("TPU is already in use",), ": another process owns the TPU (libtpu allows one per host; docs/tpu.md)"),
)


class Worker:
    """A `parity.engine.worker` process for one framework on one device set."""

    def __init__(
        self,
        framework: str,
        device: str,
        replicas: int,
        precision: str,
        timeout_s: float,
        setting: str = "default",
        setting_env: dict | None = None,
        cluster: Cluster | None = None,
        tmp_dir: Path | None = None,
        python: str | None = None,
        lock: Path | None = None,
        waits: bool = False,
    ):
        self.framework, self.timeout_s, self.setting = framework, timeout_s, setting
        self.python = python or sys.executable
        self.setting_env = setting_env or {}
        self.label = label(framework) + ("" if setting == "default" else f" ({setting})")
        self.env = env = _environment(self.setting_env, tmp_dir, lock, python, waits)  # what the worker runs with
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"parity-{framework}-", suffix=".log")
        cmd = [self.python, "-m", "parity.engine.worker", "--framework", framework, "--device", device]
        cmd += ["--replicas", str(replicas), "--precision", precision]
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
        self.sent: deque[protocol.Request] = deque()  # requests awaiting their answers, in order
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr_tail(self, n: int = 15) -> str:
        """The last lines the worker wrote, without C++ stack-trace frames."""
        self.log.flush()
        self.log.seek(0)
        lines = [
            ln
            for ln in self.log.read().splitlines()
            if ln.strip() and not ln.lstrip().startswith(("@ ", "*** Check failure"))
        ]
        return "\n".join(lines[-n:])

    def recv(self, timeout_s: float | None = None) -> dict:
        try:
            line = self.lines.get(timeout=timeout_s or self.timeout_s)
        except queue.Empty:  # a worker that did not answer in time reads no request either: killed at once
            self.close(kill=True)
            raise HarnessError(
                f"{self.label} worker gave no answer in {timeout_s or self.timeout_s:g} s; stopped it"
            ) from None
        if line is None:
            raise self._died()
        try:
            return json.loads(line)
        except ValueError:  # something else printed on the worker's protocol stream (another interpreter's banner)
            self.close()
            raise HarnessError(
                f"{self.label} worker ({self.python or sys.executable}) printed no protocol line: {line[:80]!r}"
            ) from None

    def _died(self) -> HarnessError:
        """Which worker died and how: its exit code or the signal that killed it, and its last words."""
        self.proc.wait()
        rc = self.proc.returncode
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals() else f"exit code {rc}"
        tail = self.stderr_tail()
        why = next((hint for marks, hint in DEATH_HINTS if all(m in tail for m in marks)), "")
        if why:  # the framework's own words, shortened
            tail = "\n".join(tail.splitlines()[:4])
        return HarnessError(f"{self.label} worker died ({how}){why}", tail)

    def send(self, req: protocol.Request) -> None:
        """Send a request; its answer comes, in order, from answer()."""
        try:
            self.proc.stdin.write(protocol.encode(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ConnectionResetError):  # it is gone: say which and how, not "Broken pipe"
            raise self._died() from None
        self.sent.append(req)

    def answer(self):
        """The answer to the oldest request sent and not yet answered, as the record it declares."""
        resp = self.recv()
        req = self.sent.popleft() if self.sent else None
        if "error" in resp:
            if resp.get("bug"):
                raise WorkerBug(f"{self.label} worker: {resp['error']}", resp.get("traceback", ""))
            raise HarnessError(f"{self.label} worker: {resp['error']}")
        return resp if req is None else protocol.decode_answer(req, resp)

    def ask(self, req: protocol.Request):
        self.send(req)
        return self.answer()

    def close(self, kill: bool = False) -> None:
        """Ask the worker to quit (kill: stop it at once, as when the run is interrupted); remove its log."""
        self.ask_to_quit(kill)
        self.wait_quit()

    def ask_to_quit(self, kill: bool = False) -> None:
        """The first half of close(): several workers asked at once then exit side by side."""
        if self.proc.poll() is None and kill:
            self.proc.kill()
        elif self.proc.poll() is None:
            try:
                self.proc.stdin.write(protocol.encode(protocol.Quit()) + "\n")
                self.proc.stdin.flush()
            except OSError:
                self.proc.kill()

    def wait_quit(self, timeout_s: float = 10) -> None:
        """The second half of close(): wait for the worker to exit (killed after timeout_s); remove its log."""
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# Settings that hold a list, which a configuration's own entries join: XLA's flags, glibc's tunables.
LIST_SEPARATORS = {"XLA_FLAGS": " ", "GLIBC_TUNABLES": ":"}


# What the harness tells its workers through their environment, never read from the user's: a value inherited from
# the caller's shell is dropped (PARITY_DEVICE_LOCK named a file each worker would take and truncate)
INTERNAL = (DEVICE_LOCK, DEVICE_LOCK_WAIT)


def _environment(
    setting_env: dict, tmp_dir: Path | None, lock: Path | None, python: str | None, waits: bool = False
) -> dict:
    """A worker's environment: this process's (less INTERNAL), with its configuration's settings and the run's own."""
    env = {k: v for k, v in os.environ.items() if k not in INTERNAL}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    for k, v in setting_env.items():  # appended to the user's own settings, never replacing them
        sep = LIST_SEPARATORS.get(k)
        env[k] = f"{env[k]}{sep}{v}" if sep and env.get(k, "").strip() else v
    if tmp_dir is not None:  # what the frameworks write (autograph's generated files) goes with the run's files
        env["TMPDIR"] = str(tmp_dir)
    # Both workers live at once: neither may grab the whole accelerator's memory up front.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    if lock is not None:  # one owner at a time, enforced as libtpu does (parity.engine.devicelock.own_device)
        env[DEVICE_LOCK] = str(lock)
        if waits:  # started early: it waits for the lock, its imports done
            env[DEVICE_LOCK_WAIT] = "1"
    if python:  # another environment's interpreter: it finds this checkout's parity and the implementations
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def tuned_settings(cfg: Config, fw: str, hello: dict) -> dict[str, dict]:
    """The settings a framework's workers run with besides its default, in order (parity.engine.selection): those
    its implementation names in its hello, then the command line's. name -> environment."""
    offered = [setting_from_wire(d) for d in hello.get("settings", ())]
    extra = [Setting(k, env, None) for k, env in cfg.extra_settings.get(fw, {}).items()]
    return {s.name: dict(s.env) for s in selection.settings_to_run(cfg.configs, offered, extra)}


def start_workers(
    cfg: Config, replicas: int, tmp_dir: Path | None = None, meanwhile=None
) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:
    """Start every framework's workers at once (one per tuned configuration too), calling `meanwhile()` (untimed
    work of the parent's) while the default ones start up; returns (ready workers, their hello, skipped notes),
    keyed 'tf', 'jax', 'jax+ynn', ...

    Raises:
        HarnessError: the device is absent (one line naming what was asked and what was found).
    """

    def spawn(fw: str, k: int = 0, name: str = "default", env: dict | None = None) -> Worker:
        # multi-process: each configuration's workers meet at a coordinator port of their own (k)
        cluster = cfg.cluster.for_config(k) if cfg.cluster else None
        python = cfg.pythons.get(fw)
        return Worker(fw, cfg.device, replicas, cfg.precision, cfg.timeout_s, name, env, cluster, tmp_dir, python)

    workers = {fw: spawn(fw) for fw in cfg.frameworks}
    try:
        if meanwhile is not None:
            meanwhile()
    except BaseException:
        for w in workers.values():
            w.close(kill=True)
        raise
    ready, hello, skipped = await_workers(cfg, workers)
    if cfg.tuned:  # each implementation names its own process-wide settings in its hello
        tuned = {}
        for fw in list(ready):
            for k, (name, env) in enumerate(tuned_settings(cfg, fw, hello[fw]).items(), 1):
                tuned[f"{fw}+{name}"] = spawn(fw, k, name, env)
        try:
            more, more_hello, _ = await_workers(cfg, tuned)
        except BaseException:
            for w in ready.values():
                w.close()
            raise
        ready.update(more)
        hello.update(more_hello)
    return ready, hello, skipped


def await_workers(cfg: Config, workers: dict[str, Worker]) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:
    """Each worker's first words: ready, missing (its framework is not installed), not offered (no code path for the
    device: left out beside other frameworks) or unavailable (the device)."""
    ready, hello, skipped, absent = {}, {}, [], []
    wait_s = min(300, cfg.timeout_s) + (cfg.cluster.timeout_s if cfg.cluster else 0)  # joining waits for every process
    try:
        for key, w in workers.items():
            msg = w.recv(timeout_s=wait_s)
            if msg.get("status") == "ready" and not isinstance(msg.get("replicas"), int):
                w.close()  # its hello says where its rows ran: without it, nothing of it can be read
                raise HarnessError(f"{w.label} worker's first words name no replica count: not this version's worker")
            if msg.get("status") == "ready":
                ready[key], hello[key] = w, msg
                continue
            w.close()
            if msg["status"] == "missing" and w.python != sys.executable:  # an interpreter chosen for it
                absent.append(f"{w.label}: {msg['error']} (--python {w.framework}={w.python})")
            elif msg["status"] == "missing" or (msg["status"] == "not offered" and len(cfg.frameworks) > 1):
                if w.setting == "default":  # not installed, or no code path for this device beside others that run
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


def with_workers(workers: dict[str, Worker], work, early: tuple[str, Worker] | None = None):
    """work() with `workers` running; then they are stopped (at once, if work was interrupted or failed, and with them
    the next owner started `early`, which is otherwise left to start_owner)."""
    stopped = False
    try:
        return work()
    except BaseException:  # interrupted or failed: the workers are stopped now, not asked to finish
        stopped = True
        raise
    finally:  # all asked first, so that they exit side by side
        others = [early[1]] if stopped and early else []
        for w in [*workers.values(), *others]:
            w.ask_to_quit(kill=stopped)
        for w in [*workers.values(), *others]:
            w.wait_quit()


def owner(
    cfg: Config, replicas: int, fw: str, name: str, env: dict, k: int, save_dir: Path, early: bool = False
) -> tuple[str, Worker]:
    """The worker of one owner of the device (a framework in one configuration; k: its coordinator port offset),
    started; `early`: while another owns the device, its imports done before it waits for the device."""
    key = fw if name == "default" else f"{fw}+{name}"
    w = Worker(
        fw,
        cfg.device,
        replicas,
        cfg.precision,
        cfg.timeout_s,
        name,
        env,
        cfg.cluster.for_config(k) if cfg.cluster else None,
        save_dir / "tmp",
        cfg.pythons.get(fw),
        # one path for every run of this user here: a run's own would lock nothing but itself. A multi-process run's
        # processes share their host's devices by design: theirs stays the run's own
        devicelock.device_lock_path(cfg.device) if cfg.cluster is None else save_dir / "device.lock",
        waits=early,
    )
    return key, w


def start_owner(
    cfg: Config, replicas: int, fw: str, name: str, env: dict, k: int, save_dir: Path, early=None
) -> tuple[dict[str, Worker], dict[str, dict], list[dict]]:
    """One worker alone on the device (owner's arguments), its first words read; `early`: owner's (key, worker) for
    it, started early."""
    key, w = early or owner(cfg, replicas, fw, name, env, k, save_dir)
    return await_workers(cfg, {key: w})
