"""A fake framework behind parity.api.FrameworkImpl, and a worker that serves it in this process.

FakeImpl computes the conv and the matmul with NumPy (float32 copies of the float64 oracle), deterministic, with a
controllable time per call (`delay_s`), a planted relative error (`error`) and a planted bug (`bug`: a TypeError
at the first call). LocalWorker has workerproc.Worker's interface and answers with parity.engine.worker's own code, so
the engine (schedule, rows, judging, peaks, files) runs in seconds, without TensorFlow or JAX. The CNN is not
faked: its variants are none.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from parity import api
from parity.api.variants import MANY, ONE, offered
from parity.common import float64 as oracle
from parity.common.frameworks import label
from parity.common.protocol import decode_request, encode
from parity.engine import memory, peaks, timing, worker, workerproc
from parity.engine.config import Config
from parity.engine.workerproc import Worker
from parity.judging import roofline


def _touch_and_unmap(nbytes: int) -> None:
    """A call's workspace: an anonymous mapping of its own, every page written, then unmapped. The kernel counts
    each page in the resident set and unmapping it updates VmHWM, whatever the allocator holds: a malloc'ed
    buffer may reuse pages some earlier test left resident, and then no rise is there to see."""
    with mmap.mmap(-1, nbytes) as m:
        view = np.frombuffer(m, np.uint8)
        view.fill(1)
        del view  # the mapping cannot close while an array exports it


class FakeClock:
    """A perf_counter that moves only when told: a fake's call advances it by its delay, its verification by
    `verify_s`, so what a timed interval holds is known exactly, whatever this machine's speed."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeImpl:
    """One framework's fake: variants 'op' (out of the box) and 'op+tuned' on one device, 'sharded' on several."""

    delay_s: float = 0.1
    delays: tuple[float, ...] = ()  # where given, a case's k-th call takes delays[k % len(delays)] instead
    error: float = 0.0
    bug: bool = False
    configs: dict = field(default_factory=dict)  # tuned configurations offered: name -> environment
    clock: FakeClock | None = None  # time on a fake clock: a call takes delay_s on it, synchronising block_s,
    block_s: float = 0.0  # reading the output for verification verify_s (which no timed interval may hold)
    verify_s: float = 0.0
    workspace_mb: int = 0  # memory each call touches and frees again (its peak memory, beside its output)
    # the knobs its declared tables (VARIANTS, SETTINGS: parity.api.variants records) are made from: which variant
    # names are tuned, bfloat16, dispatch-only, in the best-known order; each setting's formats and the settings' order
    tuned_names: tuple[str, ...] = ("op+tuned",)
    setting_formats: dict = field(default_factory=dict)  # a setting not named here declares none (formats None)
    bf16_names: tuple[str, ...] = ()
    dispatch_names: tuple[str, ...] = ()
    best_names: tuple[str, ...] = ("op+tuned", "sharded")
    setting_order: tuple[str, ...] = ()

    @property
    def VARIANTS(self) -> tuple[api.Variant, ...]:  # noqa: N802 - the surface's name
        return tuple(
            api.Variant(
                name,
                kind,
                ONE if name.startswith("op") else MANY,
                "bfloat16" if name in self.bf16_names else "float32",
                tuned=name in self.tuned_names,
                dispatch=name in self.dispatch_names,
                rank=self.best_names.index(name) if name in self.best_names else None,
            )
            for kind in ("conv", "matmul")
            for name in ("op", "op+tuned", *self.bf16_names, "sharded")
        )

    @property
    def SETTINGS(self) -> tuple[api.Setting, ...]:  # noqa: N802 - the surface's name
        order = self.setting_order
        return tuple(
            api.Setting(k, env, self.setting_formats.get(k), order.index(k) if k in order else None)
            for k, env in self.configs.items()
        )

    def variants(self, kind, replicas):
        return offered(self.VARIANTS, kind, replicas)

    def settings(self, device, native_bf16=False):
        return self.SETTINGS

    # devices
    def setup_devices(self, device, replicas, cluster=None):
        if device != "cpu":
            raise api.DeviceUnavailable(f"no {device} here (fake)")
        return [f"cpu:{i}" for i in range(replicas or 1)]

    def set_precision(self, precision):
        pass

    def check_compiler(self, devices):
        return contextlib.nullcontext(), ""

    def device_kind(self):
        return "cpu"

    def describe_devices(self):
        return "fake cpu"

    def list_devices(self):
        return ["cpu:0"]

    def process_info(self, devices):
        return {"process_id": 0, "num_processes": 1, "local_replicas": len(devices)}

    def placement(self, out):
        return out.placement

    def block(self, out):
        if self.clock:
            self.clock.advance(self.block_s)

    def slowest(self, seconds):
        return seconds

    def memory_stats(self, devices):
        return None

    def reset_memory_peak(self, devices):
        return False

    def trace_ops(self, directory, program=None):
        from pathlib import Path

        return [("fake/op", 0.05)] if (Path(directory) / "fake.trace").exists() else []

    def trace(self, directory):  # a fake profile: one file that says which calls ran inside it
        import contextlib
        from pathlib import Path

        @contextlib.contextmanager
        def traced():
            Path(directory).mkdir(parents=True, exist_ok=True)
            (Path(directory) / "fake.trace").write_text("traced\n")
            yield

        return traced()

    # the workloads' adapters: the conv's and the matmul's; the trained models' build nothing (their variants are none)
    def adapter(self, workload):
        if workload == "conv":
            return SimpleNamespace(WORKLOAD=workload, conv_op=self._conv_op, prepare=self._prepare_conv)
        if workload == "matmul":
            return SimpleNamespace(WORKLOAD=workload, prepare=self._prepare_matmul)
        return SimpleNamespace(WORKLOAD=workload, build=self._no_cnn)

    def _conv_op(self, images, kernels, stride=2, padding="SAME"):
        return oracle.conv2d(images, kernels, stride, padding).astype(np.float32)

    def _prepare_conv(self, variant, images, kernels, devices, stride=2, padding="SAME"):
        return self._prepared(lambda: self._conv_op(images, kernels, stride, padding), devices)

    def _prepare_matmul(self, variant, a, b, devices):
        return self._prepared(lambda: (a.astype(np.float64) @ b).astype(np.float32), devices)

    def _prepared(self, compute, devices) -> api.Prepared:
        value = compute() * np.float32(1 + self.error)
        out = SimpleNamespace(value=value, placement=[str(d) for d in devices])  # setup_devices' names

        calls = [0]

        def run():
            delay = self.delays[calls[0] % len(self.delays)] if self.delays else self.delay_s
            calls[0] += 1
            if self.bug:
                raise TypeError("a planted bug")
            if self.workspace_mb:
                _touch_and_unmap(self.workspace_mb * 2**20)
            if self.clock:
                self.clock.advance(delay)
            else:
                time.sleep(delay)
            return out

        def reading(read):  # verification's reads of the output: they take verify_s on the fake clock
            def f(*a):
                if self.clock:
                    self.clock.advance(self.verify_s)
                return read(*a)

            return f

        return api.Prepared(
            run,
            reading(lambda o: o.value.shape),
            reading(lambda o, idx: o.value[list(idx)]),
            reading(lambda o: o.placement),
            lambda: (None, "fake: no counter"),
        )

    # the CNN: not faked (its variants are none)
    def _no_cnn(self, *a, **k):
        raise NotImplementedError("the fake implements no CNN")


