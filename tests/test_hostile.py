"""Hostile input, one line per case: what a user (or a broken tool) hands the command line, the exit status it
must get, and the first line it must read, never a traceback. Add a case by adding a line to CASES.

Each case is `(name, files, argv, exit, first line)`: `files` maps a name under the test's folder to its
content (text, or bytes), written before the command runs; `{d}` in argv is that folder. The commands run in
this process (their `main`), so a case costs milliseconds."""

import json
import os
import re
from pathlib import Path

import pytest
from signal_guard import fails_unhandled

from parity import compare, launch, report, run
from parity.record.schema import SCHEMA_VERSION

ENV = {"schema_version": SCHEMA_VERSION, "device": "cpu", "host_cpu": "test", "precision": "default", "frameworks": {}}
ROW = {
    "kind": "conv",
    "framework": "tf",
    "variant": "function",
    "device": "cpu",
    "device_kind": "cpu",
    "replicas": 1,
    "precision": "default",
    "median_s": 1.0,
    "flops": 1e9,
    "reps": 5,
    "verified": True,
    "invalid_reason": None,
}


def results(rows=None, **env) -> str:
    return json.dumps({"env": {**ENV, **env}, "rows": [ROW] if rows is None else rows, "checks": []})


def row(**kw) -> str:
    return results([{**ROW, **kw}])


GOOD = results()
CMP = (compare.main, "compare")
REP = (report.report_main, "report")
RUN = (run.main, "run")
LAUNCH = (launch.main, "launch")

