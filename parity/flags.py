"""The command line of `python -m parity.run`: every flag with its help, and the argparse types that refuse bad
values with the flag named."""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
from pathlib import Path

from parity import frameworks
from parity.config import HarnessError
from parity.workloads import DEVICES, PRECISIONS, WORKLOADS

EXAMPLES = """examples:
  python -m parity.run --device cpu --quick        # minutes: both frameworks, tiny shapes, every check
  python -m parity.run --device cpu                # the article's full-size workloads, 1 and 8 replicas
  python -m parity.run --device gpu --framework jax --precision highest
  python -m parity.run --device tpu --workload cnn --schedule notebook --data download   # the notebook's table
  python -m parity.run --list-devices              # what each framework sees (the article's first step)
"""


class Parser(argparse.ArgumentParser):
    """argparse, with a bad flag said in one line (not the whole usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (--help explains every flag)\n")


DAY = 86400.0
MAX_SECONDS = 7 * DAY  # no step of a run waits longer than a week (and time.monotonic arithmetic stays exact)


def seconds(allow_zero: bool, most: float = MAX_SECONDS):
    """An argparse type: a finite number of seconds, >= 0 or > 0, at most `most` (inf and nan are refused, with
    the flag named)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
        if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be a finite number {'>=' if allow_zero else '>'} 0, got {text!r}")
        if v > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:g} s, got {text!r}")
        return v

    return parse


