"""Files from elsewhere: the loader (parity.output.loading.load_results) admits only what every reader shows, judges
a row's verification from its own figures as parity.run would, and bounds the work a file may ask of the readers
as a whole. Whatever it admits, report --html and compare show; whatever it refuses is one line naming the file,
exit 2."""

import copy
import json
import statistics
import time

import pytest
import results_doc

from parity import compare, report
from parity.judging import summary
from parity.judging.stats import RESAMPLES
from parity.output import loading, page
from parity.record.rows import FIELDS

ENV = {
    **results_doc.ENV,
    "frameworks": {"tf": {"versions": {"tf": "2"}, "device_kind": "cpu"}},
    "notes": ["a note"],
    "skipped": [{"framework": "torch", "reason": "absent"}],
    "argv": ["python", "-m", "parity.run"],
}


def row(fw: str, variant: str, med: float, tuned: bool = False, ok: bool = True, calls: int = 7) -> dict:
    t = [med * (1 + 0.001 * (k % 7 - 3)) for k in range(calls)]
    return {
        "kind": "conv",
        "framework": fw,
        "variant": variant,
        "device": "cpu",
        "device_kind": "cpu",
        "replicas": 1,
        "precision": "default",
        "median_s": statistics.median(t),
        "flops": 1e9,
        "reps": calls,
        "times_s": t,
        "rounds": list(range(calls)),
        "verified": ok,
        "invalid_reason": None if ok else "broke",
        "tuned": tuned,
        "max_rel_err": 1e-7,
        "tolerance": 1e-5,
        "setting_env": {"XLA_FLAGS": "--x"} if tuned else {},
    }


def doc() -> dict:
    """A file with something of everything the readers show: rows verified, tuned and invalid, a failed and a passed
    check, comparisons, notes and a framework left out."""
    rows = [row("tf", "function", 1.0), row("jax", "jit", 0.9), row("jax", "jit+pool", 0.8, tuned=True)]
    rows.append(row("tf", "eager", 2.0, ok=False))
    checks = [
        {"check": "loss", "workload": "cnn", "replicas": 1, "figures": {"tf_vs_jax": 0.5}, "tolerance": 0.1},
        {"check": "grads", "figures": {"tf_vs_f64": 1e-6}, "tolerance": 1e-3, "passed": True, "detail": "ok"},
    ]
    checks[0] |= {"passed": False, "detail": "off"}
    return {"env": copy.deepcopy(ENV), "rows": rows, "checks": checks, "comparisons": summary.comparisons(rows)}


def _write(tmp_path, d: dict, name: str = "a.json"):
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def _said(capsys) -> tuple[str, str]:
    out, err = capsys.readouterr()
    return out, err.strip()


# what the readers read of a file, beyond each row's declared fields (parity.record.rows.Row)
READ = [
    *(("env", k) for k in ("notes", "skipped", "argv", "host_cores", "python", "timestamp", "frameworks", "peak")),
    ("env", "frameworks", "tf", "versions"),
    ("env", "skipped", 0),
    ("env", "skipped", 0, "reason"),
    ("env", "notes", 0),
    *(("checks", i, k) for i in (0, 1) for k in ("figures", "tolerance", "workload", "replicas", "detail", "passed")),
    ("checks", 0, "figures", "tf_vs_jax"),
    ("comparisons",),
    ("comparisons", 0),
    ("comparisons", 0, "ratio"),
    ("comparisons", 0, "ci95"),
    *(("rows", 0, k) for k in FIELDS),
    ("rows", 2, "setting_env"),  # a tuned row's: the first screen compares them
    ("rows", 3, "invalid_reason"),
]
HOSTILE = [[1, 2], "x", None, {}, {"a": [1]}, True, -1, "(missing)"]


def _set(d: dict, where: tuple, value) -> None:
    *path, last = where
    for k in path:
        d = d[k]
    if value == "(missing)":
        d.pop(last, None) if isinstance(d, dict) else d.__delitem__(last)
    else:
        d[last] = value


@pytest.mark.parametrize("where", READ, ids=[".".join(map(str, w)) for w in READ])
def test_whatever_the_loader_admits_the_readers_show(tmp_path, capsys, monkeypatch, where):
    monkeypatch.setattr(page, "draw_charts", lambda d: ())  # the charts read the rows' declared fields only
    good = _write(tmp_path, doc(), "good.json")
    for value in HOSTILE:
        d = doc()
        _set(d, where, value)
        bad = _write(tmp_path, d)
        for argv, main in (
            ([str(bad), "--html", str(tmp_path / "page.html")], report.report_main),
            ([str(good), str(bad)], compare.main),
            ([str(bad), str(good)], compare.main),
        ):
            code = main(argv)
            out, err = _said(capsys)
            assert code in (0, 1, 2), (value, err)
            if code == 2 and "across machines" not in out:  # refused: the input's fault, said of the input
                assert err.startswith(f"error: {bad}: ") and len(err.splitlines()) == 1, (value, err)