CASES = [
    # results files: numbers
    (
        "overflowing median",
        {"a.json": row(median_s=1).replace('"median_s": 1', '"median_s": 1e400')},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"error: .*a\.json: 1e400 overflows to infinity",
    ),
    (
        "negative overflow in iqr",
        {"a.json": row(iqr_s=1).replace('"iqr_s": 1', '"iqr_s": -1e400')},
        (REP, "{d}/a.json"),
        2,
        r"error: .*-1e400 overflows to infinity",
    ),
    (
        "a 400-digit median",
        {"a.json": row(median_s=1).replace('"median_s": 1', '"median_s": ' + "9" * 400)},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"error: .*an integer of 400 digits",
    ),
    ("negative iqr", {"a.json": row(iqr_s=-0.5)}, (REP, "{d}/a.json"), 2, r"error: .*row 0: iqr_s is -0.5: below zero"),
    (
        "negative compile time",
        {"a.json": row(compile_s=-1.0)},
        (REP, "{d}/a.json"),
        2,
        r"compile_s is -1.0: below zero",
    ),
    (
        "a string estimate",
        {"a.json": row(est_5_notebook_epochs_s="50")},
        (REP, "{d}/a.json"),
        2,
        r"est_5_notebook_epochs_s is '50', not float or NoneType",
    ),
    (
        "a negative estimate",
        {"a.json": row(est_5_notebook_epochs_s=-50000.0)},
        (REP, "{d}/a.json"),
        2,
        r"est_5_notebook_epochs_s is -50000.0: below zero",
    ),
    ("quartiles as strings", {"a.json": row(q1_s="0.9")}, (REP, "{d}/a.json"), 2, r"q1_s is '0.9'"),
    # results files: shape
    (
        "100,000 nested levels",
        {"a.json": "[" * 100000 + "]" * 100000},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"error: .*(nested deeper than any results file|not a parity.run results file)",
    ),
    (
        "schema version 0",
        {"a.json": results(schema_version=0)},
        (REP, "{d}/a.json"),
        2,
        r"schema_version 0; this tool reads 1 to",
    ),
    ("schema version -7", {"a.json": results(schema_version=-7)}, (REP, "{d}/a.json"), 2, r"schema_version -7"),
    ("no device", {"a.json": results(device=None)}, (REP, "{d}/a.json"), 2, r"env: device is None"),
    (
        "frameworks a list",
        {"a.json": results(frameworks=["tf"])},
        (REP, "{d}/a.json"),
        2,
        r"env: frameworks is not an object",
    ),
    (
        "frameworks a string",
        {"a.json": results(frameworks="tf")},
        (REP, "{d}/a.json"),
        2,
        r"env: frameworks is not an object",
    ),
    ("not UTF-8", {"a.json": b"\xff\xfe{}"}, (REP, "{d}/a.json"), 2, r"error: .*not UTF-8 text"),
    ("a directory", {}, (REP, "{d}"), 2, r"error: .*not a regular file"),
    ("/dev/zero", {}, (REP, "/dev/zero"), 2, r"error: /dev/zero: not a regular file"),
    # flags accepted but impossible: refused before any work, the bound said
    ("a timeout of 1e12 s", {}, (RUN, "--timeout", "1e12"), 2, r"--timeout: must be at most 604800 s"),
    ("1e12 parity steps", {}, (RUN, "--parity-steps", "1e12"), 2, r"--parity-steps: expected a whole number"),
    ("a million parity steps", {}, (RUN, "--parity-steps", "1000000"), 2, r"--parity-steps: must be at most 1000"),
    ("1e12 steps per epoch", {}, (RUN, "--steps-per-epoch", "1000000000000"), 2, r"must be at most 10000"),
    ("a batch of a billion", {}, (RUN, "--batch", "1000000000"), 2, r"--batch: must be at most 60000"),
    (
        "a batch above --quick's training set",
        {},
        (RUN, "--quick", "--workload", "cnn", "--batch", "4096", "--out", "{d}/out"),
        2,
        r"error: cnn: global batch 4096 is larger than the training set \(2048 images\)",
    ),
    ("1e12 local devices", {}, (RUN, "--local-devices", "1e12"), 2, r"--local-devices: expected a whole number"),
    ("100,000 local devices", {}, (RUN, "--local-devices", "100000"), 2, r"--local-devices: must be at most 1024"),
    ("an empty --out", {}, (RUN, "--out", ""), 2, r"--out: expected a directory, got an empty path"),
    ("zero epochs", {}, (RUN, "--epochs", "0"), 2, r"--epochs: must be >= 2, got 0"),
    ("a negative warm-up", {}, (RUN, "--warmup", "-1"), 2, r"--warmup: must be >= 0"),
    ("100,000 processes", {}, (LAUNCH, "--processes", "100000"), 2, r"--processes: must be at most \d+ \(about 1 GiB"),
    ("port -1", {}, (LAUNCH, "--processes", "2", "--port", "-1"), 2, r"--port: must be >= 1"),
    ("port 70000", {}, (LAUNCH, "--processes", "2", "--port", "70000"), 2, r"--port: must be at most 65535"),
    # results files: what the readers cannot handle is refused where the file is read
    ("an unknown row kind", {"a.json": row(kind="bogus")}, (REP, "{d}/a.json"), 2, r"kind 'bogus' is no row"),
    (
        "a median that is not its times' median",
        {"a.json": row(median_s=0.19075, times_s=[0.00191] * 5, reps=5)},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"row 0: median_s is 0.19075, but the median of its times_s is 0.00191",
    ),
    (
        "reps that are not its times' count",
        {"a.json": row(times_s=[1.0] * 4, reps=5)},
        (REP, "{d}/a.json"),
        2,
        r"row 0: reps is 5, but times_s holds 4 calls",
    ),
    (
        "more calls than a run can time",
        {"a.json": row(times_s=[1.0] * 100_001, reps=100_001)},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"times_s holds 100001 calls; a row holds at most 100000",
    ),
    (
        "a row twice",
        {"a.json": results([ROW, {**ROW, "median_s": 2.0}])},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"row 1 measures what row 0 measures",
    ),
    (
        "one file twice",
        {"a.json": GOOD},
        (REP, "{d}/a.json", "{d}/a.json"),
        2,
        r"a\.json holds the same results as .*a\.json: each would be counted twice",
    ),
    ("gpu rows in a cpu file", {"a.json": row(device="gpu")}, (REP, "{d}/a.json"), 2, r"device 'gpu' in a file of"),
    ("an unknown device", {"a.json": results(device="\x1b[2J")}, (REP, "{d}/a.json"), 2, r"env: device is '\\x1b"),
    ("zero replicas", {"a.json": row(replicas=0)}, (REP, "{d}/a.json"), 2, r"replicas is 0: a row runs on at least"),
    ("zero processes", {"a.json": row(processes=0)}, (CMP, "{d}/a.json", "{d}/a.json"), 2, r"processes is 0"),
    (
        "invalid without a reason",
        {"a.json": row(verified=False, median_s=None)},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"row 0: invalid, but it gives no invalid_reason",
    ),
    # a named data directory that cannot be read is an error, not a silent fallback on synthetic data
    ("an absent --data-dir", {}, (RUN, "--data-dir", "{d}/none", "--out", "{d}"), 2, r"--data-dir .*/none: no such"),
    (
        "a --data-dir that is a file",
        {"f": "x"},
        (RUN, "--data", "download", "--data-dir", "{d}/f", "--out", "{d}"),
        2,
        r"--data-dir .*/f: exists and is not a directory",
    ),
    # what report says
    (
        "no baseline given, nothing verified",
        {"a.json": row(verified=False, median_s=None, invalid_reason="x")},
        (REP, "{d}/a.json", "--no-article"),
        0,
        r"^kind ",
    ),
    # results files: rows as implausible as parity.run would mark invalid (parity.judging.roofline.impossible)
    (
        "a verified median below one clock tick",
        {"a.json": row(median_s=1e-300)},
        (CMP, "{d}/a.json", "{d}/a.json"),
        2,
        r"error: .*a\.json: row 0: verified, but a median of 1e-300 s, below one tick of the clock",
    ),
    (
        "a verified row faster than the peak its file records",
        {"a.json": results([{**ROW, "median_s": 1e-6}], peak={"flops": 1e11, "computed_flops": 1e11})},
        (REP, "{d}/a.json", "--ratios", "{d}/r.png"),
        2,
        r"error: .*row 0: verified, but 1000000\.0 GFLOP/s of necessary arithmetic exceeds the device's peak of 100\.0",
    ),
    (
        "a recorded peak whose headroom would switch the guard off",
        {"a.json": results(peak={"flops": 1e11, "headroom": 1e300})},
        (REP, "{d}/a.json"),
        2,
        r"error: .*env: peak\.headroom is 1e\+300, not 1 to 2",
    ),
]