def whole(low: int, high: int, why: str = ""):
    """An argparse type: a whole number from `low` to `high`; `why` says where the upper bound comes from."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
        if n > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}{f' ({why})' if why else ''}, got {n}")
        return n

    return parse


def at_least(low: int, high: int = 10**6, why: str = ""):
    """An argparse type: a whole number >= `low` (and at most `high`)."""
    return whole(low, high, why)


def out_dir(text: str) -> Path:
    """An argparse type: a directory path; the empty string is refused (it would mean the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a directory, got an empty path")
    return Path(text)


def interpreter(text: str) -> tuple[str, str]:
    """An argparse type: FW=PATH, FW one of the frameworks, PATH an executable file (not run yet)."""
    fw, sep, path = text.partition("=")
    if not sep or fw not in frameworks.KEYS or not path:
        raise argparse.ArgumentTypeError(f"expected FW=PATH with FW one of {', '.join(frameworks.KEYS)}, got {text!r}")
    p = Path(path).expanduser()
    if not p.is_file() or not os.access(p, os.X_OK):
        raise argparse.ArgumentTypeError(f"{fw}: {path} is not an executable file")
    return fw, str(p.absolute())


# The platforms JAX_PLATFORMS may name for each --device: a setting that names none of them contradicts the flag.
JAX_PLATFORM_NAMES = {"cpu": ("cpu",), "gpu": ("cuda", "rocm", "gpu"), "tpu": ("tpu",)}


def check_environment(device: str, fws: tuple[str, ...], env=None) -> None:
    """Raise HarnessError (one line naming the variable) when the environment contradicts the flags."""
    env = os.environ if env is None else env
    names = [p.strip().lower() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    if "jax" in fws and names and not set(names) & set(JAX_PLATFORM_NAMES[device]):
        raise HarnessError(
            f"JAX_PLATFORMS={env['JAX_PLATFORMS']} in the environment contradicts --device {device}: unset it, or "
            f"name {' or '.join(JAX_PLATFORM_NAMES[device])} there"
        )
    hidden = env.get("CUDA_VISIBLE_DEVICES")
    if device == "gpu" and hidden is not None and hidden.strip() in ("", "-1"):
        raise HarnessError(f"CUDA_VISIBLE_DEVICES={hidden!r} in the environment hides every GPU from --device gpu")


INTERPRETER_PROBE_S = 30.0  # a Python with numpy starts in about a second; a cold disk in a few


def check_interpreter(fw: str, path: str) -> None:
    """Raise HarnessError (one line) unless `path` runs Python 3.10+ with numpy: what every worker needs before its
    framework (whose absence the worker reports itself)."""
    probe = "import sys, numpy; print('parity-python-ok'); sys.exit(0 if sys.version_info >= (3, 10) else 3)"
    try:  # its own session: on a timeout the whole group goes, whatever the program started
        p = subprocess.Popen(
            [path, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    except OSError as e:
        raise HarnessError(f"--python {fw}={path}: does not run ({e.strerror or e})") from None
    try:
        out, err = p.communicate(timeout=INTERPRETER_PROBE_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise HarnessError(
            f"--python {fw}={path}: no answer within {INTERPRETER_PROBE_S:g} s to a one-line Python probe; stopped"
        ) from None
    if p.returncode == 0 and "parity-python-ok" not in out:
        raise HarnessError(f"--python {fw}={path}: not a Python interpreter (it ran the probe without running it)")
    if p.returncode:
        last = (err.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        why = "Python older than 3.10" if p.returncode == 3 else last
        raise HarnessError(f"--python {fw}={path}: not a usable interpreter for the {fw} worker ({why})")


def positive(text: str) -> int:
    return whole(1, 10**6)(text)


def parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m parity.run",
        description="`python -m parity.run`: measure the workloads in TensorFlow and JAX, check them, print the table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where to run; an absent device is an error, never a silent fallback (default: cpu)",
    )
    ap.add_argument(
        "--framework",
        choices=("tf", "jax", "all"),
        default="all",
        help="which implementation(s) to run, each in its own process (default: all)",
    )
    ap.add_argument(
        "--workload", choices=(*WORKLOADS, "all"), default="all", help="which workload(s) to run (default: all)"
    )
    ap.add_argument(
        "--replicas",
        type=positive,
        nargs="+",
        metavar="N",
        help="data-parallel replica counts; the batch must divide by each. Default: 1 and 8 "
        "on the CPU (8 = simulated devices), every core on a GPU or TPU",
    )
    ap.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="default",
        help="float32 matmul/conv precision: 'default' is the framework's choice (TF32 on "
        "Ampere+ GPUs, bfloat16 passes on TPUs, float32 on CPUs), 'highest' forces float32; "
        "recorded in every row and sets the agreement tolerance (default: default)",
    )
    _cnn_flags(ap)
    _timing_flags(ap)
    _run_flags(ap)
    _multiprocess_flags(ap)
    ap.add_argument("--list-devices", action="store_true", help="show what each framework sees and exit")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr; print only the summary")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="after each row's timed calls, one more call (a training row: one epoch) under the framework's own "
        "profiler (jax.profiler, tf.profiler.experimental), never inside the timed calls; traces in "
        "OUT/profiles/<row>/ for TensorBoard's profile plugin (pip install tensorboard-plugin-profile) or Perfetto",
    )
    return ap


def _run_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--configs",
        choices=("all", "best", "default"),
        help="'default': each framework out of the box only; 'all': also each framework's tuned variants "
        "(+xla, +bf16, +scan, ...) and the process-wide settings each implementation names for the device "
        "(JAX on a CPU: '+ynn', '+onednn'), each setting in a worker of its own running every variant; "
        "'best': the same, but each setting runs only the variants of the number formats it acts on "
        "(+ynn float32, +onednn bfloat16): their combinations with the other format are left to 'all' "
        "(default: best; with --quick: default)",
    )
    ap.add_argument(
        "--exclusive",
        action=argparse.BooleanOptionalAction,
        help="one owner of the device at a time: each worker runs all its rows alone and releases the "
        "device before the next starts, and the first is measured again at the end to show drift "
        "(a TPU host takes one owning process: on by default with --device tpu, off elsewhere; on "
        "other devices it also makes each worker lock the device, as libtpu does)",
    )
    ap.add_argument(
        "--python",
        nargs="+",
        metavar="FW=PATH",
        type=interpreter,
        default=[],
        help="the interpreter a framework's workers run in, e.g. --python tf=~/tf-env/bin/python "
        "jax=~/jax-env/bin/python, for TF and JAX kept in environments of their own (TPU VMs, "
        "preinstalled GPU images); each needs numpy and its framework, and runs this checkout's "
        "code (default: this interpreter)",
    )
    ap.add_argument(
        "--out",
        type=out_dir,
        default=Path("results"),
        help="directory for results.json, .csv, .md, the .png chart and, with per-epoch validation, "
        "results_history.png (default: results/)",
    )


def _cnn_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--data",
        choices=("auto", "real", "download", "synthetic"),
        default="auto",
        help="CNN data: 'auto' uses Fashion-MNIST if found on disk (IDX files or TFDS in --data-dir) "
        "and otherwise a learnable synthetic stand-in, said before training and in every row; "
        "'real' makes absent data an error; 'download' fetches it through TFDS where absent "
        "(needs a network; bounded by --timeout); 'synthetic' always uses the stand-in "
        "(default: auto)",
    )
    ap.add_argument(
        "--data-dir",
        help="directory with the four Fashion-MNIST IDX .gz files, or a TFDS data_dir "
        "(default: TFDS's, $TFDS_DATA_DIR or ~/tensorflow_datasets)",
    )
    _cnn_schedule_flags(ap)


def _cnn_schedule_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--schedule",
        choices=("device", "notebook"),
        default="device",
        help="CNN schedule: 'device' is the device's default (GPU, TPU: the notebook's; CPU: shortened, "
        "see --epochs), 'notebook' the tensorflow/tpu notebook's 10 epochs x 100 steps at global "
        "batch 1024, validated after every epoch (its TPU v2-8 ended at val_accuracy 0.9184). "
        "--batch, --epochs and --steps-per-epoch still override it (default: device)",
    )
    ap.add_argument(
        "--validate",
        choices=("auto", "epoch", "end", "none"),
        default="auto",
        help="CNN test-set evaluation, never inside a timed epoch: 'epoch' after every epoch (as Keras's "
        "fit(validation_data=...); per-epoch history in the results and a second chart), 'end' once "
        "after training, 'none' never; 'auto' is 'epoch' for 459 steps or more, where accuracy "
        "can be judged, else 'none' (default: auto)",
    )
    ap.add_argument(
        "--batch",
        type=whole(1, 60000, "Fashion-MNIST's training set"),
        dest="global_batch",
        help="CNN global batch, split across replicas (notebook: 1024; CPU default: 256)",
    )
    ap.add_argument(
        "--epochs",
        type=at_least(2, 10000),
        help="CNN epochs, 2 or more: the first (compilation included) is "
        "kept apart, the others are timed (notebook: 10; CPU default: "
        "shortened)",
    )
    ap.add_argument(
        "--steps-per-epoch",
        type=whole(1, 10000, "an epoch's batches are drawn ahead, in memory"),
        help="CNN steps per epoch (notebook: 100)",
    )
    ap.add_argument(
        "--seeds",
        type=whole(1, 100),
        default=1,
        help="CNN training runs per variant, each with its own initial weights, dropout and batch "
        "order; the accuracy check compares the frameworks' mean (default: 1)",
    )
    ap.add_argument(
        "--parity-steps",
        type=whole(1, 1000, "the trajectory check's batches are held in memory"),
        default=20,
        help="steps of the dropout-free TF-vs-JAX training trajectory check (default: 20)",
    )


