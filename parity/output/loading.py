"""Reading a results file back: the one validation point (load_results), which admits only what every reader
(report, compare, the README's table) handles, with one clear error naming the file, the row and the field."""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
from pathlib import Path

from parity.common.host import HOST_TYPES
from parity.common.safe import MAX_TEXT, text, too_long
from parity.judging import roofline
from parity.judging.judge import row_peak
from parity.record import rows
from parity.record.parts import checks_problem, comparisons_problem, said_problem
from parity.record.schema import OLDEST_SCHEMA, SCHEMA_VERSION
from parity.workloads import DEVICES, WORKLOADS


class ResultsError(ValueError):
    """A results file that cannot be read as one of ours; the message names the file."""


# What every row of a results file must hold for report and compare to read it, and the fields that are numbers
# (or null) wherever present: both from parity.record.rows.Row. A verified row's median_s must also be a finite time
# above zero; NaN and Infinity are refused anywhere.
ROW_SCHEMA = {k: rows.SCHEMA[k] for k in rows.REQUIRED}
HISTORY_KEYS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy")  # one epoch of a row's history
ROW_NUMBERS = rows.NUMBERS


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number a results file may hold")


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text[:20]} overflows to infinity: not a number a results file may hold")
    return v


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits is not a number a results file may hold")
    return int(text)


MAX_RESULTS_BYTES = 512 * 2**20  # a default run's results.json is about 1 MB; a merge of hundreds stays far below
MAX_INT_DIGITS = 20  # byte counts and FLOP counts fit in 20 digits
MAX_CALLS = 100_000  # timed calls a row holds at most: the bound of parity.run's --reps and --max-reps
MEDIAN_AGREES = 1e-6  # a row's median_s and the median of its times_s agree to this (relative): one computation
# The work a results file may ask of its readers, bounded for the file as a whole, not only per row (MAX_CALLS).
# Every comparison they make (compare's, one per row both files hold; the first screen's and the page's,
# parity.judging.summary.pairs) draws stats.RESAMPLES bootstrap resamples of both rows' timed calls, and pairing
# the rows (and drawing one bar per row) takes work in their number, squared.
MAX_ROWS = 1024  # 2^20 pairs of rows looked at, at most
MAX_DRAWS = 2**30  # bootstrap draws over one file's comparisons, at most: 268,435 timed calls at RESAMPLES each


def row_kinds() -> tuple[str, ...]:
    """The rows a reader knows how to show: every row kind of the workloads' list as it is now (not as it was when
    this module was imported: a workload registered later, a test's own, is read too)."""
    return tuple(k.name for w in WORKLOADS.values() for k in w.kinds)


