"""A result row, declared once: its fields, what each means, and which ones the files, compare and tables use.

Everything that lists row fields derives from `Row`: the results file's schema (`loading.ROW_SCHEMA`,
`loading.ROW_NUMBERS`), the CSV columns (`files.CSV_FIELDS`), the identity compare matches rows on
(`compare.KEY`) and the speed table's columns (`tables.COLUMNS`). Adding a field is one line here plus the
code that measures it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any


def _f(
    default: Any = None,
    *,
    required: bool = False,
    key: bool = False,
    csv: bool = False,
    column: str | None = None,
    factory=None,
) -> Any:
    """A Row field. required: every results file's row has it (with its declared type); key: part of what
    was measured (rows of two files are the same row when all keys agree); csv: a CSV column; column: its
    heading in the speed table, where one field makes one column."""
    meta = {"required": required, "key": key, "csv": csv, "column": column}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Row:
    """One timed row: what ran where, its times, its figures and its verdict. Times in seconds; a training
    row's call is an epoch (`time_unit`). Fields a workload does not measure stay None."""

    # what was measured
    # its row kind (conv, cnn_train, ...: a workload's, parity.workloads' RowKind.name); 'workload' in older files
    kind: str = _f("", required=True, key=True, csv=True, column="kind")
    framework: str = _f("", required=True, key=True, csv=True, column="framework")  # frameworks.TABLE's key: 'tf', ...
    variant: str = _f("", required=True, key=True, csv=True, column="variant")  # with a tuned configuration: 'jit+ynn'
    # the environment of the worker's setting (XLA_FLAGS, ...), the setting named in the variant; 'config_env' in
    # files written before (parity.output.loading.current_names)
    setting_env: dict = _f(factory=dict)
    device: str = _f("", required=True, key=True, csv=True, column="device")  # cpu, gpu, tpu
    device_kind: str | None = _f(key=True, csv=True)  # the framework's name for the device
    replicas: int = _f(0, required=True, key=True, csv=True, column="replicas")
    processes: int = _f(1, key=True, csv=True)  # processes of a multi-process run
    dtype: str = "float32"  # the inputs' and outputs' number format
    precision: str | None = _f(key=True, csv=True, column="precision")  # --precision; 'bfloat16' for bf16 rows
    tuned: bool = False  # not the framework out of the box: a tuned variant or configuration
    quick: bool = _f(False, key=True, csv=True)
    seed: int | None = _f(key=True)  # a training row's seed
    spec: dict | None = _f(key=True)  # its sizes: a trained row's schedule and batch, an operation's shapes
    data: str | None = None  # a CNN row's data: 'idx', 'tfds', 'synthetic'
    # times
    median_s: float | None = _f(required=True, csv=True, column="median")
    q1_s: float | None = _f(csv=True)
    q3_s: float | None = _f(csv=True)
    iqr_s: float | None = _f(csv=True, column="IQR")
    min_s: float | None = _f(csv=True)
    reps: int | None = _f(csv=True)  # timed calls (or epochs)
    times_s: list | None = None  # every timed call (or epoch), in order (schema 3; older files lack them)
    rounds: list | None = None  # the interleaving round of each timed call: rows of one round can be paired
    modes: dict | None = (
        None  # two groups of times far apart (parity.judging.stats.modes): low_s, low_n, high_s, high_n
    )
    # of the median time: how long the worker's threads went on computing after each call returned (median;
    # included in every time: parity.engine.timing.busy_after)
    busy_after_s: float | None = _f(csv=True)
    compile_s: float | None = _f(csv=True, column="first call")  # an operation's first call; training: None
    time_unit: str | None = None  # 'epoch' for a training row, else one call
    first_epoch_s: float | None = None  # a training row's first epoch (compilation included), never timed
    # of first_epoch_s (or compile_s), the seconds its program compiled ahead, side by side with the worker's other
    # rows (--compile-ahead); null where it compiled at its first call
    compiled_ahead_s: float | None = None
    # work
    flops: float | None = _f(csv=True)  # the formula's FLOPs per call
    flops_unpadded: float | None = None  # the same without SAME padding's zeros
    flops_formula: str | None = None
    compiler_flops: float | None = _f(csv=True)  # the framework's own count
    compiler_flops_source: str | None = _f(csv=True)
    compiler_flops_ratio: float | None = None  # compiler_flops / flops
    compiler_flops_ratio_unpadded: float | None = None  # compiler_flops / flops_unpadded
    gflops_per_s: float | None = _f(csv=True, column="GFLOP/s")
    # the roofline
    peak_flops: float | None = _f(csv=True)  # the peak this row is judged against (FLOP/s)
    peak_format: str | None = None  # that peak's number format
    pct_peak: float | None = _f(csv=True, column="% peak")
    # the compiled program's attainable time a call (parity.judging.roofline.attainable: each op at the larger of its
    # FLOPs at the peak and its bytes at the bandwidth), and the share of it the median reaches: attainable_s / median_s
    attainable_s: float | None = _f(csv=True)
    pct_attainable: float | None = _f(csv=True, column="% attain")
    attainable_source: str | None = None  # how it was counted, or why there is none (None: no program's ops)
    min_bytes: float | None = _f(csv=True)  # bytes that must cross memory at least once
    arith_intensity: float | None = _f(csv=True)  # flops / min_bytes
    bound: str | None = _f(csv=True, column="bound")  # 'compute' or 'memory'
    above_peak: str | None = None  # why no % of peak is shown though the row is valid
    impossible: str | None = None  # why the row's throughput cannot be real
    # a trained workload's own figures (the CNN's, the row LSTM's)
    images_per_s: float | None = _f(csv=True, column="img/s")
    # which kernel the recurrent layers ran ('lax.scan', 'unrolled', "Keras's generic loop (tf.while_loop)",
    # 'cuDNN'): a framework may choose among several silently; None for a model without recurrent layers
    kernel_path: str | None = _f(csv=True)
    test_loss: float | None = None
    test_accuracy: float | None = None
    history: list | None = None  # per epoch: epoch, loss, accuracy, val_loss, val_accuracy
    est_5_notebook_epochs_s: float | None = None  # the article's figure, extrapolated from the step time
    # memory (parity.engine.memory): the row's resident state + its largest rise during one call
    peak_memory_bytes: int | None = _f(csv=True, column="peak mem")
    peak_memory_source: str | None = None  # where it was read, or why there is none
    peak_memory_at_least: bool | None = None  # the figure is a lower bound (its source says why); None: older files
    # --profile: one more call after the timed ones, traced by the framework's own profiler
    profile_dir: str | None = None  # its traces, relative to --out
    layers: list | None = (
        None  # per layer and pass (parity.judging.layers): layer, pass, seconds (CPU time, thread-summed, per step or
        # call), share, wall_s (the wall time split among the ops running at each instant)
    )
    # the profiled call's own time, taken as a timed call's: over median_s, the profiler's overhead (None: older files)
    profile_call_s: float | None = None
    # the profiled ops' CPU time over the profiled call's time (older files: over the row's median); below 0.8: said
    profile_coverage: float | None = None
    # agreement
    max_abs_err: float | None = None
    max_rel_err: float | None = _f(csv=True, column="err vs f64")  # against the float64 oracle
    xfw_max_rel_err: float | None = _f(csv=True, column="err vs other")  # against the other framework's output
    tolerance: float | None = None  # the oracle tolerance; None where the checks judge the numbers
    # which float64 oracle max_rel_err is against, where a workload may choose: 'NumPy float64' (its own), 'JAX float64
    # (x64)', 'PyTorch float64 (double)', 'TensorFlow float64' (a trained model's inference row); None: the NumPy
    # oracle (operations, the CNN), or a file written before the field
    oracle: str | None = None
    # the verdict
    noisy: bool = _f(False, csv=True)  # IQR above 10% of the median
    verified: bool = _f(False, required=True, csv=True, column="verified")
    invalid_reason: str | None = _f(csv=True)
    drift: float | None = None  # one owner at a time: the re-measured median's change
    saved: str | None = field(default=None, repr=False, metadata={"internal": True})  # the oracle rows' .npy
    # the compiled program's ops a call, as the worker read them (a roofline.Counted's `ops`): judged, not saved
    program_ops: dict | None = field(default=None, repr=False, metadata={"internal": True})

    def update(self, values: dict) -> None:
        """Set fields from a mapping; a name that is no field is an error, not a silent new key."""
        for k, v in values.items():
            if k not in FIELDS:
                raise KeyError(f"Row has no field {k!r}")
            setattr(self, k, v)

    def to_dict(self) -> dict:
        """The row as results.json holds it (every declared field, in declaration order)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.metadata.get("internal")}

    def key(self) -> tuple:
        """What was measured: equal for two measurements of the same row."""
        return key(self.to_dict())


FIELDS = {f.name: f for f in dataclasses.fields(Row) if not f.metadata.get("internal")}


def _names(flag: str) -> tuple[str, ...]:
    return tuple(n for n, f in FIELDS.items() if f.metadata.get(flag))


CSV_FIELDS = _names("csv")
KEY = _names("key")
REQUIRED = _names("required")
COLUMNS = tuple(f.metadata["column"] for f in FIELDS.values() if f.metadata.get("column"))


def columns(rows: list[dict]) -> tuple[str, ...]:
    """The speed table's columns for `rows`: COLUMNS, less '% attain' where no row has its share of its attainable
    time (a results file written before the field reads as it was written)."""
    if any(r.get("pct_attainable") is not None for r in rows):
        return COLUMNS
    return tuple(c for c in COLUMNS if c != FIELDS["pct_attainable"].metadata["column"])


def key(row: dict) -> tuple:
    """The identity of a row read from a results file (older files may lack a key field: None, 1 process)."""
    out = []
    for k in KEY:
        v = row.get(k)
        if k == "processes":
            v = v or 1
        elif isinstance(v, (dict, list)):
            v = json.dumps(v, sort_keys=True)
        out.append(v)
    return tuple(out)


def _types(name: str) -> tuple[type, ...]:
    """The Python types a field's annotation allows (int where float is allowed: JSON writes 2.0 as 2)."""
    hint = typing.get_type_hints(Row)[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    out = tuple(type(None) if a is type(None) else typing.get_origin(a) or a for a in args)
    return (*out, int) if float in out and int not in out else out


SCHEMA = {n: _types(n) for n in FIELDS}
NUMBERS = tuple(n for n, t in SCHEMA.items() if float in t or int in t)  # numbers or None wherever present


def judge_oracle(r: dict) -> None:
    """A row judged against the float64 oracle (one with a tolerance) from its own figures, as parity.run judges its
    rows (parity.workloads.base: max_rel_err within the tolerance): one that says it is verified but whose figures
    say otherwise is invalid, saying why (in place). A file from elsewhere is believed on its figures, not its word."""
    if not r["verified"] or r.get("tolerance") is None:
        return
    err, tol = r.get("max_rel_err"), r["tolerance"]
    if err is not None and err <= tol:
        return
    said = "no max_rel_err" if err is None else f"max_rel_err {err:.3g}"
    r["verified"] = False
    r["invalid_reason"] = (
        f"{said} vs the float64 oracle exceeds {tol:g} (judged here from the row's figures; the file said verified)"
    )
