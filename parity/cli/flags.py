"""The command line of `python -m parity.run`: every flag with its help (the types that refuse bad values:
`parity.cli.argtypes`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from parity.cli import workloads
from parity.cli.argtypes import Parser, at_least, framework_list, interpreter, out_dir, seconds, whole
from parity.common import frameworks
from parity.engine.cluster import MAX_LOCAL_DEVICES
from parity.engine.config import PRESETS
from parity.workloads import DEVICES, PRECISIONS, WORKLOADS

EXAMPLES = """examples:
  python -m parity.run --device cpu --quick        # 2-7 minutes by CPU class: every framework, tiny shapes, every check
  python -m parity.run --device cpu                # every workload at the CPU's default sizes, one device
  python -m parity.run --device cpu --preset full  # and 8 simulated devices, on a larger budget: 20 minutes or more
  python -m parity.run --device gpu --framework jax --precision highest
  python -m parity.run --device tpu --workload cnn --schedule notebook --data download   # the notebook's table
  python -m parity.run --list-devices              # what each framework sees (the article's first step)

what each label of a row means (jit+pool+ynn+onednn+thp, fit+spe, not judged, ...): docs/glossary.md
"""


class RunParser(Parser):
    """The run's parser: a workload plug-in that could not be loaded (an entry point's, a --workload module's) is
    said in one line once the command line is read; the other workloads run."""

    def parse_known_args(self, args=None, namespace=None):
        try:
            return super().parse_known_args(args, namespace)
        finally:
            workloads.report_errors()


def parser() -> argparse.ArgumentParser:
    ap = RunParser(
        prog="python -m parity.run",
        description="`python -m parity.run`: measure the workloads in every framework, check them, print the table.",
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
        type=framework_list,
        default="all",
        metavar="FW[,FW...]",
        help=f"which implementation(s) to run, each in its own process: one of {', '.join(frameworks.KEYS)}, a comma "
        "list of them (--framework jax,torch), or all (default: all)",
    )
    ap.add_argument(
        "--workload", type=workloads.workload, nargs="+", default=["all"], metavar="W", help=workloads.help_text()
    )
    ap.add_argument(
        "--list-workloads", action=workloads.ListWorkloads, help="list the workloads, where each comes from, and exit"
    )
    ap.add_argument(
        "--replicas",
        type=whole(1, MAX_LOCAL_DEVICES, "simulated devices per process, as --local-devices"),
        nargs="+",
        metavar="N",
        help="data-parallel replica counts; the batch must divide by each. Default: the preset's: on a CPU 1 (full: 1 "
        "and 8 simulated devices, quick: 1 and 2; they check the data-parallel code path on the same cores); on a GPU "
        "or TPU one chip and every chip",
    )
    ap.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="default",
        help="float32 matmul/conv precision: 'default' is the framework's choice (TF32 on "
        "Ampere+ GPUs, bfloat16 passes on TPUs, float32 on CPUs), 'highest' forces float32; "
        "recorded in every row and sets the agreement tolerance (default: default)",
    )
    _trained_flags(ap)
    _timing_flags(ap)
    _run_flags(ap)
    _multiprocess_flags(ap)
    _output_flags(ap)
    return ap


def _output_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--list-devices", action="store_true", help="show what each framework sees and exit")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr; print only the first screen")
    ap.add_argument(
        "--verbose",
        action="store_true",
        help="after the first screen, the per-row table, every parity check and the notes (all of them are in "
        "OUT/results.md either way)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="after each row's timed calls, one more call (a training row: one epoch) under the framework's own "
        "profiler (jax.profiler, tf.profiler.experimental), never inside the timed calls; traces in "
        "OUT/profiles/<row>/ for TensorBoard's profile plugin (pip install tensorboard-plugin-profile) or Perfetto",
    )


def _run_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--configs",
        choices=("all", "levers", "best", "default"),
        help="which variants are timed. 'default': each framework out of the box only (and only its parity "
        "checks); the others run every variant's parity checks. 'best': also each framework's best-known "
        "configuration for each workload, replica count and number format (its implementation's variant of lowest "
        "`rank`, with the process-wide setting of lowest rank for that format: JAX on a CPU with bfloat16 "
        "hardware '+ynn+onednn' for both formats, with '+thp' where the kernel grants huge pages on request; "
        "parity.engine.selection); "
        "'levers': each tuned variant (+xla, +bf16, +scan, +pool, ...) and each process-wide setting on its own, "
        "a setting with the variants of the number formats it acts on, without the several-steps-per-dispatch "
        "ones (+scan, +spe); 'all': every combination, '+thp' alone too "
        "(default: the preset's: best; quick: default; levers: levers)",
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
        "--compile-ahead",
        action=argparse.BooleanOptionalAction,
        help="build each worker's trained-workload rows first and compile their programs (training steps, inference) "
        "side by side on the host's cores in its background, while it computes its parity rounds (their programs "
        "side by side too), before their first calls; one owner at a time, the next owner's worker starts meanwhile "
        "and waits for the device (on by default on a GPU or TPU, where a step compiles for tens of seconds; off on "
        "a CPU, where the first calls are compiled one at a time)",
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


def _trained_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--data",
        choices=("auto", "real", "download", "synthetic"),
        default="auto",
        help="the trained workloads' data (the CNN's and the row LSTM's): 'auto' uses Fashion-MNIST if found on "
        "disk (IDX files or TFDS in --data-dir) "
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
    _schedule_flags(ap)


def _takers(option: str) -> str:
    """The workloads whose record takes a spec field from the command line (Workload.options)."""
    return ", ".join(name for name, w in WORKLOADS.items() if option in w.options)


def _seeded() -> str:
    """The workloads with a row kind run once per --seeds (RowKind.seeded)."""
    return ", ".join(name for name, w in WORKLOADS.items() if any(k.seeded for k in w.kinds))


def _schedule_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--schedule",
        choices=("device", "notebook"),
        default="device",
        help="the trained workloads' schedule: 'device' is the device's default (GPU, TPU: the notebook's; CPU: "
        "shortened, see --epochs), 'notebook' (--preset notebook) the tensorflow/tpu notebook's 10 epochs x 100 "
        "steps at global batch 1024, validated after every epoch (its TPU v2-8 ended at val_accuracy 0.9184). "
        "--batch, --epochs and --steps-per-epoch still override it (default: device)",
    )
    ap.add_argument(
        "--validate",
        choices=("auto", "epoch", "end", "none"),
        default="auto",
        help="the trained workloads' test-set evaluation, never inside a timed epoch: 'epoch' after every epoch (as "
        "Keras's fit(validation_data=...); per-epoch history in the results and a second chart), 'end' once "
        "after training, 'none' never; 'auto' is 'epoch' where accuracy can be judged (the CNN: 459 steps or more, "
        "once BatchNorm has settled; the LSTM: its full schedule), else 'none' (default: auto)",
    )
    ap.add_argument(
        "--batch",
        type=whole(1, 60000, "Fashion-MNIST's training set"),
        dest="global_batch",
        help=f"the trained workloads' global batch ({_takers('global_batch')}), split across replicas (notebook: "
        "1024; CPU default: 256)",
    )
    ap.add_argument(
        "--epochs",
        type=at_least(2, 10000),
        help=f"the trained workloads' epochs ({_takers('epochs')}), 2 or more: the first (compilation "
        "included) is kept apart, the others are timed (notebook: 10; CPU default: shortened)",
    )
    ap.add_argument(
        "--steps-per-epoch",
        type=whole(1, 10000, "an epoch's batches are drawn ahead, in memory"),
        help=f"the trained workloads' steps per epoch ({_takers('steps_per_epoch')}; notebook: 100)",
    )
    ap.add_argument(
        "--seeds",
        type=whole(1, 100),
        default=1,
        help=f"training runs per trained variant ({_seeded()}), each with its own initial weights, "
        "dropout and batch order; the accuracy check compares the frameworks' mean (default: 1)",
    )
    ap.add_argument(
        "--parity-steps",
        type=whole(1, 1000, "the trajectory check's batches are held in memory"),
        help="steps of the dropout-free training trajectory check between frameworks (default: the preset's, 20; "
        "quick: 3)",
    )


def _timing_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help="a complete configuration of the run's extent; a flag given beside it overrides its own part. "
        + "; ".join(f"'{p.name}': {p.about} (--configs {p.configs}, --budget {p.budget_s:g}, --max-reps "
                    f"{p.max_reps}, --parity-steps {p.parity_steps}; took {p.took})" for p in PRESETS.values())
        + " (default: default). Each label a run prints: docs/tuning.md",
    )  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="the same as --preset quick")
    ap.add_argument(
        "--reps",
        type=whole(1, 100000),
        default=5,
        help="minimum timed calls (or training epochs) per row (default: 5, the fewest a 95%% interval takes); more "
        "are added while the row, or a comparison it is in, is not settled, within --budget",
    )
    ap.add_argument(
        "--budget",
        "--min-time",
        dest="budget",
        type=seconds(allow_zero=True),
        metavar="S",
        help="a row whose median (or one of its comparisons) is not yet known to +-10%% at 95%% gets more calls, round "
        "by round, until its timed calls add up to S seconds (default: the preset's: default 3, full 8, quick 2); 0: "
        "exactly --reps "
        "calls. What a run could not settle is said in its summary (docs/statistics.md). --min-time: its old name",
    )
    ap.add_argument(
        "--max-reps",
        type=whole(1, 100000),
        help="at most this many timed calls per row, whatever the budget (default: the preset's: default 30, full 200, "
        "quick 50)",
    )
    ap.add_argument(
        "--warmup",
        type=whole(0, 1000),
        default=0,
        help="more untimed calls of each operation before its timed ones (each turn of timed calls already follows one "
        "of its own; default: 0)",
    )
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
        type=whole(1, MAX_LOCAL_DEVICES, "simulated devices per process"),
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
