"""results.html (parity.output.page) from a shipped results file, with no framework imported (this file is one of
test_no_frameworks' ENGINE_TESTS): the first screen's summary and verdict, every row and check (failures first),
the machine, versions and command, no reference to anything outside the page, and every string from the file
escaped. What a browser makes of the page: test_html_browser.py."""

import base64
import copy
import html
import re
import struct
import zlib
from pathlib import Path

import pytest

from parity import report
from parity.common.safe import text
from parity.output import files, page, screen

SHIPPED = Path(__file__).resolve().parent.parent / "docs" / "results" / "xeon-avx512" / "cpu-default.json"
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'


def png(width: int = 3, height: int = 2) -> bytes:
    """A tiny valid PNG (grey pixels): a chart to embed without drawing one."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def shipped() -> dict:
    return files.load_results(SHIPPED)


def _page(doc: dict, charts=None) -> str:
    return page.page([page.shown("cpu-default.json", doc, charts or ((page.CHARTS[0][1], png()),))])


def _section(html_text: str, name: str) -> str:
    return html_text.split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]


def _cells(row_html: str) -> list[str]:
    return [html.unescape(c.replace("<wbr>", "")) for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html)]


def _body_lines(table_html: str) -> list[str]:
    return re.findall(r"<tr[^>]*>(.*?)</tr>", table_html.split("<tbody>", 1)[1])


def test_the_page_holds_the_first_screens_summary_and_verdict(shipped):
    summary = _section(_page(shipped), "summary")
    assert html.escape(screen.machine_line(shipped["env"])) in summary
    header, body = screen.fastest_lines(shipped)
    assert [_cells(line) for line in _body_lines(summary)[: len(body)]] == [list(line) for line in body]
    assert all(f">{html.escape(h)}</th>" in summary for h in header)
    assert f'<p class="verdict">{html.escape(screen.verdict(shipped))}</p>' in summary
    assert "32 of 32 rows verified" in summary and "How the intervals were made" in summary


def test_a_summary_ratio_whose_interval_holds_1_is_greyed(shipped):
    """Read from what the cell says ('1.09x (0.80-1.47)'): greyed exactly where its interval holds 1."""
    lines = _body_lines(_section(_page(shipped), "summary"))[: len(screen.fastest_lines(shipped)[1])]
    seen = set()
    for line in lines:
        for cell in re.findall(r"<td[^>]*>.*?</td>", line):
            if m := re.search(r"x \((\d+\.\d+)-(\d+\.\d+)\)", cell):
                holds = float(m[1]) <= 1 <= float(m[2])
                assert cell.startswith('<td class="held">') == holds, cell
                seen.add(holds)
    assert seen == {True, False}  # the shipped file has both


def test_every_row_is_a_line_of_a_sortable_table(shipped):
    rows = _section(_page(shipped), "rows")
    assert '<table class="sortable">' in rows
    lines = _body_lines(rows)
    assert len(lines) == len(shipped["rows"]) == 32
    for line, r in zip(lines, shipped["rows"], strict=True):
        cells = _cells(line)
        assert cells[:3] == [r["kind"], r["framework"], r["variant"]] and cells[-1] == "yes"
    assert f'data-v="{float(shipped["rows"][0]["median_s"])!r}"' in lines[0]  # sorted on the figure, not its text


def test_every_check_is_there_failures_first(shipped):
    doc = copy.deepcopy(shipped)
    last = max(i for i, c in enumerate(doc["checks"]) if c["passed"])
    doc["checks"][last]["passed"] = False  # the last check that passed fails: it comes first
    checks = _section(_page(doc), "checks")
    lines = _body_lines(checks)
    assert len(lines) == len(doc["checks"]) == 37
    results = [_cells(line)[5] for line in lines]
    assert results == ["FAIL"] + ["not judged"] * 2 + ["PASS"] * 34
    assert _cells(lines[0])[0] == doc["checks"][last]["check"]
    assert {_cells(line)[0] for line in lines} == {c["check"] for c in doc["checks"]}


def test_the_machine_versions_and_command_are_there(shipped):
    machine = _section(_page(shipped), "machine")
    env = shipped["env"]
    assert "python -m parity.run --device cpu --out /tmp/runs/default4" in machine
    assert env["frameworks"]["tf"]["versions"]["tensorflow-cpu"] in machine and env["git_commit"] in machine
    assert html.escape(env["host_cpu"]) in machine and env["timestamp"] in machine


def test_the_page_fetches_nothing(shipped):
    out = _page(shipped)
    refs = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", out, re.IGNORECASE)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs), refs
    assert "<link" not in out.lower() and "@import" not in out and "url(" not in out
    assert "default-src 'none'" in out  # and the browser is told so
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", out, re.IGNORECASE)


def test_a_chart_is_embedded_as_the_png_it_is():
    doc = files.load_results(SHIPPED)
    out = _page(doc, ((page.CHARTS[0][1], png(5, 4)),))
    assert f'src="data:image/png;base64,{base64.b64encode(png(5, 4)).decode()}"' in out


def _hostile(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc["rows"][0]["variant"] = SCRIPT
    doc["env"]["host_cpu"] = ATTRIBUTE
    doc["env"]["argv"] = ["python", "-m", "parity.run", SCRIPT]
    doc["checks"][0]["detail"] = ATTRIBUTE
    doc["env"]["notes"] = [SCRIPT]
    return doc


def test_a_hostile_string_is_text_in_the_page(shipped):
    out = _page(_hostile(shipped))
    assert "<script>alert" not in out and "<img src=x" not in out and "onerror=alert(1)>" not in out
    assert out.count(html.escape(SCRIPT)) >= 3 and out.count(html.escape(ATTRIBUTE)) >= 3
    assert out.count("<script>") == 1  # the page's own


def test_html_is_a_medium_of_the_one_escaping():
    assert text(ATTRIBUTE, "html") == "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert text("it's\x1b[31m & <b>", "html") == "it&#x27;s\\x1b[31m &amp; &lt;b&gt;"


def test_every_run_writes_the_page_with_its_charts(tmp_path, shipped):
    pytest.importorskip("matplotlib")
    doc = {"env": shipped["env"], "rows": [r for r in shipped["rows"] if r["kind"] == "matmul"], "checks": []}
    made = files.write_all(doc, tmp_path)
    assert made[-1].name == "results.html"
    out = (tmp_path / "results.html").read_text()
    for name in ("results_ratios.png", "results.png"):
        assert base64.b64encode((tmp_path / name).read_bytes()).decode() in out


def test_report_html_writes_several_files_to_one_page(tmp_path, capsys, monkeypatch):
    drawn = []
    monkeypatch.setattr(page, "draw_charts", lambda doc: drawn.append(doc) or (("a chart", png()),))  # drawn: above
    zen4 = SHIPPED.parent.parent / "zen4" / "cpu-default.json"
    out = tmp_path / "page.html"
    assert report.report_main([str(SHIPPED), str(zen4), "--no-article", "--html", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {out}\n")
    written = out.read_text()
    rows = _section(written, "rows")
    assert (
        ">file</th>" in rows and ">zen4/cpu-default.json</td>" in rows and ">xeon-avx512/cpu-default.json</td>" in rows
    )
    assert "zen4/cpu-default.json: cpu, AMD EPYC (Zen 4), 2 cores</h3>" in _section(written, "summary")
    assert len(drawn) == 2 and written.count("data:image/png;base64,") == 2  # each file's charts
    assert not list(tmp_path.glob(".parity-stage-*"))


def test_report_html_refuses_what_it_cannot_write(tmp_path, capsys):
    (tmp_path / "page.html").mkdir()
    assert report.report_main([str(SHIPPED), "--no-article", "--html", str(tmp_path / "page.html")]) == 2
    assert "page.html there is a directory" in capsys.readouterr().err
    assert report.report_main([str(SHIPPED), "--grid", "--html", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err == "error: --grid takes only results files, not --html\n"
