"""No output replaces an input, a device or a pipe (issue 107, D9 and D10): an output that is one of the command's
inputs (the same file, whatever it is called: a link, another name) or that exists and is not a regular file (a
FIFO, a device) is refused before any work, exit 2 in one line, the input and the pipe untouched."""

import json
import os
from pathlib import Path

import pytest

from parity import report, run
from parity.output import files
from parity.record.schema import SCHEMA_VERSION

ENV = {"schema_version": SCHEMA_VERSION, "device": "cpu", "host_cpu": "test", "precision": "default", "frameworks": {}}
ROW = {"kind": "conv", "framework": "tf", "variant": "function", "device": "cpu", "device_kind": "cpu", "replicas": 1}
ROW |= {"precision": "default", "median_s": 1.0, "flops": 1e9, "reps": 5, "verified": True, "invalid_reason": None}


def results(path: Path, median_s: float = 1.0) -> Path:
    path.write_text(json.dumps({"env": ENV, "rows": [{**ROW, "median_s": median_s}], "checks": []}))
    return path


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    return results(tmp_path / "a.json"), results(tmp_path / "b.json", 2.0)


def refused(capsys, *said: str) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert all(s in err for s in said), err
    return err


# D9: an output that is one of the inputs


def _same_file_cases(a: Path, b: Path) -> list[list[str]]:
    link = a.parent / "link.json"
    link.symlink_to(a)
    hard = a.parent / "hard.json"
    os.link(b, hard)
    return [
        [str(a), "--html", str(a)],
        [str(a), "--html", str(link)],  # through a symbolic link
        [str(link), "--html", str(a)],  # the input named through one
        [str(a), "--ratios", str(a)],
        [str(a), str(b), "--html", str(b)],  # not the first input
        [str(a), str(b), "--html", str(hard)],  # another name of the same file
        [str(a), "--out", str(a.parent), "--html", str(a.parent / "page.html")],  # merged.* are no inputs: fine
    ]


def test_an_output_that_is_one_of_the_inputs_is_refused_before_any_work(inputs, capsys, monkeypatch):
    a, b = inputs
    before = {p: p.read_bytes() for p in (a, b)}
    monkeypatch.setattr(report, "cross_table", lambda rows: pytest.fail("the table was made"))
    *same, apart = _same_file_cases(a, b)
    for argv in same:
        assert report.report_main(argv) == 2, argv
        flag = next(x for x in argv if x.startswith("--"))
        refused(capsys, f"error: {flag} ", "is the input ")
        assert {p: p.read_bytes() for p in (a, b)} == before, argv
    monkeypatch.undo()
    assert report.report_main(apart) == 0
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_merged_files_that_are_an_input_are_refused(inputs, capsys):
    a, _ = inputs
    out = a.parent / "out"
    out.mkdir()
    (out / "merged.json").symlink_to(a)  # the set would replace the link, but its reader meant the input
    assert report.report_main([str(a), "--out", str(out)]) == 2
    refused(capsys, "error: --out ", "is the input ")
    assert (out / "merged.json").is_symlink() and json.loads(a.read_text())["rows"][0]["median_s"] == 1.0


def test_the_grid_s_chart_onto_its_input_is_refused(inputs, capsys):
    a, _ = inputs
    before = a.read_bytes()
    assert report.report_main(["--grid", str(a), "--ratios", str(a)]) == 2
    refused(capsys, "error: --ratios ", "is the input ")
    assert a.read_bytes() == before


# D10: an output path that exists and is not a regular file


def test_a_fifo_at_an_output_path_is_refused_and_kept(inputs, capsys):
    a, _ = inputs
    fifo = a.parent / "x"
    os.mkfifo(fifo)
    for flag in ("--html", "--ratios"):
        assert report.report_main([str(a), flag, str(fifo)]) == 2
        refused(capsys, f"error: {flag} ", "a named pipe (FIFO)", "not a regular file")
        assert fifo.is_fifo()
    link = a.parent / "to-fifo.html"
    link.symlink_to(fifo)  # a link to a regular file is written through; a link to a pipe is not
    assert report.report_main([str(a), "--html", str(link)]) == 2
    refused(capsys, "a named pipe (FIFO)")
    assert fifo.is_fifo() and link.is_symlink()


def test_a_device_or_a_socket_at_an_output_path_is_refused(inputs, capsys):
    import socket
    import stat

    a, _ = inputs
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(a.parent / "sock.html"))
    try:
        assert report.report_main([str(a), "--html", str(a.parent / "sock.html")]) == 2
        refused(capsys, "error: --html ", "a socket", "not a regular file")
    finally:
        sock.close()
    device = a.parent / "null.html"  # a device of its own: a test never writes near the system's /dev
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device needs root (CAP_MKNOD)")
    assert report.report_main([str(a), "--html", str(device)]) == 2
    refused(capsys, "error: --html ", "a character device", "not a regular file")
    assert device.is_char_device()


def test_a_set_member_that_is_a_fifo_is_refused_by_the_one_writer(tmp_path, capsys):
    os.mkfifo(tmp_path / "merged.csv")
    with pytest.raises(OSError, match=r"--out .*: merged.csv there is a named pipe \(FIFO\), not a regular file"):
        files.check_out_dir(tmp_path, report.MERGED_FILES)
    with pytest.raises(OSError, match="merged.csv there is a named pipe"):
        files.write_staged(tmp_path, {"merged.csv": lambda p: p.write_text("x")}, ("merged.csv",))
    assert (tmp_path / "merged.csv").is_fifo()
    (tmp_path / "results.html").symlink_to(tmp_path / "merged.csv")
    with pytest.raises(OSError, match="results.html there is a named pipe"):
        files.check_out_dir(tmp_path)
    (tmp_path / "results.html").unlink()
    (tmp_path / "results.html").symlink_to(results(tmp_path / "page.html"))  # a link to a regular file: as today
    files.check_out_dir(tmp_path, ("results.html",))


def test_a_run_whose_results_json_is_a_fifo_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    os.mkfifo(tmp_path / "results.json")
    ran = []
    monkeypatch.setattr(run, "run_suite", lambda *a: ran.append(a) or {})
    assert run.main(["--device", "cpu", "--quick", "--out", str(tmp_path)]) == 2
    refused(capsys, "results.json there is a named pipe (FIFO)")
    assert not ran and (tmp_path / "results.json").is_fifo()