def _timing_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--quick",
        action="store_true",
        help="same structure at tiny sizes, for smoke tests (conv: seconds; cnn: about 2 minutes on 2 CPU "
        "cores, most of it compilation)",
    )
    ap.add_argument(
        "--reps",
        type=whole(1, 100000),
        default=5,
        help="minimum timed repetitions per row; more are added until --min-time (default: 5)",
    )
    ap.add_argument(
        "--min-time",
        type=seconds(allow_zero=True),
        metavar="S",
        help="repeat each row until its timed calls add up to S seconds, as pytest-benchmark "
        "calibrates (default: 2; --quick: 0.5); at least --reps calls whatever S. CNN training is timed per "
        "epoch instead",
    )
    ap.add_argument(
        "--max-reps", type=whole(1, 100000), default=200, help="cap on the calibrated repetitions (default: 200)"
    )
    ap.add_argument("--warmup", type=whole(0, 1000), default=1, help="untimed calls after the first (default: 1)")
    ap.add_argument(
        "--timeout",
        type=seconds(allow_zero=False),
        default=1800.0,
        help="seconds any one worker step (and a --data download) may take before the run is stopped (default: 1800)",
    )


def _multiprocess_flags(ap: argparse.ArgumentParser) -> None:
    mp = ap.add_argument_group(
        "multi-process runs (one process of several; docs/multihost.md; parity.launch starts them on one machine)"
    )
    mp.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="process 0's address: JAX's coordinator listens on PORT (PORT+1.. for tuned configurations), "
        "TensorFlow worker i on PORT+4+i unless TF_CONFIG says otherwise; 'auto': JAX finds it "
        "(Cloud TPU VMs, Slurm, Open MPI) and TensorFlow reads TF_CONFIG (env: PARITY_COORDINATOR)",
    )
    mp.add_argument(
        "--num-processes", type=whole(1, 4096), metavar="P", help="processes in the run (env: PARITY_NUM_PROCESSES)"
    )
    mp.add_argument(
        "--process-id",
        type=int,
        metavar="I",
        help="this process, 0..P-1; process 0 prints and writes the results (env: PARITY_PROCESS_ID)",
    )
    mp.add_argument(
        "--local-devices",
        type=whole(1, 1024, "simulated devices per process"),
        metavar="D",
        help="simulated CPU devices per process for JAX (env: PARITY_LOCAL_DEVICES; default 1; GPUs and "
        "TPUs: every local one). The run's replicas are every process's devices",
    )
    mp.add_argument(
        "--join-timeout",
        type=seconds(allow_zero=False),
        default=120.0,
        metavar="S",
        help="seconds to wait for the other processes at start-up, and for a peer in a collective (default: 120)",
    )
