"""Result files: results.json, .csv, .md, .html and the charts, written as a unit (reading them back:
parity.output.loading)."""

from __future__ import annotations

import contextlib
import json
import os
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


def write_json(path: Path, doc: dict) -> None:
    write_text(path, json.dumps(doc, indent=2) + "\n")


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


def check_out_dir(out: Path, names: tuple[str, ...] = RESULT_FILES) -> None:
    """Make sure results can be written to `out` before any work is done: it is (or can be made) a writable
    directory, and none of the files to be written is a directory. Raises OSError with one clear line."""
    out = Path(out)
    if out.is_symlink() and not out.exists():
        raise OSError(f"--out {out}: a symbolic link that leads nowhere (a loop, or a missing target)")
    if out.exists() and not out.is_dir():
        raise OSError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".parity-probe-")
        probe.close()
    except OSError as e:
        raise OSError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    for name in names:
        if (out / name).is_dir():
            raise OSError(f"--out {out}: {name} there is a directory; results would not fit")


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


def write_staged(
    out: Path, makers: dict[str, Callable[[Path], bool | None]], names: tuple[str, ...], dirs: tuple[str, ...] = ()
) -> list[Path]:
    """The one writer of an output directory: each maker writes its file (or, for a name in `dirs`, its folder)
    into a staging folder inside `out` (returning False when it has nothing to write); only when every one has
    succeeded do they replace the previous ones, with Ctrl-C and SIGTERM held back for those few renames, and a
    previous file or folder of `names` or `dirs` that this set lacks is removed. The directory is locked
    (out_lock) meanwhile. Any failure (a chart that crashes, a full disk) leaves the previous files as they were
    and no staging folder behind; it is raised as OSError with one line."""
    out = Path(out)
    check_out_dir(out, names)
    try:
        with out_lock(out), tempfile.TemporaryDirectory(dir=out, prefix=".parity-stage-") as tmp:
            stage = Path(tmp)
            made = [name for name, make in makers.items() if make(stage / name) is not False]
            with signals.deferred():
                for name in (*names, *dirs):
                    if name in made or not (out / name).exists():
                        continue
                    if name in dirs and (out / name).is_dir() and not (out / name).is_symlink():
                        os.replace(out / name, stage / f".previous-{name}")  # removed with the stage
                    elif name not in dirs:
                        (out / name).unlink()  # a stale file must not sit beside this set
                for name in made:
                    if name in dirs and (out / name).is_dir() and not (out / name).is_symlink():
                        os.replace(out / name, stage / f".previous-{name}")
                    os.replace(stage / name, out / name)
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
    runaway error message) is cut, saying so."""
    import shutil

    doc = bounded(doc)
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