def read_bounded(path: Path, limit: int = MAX_RESULTS_BYTES, what: str = "results file") -> bytes:
    """A regular file's bytes, at most `limit` of them: a FIFO, a device or a directory is refused before it is
    opened for reading (a FIFO would block, /dev/zero would never end), and so is a file larger than `limit`."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ResultsError(f"{path}: not a regular file; a {what} is one")
        if st.st_size > limit:
            raise ResultsError(f"{path}: {st.st_size} bytes, more than a {what} holds ({limit})")
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise ResultsError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > limit:
        raise ResultsError(f"{path}: more than a {what} holds ({limit} bytes)")
    return data


def load_results(path: Path) -> dict:
    """A results.json written by `parity.run`, checked so that every reader (report, compare, the tables, the
    chart, the bootstrap) can handle what it admits: a regular file of bounded size, finite numbers and bounded
    integers, bounded nesting and string lengths (MAX_TEXT), a known schema version, a validated `env` (a known
    device), and every row of its declared field types (parity.record.rows.Row) and in their domains: a known row
    kind, the file's device, at least one replica and process, at most MAX_CALLS timed calls whose median is the
    row's median_s, a reason where it is invalid, and no two rows of one identity (parity.record.rows.key).
    Beside the rows, what the readers show of the checks, the comparisons and the env (parity.record.parts); a row
    that says it is verified is judged from its own figures (rows.judge_oracle); and the work the whole file asks of
    the readers is bounded (MAX_ROWS, MAX_DRAWS). Raises ResultsError naming the file, the row and the field."""
    doc = _parsed(path)
    current_names(doc)
    if (n := len(doc["rows"])) > MAX_ROWS:
        raise ResultsError(f"{path}: {n} rows; a results file holds at most {MAX_ROWS} (its readers pair the rows)")
    why = _env_problem(doc["env"]) or said_problem(doc["env"])
    if why:
        raise ResultsError(f"{path}: env: {why}")
    why = checks_problem(doc.get("checks")) or comparisons_problem(doc.get("comparisons"))
    if why:
        raise ResultsError(f"{path}: {why}")
    seen: dict[tuple, int] = {}
    for i, r in enumerate(doc["rows"]):
        why = _row_problem(r) or _domain_problem(r, doc["env"])
        if not why:
            rows.judge_oracle(r)
            why = _implausible(r, doc["env"])
        if why:
            raise ResultsError(f"{path}: row {i}: {why}")
        if (first := seen.setdefault(rows.key(r), i)) != i:
            raise ResultsError(
                f"{path}: row {i} measures what row {first} measures (the same {', '.join(rows.KEY)}): "
                f"a results file holds each row once"
            )
    why = _work_problem(doc["rows"])
    if why:
        raise ResultsError(f"{path}: {why}")
    return doc


def _parsed(path: Path) -> dict:
    """A results file's JSON, bounded (read_bounded, MAX_TEXT, MAX_INT_DIGITS, finite numbers), with env and rows."""
    data = read_bounded(path)
    try:
        doc = json.loads(
            data.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite, parse_int=_bounded_int
        )
    except UnicodeDecodeError:
        raise ResultsError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    except ValueError as e:  # NaN, Infinity, overflowing numbers, huge integers
        raise ResultsError(f"{path}: {e}") from None
    except RecursionError:
        raise ResultsError(f"{path}: nested deeper than any results file") from None
    if (long := too_long(doc)) is not None:
        raise ResultsError(
            f"{path}: a string of {len(long)} characters ({text(long, limit=40)}); a results file's "
            f"strings are at most {MAX_TEXT}"
        )
    if not isinstance(doc, dict) or not isinstance(doc.get("env"), dict) or not isinstance(doc.get("rows"), list):
        raise ResultsError(f"{path}: not a parity.run results file (no 'env' and 'rows')")
    return doc


def _work_problem(rows: list[dict]) -> str | None:
    """Why the rows ask more work of the readers than a results file may (MAX_DRAWS), or None."""
    from parity.judging.stats import RESAMPLES
    from parity.judging.summary import pairs

    def calls(r: dict) -> int:
        return len(r.get("times_s") or ())

    own = sum(map(calls, rows))
    paired = sum(calls(a) + calls(b) for *_, a, b, _ in pairs(rows))
    if RESAMPLES * max(own, paired) <= MAX_DRAWS:
        return None
    return (
        f"its comparisons would resample {max(own, paired)} timed calls {RESAMPLES} times each; a results file asks "
        f"its readers for at most {MAX_DRAWS // RESAMPLES} ({MAX_DRAWS:.3g} draws)"
    )


def current_names(doc: dict) -> dict:
    """`doc`, a results file's contents, with today's names (in place): an older file's row 'workload' (it held the
    row kind) is its 'kind', its 'config_env' (its setting's environment) its 'setting_env'; a comparison's 'kind'
    (which pair) its 'pair' and its 'workload' its 'kind'. A check's 'workload' is a workload's name, then as now."""
    for r in doc["rows"] if isinstance(doc.get("rows"), list) else ():
        for was, now in (("workload", "kind"), ("config_env", "setting_env")):
            if isinstance(r, dict) and was in r and now not in r:
                r[now] = r.pop(was)
    for c in doc["comparisons"] if isinstance(doc.get("comparisons"), list) else ():
        if isinstance(c, dict) and "workload" in c and "pair" not in c:
            c["pair"], c["kind"] = c.pop("kind", None), c.pop("workload")
    return doc


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _raw_problem(r: dict) -> str | None:
    """What makes a row's raw times unusable (schema 3): times above zero, one round (an integer) per time."""
    times, rounds = r.get("times_s"), r.get("rounds")
    if times is not None and not (
        isinstance(times, list) and all(_number(t) and math.isfinite(t) and t > 0 for t in times)
    ):
        return "times_s is not a list of times above zero"
    if rounds is not None and not (
        isinstance(rounds, list)
        and all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in rounds)
        and len(rounds) == len(times or ())
    ):
        return "rounds is not one round number (an integer from 0) per timed call"
    return None


