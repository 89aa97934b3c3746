"""Result files: results.json, .csv, .md, .html and the charts, written as a unit (reading them back:
parity.output.loading)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from parity.common import signals
from parity.common.safe import bounded, text
from parity.output import page
from parity.output.charts import chart, history_chart, layers_chart, ratio_chart
from parity.output.tables import markdown
from parity.record import rows
from parity.record.schema import PROFILES  # beside the results: a folder of traces per profiled row (--profile)


def write_text(path: Path, text: str) -> None:
    """Write atomically: a crash never leaves a half-written results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def finite(doc):
    """`doc` (JSON data) with every number that is not finite (NaN, an infinity: none is a JSON number) as null: a
    results file holds finite numbers only (parity.output.loading refuses the rest). The checks and rows such a
    number comes from are failed, naming it, where they are judged (parity.judging.judge)."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    return [finite(v) for v in doc] if isinstance(doc, (list, tuple)) else doc


def write_json(path: Path, doc: dict) -> None:
    write_text(path, json.dumps(finite(doc), indent=2, allow_nan=False) + "\n")


CSV_FIELDS = rows.CSV_FIELDS  # the fields tools most often want, in parity.record.rows.Row's order


def csv_text(rows: list[dict]) -> str:
    """The rows as CSV (one line per row, the fields tools most often want)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:  # text as text, never a formula (parity.common.safe)
        w.writerow({k: text(v, "csv") if isinstance(v := r.get(k), str) else v for k in CSV_FIELDS})
    return buf.getvalue()


RESULT_FILES = (
    "results.json",
    "results.csv",
    "results.md",
    "results.png",
    "results_ratios.png",
    "results_history.png",
    "results_layers.png",
    "results.html",
)


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"))
_KINDS += ((stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_regular(path: Path) -> str | None:
    """What `path` is where it exists and is neither a regular file nor a folder, through a symbolic link (a pipe,
    a device, a socket: what a write must never replace), or None."""
    mode = st.st_mode if (st := _stat(path)) else None  # absent, or a link that leads nowhere: a new file
    if mode is None or stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for kind, what in _KINDS if kind(mode)), "not a file")


def check_out_dir(
    out: Path, names: tuple[str, ...] | None = None, dirs: tuple[str, ...] = (), flag: str = "--out"
) -> None:
    """Make sure results can be written to `out` before any work is done: it is (or can be made) a writable
    directory, none of the files to be written (`names`) is a directory or anything else that is not a regular file
    (a pipe, a device: not_regular), and none of the folders (`dirs`) is a file or a symbolic link. By default the
    set parity.run writes: RESULT_FILES and its PROFILES folder. Raises OSError with one clear line naming `flag`,
    the option that chose `out`."""
    if names is None:
        names, dirs = RESULT_FILES, (PROFILES,)
    out = Path(out)
    if out.is_symlink() and not out.exists():
        raise OSError(f"{flag} {out}: a symbolic link that leads nowhere (a loop, or a missing target)")
    if out.exists() and not out.is_dir():
        raise OSError(f"{flag} {out}: exists and is not a directory")
    for name in names:
        if (out / name).is_dir():
            raise OSError(f"{flag} {out}: {name} there is a directory; results would not fit")
        if (what := not_regular(out / name)) is not None:
            raise OSError(f"{flag} {out}: {name} there is {what}, not a regular file; it is left as it is")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".parity-probe-")
        probe.close()
    except OSError as e:
        raise OSError(f"{flag} {out}: cannot write there ({e.strerror or e})") from None
    for name in dirs:
        p = out / name
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            what = "a symbolic link" if p.is_symlink() else "not a folder"
            raise OSError(f"{flag} {out}: {name} there is {what}; this set writes a folder of that name")


def written_through(given: Path, flag: str) -> Path:
    """Where a file that `flag` names is written: `given`, or the file a symbolic link there leads to (written
    through, as a shell's `>` writes, never replacing the link), checked before any work (check_out_dir). Raises
    OSError with one line naming `flag` where it is a folder, a link in a loop, or in a folder it cannot write to."""
    path = Path(os.path.realpath(given)) if given.is_symlink() else given
    if path.is_symlink():
        raise OSError(f"{flag} {given}: a symbolic link that leads nowhere (a loop)")
    check_out_dir(path.parent, (path.name,), flag=flag)
    return path


