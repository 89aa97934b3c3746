"""Every file a run writes, its own readers read (issue 107, C8): a check whose bound or figures are not finite
numbers from zero (a plug-in's bound of infinity, NaN or -1; a float64 answer of NaN) fails, naming the cause, and
a row whose tolerance is not verifies nothing; the writer never writes NaN or Infinity, which no reader takes."""

import json
import math

import pytest

from parity import run
from parity.output import files
from parity.record.parts import checks_problem, judgeable
from parity.record.rows import Row
from parity.record.schema import SCHEMA_VERSION

INF, NAN = math.inf, math.nan
CHECK = {"check": "forward block", "workload": "gru", "replicas": 1, "figures": {"tf_vs_f64": 1e-7}}
CHECK |= {"max_rel_err": 1e-7, "tolerance": 1e-5, "passed": True, "detail": "within"}
ROW = {"kind": "conv", "framework": "tf", "variant": "function", "device": "cpu", "device_kind": "cpu", "replicas": 1}
ROW |= {"precision": "default", "median_s": 1.0, "flops": 1e9, "reps": 5, "verified": True, "tolerance": 1e-5}
ROW |= {"max_rel_err": 1e-7}
ENV = {"schema_version": SCHEMA_VERSION, "device": "cpu", "host_cpu": "t", "host_cores": 2, "precision": "default"}
ENV |= {"python": "3.12", "timestamp": "t", "git_commit": "c", "frameworks": {}}


def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} in the file")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("tol", [INF, NAN, -1.0, -INF, "1e-3", True])
def test_a_check_whose_bound_is_not_a_finite_number_from_zero_fails_naming_it(tol):
    (c,), _ = judgeable([{**CHECK, "tolerance": tol}], [])
    assert c["passed"] is False and c["tolerance"] == 0.0 and c["figures"] == CHECK["figures"]
    assert (
        c["detail"].startswith("failed, not judgeable: tolerance ") and "not a finite number from zero" in c["detail"]
    )
    assert c["detail"].endswith("(shown as 0); within")  # what the check said, after the cause
    assert checks_problem([c]) is None  # readable: a failed check with its figures and a tolerance


@pytest.mark.parametrize("bad", [NAN, INF, -INF, -0.5, None])
def test_a_check_whose_figure_is_not_a_finite_number_from_zero_fails_naming_it(bad):
    (c,), _ = judgeable([{**CHECK, "figures": {"tf_vs_f64": 1e-7, "jax_vs_f64": bad}}], [])
    assert c["passed"] is False and c["tolerance"] == 1e-5
    assert c["detail"].startswith(f"failed, not judgeable: figure jax_vs_f64 {bad!r} is not a finite number from zero")
    finite = bad is not None and math.isfinite(bad)
    assert c["figures"] == {"tf_vs_f64": 1e-7, **({"jax_vs_f64": bad} if finite else {})}  # JSON holds a -0.5
    assert checks_problem([c]) is None


def test_an_unjudged_check_with_a_bad_figure_fails_with_a_tolerance_to_show():
    (c,), _ = judgeable([{**CHECK, "tolerance": None, "passed": None, "figures": {"acc": NAN}}], [])
    assert c["passed"] is False and c["tolerance"] == 0.0 and c["figures"] == {}
    assert "tolerance absent (shown as 0), figure acc nan" in c["detail"] and checks_problem([c]) is None


def test_sound_checks_and_rows_are_kept_as_they_are():
    quiet = {**CHECK, "tolerance": None, "passed": None, "figures": {}}
    checks, rows = [CHECK, quiet, {**CHECK, "tolerance": 0, "figures": {"a": 0}}], [ROW, {**ROW, "tolerance": None}]
    got = judgeable(checks, rows)
    assert got == (checks, rows) and all(a is b for a, b in zip(got[0] + got[1], checks + rows, strict=True))


@pytest.mark.parametrize("tol", [INF, NAN, -1.0])
def test_a_row_whose_tolerance_is_not_a_finite_number_from_zero_verifies_nothing(tol):
    _, (r, invalid) = judgeable([], [{**ROW, "tolerance": tol}, {**ROW, "tolerance": tol, "verified": False}])
    assert r["verified"] is False and r["tolerance"] is None
    assert (
        r["invalid_reason"] == f"its tolerance {tol!r} is not a finite number from zero: nothing is verified against it"
    )
    invalid = {**invalid, "invalid_reason": "the framework failed"}
    assert judgeable([], [invalid])[1][0]["invalid_reason"] == "the framework failed"  # the first cause stays


def test_the_writer_never_writes_nan_or_infinity(tmp_path):
    files.write_json(tmp_path / "x.json", {"a": NAN, "b": [INF, 1.5, (2.0, -INF)], "c": {"d": -INF, "e": "inf"}})
    assert _strict((tmp_path / "x.json").read_text()) == {
        "a": None,
        "b": [None, 1.5, [2.0, None]],
        "c": {"d": None, "e": "inf"},
    }


def test_a_run_whose_plugin_gives_an_infinite_bound_fails_and_its_file_reads_back(tmp_path, monkeypatch, capsys):
    """The engine's result as a plug-in makes it (its check bound infinite, a row's tolerance NaN, an error of
    infinity): exit 1, the check failed naming its bound, the row invalid, every file readable."""
    rows = [Row(**ROW).to_dict(), Row(**{**ROW, "framework": "jax", "tolerance": NAN, "max_rel_err": INF}).to_dict()]
    checks = [{**CHECK, "tolerance": INF}, {**CHECK, "check": "trajectory", "figures": {"tf_vs_jax": NAN}}]
    res = {"rows": rows, "checks": checks, "hello": {}, "skipped": [], "notes": [], "peak": None}
    monkeypatch.setattr(run, "run_suite", lambda cfg, tmp: res)
    out = tmp_path / "out"
    assert run.main(["--device", "cpu", "--quick", "--workload", "conv", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "invalid: conv jax function x1: its tolerance nan is not a finite number from zero" in err
    doc = files.load_results(out / "results.json")  # the reader's refusals: NaN, Infinity
    _strict((out / "results.json").read_text())
    assert [c["passed"] for c in doc["checks"]] == [False, False]
    assert "tolerance inf is not a finite number from zero" in doc["checks"][0]["detail"]
    assert "figure tf_vs_jax nan is not a finite number from zero (left out)" in doc["checks"][1]["detail"]
    assert [r["verified"] for r in doc["rows"]] == [True, False] and doc["rows"][1]["max_rel_err"] is None
    assert "| FAIL |" in (out / "results.md").read_text()
    assert not {"nan", "inf"} & {
        v.lower() for line in (out / "results.csv").read_text().splitlines() for v in line.split(",")
    }


def test_a_results_doc_with_a_stray_infinity_is_written_readable(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "chart", lambda *a, **k: False)
    row = Row(**{**ROW, "verified": False, "invalid_reason": "diverged", "max_rel_err": INF}).to_dict()
    files.write_all({"env": ENV, "rows": [row], "checks": []}, tmp_path)
    assert files.load_results(tmp_path / "results.json")["rows"][0]["max_rel_err"] is None
