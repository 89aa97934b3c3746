"""results.html in a real browser (headless chromium, --dump-dom: the DOM after the page's scripts ran): the summary
and the rows render, each chart decodes, a click on a heading sorts the rows, the page reads without script, and a
results file's hostile strings never run. Without chromium these tests are skipped, saying how to install it; under
CI (`.ci/run` installs chromium and sets PARITY_REQUIRE_BROWSER=1) a missing browser fails them instead."""

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from parity import report
from parity.common.safe import text
from parity.output import files, screen

SHIPPED = Path(__file__).resolve().parent.parent / "docs" / "results" / "xeon-avx512" / "cpu-default.json"
TITLE = "<script>document.title='pwned'</script>"
MARKER = """"><img src=x onerror="document.body.setAttribute('data-pwned','1')">"""
# Run by the page after load: how many images decoded, then the rows' median column after one click on its heading
# and after a second (each cell's data-v), as text the dump keeps.
PROBE = """<script>window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  var table = document.querySelector("#rows table"), heads = table.tHead.rows[0].cells, col = -1;
  for (var j = 0; j < heads.length; j++) if (heads[j].textContent === "median") col = j;
  function column() {
    var rows = table.tBodies[0].rows;
    return Array.prototype.map.call(rows, function (r) { return r.cells[col].getAttribute("data-v"); });
  }
  heads[col].click();
  var up = column();
  heads[col].click();
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({images: ok, of: imgs.length, up: up, down: column()});
  document.body.appendChild(out);
});</script></body>"""


REQUIRE = "PARITY_REQUIRE_BROWSER"
MISSING = "no chromium on PATH: apt-get install chromium (Debian's; .ci/run installs it)"


def find_chromium() -> str:
    """The path of headless chromium.

    Raises:
        pytest.skip.Exception: none on PATH (a fresh machine: the README's test command still passes).
        pytest.fail.Exception: none on PATH and PARITY_REQUIRE_BROWSER=1 (as `.ci/run` sets it).
    """
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{MISSING}; {REQUIRE}=1 requires it", pytrace=False)
        pytest.skip(MISSING)
    return found


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def test_a_missing_browser_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv(REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^no chromium on PATH: apt-get install chromium"):
        find_chromium()
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE}=1 requires it"):
        find_chromium()
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}" if name == "chromium-browser" else None)
    assert find_chromium() == "/usr/bin/chromium-browser"  # either name, required or not


def test_ci_requires_the_browser_before_it_runs_the_tests():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert re.search(rf"^export {REQUIRE}=1$", ci, flags=re.MULTILINE)
    assert ci.index(f"export {REQUIRE}=1") < ci.index("python -m pytest -q")


def dom(chromium: str, page: Path, *flags: str) -> str:
    """The DOM of `page` after its scripts ran, as headless chromium dumps it."""
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    argv += [f"--user-data-dir={page.parent / 'profile'}", *flags, "--dump-dom", page.as_uri()]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(page.parent)}
    )
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


def body_tag(dumped: str) -> str:
    return re.search(r"<body[^>]*>", dumped).group(0)


def written(tmp_path: Path, doc: dict, name: str) -> Path:
    """`doc` as a results file, and its page as `parity.report --html` writes it (the charts drawn)."""
    source, out = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    source.write_text(json.dumps(doc))
    assert report.report_main([str(source), "--no-article", "--html", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def shipped_page(tmp_path_factory) -> Path:
    return written(tmp_path_factory.mktemp("page"), files.load_results(SHIPPED), "shipped")


def test_the_page_renders_its_summary_charts_and_sorted_rows(chromium, shipped_page):
    probed = shipped_page.with_name("probed.html")
    probed.write_text(shipped_page.read_text().replace("</body>", PROBE))
    dumped = dom(chromium, probed)
    assert 'data-sort-ready="2"' in body_tag(dumped)  # the page's script ran: both tables sortable
    assert "verdict: 32 of 32 rows verified against float64" in dumped and "function 498 ms" in dumped
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dumped).group(1))
    assert found["images"] == found["of"] == 2  # the ratio and throughput charts decoded
    medians = sorted(r["median_s"] for r in files.load_results(SHIPPED)["rows"])
    assert [float(v) for v in found["up"]] == medians and [float(v) for v in found["down"]] == medians[::-1]
    assert 'aria-sort="descending"' in dumped


def test_the_page_reads_without_script(chromium, shipped_page):
    bare = shipped_page.with_name("bare.html")  # its script left out (chromium's --dump-dom needs script on)
    bare.write_text(re.sub(r"<script>.*?</script>", "", shipped_page.read_text(), flags=re.DOTALL))
    dumped = dom(chromium, bare)
    assert "data-sort-ready" not in body_tag(dumped)
    doc = files.load_results(SHIPPED)
    lines = [t.count("<tr") for t in re.findall(r"<table.*?</table>", dumped, flags=re.DOTALL)]
    body = (len(screen.fastest_lines(doc)[1]), len(doc["rows"]), len(doc["checks"]), len(doc["env"]["frameworks"]))
    assert lines == [1 + n for n in body]  # the summary, the rows, the checks, the versions: each line there
    assert "Click a column heading" not in re.sub(r'<span class="js-only" hidden="">.*?</span>', "", dumped)


def test_a_hostile_results_file_shows_its_strings_and_runs_none(chromium, tmp_path):
    doc = copy.deepcopy(files.load_results(SHIPPED))
    doc["rows"][0]["variant"] = TITLE
    doc["env"]["host_cpu"] = MARKER
    doc["env"]["argv"] = ["python", "-m", "parity.run", TITLE, MARKER]
    doc["checks"][0]["detail"] = MARKER
    page = written(tmp_path, doc, "hostile")
    dumped = dom(chromium, page)
    assert "data-pwned" not in body_tag(dumped) and "<title>pwned</title>" not in dumped
    assert 'data-sort-ready="2"' in body_tag(dumped)  # the page's own script still ran
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dumped  # shown as text
    assert """"&gt;&lt;img src=x onerror="document.body.setAttribute('data-pwned','1')"&gt;""" in dumped
    # the control: the same strings unescaped would have run in this browser
    raw = tmp_path / "raw.html"
    raw.write_text(page.read_text().replace(text(TITLE, "html"), TITLE).replace(text(MARKER, "html"), MARKER))
    dumped = dom(chromium, raw)
    assert 'data-pwned="1"' in body_tag(dumped) and "<title>pwned</title>" in dumped
