"""The command lines' argparse types and checks: each refuses a bad value before any work, in one line that names
the flag (or the environment variable, or the interpreter) and the bound."""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

from parity.common import frameworks
from parity.common.messages import HarnessError
from parity.common.safe import text


class Parser(argparse.ArgumentParser):
    """argparse, with a bad flag said in one line (not the whole usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, text(f"{self.prog}: error: {message} (--help explains every flag)") + "\n")


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


def framework_list(text: str) -> str:
    """An argparse type: 'all', one framework or a comma list of them ('jax,torch'), as given once checked
    (parity.common.frameworks.chosen reads it)."""
    try:
        frameworks.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


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


FORCED_DEVICES = re.compile(r"--xla_force_host_platform_device_count=(\S*)")  # XLA's CPU device count


def check_environment(device: str, fws: tuple[str, ...], counts: tuple[int, ...] = (), env=None) -> None:
    """Raise HarnessError (one line naming the variable) when the environment contradicts the flags, for every
    framework that reads it (`counts`: the run's replica counts, each worker's CPU devices): a JAX_PLATFORMS or
    XLA_FLAGS at odds with --device and --replicas, PyTorch's threads beyond the cores, a variable that would make
    rows' labels false (parity.engine.environment.REFUSED), a compilation cache directory no framework could write."""
    from parity.engine import environment  # the run's alone: report and compare, which parse flags here, load no engine

    env = os.environ if env is None else env
    on_jax = [frameworks.label(fw) for fw in fws if frameworks.on_jax(fw)]
    names = [p.strip().lower() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    if on_jax and names and not set(names) & set(JAX_PLATFORM_NAMES[device]):
        raise HarnessError(
            f"JAX_PLATFORMS={env['JAX_PLATFORMS']} in the environment contradicts --device {device} (read by "
            f"{', '.join(on_jax)}): unset it, or name {' or '.join(JAX_PLATFORM_NAMES[device])} there"
        )
    forced = FORCED_DEVICES.findall(env.get("XLA_FLAGS", ""))
    other = sorted({max(c, 1) for c in counts} - {int(forced[-1]) if forced and forced[-1].isdigit() else -1})
    if on_jax and device == "cpu" and forced and other:
        raise HarnessError(
            f"XLA_FLAGS' --xla_force_host_platform_device_count={forced[-1]} contradicts the run's replica count "
            f"{' and '.join(map(str, other))} (--replicas): each {' and '.join(on_jax)} worker makes as many CPU "
            "devices as its replicas; remove the flag from XLA_FLAGS"
        )
    known = {n for names in JAX_PLATFORM_NAMES.values() for n in names}
    if on_jax and set(names) - known:  # JAX fails on a platform it does not know, whatever else is named
        raise HarnessError(
            f"JAX_PLATFORMS={env['JAX_PLATFORMS']} in the environment names {', '.join(sorted(set(names) - known))}, "
            f"no platform JAX has (read by {', '.join(on_jax)}): name only {', '.join(sorted(known))}"
        )
    if frameworks.TORCH in fws:
        _check_torch_threads(env)
    if why := environment.refused(fws, env):
        raise HarnessError(why)
    for var, readers in CACHE_DIRS.items():
        given = [frameworks.label(fw) for fw in fws if fw in readers]
        if given and var in env and (why := _unusable_dir(env[var])):
            raise HarnessError(f"{var}={env[var]!r} in the environment: {why} (read by {', '.join(given)})")
    hidden = env.get("CUDA_VISIBLE_DEVICES")
    if device == "gpu" and hidden is not None and hidden.strip() in ("", "-1"):
        raise HarnessError(f"CUDA_VISIBLE_DEVICES={hidden!r} in the environment hides every GPU from --device gpu")


def _check_torch_threads(env) -> None:
    """OMP_NUM_THREADS becomes PyTorch's compute threads (torch_impl.devices.threads), in its worker and in each DDP
    rank: a whole number from 1 to the cores this process may run on, or unset (every core, as the other frameworks
    take them). More threads than cores only oversubscribe them, and enough of them exhaust the process limit."""
    given = env.get("OMP_NUM_THREADS")
    cores = len(os.sched_getaffinity(0))
    if given is not None and not (given.strip().isdigit() and 1 <= int(given) <= cores):
        raise HarnessError(
            f"OMP_NUM_THREADS={given!r} in the environment: PyTorch runs that many compute threads (a worker, and each "
            f"DDP rank); this process may run on {cores} core(s): set it from 1 to {cores}, or unset it"
        )


# The compilation caches a framework writes in the directory a variable names (made there if absent): each row's
# cache_dir_env in the frameworks table, by variable
_CACHE_VARS = dict.fromkeys(f.cache_dir_env for f in frameworks.TABLE.values() if f.cache_dir_env)
CACHE_DIRS = {v: tuple(k for k, f in frameworks.TABLE.items() if f.cache_dir_env == v) for v in _CACHE_VARS}


def _unusable_dir(path: str) -> str | None:
    """Why a directory a framework writes in (made where absent, as os.makedirs does) cannot be, or None."""
    if not path.strip():
        return "an empty path"
    p = Path(path).absolute()
    for at in (p, *p.parents):  # the path, else the nearest of its folders that exists
        try:
            st = os.stat(at)
        except FileNotFoundError:
            if os.path.lexists(at):
                return f"{at} is a symbolic link to nothing"
            continue
        except OSError as e:  # a symbolic-link loop, a file where a folder should be
            return f"{at}: {e.strerror}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{at} is not a directory"
        if not os.access(at, os.W_OK | os.X_OK):
            return f"{at} is not writable" + ("" if at == p else " (the directory would be made there)")
        return None
    return "no part of it exists"


def check_data_dir(data: str, data_dir: str | None) -> None:
    """Raise HarnessError (one line) when a --data-dir the user named cannot be what --data reads: a path that
    exists and is no directory, or, for 'auto' and 'real', a directory that does not exist ('auto' would fall back
    on the synthetic stand-in for a typo). 'download' may name a directory to be made."""
    if data_dir is None or data == "synthetic":
        return
    p = Path(data_dir)
    if p.exists() and not p.is_dir():
        raise HarnessError(f"--data-dir {data_dir}: exists and is not a directory")
    if data in ("auto", "real") and not p.is_dir():
        raise HarnessError(
            f"--data-dir {data_dir}: no such directory (--data {data} reads Fashion-MNIST there; --data download "
            f"makes it)"
        )


def check_interpreter(fw: str, path: str, timeout_s: float) -> None:
    """Raise HarnessError (one line) unless `path` runs Python 3.10+ with numpy within `timeout_s` (--timeout, the
    bound of every wait of a run): what every worker needs before its framework (whose absence the worker reports
    itself)."""
    probe = "import sys, numpy; print('parity-python-ok'); sys.exit(0 if sys.version_info >= (3, 10) else 3)"
    try:  # its own session: on a timeout the whole group goes, whatever the program started
        p = subprocess.Popen(
            [path, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
    except OSError as e:
        raise HarnessError(f"--python {fw}={path}: does not run ({e.strerror or e})") from None
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise HarnessError(
            f"--python {fw}={path}: no answer within {timeout_s:g} s (--timeout) to a one-line Python probe; stopped"
        ) from None
    if p.returncode == 0 and "parity-python-ok" not in out:
        raise HarnessError(f"--python {fw}={path}: not a Python interpreter (it ran the probe without running it)")
    if p.returncode:
        last = (err.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        why = "Python older than 3.10" if p.returncode == 3 else last
        raise HarnessError(f"--python {fw}={path}: not a usable interpreter for the {fw} worker ({why})")
