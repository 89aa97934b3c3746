"""compare with statistics, on synthetic timings with known answers: A/A flags nothing, a planted slowdown is
flagged and named, and files without raw times still load and say what they are judged on."""

import json

import numpy as np
import pytest
from results_doc import timed_row

from parity import compare
from parity.output.files import load_results
from parity.record import schema


def _write(path, rows, version=schema.SCHEMA_VERSION):
    env = {"schema_version": version, "device": "cpu", "host_cpu": "test", "precision": "default", "frameworks": {}}
    path.write_text(json.dumps({"env": env, "rows": rows, "checks": []}))
    return str(path)


def _noisy(rng, n, base=1.0):
    """A row's calls: 8% lognormal noise, one call in ten slowed by half."""
    return base * np.exp(rng.normal(0, 0.08, n)) * np.where(rng.random(n) < 0.1, 1.5, 1.0)


def test_a_file_against_itself_flags_nothing(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [timed_row("tf", "function", _noisy(rng, 8)), timed_row("jax", "jit", _noisy(rng, 8, 2.0))]
    f = _write(tmp_path / "a.json", rows)
    assert compare.main([f, f]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" not in out and out.count("ok (95% CI") == 2


def test_two_halves_of_one_rows_calls_flag_nothing(tmp_path):
    rng = np.random.default_rng(1)
    for k in range(50):  # 50 rows, each split into its first and second 10 calls
        t = _noisy(rng, 20)
        old, new = timed_row("tf", "function", t[:10]), timed_row("tf", "function", t[10:])
        lines, bad = compare.compare({"rows": [old]}, {"rows": [new]}, 0.10)
        assert not bad, (k, lines[0]["verdict"])


def test_a_planted_slowdown_is_flagged_and_named(tmp_path, capsys):
    rng = np.random.default_rng(2)
    old = [
        timed_row("tf", "function", _noisy(rng, 6)),
        timed_row("jax", "jit", _noisy(rng, 6)),
        timed_row("jax", "pmap", _noisy(rng, 6)),
    ]
    new = [
        timed_row("tf", "function", _noisy(rng, 6)),
        timed_row("jax", "jit", 1.5 * _noisy(rng, 6)),
        timed_row("jax", "pmap", _noisy(rng, 6)),
    ]
    assert compare.main([_write(tmp_path / "old.json", old), _write(tmp_path / "new.json", new)]) == 1
    out = capsys.readouterr().out
    flagged = [ln for ln in out.splitlines() if "REGRESSION" in ln]
    assert len(flagged) == 1 and " jit " in flagged[0] and "95% CI" in flagged[0], out
    assert "1 regression(s)" in out


def test_one_median_over_the_threshold_is_not_enough(tmp_path):
    # NEW's median 15% above OLD's, but the calls overlap: the interval reaches below 1.10
    old = timed_row("tf", "function", [1.0, 0.8, 1.2, 0.9, 1.1, 1.3])
    new = timed_row("tf", "function", [1.15, 0.9, 1.4, 1.0, 1.3, 1.2])
    (line,), bad = compare.compare({"rows": [old]}, {"rows": [new]}, 0.10)
    assert not bad and line["verdict"].startswith("slower by") and "not shown beyond 10%" in line["verdict"]
    assert line["ci95"][0] < 1.10 < line["ci95"][1]


def test_files_without_raw_times_load_and_say_what_they_are_judged_on(tmp_path, capsys):
    old = timed_row("tf", "function", [1.0] * 5)
    for k in ("times_s", "rounds"):
        del old[k]
    f_old = _write(tmp_path / "old.json", [old], version=2)  # a schema-2 file: medians and quartiles only
    assert load_results(f_old)["rows"][0]["median_s"] == 1.0
    f_new = _write(tmp_path / "new.json", [timed_row("tf", "function", [1.3] * 5)])
    assert compare.main([f_old, f_new]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 30.0% slower (median ratio only: a file without raw times)" in out


@pytest.mark.parametrize(
    "times, rounds, why",
    [
        ([1.0, 1e400], [0, 1], "1e400 overflows to infinity"),
        ([1.0, -1.0], [0, 1], "times_s is not a list of times above zero"),
        ([1.0, "1"], [0, 1], "times_s is not a list of times above zero"),
        ([1.0, 1.0], [0], "rounds is not one round number"),
        ([1.0, 1.0], [0, True], "rounds is not one round number"),
    ],
)
def test_raw_times_that_are_no_times_are_refused(tmp_path, capsys, times, rounds, why):
    row = {**timed_row("tf", "function", [1.0, 1.0]), "times_s": times, "rounds": rounds}
    f = tmp_path / "bad.json"
    f.write_text(
        json.dumps({"env": {"schema_version": 3, "device": "cpu", "frameworks": {}}, "rows": [row]}).replace(
            "Infinity", "1e400"
        )
    )
    assert compare.main([str(f), str(f)]) == 2
    assert why in capsys.readouterr().err