def check_outputs(
    inputs: list[Path], named: dict[str, Path | None], out: Path | None = None, names: tuple[str, ...] = ()
) -> dict[str, Path | None]:
    """Every output of a command that reads `inputs`, checked before any work: the files `named` (flag -> the path it
    gives, or None), each written through a symbolic link (written_through), and the set `names` in the directory
    `out` (check_out_dir, its flag --out); none of them one of the inputs, the same file by its device and inode
    whatever names or links lead to it. Returns `named` with each path as it will be written. Raises OSError with
    one line naming the flag."""
    if out is not None:
        check_out_dir(out, names)
    through = {flag: p and written_through(p, flag) for flag, p in named.items()}
    outputs = [(flag, p) for flag, p in named.items() if p] + [("--out", out / n) for n in names if out is not None]
    read = {(st.st_dev, st.st_ino): p for p in reversed(inputs) if (st := _stat(p))}  # by identity, not by name
    for flag, p in outputs:  # as given: os.stat follows a link as the write does
        if (st := _stat(p)) and (hit := read.get((st.st_dev, st.st_ino))) is not None:
            raise OSError(f"{flag} {p}: is the input {hit}; writing it would replace what it reads")
    return through


def _stat(path: Path) -> os.stat_result | None:
    """The file `path` leads to (through links), or None where there is none to read."""
    try:
        return os.stat(path)
    except OSError:
        return None


_HELD: dict[tuple[int, int], int] = {}  # output directories this process holds the lock of: (device, inode) -> fd


@contextlib.contextmanager
def out_lock(out: Path) -> Iterator[None]:
    """One parity command at a time writes to the directory `out`: an exclusive lock on the directory itself (no
    file left behind), released when the block ends or the process does, however it ends. Taken again by the same
    process, it is the same lock. Raises OSError with one line when another process holds it."""
    import fcntl

    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    if key in _HELD:
        os.close(fd)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(
            f"{out}: another parity command is writing results there; wait for it to end or choose another --out"
        ) from None
    _HELD[key] = fd
    try:
        yield
    finally:
        del _HELD[key]
        os.close(fd)


def _one_line(e: OSError) -> str:
    """An OSError's cause in one line; shutil.Error's list of every file that failed becomes its first and a count."""
    import shutil

    if isinstance(e, shutil.Error) and e.args and isinstance(e.args[0], list) and e.args[0]:
        first = e.args[0][0]
        more = len(e.args[0]) - 1
        return f"{first[-1] if isinstance(first, tuple) else first}" + (f" (and {more} more)" if more else "")
    return str(e.strerror or e)


STAGE = ".parity-stage-"  # a staging folder's prefix, inside the directory it writes to
# what a run killed by SIGKILL (which nothing can catch) leaves besides a staging folder: said where one is found
KILLED = "a run killed so also leaves its working folder $TMPDIR/parity-* and its workers' logs $TMPDIR/parity-*.log"


def _clear_stale(out: Path) -> None:
    """Remove the staging folders a command killed while writing left in `out`, whose lock the caller
    holds (so no live command owns them), and say so in one line on stderr: whether the files beside them were a set
    half replaced (the killed command had begun moving its files into place) or whole."""
    import shutil
    import sys

    stale = sorted(p for p in out.glob(f"{STAGE}*") if p.is_dir() and not p.is_symlink())
    if not stale:
        return
    half = any(q.name.startswith(".previous-") for p in stale for q in p.iterdir())
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    state = "were a set half replaced" if half else "were whole"
    names = ", ".join(p.name for p in stale)
    print(
        text(
            f"note: removed {names} from {out}: left by a command killed while writing there; the files there {state}; "
            + KILLED
        ),
        file=sys.stderr,
    )


class _NotRestored(OSError):
    """Installing a set failed, and so did putting the previous one back: where the previous files are now."""


def _swap(out: Path, stage: Path, members: tuple[str, ...], made: list[str]) -> None:
    """Replace the set `members` in `out` with `made`, staged in `stage`: every previous member moved aside into the
    stage first, then every new one moved in, so that `out` never holds members of two sets. Any failure moves the
    new ones back out and the previous ones back in (all or nothing); raises the failure, or _NotRestored where the
    previous files could not all be put back."""
    aside: list[str] = []
    placed: list[str] = []
    try:
        for name in members:
            if (out / name).is_symlink() or (out / name).exists():
                os.replace(out / name, stage / f".previous-{name}")
                aside.append(name)
        for name in made:
            os.replace(stage / name, out / name)
            placed.append(name)
    except OSError as e:
        try:
            for name in reversed(placed):
                os.replace(out / name, stage / name)
            for name in reversed(aside):
                os.replace(stage / f".previous-{name}", out / name)
        except OSError as again:
            raise _NotRestored(
                f"{_one_line(e)}, and putting the previous files back failed ({_one_line(again)}): those not in "
                f"{out} are in {stage} as .previous-<name>"
            ) from None
        raise