@pytest.mark.parametrize(
    "where, value, said",
    [
        (("checks", 0, "figures"), [1, 2], r"check 0: figures is \[1, 2\], not an object of name -> number"),
        (("comparisons",), "x", "comparisons is str, not a list"),
        (("checks", 0, "tolerance"), "0.1", "check 0: tolerance is '0.1', not a number from zero"),
        (("checks", 0, "tolerance"), None, "check 0 failed, but it gives no tolerance"),
        (("checks", 0, "tolerance"), "(missing)", "check 0 failed, but it gives no tolerance"),
        (("env", "notes"), [1, 2], r"env: notes is \[1, 2\], not a list of text"),
        (("env", "skipped"), ["x"], r"env: skipped is \['x'\], not a list of objects with a framework and a reason"),
    ],
)
def test_the_fields_that_crashed_report_html_are_refused_as_the_files_fault(tmp_path, capsys, where, value, said):
    d = doc()
    _set(d, where, value)
    bad = _write(tmp_path, d)
    assert report.report_main([str(bad), "--html", str(tmp_path / "page.html")]) == 2
    _, err = _said(capsys)
    assert err.startswith(f"error: {bad}: ") and "cannot write" not in err and len(err.splitlines()) == 1, err
    assert pytest.importorskip("re").search(said, err), err


def test_a_row_that_says_verified_against_its_own_figures_is_judged_invalid(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(page, "draw_charts", lambda d: ())
    good = _write(tmp_path, doc(), "good.json")
    d = doc()
    d["rows"][1] |= {"max_rel_err": 0.9, "tolerance": 1.5e-6}  # verified: true, as the file says
    lying = _write(tmp_path, d, "lying.json")
    r = loading.load_results(lying)["rows"][1]
    assert r["verified"] is False
    assert r["invalid_reason"].startswith("max_rel_err 0.9 vs the float64 oracle exceeds 1.5e-06")
    assert report.report_main([str(lying), "--html", str(tmp_path / "page.html")]) == 0
    html = (tmp_path / "page.html").read_text()
    assert "verdict: 2 of 4 rows verified" in html and "4 of 4" not in html
    capsys.readouterr()
    assert compare.main([str(good), str(lying)]) == 1  # the gate does not pass it
    assert "REGRESSION: now invalid (max_rel_err 0.9 vs the float64 oracle" in capsys.readouterr().out


def test_a_row_within_its_tolerance_stays_verified(tmp_path):
    d = doc()
    d["rows"][1] |= {"max_rel_err": 1e-5, "tolerance": 1e-5}
    assert loading.load_results(_write(tmp_path, d))["rows"][1]["verified"] is True


def test_the_work_a_file_asks_is_bounded_as_a_whole_and_refused_at_once(tmp_path, capsys):
    calls = loading.MAX_DRAWS // RESAMPLES // 3 + 1  # each row within MAX_CALLS, the three together beyond
    assert calls <= loading.MAX_CALLS
    d = doc()
    d["rows"] = [row("tf", "function", 1.0, calls=calls), row("jax", "jit", 0.9, calls=calls)]
    d["rows"].append(row("tf", "eager", 1.1, calls=calls))
    d["comparisons"] = []
    big = _write(tmp_path, d)
    for argv, main in (
        ([str(big), "--html", str(tmp_path / "p.html")], report.report_main),
        ([str(big)] * 2, compare.main),
    ):
        start = time.perf_counter()
        assert main(argv) == 2
        took = time.perf_counter() - start
        _, err = _said(capsys)
        assert err.startswith(f"error: {big}: its comparisons would resample") and len(err.splitlines()) == 1, err
        assert f"at most {loading.MAX_DRAWS // RESAMPLES}" in err
        assert took < 30, took  # refused, not worked through


def test_a_base_row_shared_by_many_comparisons_counts_once_per_comparison(tmp_path, capsys):
    many = 60
    calls = loading.MAX_DRAWS // RESAMPLES // many  # one row's calls resampled in every tuned row's comparison
    d = doc()
    d["rows"] = [row("jax", "jit", 1.0, calls=calls)] + [row("jax", f"jit+l{i}", 0.9, tuned=True) for i in range(many)]
    d["comparisons"] = []
    assert sum(len(r["times_s"]) for r in d["rows"]) * RESAMPLES < loading.MAX_DRAWS  # within, counted per row
    with pytest.raises(loading.ResultsError, match="its comparisons would resample"):
        loading.load_results(_write(tmp_path, d))


def test_a_file_of_more_rows_than_the_readers_pair_is_refused_before_they_are_read(tmp_path):
    d = doc()
    d["rows"] = [{"not": "a row"}] * (loading.MAX_ROWS + 1)  # refused on their number, before each is read
    said = f"{loading.MAX_ROWS + 1} rows; a results file holds at most {loading.MAX_ROWS}"
    with pytest.raises(loading.ResultsError, match=said):
        loading.load_results(_write(tmp_path, d))
