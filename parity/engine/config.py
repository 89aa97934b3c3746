"""What a run is asked to do (Config); the error that ends it and its progress lines are parity.common.messages."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from parity.api.cluster import Cluster
from parity.common import frameworks as known  # the table (Config.frameworks: the keys a run asked for)
from parity.common.frameworks import KEYS
from parity.common.messages import HarnessError
from parity.workloads import PLUGINS, WORKLOADS


@dataclass(frozen=True)
class Preset:
    """A complete configuration of a run's extent, written once: `--preset NAME` (`--quick` is 'quick'); a flag
    given beside it (--configs, --budget, --max-reps, --parity-steps, --replicas ...) overrides its own field."""

    name: str
    about: str  # one line, for --help: what it times and judges
    took: str  # one line, for --help: how long it took, on which CPU class (docs/results/<class>/)
    configs: str  # which variants are timed (parity.engine.selection)
    specs: str  # 'quick': every workload's --quick spec; 'device': the device's default; 'notebook': the notebook's
    budget_s: float  # an unsettled row's calls are added until their times add up to this (parity.judging.settling)
    max_reps: int  # at most this many calls a row
    parity_steps: int  # steps of the dropout-free trajectory check
    peak_size: int  # the side of the square matrix products that measure a CPU's peaks
    # the replica counts timed on a CPU: simulated devices beside one check the data-parallel code path on the same
    # cores (no speed a user can buy); 2 reach the code 8 reach, TF's per-replica tracing in a quarter of the time.
    # A GPU or TPU times one chip and all of them, whatever the preset.
    cpu_replicas: tuple[int, ...] = (1,)
    # 'timed': the trajectory checks train the variants the run times; 'catalog': every variant each implementation
    # offers. A variant the default does not time is trained and judged by `full`.
    parity: str = "catalog"

    def replica_counts(self, device: str) -> tuple[int, ...]:
        """The replica counts this preset times on `device` (0: every chip the device has)."""
        if device != "cpu":
            return (1, 0)
        return self.cpu_replicas


PRESETS = {
    p.name: p
    for p in (
        Preset(
            "quick",
            "tiny shapes at 1 and 2 replicas, each framework out of the box, every check",
            "1 min 27 s on zen5 and 2 min 6 s to 3 min 59 s on zen4 hosts with PyTorch and the ViT; 3 min 42 s on "
            "xeon-avx512 at batch 64 (docs/results/<class>/README.md); 1 min 50 s on one TPU v5e (docs/tpu.md)",
            # the peak's products at 1024: a fraction of 2048's time a measurement on one xeon-amx core, and about the
            # same peak on 2; a quick run's tiny rows are far below either
            "default", "quick", 2.0, 50, 3, 1024, (1, 2),
        ),
        Preset(
            "default",
            "the device's conv, matmul, CNN, LSTM and ViT sizes and schedules (a CPU's conv on 32 images, not 128), "
            "at one device (a GPU or TPU: one chip and all of them), each framework out of the box and at its "
            "best-known configuration, every row against float64, every timed variant's trajectory against one "
            "reference",
            "10 min 2 s to 13 min 14 s on zen4 hosts with PyTorch and the ViT (bfloat16 rows too); 7 min 10 s on "
            "xeon-avx512, three frameworks, no ViT, no bfloat16 rows, the conv on 128 images; 5 min 0 s on one TPU "
            "v5e, JAX and Keras 3 on JAX (docs/tpu.md)",
            "best", "device", 3.0, 30, 20, 4096, (1,), "timed",
        ),
        Preset(
            "full",
            "the default, and on a CPU 8 simulated devices too, each row's calls settled on a larger budget",
            "20 min 26 s on zen4 (bfloat16 rows too); 22 min 16 s on xeon-avx512, no bfloat16 rows; 14 min 23 s on "
            "xeon-amx, as its earlier default",
            "best", "device", 8.0, 200, 20, 4096, (1, 8),
        ),
        Preset(
            "levers",
            "the default, and each tuning on its own too: what checks that `best` names the fastest configuration",
            "30 min 31 s on zen4, bfloat16 rows too (docs/results/zen4/cpu-levers-log.txt); 20 min 55 s on "
            "xeon-avx512, no bfloat16 rows (before it ran best's several-steps rows under a setting)",
            "levers", "device", 8.0, 200, 20, 4096, (1,),
        ),
        Preset(
            "notebook",
            "the tensorflow/tpu notebook's schedule on any device, for each trained workload as it declares it: 10 "
            "epochs x 100 steps at global batch 1024, validated after every epoch",
            "hours on a 2-core CPU",
            "best", "notebook", 8.0, 200, 20, 4096, (1, 8),
        ),
    )
}  # fmt: skip


def chips(device: str, hello: dict) -> int:
    """The most `device` chips any worker of a round saw (its hello's device list: 'gpu:0 NVIDIA H200',
    '/device:GPU:0 (GPU)'); an accelerator's default times one chip, then every chip where there are several.
    Unverified on an accelerator here: the CPU machines have none."""
    return max((sum(device in d.lower() for d in h.get("devices", ())) for h in hello.values()), default=0)


@dataclass
class Config:
    device: str = "cpu"
    frameworks: tuple[str, ...] = KEYS
    workloads: tuple[str, ...] = ("conv",)
    replicas: tuple[int, ...] = ()
    precision: str = "default"
    preset: str = "default"  # PRESETS' name: what the run's extent was made from
    quick: bool = False  # every workload at its --quick spec (the 'quick' preset)
    reps: int = 5  # the minimum; parity.judging.settling adds calls to unsettled rows until budget_s of timed work
    budget_s: float = 8.0
    max_reps: int = 200
    tuned: bool = True  # also run each implementation's tuned configurations, as rows of their own
    profile: bool = False  # one more call per row, after its timed ones, under the framework's profiler
    configs: str = "best"  # with tuned: 'best', 'levers' or 'all' (parity.engine.selection: which variants each times)
    extra_settings: dict = field(default_factory=dict)  # framework -> {name: env}: more settings, each a worker
    warmup: int = 0  # more untimed calls of an operation before its first turn (each turn begins with one)
    timeout_s: float = 1800.0
    progress: bool = True
    verbose: bool = False  # the per-row table, every check and the notes on stdout too (they are in results.md)
    data: str = "auto"
    data_dir: str | None = None
    validate: str = "auto"  # a trained workload's evaluation: 'epoch', 'end', 'none', or 'auto' (its suite decides)
    overrides: dict = field(default_factory=dict)  # spec fields from the command line (global_batch, epochs, ...)
    notebook: bool = False  # each trained workload on the notebook's schedule, as it declares it (Workload.notebook)
    parity_steps: int = 20
    parity_variants: str = "catalog"  # the preset's: 'timed' or 'catalog' (Preset.parity)
    seeds: int = 1  # CNN training runs per variant (init, dropout and batch order seeded differently)
    cluster: Cluster | None = None  # one process of a multi-process run (parity.engine.cluster); None: the only one
    command: tuple[str, ...] = ("python", "-m", "parity.run")  # how this run was started, for advice to rerun
    exclusive: bool = False  # one owner of the device at a time (a TPU host: libtpu takes one process)
    ahead: bool = False  # trained workloads' programs compiled side by side before first calls (parity.engine.ahead)
    pythons: dict = field(default_factory=dict)  # framework -> the interpreter its workers run in (default: this one)

    def spec(self, wl: str):
        """The workload's spec for this run: --quick, the device's default schedule, the notebook's, then overrides."""
        return WORKLOADS[wl].spec(self.quick, self.device, self.overrides, self.notebook)

    def check_batches(self) -> None:
        """Before anything starts: a batch that does not split over the replicas is the user's to fix."""
        for wl in self.workloads:
            spec = self.spec(wl)
            batch = spec.batch
            if batch > getattr(spec, "train_size", batch):
                raise HarnessError(
                    f"{wl}: global batch {batch} is larger than the training set ({spec.train_size} images)"
                )
            for r in self.replica_counts():
                if r and batch % r:
                    fits = [d for d in (1, 2, 4, 8, 16, 32) if batch % d == 0]
                    how = "a --batch that divides, or " if "global_batch" in WORKLOADS[wl].options else ""
                    raise HarnessError(
                        f"{wl}: global batch {batch} does not divide by {r} replicas; choose {how}"
                        f"--replicas among {', '.join(map(str, fits))}"
                    )

    def size_notes(self) -> list[str]:
        """Each operation run at another size than its full one, said (Workload.size_note)."""
        return [n for wl in self.workloads for n in WORKLOADS[wl].size_note(self.spec(wl))]

    def replica_counts(self) -> tuple[int, ...]:
        """What was asked, else the preset's (Preset.replica_counts: the CPU default one device; `full` 1 and 8
        simulated devices, `quick` 1 and 2; a GPU or TPU one chip and every chip, 0).

        A multi-process run has one: every process's devices (0)."""
        if self.cluster is not None:
            return (0,)
        if self.replicas:
            return self.replicas
        return PRESETS["quick" if self.quick else self.preset].replica_counts(self.device)

    def rounds(self, replicas: int = 1) -> list[Config]:
        """The run's workloads in the rounds over `replicas` devices that share one set of workers: all of them, but
        one workload a round where every configuration runs (`--configs levers` or `all`: a dozen workers on a CPU).
        There each worker keeps what its largest buffers took (TensorFlow's allocator, the '+heap' settings' malloc):
        on zen4 the machine's used memory peaked at 20.5 GB in the conv's round, 12.4 GB in the CNN's
        (docs/results/zen4/cpu-levers-memory.txt); with one set of workers for every workload, the next workloads
        came on top of the conv's until the kernel killed a worker at 23 GiB. Over several devices, the frameworks
        without data parallelism (left_out) are not in them; none if no framework is left."""
        left = {s["framework"] for s in self.left_out(replicas)}
        cfg = replace(self, frameworks=tuple(fw for fw in self.frameworks if fw not in left))
        if not cfg.frameworks:
            return []
        if cfg.tuned and cfg.configs in ("levers", "all") and len(cfg.workloads) > 1:
            return [replace(cfg, workloads=(wl,)) for wl in cfg.workloads]
        return [cfg]

    def left_out(self, replicas: int) -> list[dict]:
        """The frameworks that offer no variant over `replicas` devices (0: every chip, which may be one, is not
        several), each with why: the run's skipped notes."""
        out = [
            {
                "framework": fw,
                "reason": f"over {replicas} devices: {known.label(fw)} offers no data-parallel variant",
            }
            for fw in self.frameworks
            if replicas > 1 and fw in known.TABLE and not known.TABLE[fw].data_parallel
        ]
        return out + self.without_adapters([s["framework"] for s in out])

    def without_adapters(self, skipped: list[str] = ()) -> list[dict]:
        """The frameworks that have an adapter for none of the run's workloads (a plug-in's package with modules for
        some frameworks only), each with why: no worker of theirs starts."""

        def has(wl: str, fw: str) -> bool:
            found = PLUGINS.get(wl)
            return found is None or not found.frameworks or fw in found.frameworks

        return [
            {"framework": fw, "reason": f"no adapter for {', '.join(self.workloads)}"}
            for fw in self.frameworks
            if fw not in skipped and self.workloads and not any(has(wl, fw) for wl in self.workloads)
        ]

    def matmul_size(self) -> int:
        """The side of the square matrix products that measure a CPU's peaks (the preset's)."""
        return PRESETS["quick" if self.quick else self.preset].peak_size