def write_staged(
    out: Path, makers: dict[str, Callable[[Path], bool | None]], names: tuple[str, ...], dirs: tuple[str, ...] = ()
) -> list[Path]:
    """The one writer of an output directory, whose files (`names`) and folders (`dirs`) are one set: every member
    is checked first (check_out_dir); each maker writes its file (or, for a name in `dirs`, its folder) into a
    staging folder inside `out` (returning False when it has nothing to write); only when every one has succeeded
    does the new set replace the previous one, all or nothing (_swap), with Ctrl-C, SIGTERM and SIGHUP held back
    for those few renames; a previous member this set lacks is removed. The directory is locked (out_lock)
    meanwhile, and staging folders that a killed command left there are removed first, said in one line. Any
    failure (a chart that crashes, a full disk, a member that cannot be moved) leaves the previous files as they
    were and no staging folder behind; it is raised as OSError with one line. Only SIGKILL, which nothing can
    catch, can stop it midway (KILLED): `out` then holds members of one set only, the rest in the staging folder
    that the next write there removes."""
    import shutil

    out = Path(out)
    check_out_dir(out, names, dirs)
    kept = False
    try:
        with out_lock(out):
            _clear_stale(out)
            stage = Path(tempfile.mkdtemp(dir=out, prefix=STAGE))
            try:
                made = [name for name, make in makers.items() if make(stage / name) is not False]
                with signals.deferred():
                    _swap(out, stage, (*names, *dirs), made)
            except _NotRestored:
                kept = True
                raise
            finally:
                if not kept:
                    shutil.rmtree(stage, ignore_errors=True)
    except _NotRestored as e:
        raise OSError(f"cannot write to {out}: {e}") from None
    except OSError as e:
        raise OSError(f"cannot write to {out}: {_one_line(e)}; the previous files there are as they were") from None
    except (ValueError, TypeError, KeyError) as e:  # a maker refused what it was given (a chart, a table)
        raise OSError(
            f"cannot write to {out}: {type(e).__name__}: {e}; the previous files there are as they were"
        ) from None
    return [out / n for n in made]


def write_all(doc: dict, out: Path, profiles: Path | None = None) -> list[Path]:
    """results.json, .csv, .md, .png (when matplotlib is there and a row is verified), results_history.png
    (when a training row was validated per epoch), results.html (parity.output.page, the charts embedded) and,
    given `profiles`, a copy of that folder as profiles/, under `out`, as one unit (write_staged): a previous run's
    profiles/ does not outlive its results. A string longer than a results file may hold (MAX_TEXT: a framework's
    runaway error message) is cut, saying so; a number that is not finite is null (finite)."""
    import shutil

    doc = finite(bounded(doc))
    env = doc["env"]
    title = f"{env['device']} ({env.get('host_cpu', '')}), precision {env['precision']}"
    return write_staged(
        out,
        {
            "results.json": lambda p: write_json(p, doc),
            "results.csv": lambda p: write_text(p, csv_text(doc["rows"])),
            "results.md": lambda p: write_text(p, markdown(doc)),
            "results.png": lambda p: chart(doc["rows"], p, title),
            "results_ratios.png": lambda p: ratio_chart(doc, p),
            "results_history.png": lambda p: history_chart(doc["rows"], p, f"validation accuracy per epoch: {title}"),
            "results_layers.png": lambda p: layers_chart(doc, p),
            # after the charts: the page embeds those staged beside it
            "results.html": lambda p: write_text(
                p, page.page([page.shown("results.json", doc, page.read_charts(p.parent))])
            ),
            PROFILES: lambda p: profiles is not None and bool(shutil.copytree(profiles, p)),
        },
        RESULT_FILES,
        (PROFILES,),
    )


# the reader, re-exported where every caller finds it
from parity.output.loading import (  # noqa: E402, F401
    MAX_RESULTS_BYTES,
    ResultsError,
    load_results,
    read_bounded,
)
