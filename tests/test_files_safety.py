"""The set of files a command writes is one unit: every member checked before any work, all of them or none after,
and what the command says about its files is true, however it is stopped (a failure, a signal, a kill)."""

import os
import signal
from pathlib import Path

import pytest
import results_doc
from signal_guard import fails_unhandled

from parity.common import signals
from parity.output import files
from parity.record.rows import Row

ENV = {**results_doc.ENV, "timestamp": "t", "git_commit": "c", "frameworks": {}}
ROW = results_doc.ROW


def doc(*medians: float) -> dict:
    rows = [Row(**{**ROW, "median_s": m, "replicas": i + 1}).to_dict() for i, m in enumerate(medians)]
    return {"env": ENV, "rows": rows}


def snapshot(out: Path) -> dict:
    """Every entry under `out` (links as links, hidden ones too) with its bytes or its target."""
    return {
        p.relative_to(out): ("link", os.readlink(p)) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
        for p in sorted(out.rglob("*"))
    }


@pytest.fixture
def previous(tmp_path, monkeypatch):
    """`out` holding a previous run's whole set (no chart drawn, a chart file of its own beside it), and traces to
    copy as profiles/."""
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    out = tmp_path / "out"
    files.write_all(doc(1.0, 2.0, 3.0), out)
    (out / "results_ratios.png").write_bytes(b"the previous chart")
    traces = tmp_path / "traces"
    (traces / "row").mkdir(parents=True)
    (traces / "row" / "t.trace").write_text("new traces")
    return out, traces


@pytest.mark.parametrize("kind", ["file", "link to a folder", "link that leads nowhere"])
def test_a_profiles_entry_that_is_no_folder_is_refused_before_work_and_the_set_is_untouched(previous, kind):
    out, traces = previous
    elsewhere = out.parent / "elsewhere"
    elsewhere.mkdir()
    if kind == "file":
        (out / "profiles").write_text("mine")
    else:
        (out / "profiles").symlink_to(elsewhere if kind == "link to a folder" else out.parent / "missing")
    before = snapshot(out)
    with pytest.raises(OSError, match=r"profiles there is (a symbolic link|not a folder)"):
        files.check_out_dir(out)  # what parity.run checks before any work
    with pytest.raises(OSError) as e:
        files.write_all(doc(9.0), out, traces)
    assert "profiles there is" in str(e.value)
    assert snapshot(out) == before and list(elsewhere.iterdir()) == []


def failing_move_in(out: Path, nth: int, then=lambda: None):
    """os.replace, but its `nth` move into `out` fails with an I/O error (after calling `then`)."""
    real, moved = os.replace, []

    def replace(src, dst):
        if Path(dst).parent == out:
            moved.append(Path(dst).name)
            if len(moved) == nth:
                then()
                raise OSError(5, "Input/output error")
        return real(src, dst)

    return replace


def write_failing(monkeypatch, out: Path, traces, replace) -> str:
    """What files.write_all's OSError says where os.replace is `replace`."""
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError) as e:
        files.write_all(doc(9.0), out, traces)
    monkeypatch.undo()
    return str(e.value)


def test_a_member_that_cannot_be_moved_in_puts_the_previous_set_back(previous, monkeypatch):
    out, traces = previous
    before = snapshot(out)
    said = write_failing(monkeypatch, out, traces, failing_move_in(out, 3))
    assert "Input/output error" in said and "the previous files there are as they were" in said
    assert snapshot(out) == before  # what it says is true: no new json beside an old chart, no stage left


def test_a_failure_that_cannot_be_undone_says_where_the_previous_files_are(previous, monkeypatch):
    out, traces = previous
    real = os.replace

    def stuck(src, dst):
        if Path(dst).parent == out or Path(src).name.startswith(".previous-"):
            raise OSError(30, "Read-only file system")
        return real(src, dst)

    first_in_fails = failing_move_in(out, 1, then=lambda: monkeypatch.setattr(os, "replace", stuck))
    said = write_failing(monkeypatch, out, traces, first_in_fails)
    assert "as they were" not in said and "putting the previous files back failed" in said
    stage = next(out.glob(".parity-stage-*"))
    assert (stage / ".previous-results.json").is_file() and str(stage) in said


@pytest.mark.parametrize("half", [True, False], ids=["killed while renaming", "killed while staging"])
def test_a_stage_a_killed_command_left_is_removed_by_the_next_write_and_said(previous, capsys, half):
    out, traces = previous
    stale = out / ".parity-stage-killed"
    stale.mkdir()
    (stale / ("results.csv" if not half else ".previous-results.csv")).write_text("old")
    files.write_all(doc(9.0), out, traces)
    err = capsys.readouterr().err
    assert not stale.exists() and not list(out.glob(".parity-stage-*"))
    assert ".parity-stage-killed" in err and "killed while writing" in err and "$TMPDIR/parity-*" in err
    assert ("half replaced" in err) == half and len(err.strip().splitlines()) == 1
    assert (out / "profiles" / "row" / "t.trace").read_text() == "new traces"


@pytest.fixture
def no_sighup_death():
    """SIGHUP raises here unless the code under test handles it: an unhandled one fails the test, not pytest."""
    with fails_unhandled(signal.SIGHUP):
        yield


def test_sighup_is_handled_as_sigterm(no_sighup_death, capsys):
    def hung_up() -> int:
        os.kill(os.getpid(), signal.SIGHUP)
        raise AssertionError("SIGHUP did not stop the command")

    assert signals.guarded("parity.report", hung_up, "nothing written") == 143
    assert capsys.readouterr().err.strip() == "terminated (SIGHUP); nothing written"


def test_sighup_waits_for_the_renames_as_sigterm_does(no_sighup_death):
    done = []
    with pytest.raises(signals.Terminated), signals.handled():
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            done.append("renamed")
        done.append("after")
    assert done == ["renamed"]