class LocalWorker:
    """workerproc.Worker's interface, answered in this process by parity.engine.worker on FAKES[framework][setting]."""

    FAKES: dict[str, dict[str, FakeImpl]] = {}  # framework -> configuration ('default', a tuned one) -> its fake
    CLOCK: FakeClock | None = None  # where set, a fake without a clock of its own takes this one (no real sleeps)

    def __init__(
        self,
        framework,
        device,
        replicas,
        precision,
        timeout_s,
        setting="default",
        setting_env=None,
        cluster=None,
        tmp_dir=None,
        python=None,
        lock=None,
        waits=False,  # a next owner started early: these fakes take no lock, so nothing to wait for
    ):
        self.framework, self.setting, self.setting_env = framework, setting, setting_env or {}
        self.python, self.timeout_s = python or sys.executable, timeout_s
        self.env = {**os.environ, **self.setting_env}
        self.label = label(framework) + ("" if setting == "default" else f" ({setting})")
        self.impl = self.FAKES[framework][setting]
        if self.impl.clock is None:
            self.impl.clock = self.CLOCK
        self.args = SimpleNamespace(framework=framework, device=device, replicas=replicas, precision=precision)
        self.timers: dict = {}
        self.asked: list = []  # every request (parity.common.protocol), in order
        self.sent: deque = deque()
        try:
            self.devices = self.impl.setup_devices(device, replicas)
            self.args.memory = memory.source_for(self.impl, self.devices, device)  # as worker.serve does
            self.args.compiling = None
            self.pending = deque([worker.hello(self.impl, self.devices, self.args)])
        except api.DeviceNotOffered as e:
            self.pending = deque([{"status": "not offered", "error": str(e)}])
        except api.DeviceUnavailable as e:
            self.pending = deque([{"status": "unavailable", "error": str(e)}])

    def recv(self, timeout_s=None) -> dict:
        return self.pending.popleft()

    def send(self, req) -> None:
        """Answered at once by the worker's own code, over the wire's encoding both ways."""
        self.asked.append(req)
        self.sent.append(req)
        answer = worker.respond(self.impl, self.devices, self.args, self.timers, decode_request(encode(req)))
        self.pending.append(answer if isinstance(answer, dict) else json.loads(encode(answer)))

    answer = Worker.answer
    ask = Worker.ask

    def ask_to_quit(self, kill: bool = False) -> None:
        pass

    def wait_quit(self, timeout_s: float = 10) -> None:
        pass

    close = Worker.close


def quick_config(frameworks, workloads, reps: int, **more) -> Config:
    """A `--quick` run's Config for the fakes: exactly `reps` timed calls a row (no time budget, the cap at `reps`),
    no warm-up, no progress lines; `more` (replicas, exclusive, ...) on top."""
    return Config(
        frameworks=frameworks,
        workloads=workloads,
        quick=True,
        reps=reps,
        max_reps=reps,
        budget_s=0.0,
        warmup=0,
        progress=False,
        **more,
    )


def fake_engine(monkeypatch, peak: roofline.Peak, fakes: dict[str, dict[str, FakeImpl]]) -> FakeClock:
    """The engine on fakes in this process: every worker a LocalWorker on `fakes` (framework -> configuration ->
    FakeImpl), the CPU peak fixed at `peak`, and time a fake clock's (time.perf_counter, and every fake's without a
    clock of its own): a fake's call advances it, nothing sleeps. Returns the clock."""
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    monkeypatch.setattr(LocalWorker, "CLOCK", clock)
    monkeypatch.setattr(LocalWorker, "FAKES", fakes)
    monkeypatch.setattr(workerproc, "Worker", LocalWorker)
    monkeypatch.setattr(peaks, "cpu_peak", lambda n: peak)
    monkeypatch.setattr(peaks, "remeasured", lambda p, n: p)
    return clock