def _env_problem(env: dict) -> str | None:
    """What makes a results file's env unreadable, or None."""
    version = env.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not OLDEST_SCHEMA <= version <= SCHEMA_VERSION:
        return f"schema_version {version!r}; this tool reads {OLDEST_SCHEMA} to {SCHEMA_VERSION}"
    if env.get("device") not in DEVICES:
        return f"device is {text(repr(env.get('device')), limit=40)}, not one of {', '.join(DEVICES)}"
    fws = env.get("frameworks", {})
    if not isinstance(fws, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in fws.items()):
        return "frameworks is not an object of framework name -> its record"
    for k, v in fws.items():
        if not isinstance(v.get("versions", {}), dict):
            return f"frameworks.{k}.versions is not an object"
    for k in ("host_cpu", "precision", "timestamp", "git_commit"):
        if env.get(k) is not None and not isinstance(env[k], str):
            return f"{k} is {env[k]!r}, not text"
    return _peak_problem(env.get("peak")) or (None if env.get("host") is None else _host_problem(env["host"]))


PEAK_NUMBERS = ("flops", "bandwidth", "computed_flops", "measured_flops", "measured_bandwidth")


def _peak_problem(peak) -> str | None:
    """What makes env.peak (parity.judging.roofline.Peak, the peak the rows were judged against) unreadable."""
    if peak is None:
        return None
    if not isinstance(peak, dict):
        return f"peak is {type(peak).__name__}, not an object"
    for k in ("device_kind", "number_format", "source"):
        if k in peak and not isinstance(peak[k], str):
            return f"peak.{k} is {text(repr(peak.get(k)), limit=40)}, not text"
    for k in PEAK_NUMBERS:
        if peak.get(k) is not None and not (_number(peak[k]) and peak[k] >= 0):
            return f"peak.{k} is {text(repr(peak[k]), limit=40)}, not a number from zero"
    bf16 = peak.get("measured_bf16")
    if bf16 is not None and not (isinstance(bf16, dict) and all(_number(v) and v >= 0 for v in bf16.values())):
        return "peak.measured_bf16 is not an object of name -> FLOP/s"
    headroom = peak.get("headroom", 1.0)
    if not (_number(headroom) and 1.0 <= headroom <= roofline.CPU_HEADROOM):
        return f"peak.headroom is {text(repr(headroom), limit=40)}, not 1 to {roofline.CPU_HEADROOM:g}"
    return None


def _implausible(r: dict, env: dict) -> str | None:
    """Why a verified row's time cannot be real, as `parity.run` judges its own rows (roofline.impossible), against
    the peak its file records (a GPU's or TPU's from the table where the file records none), or None."""
    if not r["verified"]:
        return None
    row = rows.Row(**{k: r[k] for k in rows.FIELDS if k in r})
    row.device_kind = row.device_kind or ""
    peak = env.get("peak")
    if peak is not None:
        given = {k: peak[k] for k in roofline.Peak.__dataclass_fields__ if k in peak}
        cpu = env["device"] == "cpu"  # what the run writes, where a hand-made file leaves it out
        made = {"device_kind": "cpu" if cpu else row.device_kind, "number_format": "fp32", "source": ""}
        made |= {"flops": None, "bandwidth": None, "headroom": roofline.CPU_HEADROOM if cpu else 1.0}
        peak = roofline.Peak(**{**made, **given})
    elif env["device"] != "cpu":
        peak = roofline.accelerator_peak(env["device"], row.device_kind, row.precision or "default")
    why = roofline.impossible(row, row_peak(row, peak, here=False), row.replicas)
    return f"verified, but {why}" if why else None