def _run(tmp_path, files, argv):
    for name, content in files.items():
        p = tmp_path / name
        p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
    (main, _), *args = argv
    try:
        return main([a.replace("{d}", str(tmp_path)) for a in args])
    except SystemExit as e:  # argparse refuses a flag by exiting
        return e.code


@pytest.mark.parametrize("name, files, argv, code, first", CASES, ids=[c[0] for c in CASES])
def test_hostile_input(tmp_path, capsys, name, files, argv, code, first):
    assert _run(tmp_path, files, argv) == code
    out, err = capsys.readouterr()
    said = (err or out).strip().splitlines()
    assert said and re.search(first, said[0]), (err or out)[:500]
    assert "Traceback" not in out + err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    assert report.report_main([str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_ctrl_c_during_compare_or_report_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "a.json").write_text(GOOD)

    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare, "load_results", interrupted)
    monkeypatch.setattr(report, "load_results", interrupted)
    assert compare.main([str(tmp_path / "a.json")] * 2) == 130
    assert report.report_main([str(tmp_path / "a.json")]) == 130
    err = capsys.readouterr().err
    assert err.count("interrupted") == 2 and "Traceback" not in err


def test_a_report_that_fails_midway_leaves_the_previous_files_and_no_stage(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    (tmp_path / "a.json").write_text(GOOD)
    assert report.report_main([str(tmp_path / "a.json"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "chart", full_disk)  # the last file of the set fails, after the others
    (tmp_path / "b.json").write_text(row(median_s=2.0))
    assert report.report_main([str(tmp_path / "b.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "as they were" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no new json beside an old chart, no stage


def test_an_out_that_is_a_symlink_loop_says_so(tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert run.main(["--out", str(loop)]) == 2
    err = capsys.readouterr().err
    assert "a symbolic link that leads nowhere" in err and len(err.strip().splitlines()) == 1


def test_an_environment_that_contradicts_the_flags_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    assert run.main(["--device", "cpu", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: JAX_PLATFORMS=tpu in the environment contradicts --device cpu")
    assert len(err.strip().splitlines()) == 1
    assert run.main(["--device", "cpu", "--framework", "tf", "--list-devices"]) == 0  # TF does not read it


def test_an_interpreter_that_hangs_or_is_no_python_is_refused(tmp_path, monkeypatch):
    import subprocess
    import time

    from parity.cli import argtypes as flags
    from parity.common.messages import HarnessError

    marker = tmp_path / "started"
    sleepy = tmp_path / "python"
    sleepy.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 600 &\necho $! > {tmp_path / 'child'}\nwait\n")
    sleepy.chmod(0o755)
    with pytest.raises(HarnessError, match=r"no answer within 1 s \(--timeout\)"):
        flags.check_interpreter("jax", str(sleepy), 1.0)
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5  # killed with its group: gone (or a zombie reaped by init) within seconds
    while time.monotonic() < deadline:
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True, text=True).stdout
        if not state.strip() or state.strip().startswith("Z"):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the probe's child {child} outlived the refusal")
    with pytest.raises(HarnessError, match="not a Python interpreter"):
        flags.check_interpreter("jax", "/bin/true", 30.0)


@pytest.mark.parametrize(
    "var, value, said",
    [
        ("PARITY_LOCAL_DEVICES", "1000000000000", "must be 0 to 1024"),
        ("PARITY_LOCAL_DEVICES", "1e12", "must be a whole number"),
        ("PARITY_NUM_PROCESSES", "100000", "the process count must be 1 to 4096"),
    ],
)
def test_cluster_settings_from_the_environment_are_bounded_too(tmp_path, capsys, monkeypatch, var, value, said):
    monkeypatch.setenv("PARITY_COORDINATOR", "127.0.0.1:12355")
    monkeypatch.setenv("PARITY_NUM_PROCESSES", "2")
    monkeypatch.setenv("PARITY_PROCESS_ID", "0")
    monkeypatch.setenv(var, value)
    assert run.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_report_without_a_baseline_never_names_one(tmp_path, capsys):
    (tmp_path / "a.json").write_text(row(verified=False, median_s=None, invalid_reason="x"))
    assert report.report_main([str(tmp_path / "a.json"), "--no-article"]) == 0
    out = capsys.readouterr().out
    assert "conv: no verified row: no speedups" in out and "--baseline None" not in out


# ---- strings from a results file are shown as plain text, wherever they are shown (parity.common.safe) ----------

ESC = "\x1b]0;PWNED\x07\x1b[2J"  # retitles and clears a terminal that prints it


def _report_out(tmp_path, capsys, doc: str, *flags) -> tuple[str, dict[str, str]]:
    (tmp_path / "a.json").write_text(doc)
    out = tmp_path / "out"
    assert report.report_main([str(tmp_path / "a.json"), "--no-article", "--out", str(out), *flags]) == 0
    said = capsys.readouterr()
    assert "Traceback" not in said.err
    return said.out, {p.name: p.read_text() for p in out.glob("merged.*") if p.suffix != ".png"}


@pytest.mark.parametrize(
    "where",
    ["variant", "framework", "precision", "invalid_reason", "device_kind", "host_cpu", "frameworks.device_kind"],
)
def test_a_control_sequence_in_a_results_file_never_reaches_the_terminal_or_markdown(tmp_path, capsys, where):
    r, env = dict(ROW), {}
    if where == "invalid_reason":
        r.update(verified=False, median_s=None, invalid_reason=ESC)
    elif where == "host_cpu":
        env["host_cpu"] = ESC
    elif where == "frameworks.device_kind":
        env["frameworks"] = {"tf": {"device_kind": ESC, "versions": {}}}
    else:
        r[where] = ESC
    doc = results([r], **env)
    out, made = _report_out(tmp_path, capsys, doc)
    for text in (out, *made.values()):  # merged.json holds it as JSON escapes
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;PWNED\\x07" in out + made["merged.md"] + made["merged.csv"]  # shown, as escapes
    if where == "invalid_reason":  # compare's verdict names the reason: escaped too
        (tmp_path / "old.json").write_text(GOOD)
        (tmp_path / "new.json").write_text(doc)
        assert compare.main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
        out = capsys.readouterr().out
        assert "\x1b" not in out and "now invalid (\\x1b]0;PWNED\\x07" in out


def test_a_newline_in_a_variant_cannot_forge_a_table_line(tmp_path, capsys):
    forged = "function\nconv   | evil machine | tf | forged | 1 | default | 0.01 ms"
    out, made = _report_out(tmp_path, capsys, row(variant=forged))
    table = out.split("  * ")[0].strip().splitlines()
    assert len(table) == 3 and "function\\nconv" in table[2]  # header, rule, the one row
    assert not any(line.startswith("conv   | evil") for text in made.values() for line in text.splitlines())
    assert "function\\nconv" in made["merged.csv"] and "\n" not in made["merged.csv"].splitlines()[1]


def test_a_variant_cannot_leave_the_markdown_fence_or_make_html(tmp_path, capsys):
    evil = "x\n```\n<script>alert(1)</script>\n```` [a](javascript:alert(1))"
    _, made = _report_out(tmp_path, capsys, row(variant=evil))
    lines = made["merged.md"].splitlines()
    fence = lines[0]
    assert set(fence) == {"`"} and lines.index(fence, 1) == len(lines) - 1  # one fence, closed on the last line
    assert all(len(line) < len(fence) or set(line) != {"`"} for line in lines[1:-1])


def test_results_markdown_escapes_html_links_and_cells():
    from parity.output.tables import markdown
    from parity.record.rows import Row

    env = {**ENV, "host_cores": 2, "python": "3.12", "timestamp": "t", "git_commit": "c"}
    evil = "<script>alert(1)</script> | [a](javascript:alert(1)) `x`"
    doc = {"env": {**env, "host_cpu": evil}, "rows": [Row(**{**ROW, "variant": evil}).to_dict()], "checks": []}
    md = markdown(doc)
    assert "<script" not in md and not re.search(r"(?<!\\)\]\(", md) and "&lt;script>" in md
    speed = next(line for line in md.splitlines() if line.startswith("| conv | tf"))
    assert len(re.split(r"(?<!\\)\|", speed)) == 18  # 16 cells: the variant's | escaped
    assert "\\`x\\`" in md and "host &lt;script>" in md


@pytest.mark.parametrize("value", ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"])
def test_a_formula_in_a_results_file_is_text_in_the_csv(tmp_path, capsys, value):
    _, made = _report_out(tmp_path, capsys, row(variant=value))
    cell = made["merged.csv"].splitlines()[1]
    assert f",'{value[:4]}" in cell or f",\"'{value[:4]}" in cell, cell


def test_a_string_longer_than_any_results_file_holds_is_refused_at_once(tmp_path, capsys):
    from parity.common.safe import MAX_TEXT

    (tmp_path / "a.json").write_text(row(variant="v" * 10_000_000))
    assert report.report_main([str(tmp_path / "a.json"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "a string of 10000000 characters (vvv" in err and f"at most {MAX_TEXT}" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_long_string_is_cut_in_a_chart_and_in_what_run_writes(tmp_path):
    from parity.common.safe import MAX_TEXT, text
    from parity.output import files
    from parity.output.charts import LABEL

    assert len(text("v" * 60_000, "chart", LABEL)) == LABEL and text("a$b$", "chart") == "a\\$b\\$"
    from parity.record.rows import Row

    r = Row(**{**ROW, "invalid_reason": "e" * (MAX_TEXT + 10), "verified": False, "median_s": None}).to_dict()
    doc = {"env": {**ENV, "host_cores": 2, "python": "3.12", "timestamp": "t", "git_commit": "c"}, "rows": [r]}
    files.write_all(doc, tmp_path)
    back = files.load_results(tmp_path / "results.json")  # run never writes what the readers refuse
    assert len(back["rows"][0]["invalid_reason"]) <= MAX_TEXT and "characters cut" in back["rows"][0]["invalid_reason"]


# ---- compare's bootstrap, and a bug in report or compare ------------------------------------------------------


def test_the_bootstrap_draws_in_chunks_whose_memory_does_not_grow_with_the_calls(monkeypatch):
    import tracemalloc

    import numpy as np

    from parity.judging import stats

    t = np.random.default_rng(0).uniform(1.0, 2.0, 2000)
    whole = stats.median_ratio(t, t[::-1].copy(), resamples=400)  # one chunk: the draws as they always were
    monkeypatch.setattr(stats, "CHUNK_VALUES", 2**12, raising=False)  # 2 resamples of 2000 calls per chunk
    tracemalloc.start()
    chunked = stats.median_ratio(t, t[::-1].copy(), resamples=400)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * 2**20, peak  # one 400 x 2000 draw alone is 6.4 MB
    assert chunked.low <= chunked.ratio <= chunked.high and abs(chunked.low - whole.low) < 0.05


@pytest.mark.parametrize("command", [CMP, REP], ids=["compare", "report"])
def test_a_bug_in_report_or_compare_is_exit_3_in_one_line(tmp_path, capsys, monkeypatch, command):
    (tmp_path / "a.json").write_text(GOOD)

    def broken(*a, **k):
        raise KeyError("x")

    monkeypatch.setattr(compare, "compare", broken)
    monkeypatch.setattr(report, "cross_table", broken)
    (main, _) = command
    assert main([str(tmp_path / "a.json")] * (2 if command is CMP else 1)) == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.match(
        r"error: internal error in parity\.(compare|report) \(KeyError: 'x' at .*test_hostile\.py:\d+\)", err
    )


# ---- signals from a command's first line to its last; the output set as one unit, locked ---------------------


@pytest.fixture
def fakes(monkeypatch):
    """run.main on fake frameworks in this process (tests/fakeimpl.py), on a fake clock, the peak fixed, no chart
    drawn."""
    from fakeimpl import FakeImpl, fake_engine

    from parity.common import frameworks
    from parity.judging import roofline
    from parity.output import files

    peak = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed for the tests", computed_flops=1e9, measured_flops=1e9)
    fake_engine(monkeypatch, peak, {k: {"default": FakeImpl()} for k in frameworks.KEYS})
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    return ["--quick", "--workload", "conv", "--framework", "tf", "--replicas", "1", "--configs", "default", "--quiet"]


@pytest.fixture
def no_sigterm_death():
    """SIGTERM raises here unless the command under test handles it: a command that does not must fail the test,
    not kill pytest."""
    import signal

    with fails_unhandled(signal.SIGTERM):
        yield


def _signal_then_wait(sig):
    import signal
    import time

    def make(*a, **k):
        os.kill(os.getpid(), getattr(signal, sig))
        time.sleep(2)  # the signal arrives meanwhile
        raise AssertionError("the signal did not stop the command")

    return make


@pytest.mark.parametrize(
    "sig, code, said",
    [("SIGTERM", 143, "terminated (SIGTERM)"), ("SIGHUP", 129, "terminated (SIGHUP)"), ("SIGINT", 130, "interrupted")],
)
def test_a_signal_while_run_writes_its_files_is_one_line_and_leaves_the_previous_set(
    tmp_path, capsys, monkeypatch, fakes, no_sigterm_death, sig, code, said
):
    from parity.output import files

    out = tmp_path / "out"
    assert run.main([*fakes, "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    monkeypatch.setattr(files, "markdown", _signal_then_wait(sig))  # inside the write phase, after the tables
    assert run.main([*fakes, "--out", str(out)]) == code
    err = capsys.readouterr().err
    assert err.strip() == f"{said}; the previous files in {out} are as they were", err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no stage, no half set


def test_sigterm_while_report_writes_leaves_no_stage(tmp_path, capsys, monkeypatch, no_sigterm_death):
    out = tmp_path / "out"
    (tmp_path / "a.json").write_text(GOOD)
    assert report.report_main([str(tmp_path / "a.json"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(report, "chart", _signal_then_wait("SIGTERM"))
    (tmp_path / "b.json").write_text(row(median_s=2.0))
    assert report.report_main([str(tmp_path / "b.json"), "--out", str(out)]) == 143
    assert "terminated (SIGTERM); nothing written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("command", [CMP, REP], ids=["compare", "report"])
def test_report_and_compare_take_ctrl_c_even_when_started_with_it_ignored(tmp_path, capsys, monkeypatch, command):
    import signal

    (tmp_path / "a.json").write_text(GOOD)
    real = command[0].__globals__["load_results"]

    def load_then_ctrl_c(path):
        os.kill(os.getpid(), signal.SIGINT)
        import time

        time.sleep(1)
        return real(path)

    monkeypatch.setattr(compare if command is CMP else report, "load_results", load_then_ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a non-interactive shell
    try:
        assert command[0]([str(tmp_path / "a.json")] * (2 if command is CMP else 1)) == 130
    finally:
        assert signal.signal(signal.SIGINT, previous) == signal.SIG_IGN  # and the inherited handler is restored
    assert "interrupted" in capsys.readouterr().err


def test_signals_while_a_set_is_renamed_into_place_wait_for_the_renames():
    import signal

    from parity.common import signals

    done = []
    with pytest.raises(signals.Terminated), signals.handled():
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("renamed")  # not cut short
        done.append("after")  # never: the held-back signal acts as the block ends
    assert done == ["renamed"]


def test_a_stalled_call_is_said(tmp_path):
    from parity.output.notes import stall_note

    ok = {**ROW, "times_s": [0.002] * 4 + [6.0], "reps": 5, "median_s": 0.002}
    assert stall_note([ok]) and "3000x its median" in stall_note([ok])[0]
    assert stall_note([{**ok, "times_s": [0.002] * 4 + [0.03]}]) == []  # 15x: not a stall


def test_profiles_are_part_of_the_set_and_a_failed_copy_leaves_the_previous_one(tmp_path, monkeypatch):
    import shutil

    from parity.output import files
    from parity.record.rows import Row

    doc = {
        "env": {**ENV, "host_cores": 2, "python": "3.12", "timestamp": "t", "git_commit": "c"},
        "rows": [Row(**ROW).to_dict()],
    }
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    traces = tmp_path / "traces"
    (traces / "row").mkdir(parents=True)
    (traces / "row" / "t.trace").write_text("one")
    out = tmp_path / "out"
    files.write_all(doc, out, traces)
    assert (out / "profiles" / "row" / "t.trace").read_text() == "one"
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def full(src, dst, **k):
        Path(dst).mkdir()
        raise shutil.Error([(f"{src}/{i}", f"{dst}/{i}", "[Errno 28] No space left on device") for i in range(50)])

    monkeypatch.setattr(shutil, "copytree", full)
    with pytest.raises(OSError) as e:
        files.write_all({**doc, "rows": [Row(**{**ROW, "median_s": 2.0}).to_dict()]}, out, traces)
    assert str(e.value) == (
        f"cannot write to {out}: [Errno 28] No space left on device (and 49 more); the previous files there are as "
        "they were"
    )
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    monkeypatch.undo()
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    files.write_all(doc, out)  # without profiles: the previous ones go with the previous results
    assert not (out / "profiles").exists() and not list(out.glob(".*"))


def test_a_second_command_writing_to_one_out_is_refused(tmp_path, capsys, fakes):
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import fcntl,os,time; fd=os.open({str(out)!r}, os.O_RDONLY); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        assert run.main([*fakes, "--out", str(out)]) == 2
        (tmp_path / "a.json").write_text(GOOD)
        assert report.report_main([str(tmp_path / "a.json"), "--out", str(out)]) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("another parity command is writing results there" in e for e in err), err
    assert list(out.iterdir()) == []
    assert run.main([*fakes, "--out", str(out)]) == 0  # the lock goes with its holder


def test_the_device_lock_is_one_path_for_every_run(tmp_path, monkeypatch):
    from parity.engine.devicelock import device_lock_path

    monkeypatch.setenv("PARITY_LOCK_DIR", str(tmp_path / "locks"))
    a, b = device_lock_path("tpu"), device_lock_path("tpu")
    assert a == b == tmp_path / "locks" / "tpu.lock" and a.parent.stat().st_mode & 0o777 == 0o700
    a.parent.chmod(0o755)
    with pytest.raises(Exception, match="not a private directory of this user"):
        device_lock_path("tpu")
    monkeypatch.setenv("PARITY_LOCK_DIR", "locks")
    with pytest.raises(Exception, match="PARITY_LOCK_DIR='locks': not an absolute path"):
        device_lock_path("tpu")


def test_the_device_lock_does_not_move_with_the_temporary_folder(tmp_path, monkeypatch):
    """Two runs of one user with different TMPDIR values must not both hold the device: only PARITY_LOCK_DIR,
    named for it, moves the lock."""
    import os

    from parity.engine.devicelock import device_lock_path

    monkeypatch.delenv("PARITY_LOCK_DIR", raising=False)
    fixed = Path(f"/tmp/parity-locks-{os.getuid()}/cpu.lock")
    for tmp in (tmp_path / "a", tmp_path / "b"):
        tmp.mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr("tempfile.tempdir", str(tmp))
        assert device_lock_path("cpu") == fixed


@pytest.mark.parametrize("given", ["inf", "1e308", "nan"])
def test_a_threshold_that_switches_the_gate_off_is_refused(tmp_path, capsys, given):
    (tmp_path / "a.json").write_text(GOOD)
    with pytest.raises(SystemExit) as e:
        compare.main([str(tmp_path / "a.json")] * 2 + ["--fail-over", given])
    assert e.value.code == 2 and "--fail-over" in capsys.readouterr().err


def test_minus_zero_is_zero_and_empty_flags_are_not_ignored(tmp_path, capsys):
    (tmp_path / "a.json").write_text(GOOD)
    assert compare.main([str(tmp_path / "a.json")] * 2 + ["--fail-over", "-0"]) == 0
    assert "no regression beyond 0%" in capsys.readouterr().out
    assert report.report_main([str(tmp_path / "a.json"), "--baseline", ""]) == 2
    assert "--baseline '': expected" in capsys.readouterr().err
    assert report.report_main([str(tmp_path / "a.json"), "--workload", ""]) == 2
    assert "no rows of workload ''" in capsys.readouterr().err


def _interpreter(tmp_path: Path, body: str) -> str:
    """A stand-in interpreter for a worker: a shell script that ignores its arguments and runs `body`."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_a_worker_that_prints_no_protocol_line_is_named_in_one_line(tmp_path):
    from parity.common.messages import HarnessError
    from parity.engine.workerproc import Worker

    w = Worker("jax", "cpu", 1, "default", 30, python=_interpreter(tmp_path, "echo 'Welcome to a banner'"))
    with pytest.raises(HarnessError, match=r"JAX worker \(.*python\) printed no protocol line: 'Welcome to a banner"):
        w.recv()


def test_a_worker_that_never_answers_is_waited_for_no_longer_than_the_timeout(tmp_path):
    from parity.common.messages import HarnessError
    from parity.engine.config import Config
    from parity.engine.workerproc import Worker, await_workers

    w = Worker("jax", "cpu", 1, "default", 1, python=_interpreter(tmp_path, "sleep 30"))
    with pytest.raises(HarnessError, match="JAX worker gave no answer in 0.3 s; stopped it"):
        await_workers(Config(timeout_s=0.3, progress=False), {"jax": w})


def test_an_exclusive_worker_takes_the_lock_every_run_shares(tmp_path, monkeypatch):
    """One owner of the device among every run of this user here: a run's owner locks the shared path, not one
    inside its own folder (which would lock nothing but itself)."""
    from parity.engine import devicelock, workerproc
    from parity.engine.config import Config

    monkeypatch.setenv("PARITY_LOCK_DIR", str(tmp_path / "locks"))
    seen = {}

    class Taken(Exception):
        pass

    def worker(*args, **kw):
        seen["lock"] = args[-1]
        raise Taken

    monkeypatch.setattr(workerproc, "Worker", worker)
    with pytest.raises(Taken):
        workerproc.start_owner(Config(progress=False), 1, "jax", "default", {}, 0, tmp_path / "run")
    assert seen["lock"] == devicelock.device_lock_path("cpu") and (tmp_path / "run") not in seen["lock"].parents


def test_a_worker_whose_hello_names_no_replicas_is_one_line(tmp_path):
    from parity.common.messages import HarnessError
    from parity.engine.config import Config
    from parity.engine.workerproc import Worker, await_workers

    w = Worker("jax", "cpu", 1, "default", 30, python=_interpreter(tmp_path, """echo '{"status": "ready"}'"""))
    with pytest.raises(HarnessError, match="JAX worker's first words name no replica count"):
        await_workers(Config(timeout_s=30, progress=False), {"jax": w})


# ---- compare fails closed --------------------------------------------------------------------------------------


def test_compare_that_compared_nothing_fails(tmp_path, capsys):
    (tmp_path / "a.json").write_text(row(verified=False, invalid_reason="broken", median_s=None))
    assert compare.main([str(tmp_path / "a.json")] * 2) == 2
    captured = capsys.readouterr()
    assert "no regression" not in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "nothing compared: none of the 1 row(s) the two files share is verified in OLD" in err[0]


def test_compare_names_the_rows_new_lacks_and_fails(tmp_path, capsys):
    variants = [f"v{i}" for i in range(5)]
    (tmp_path / "old.json").write_text(results([{**ROW, "variant": v} for v in variants]))
    (tmp_path / "new.json").write_text(results([{**ROW, "variant": "v0"}]))
    assert compare.main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 4 of OLD's 5 rows are missing from NEW: conv tf v1 x1, conv tf v2 x1, conv tf v3 x1 and 1 more" in out


def test_compare_fails_when_new_parity_checks_failed(tmp_path, capsys):
    failed = {"check": "forward block1", "figures": {"tf_vs_f64": 0.1}, "tolerance": 1e-3, "passed": False}
    checks = [failed, {"check": "gradients", "passed": True}]
    (tmp_path / "old.json").write_text(GOOD)
    (tmp_path / "new.json").write_text(json.dumps({**json.loads(GOOD), "checks": checks}))
    assert compare.main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    assert "FAIL: 1 of NEW's 2 parity checks failed: forward block1 (exit 1)" in capsys.readouterr().out
    (tmp_path / "new.json").write_text(json.dumps({**json.loads(GOOD), "checks": [{"check": "x", "passed": "no"}]}))
    assert compare.main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 2
    assert "check 0: passed is 'no', not true, false or null" in capsys.readouterr().err


def test_the_interpreter_probe_waits_no_longer_than_the_timeout(tmp_path, capsys):
    import time

    hangs = _interpreter(tmp_path, "echo 'Python 3.12'\nexec sleep 60")
    start = time.monotonic()
    assert run.main(["--python", f"jax={hangs}", "--timeout", "0.3", "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - start < 15
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no answer within 0.3 s (--timeout)" in err[0], err


def test_a_path_with_a_newline_is_one_line_of_error(tmp_path, capsys):
    odd = tmp_path / "two\nlines"
    odd.mkdir()
    python = _interpreter(odd, "exit 7")
    assert run.main(["--python", f"jax={python}", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "two\\nlines/python: not a usable interpreter" in err[0], err
    with pytest.raises(SystemExit):
        run.main(["--python", f"jax={odd / 'absent'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "two\\nlines/absent is not an executable file" in err[0], err


# ---- the environment, checked before any work for every framework that reads it ---------------------------------


def test_jax_platforms_is_checked_for_every_framework_on_jax(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "gpu")
    assert run.main(["--framework", "keras-jax", "--device", "cpu", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: JAX_PLATFORMS=gpu in the environment contradicts --device cpu (read by Keras 3 (JAX))"
    ), err


def test_a_forced_cpu_device_count_that_contradicts_the_replicas_is_refused(tmp_path, capsys, monkeypatch):
    from parity.cli.argtypes import check_environment

    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false --xla_force_host_platform_device_count=3")
    assert run.main(["--framework", "jax", "--replicas", "8", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--xla_force_host_platform_device_count=3 contradicts the run's replica count 8" in err[0]
    agrees = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    check_environment("cpu", ("jax", "keras-jax"), (8,), agrees)  # no contradiction: nothing overridden
    check_environment("cpu", ("tf",), (1, 8), agrees)  # TensorFlow makes no CPU devices from it


def test_a_framework_with_no_path_for_the_device_is_left_out_beside_others_and_refused_alone(tmp_path, capsys, fakes):
    """PyTorch on a TPU (torch_impl.devices): beside other frameworks its rows are left out and the first screen
    says why in one line; asked for alone, the run ends with that line as its error and writes nothing."""
    from fakeimpl import FakeImpl, LocalWorker

    from parity import api

    class NoPath(FakeImpl):
        def setup_devices(self, device, replicas, cluster=None):
            raise api.DeviceNotOffered("no code path for this device here (fake)")

    LocalWorker.FAKES["jax"] = {"default": NoPath()}  # the fixture's monkeypatch restores FAKES after the test
    both = [a for a in fakes if a not in ("--framework", "tf")]
    assert run.main([*both, "--framework", "all", "--out", str(tmp_path / "all")]) == 0
    said = capsys.readouterr().out
    doc = json.loads((tmp_path / "all" / "results.json").read_text())
    assert "jax" not in {r["framework"] for r in doc["rows"]} and doc["rows"]
    assert "not run: jax: no code path for this device here (fake)" in said
    assert run.main([*both, "--framework", "jax", "--out", str(tmp_path / "alone")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no code path for this device here (fake)" in err[0], err
    assert not (tmp_path / "alone").exists() or not list((tmp_path / "alone").iterdir())


ESC_NAME = "a\x1b]0;owned\x07\x1b[2J.json"  # a file name that would retitle and clear a terminal


@pytest.mark.parametrize("content", ["{", GOOD], ids=["unreadable", "readable"])
@pytest.mark.parametrize("command", [CMP, REP], ids=["compare", "report"])
def test_a_file_name_never_reaches_the_terminal_raw(tmp_path, capsys, command, content):
    (tmp_path / ESC_NAME).write_text(content)
    (tmp_path / "b.json").write_text(results([ROW, {**ROW, "framework": "jax"}]))
    given = [str(tmp_path / ESC_NAME), str(tmp_path / "b.json")]  # compare: OLD, NEW; report: both files
    flags = ["--out", str(tmp_path / ESC_NAME[:-5]), "--html", str(tmp_path / (ESC_NAME + ".html"))]
    command[0](given + (flags if command is REP else []))
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b" in out + err  # said, escaped


def test_html_writes_through_a_symbolic_link_and_a_folder_is_refused_as_html(tmp_path, capsys):
    (tmp_path / "a.json").write_text(GOOD)
    target = tmp_path / "site" / "page.html"
    target.parent.mkdir()
    target.write_text("old page")
    link = tmp_path / "results.html"
    link.symlink_to(target)
    assert report.report_main([str(tmp_path / "a.json"), "--html", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link kept, the page written through it
    assert target.read_text().startswith("<!DOCTYPE html>")
    capsys.readouterr()
    assert report.report_main([str(tmp_path / "a.json"), "--html", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --html {tmp_path}: site there is a directory") and "--out" not in err, err