def _host_problem(host) -> str | None:
    """What makes env.host (parity.common.host.Host) unreadable, or None; a file without it is read as older."""
    if not isinstance(host, dict):
        return f"host is {type(host).__name__}, not an object"
    for k, types in HOST_TYPES.items():
        if k not in host:
            return f"host lacks {k}"
        v = host[k]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            return f"host.{k} is {text(repr(v), limit=40)}, not {' or '.join(t.__name__ for t in types)}"
        if isinstance(v, int) and v < (1 if k in ("cores", "logical_cpus") else 0):
            return f"host.{k} is {v}: below {'one' if k in ('cores', 'logical_cpus') else 'zero'}"
    if not all(isinstance(f, str) and isinstance(on, bool) for f, on in host["flags"].items()):
        return "host.flags is not an object of flag name -> true or false"
    return None


def _domain_problem(r: dict, env: dict) -> str | None:
    """What puts a well-typed row outside what the readers handle, or None."""
    kinds = row_kinds()
    if r["kind"] not in kinds:
        return f"kind {text(repr(r['kind']), limit=40)} is no row kind this tool knows ({', '.join(kinds)})"
    if r["device"] != env["device"]:
        return f"device {text(repr(r['device']), limit=40)} in a file of device {env['device']!r}"
    for k in ("replicas", "processes"):
        if r.get(k) is not None and r[k] < 1:
            return f"{k} is {r[k]!r}: a row runs on at least one"
    if not r["verified"] and not (isinstance(r.get("invalid_reason"), str) and r["invalid_reason"].strip()):
        return "invalid, but it gives no invalid_reason"
    times = r.get("times_s")
    if times:
        if len(times) > MAX_CALLS:
            return f"times_s holds {len(times)} calls; a row holds at most {MAX_CALLS} (parity.run's --max-reps bound)"
        if r.get("reps") is not None and r["reps"] != len(times):
            return f"reps is {r['reps']}, but times_s holds {len(times)} calls"
        med = r["median_s"]
        if med is not None and abs(statistics.median(times) - med) > MEDIAN_AGREES * med:
            return f"median_s is {med!r}, but the median of its times_s is {statistics.median(times)!r}"
    return None


# Numbers that may be below zero: a re-measured median's change. Every other number a row holds is a time, a
# count, a size, an error or a ratio, never negative.
SIGNED = ("drift",)


def _row_problem(r) -> str | None:
    """What makes a row unreadable, or None."""
    if not isinstance(r, dict):
        return f"not an object but {type(r).__name__}"
    missing = [k for k in ROW_SCHEMA if k not in r]
    if missing:
        return f"lacks {', '.join(missing)}"
    for k, types in rows.SCHEMA.items():
        if k not in r or (r[k] is None and type(None) in types):
            continue
        if not isinstance(r[k], types) or (isinstance(r[k], bool) and bool not in types):
            return f"{k} is {r[k]!r}, not {' or '.join(t.__name__ for t in types)}"
    for k in ROW_NUMBERS:
        if r.get(k) is not None and (not isinstance(r[k], (int, float)) or isinstance(r[k], bool)):
            return f"{k} is {r[k]!r}, not a number"
        if r.get(k) is not None and k not in SIGNED and r[k] < 0:
            return f"{k} is {r[k]!r}: below zero"
    env = r.get("setting_env")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return f"setting_env is {text(repr(env), limit=40)}, not an object of variable name -> value (text)"
    hist = r.get("history")
    if hist is not None and not (
        isinstance(hist, list)
        and all(
            isinstance(h, dict)
            and all(isinstance(h.get(k), (int, float)) and not isinstance(h.get(k), bool) for k in HISTORY_KEYS)
            for h in hist
        )
    ):
        return f"history is not a list of epochs with {', '.join(HISTORY_KEYS)}"
    why = _raw_problem(r)
    if why:
        return why
    if r["verified"] and not (r["median_s"] is not None and r["median_s"] > 0):
        return f"verified, but its median_s is {r['median_s']!r}, not a time above zero"
    return None
