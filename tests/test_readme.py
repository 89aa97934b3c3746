"""The README's grid, docs/results.md's bfloat16 grid and its table are the project's own tool's output for the
results files they name: made again here from the shipped files, each must read the same; the README's answer quotes
only figures the two grids hold, and docs/results.md's summary only figures its table holds. No TensorFlow or JAX
starts."""

import json
import re
from pathlib import Path

import pytest

from parity import report
from parity.common import frameworks
from parity.output import grid, readme
from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
SHIPPED = current_names(json.loads((ROOT / "docs/results/zen4/cpu-default.json").read_text()))["rows"][0]


@pytest.mark.parametrize(
    "page,made",
    [(RESULTS, readme), (README, grid), (RESULTS, grid)],
    ids=["docs/results.md's table", "README's grid", "docs/results.md's bfloat16 grid"],
)
def test_a_pages_generated_block_is_its_shipped_files_block(monkeypatch, page, made):
    text = page.read_text()
    files = made.files_named(text)
    assert files, f"{page.name}'s block names no results file"
    monkeypatch.chdir(ROOT)  # the blocks name the files relative to the repository's root
    block = made.block(files) if made is readme else made.grid(files, grid.dtype_named(text))
    assert made.shown(text) == block, (
        f"{page.name}'s block differs from its files': run the command on its first line "
        "and paste its output between the markers"
    )


def test_the_readme_grid_is_float32_and_results_md_holds_its_bfloat16_twin_of_the_same_files():
    text, twin = README.read_text(), RESULTS.read_text()
    assert (grid.dtype_named(text), grid.dtype_named(twin)) == ("float32", "bfloat16")
    assert grid.files_named(twin) == grid.files_named(text) == readme.files_named(twin)


def _cells(page: str) -> set[str]:
    lines = grid.shown(page).splitlines()[3:-1]
    return {part.strip() for line in lines for cell in line.split("|") for part in cell.split("/")}


def test_the_readme_answer_quotes_only_figures_its_grids_hold():
    """Every ratio the answer's bullets give ('2.25x', '0.89x~') is a cell of the README's grid or, in bfloat16, of
    docs/results.md's: a figure the files hold, made again by the test above."""
    text = README.read_text()
    answer = text[text.index("## The answer") : text.index(grid.END)]
    bullets = answer[: answer.index("<!-- results grid")]
    cells = _cells(text) | _cells(RESULTS.read_text())
    quoted = re.findall(r"\d+\.\d\dx~?", bullets)
    assert len(quoted) >= 6
    assert not [q for q in quoted if q not in cells]


def test_the_readme_answers_on_one_screen():
    """The question and what to read next, the set-up, the article and the workloads, at most six bullets, the grid and
    the chart before "Run it yourself", in about 65 lines as a reader sees them (the grid's two generated markers are
    HTML comments, not shown): 4 frameworks' 3 ratios over 8 row kinds make the grid 27 of them."""
    text = README.read_text()
    screen = text[: text.index("## Run it yourself")].splitlines()
    shown = [line for line in screen if not line.startswith("<!--")]
    answer = text[text.index("## The answer") : text.index("<!-- results grid")]
    assert len(shown) <= 68, len(shown)
    assert len(re.findall(r"^- \*\*", answer, flags=re.M)) <= 6
    assert "![" in "\n".join(shown)  # the chart across classes


def _said(c: dict) -> str:
    """A comparison as the pages write it: '1.12x (1.03-1.37)', ', no difference' where its interval holds 1."""
    (lo, hi) = c["ci95"]
    return f"{c['ratio']:.2f}x ({lo:.2f}-{hi:.2f})" + (", no difference" if lo <= 1 <= hi else "")


def test_the_results_summary_quotes_only_figures_its_table_holds():
    """docs/results.md's 'What the CPU runs say': every ratio with its interval ('1.12x (1.03-1.37)', ', no
    difference' where it holds 1) is a cell of the table it points to, or, in a bullet that names a results file of
    its own, one of that file's comparisons."""
    text = RESULTS.read_text()
    said = " ".join(text[text.index("## What the CPU runs say") : text.index("## bfloat16")].split())
    table = readme.shown(text)
    quoted, off_table = 0, []
    for bullet in said.split(" - **"):
        own = set()
        for name in re.findall(r"`(docs/results/[\w/-]+\.json)`", bullet):
            own |= {_said(c) for c in current_names(json.loads((ROOT / name).read_text()))["comparisons"]}
        figures = re.findall(r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)(?:, no difference)?", bullet)
        quoted += len(figures)
        off_table += [q for q in figures if f"| {q} |" not in table and q not in own]
    assert quoted >= 10
    assert not off_table


@pytest.mark.parametrize("page,named", [(RESULTS, readme.files_named), (README, grid.files_named)])
def test_every_file_a_page_names_is_one_machine_class_folder_under_docs_results(page, named):
    files = named(page.read_text())
    assert all(p.parts[:2] == ("docs", "results") and len(p.parts) == 4 for p in files), files
    assert all((ROOT / p).is_file() and (ROOT / p.parent / "README.md").is_file() for p in files), files


def _row(fw: str, median_s: float, wl: str = "conv", variant: str = "op", **kw) -> dict:
    """A verified row of five equal calls in rounds 0-4, its other fields a shipped file's first row's."""
    row = {**SHIPPED, "kind": wl, "framework": fw, "variant": variant, "replicas": 1, "dtype": "float32"}
    row.update(tuned=False, verified=True, median_s=median_s, times_s=[median_s] * 5, rounds=list(range(5)), reps=5)
    return {**row, **kw}


def _write(path: Path, rows: list[dict]) -> Path:
    env = {"schema_version": 3, "device": "cpu", "argv": ["python", "-m", "parity.run", "--out", "/tmp/x"]}
    env.update(host_cpu="Some CPU", host_cores=2, git_commit="abc1234", frameworks={})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"env": env, "rows": rows, "checks": []}))
    return path


@pytest.fixture
def three(monkeypatch):
    """A third framework after today's two, as the frameworks' table would hold it."""
    third = frameworks.Framework("kjax", "Keras (JAX)", "Keras-JAX", "kjax_impl", ("keras",), "tab:green")
    table = {**frameworks.TABLE, third.key: third}
    monkeypatch.setattr(frameworks, "TABLE", table)
    monkeypatch.setattr(frameworks, "KEYS", tuple(table))


def test_a_column_per_framework_of_any_file_and_a_line_per_class_and_group(tmp_path, monkeypatch, three):
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1), _row("kjax", 0.3)])
    b = _write(Path("r/two/cpu-default.json"), [_row("jax", 0.4), _row("kjax", 0.2)])
    lines = readme.block([a, b]).splitlines()
    assert lines[1] == (
        "| machine | kind | replicas | format | TF fastest | JAX fastest | Keras-JAX fastest "
        "| JAX/TF (95% CI) | Keras-JAX/TF (95% CI) | parity |"
    )
    assert lines[3].startswith("| one | conv | 1 | float32 | op 200.00 ms | op 100.00 ms | op 300.00 ms ")
    assert "| 0.50x (0.50-0.50) | 1.50x (1.50-1.50) |" in lines[3]
    # no TF row in the second file: its ratio divides by the next framework that has one, and says so
    assert lines[4].startswith("| two | conv | 1 | float32 | - | op 400.00 ms | op 200.00 ms | - ")
    assert "| 0.50x (0.50-0.50), over JAX |" in lines[4]
    assert "| python -m parity.run at abc1234 |" in lines[-3]  # where it wrote its files left out


def test_the_markers_name_the_files_and_read_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1)])
    text = "# title\n\n" + readme.block([a]) + "\n\nmore\n"
    assert readme.files_named(text) == [a] and readme.shown(text) == readme.block([a])
    with pytest.raises(ValueError, match="no results block"):
        readme.files_named("# a README without one\n")


def _refuses_files_of_no_class_or_two_of_one(flag: str, a: Path, capsys) -> None:
    """`report FLAG` refuses a second file of `a`'s class and a file in no folder, each in one line, exit 2."""
    c = _write(Path("r/one/other.json"), [_row("tf", 0.2)])
    assert report.report_main([flag, str(a), str(c)]) == 2
    assert "two files of one machine class (folder) one" in capsys.readouterr().err
    _write(Path("loose.json"), [_row("tf", 0.2)])
    assert report.report_main([flag, "loose.json"]) == 2
    assert "loose.json: in no folder" in capsys.readouterr().err


def test_the_command_prints_the_block_and_refuses_what_it_cannot_use(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1)])
    assert report.report_main(["--readme", str(a)]) == 0
    assert capsys.readouterr().out == readme.block([a]) + "\n"
    _refuses_files_of_no_class_or_two_of_one("--readme", a, capsys)
    Path("r/bad.json").write_text("{")
    assert report.report_main(["--readme", "r/bad.json"]) == 2
    assert "bad.json: not JSON" in capsys.readouterr().err
    assert report.report_main(["--readme", "--out", "o", str(a)]) == 2
    assert "--readme takes only results files, not --out" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["x--><script>alert(1)</script><!--", "two\nlines", "a space", "100%"])
def test_a_path_can_neither_close_the_marker_nor_split_it(tmp_path, monkeypatch, folder):
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r") / folder / "cpu-default.json", [_row("tf", 0.2), _row("jax", 0.1)])
    block = readme.block([a])
    marker = block.splitlines()[0]
    assert marker.startswith("<!-- results table: ") and marker.endswith(" -->")
    assert marker.count("-->") == 1 and "<" not in marker[4:] and "\n" not in marker
    assert readme.files_named(block) == [a]  # read back exactly


def test_the_grid_command_prints_the_grid_and_refuses_what_it_cannot_use(tmp_path, monkeypatch, capsys):
    """--grid: one file per machine class, fastest and out of the box over TF's, `~` where the interval holds 1; a
    file in no folder, two of one class, or another flag beside it: one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1), _row("jax", 0.3, variant="jit")])
    a_doc = json.loads(a.read_text())
    a_doc["rows"][1]["tuned"] = True  # JAX's fastest is a tuned row; its out-of-the-box row is slower than TF's
    a.write_text(json.dumps(a_doc))
    b = _write(Path("r/two/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.2)])
    assert report.report_main(["--grid", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out == grid.grid([a, b]) + "\n"
    assert "| conv, JAX/TF | 0.50x / 1.50x | 1.00x~ / 1.00x~ |" in out  # five equal calls: no spread, 1 held
    assert "| file, at commit | cpu-default at abc1234 | cpu-default at abc1234 |" in out
    _refuses_files_of_no_class_or_two_of_one("--grid", a, capsys)
    assert report.report_main(["--grid", "--readme", str(a)]) == 2
    assert "--grid takes only results files, not --readme and --grid at once" in capsys.readouterr().err


def test_the_bfloat16_grid_holds_the_bfloat16_rows_alone(tmp_path, monkeypatch, capsys):
    """--grid --bfloat16: the same grid over the bfloat16 rows, its command in its marker; --bfloat16 without --grid,
    or beside --ratios (the float32 grid's chart): one line, exit 2, nothing printed."""
    monkeypatch.chdir(tmp_path)
    bf16 = {"dtype": "bfloat16", "variant": "op+bf16", "tuned": True}  # as every bfloat16 row: asked for
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1), _row("tf", 0.1, **bf16),
                                                 _row("jax", 0.3, **bf16)])  # fmt: skip
    assert report.report_main(["--grid", "--bfloat16", str(a)]) == 0
    out = capsys.readouterr().out
    assert out == grid.grid([a], "bfloat16") + "\n" and grid.dtype_named(out) == "bfloat16"
    assert out.startswith("<!-- results grid: python -m parity.report --grid --bfloat16 r/one/cpu-default.json -->")
    assert "| one device, bfloat16 | one |" in out and "| conv, JAX/TF | 3.00x |" in out and "0.50x" not in out
    assert grid.files_named(out) == [a]
    assert "| conv, JAX/TF | 0.50x / 0.50x |" in grid.grid([a]) and grid.dtype_named(grid.grid([a])) == "float32"
    for argv in (["--bfloat16", str(a)], ["--grid", "--bfloat16", str(a), "--ratios", "c.png"]):
        assert report.report_main(argv) == 2
        captured = capsys.readouterr()
        assert captured.err == "error: --bfloat16 goes with --grid alone (the chart, --ratios, is the float32 grid's)\n"
        assert captured.out == "" and not Path("c.png").exists()


def test_the_grid_as_one_chart_across_classes(tmp_path, monkeypatch, capsys):
    """--grid with --ratios PNG: the grid's classes in one chart, written; --ratios beside --readme refused, one line,
    exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    a = _write(Path("r/one/cpu-default.json"), [_row("tf", 0.2), _row("jax", 0.1)])
    b = _write(Path("r/two/cpu-default.json"), [_row("tf", 0.2), _row("jax", 2.0)])  # 10x: beyond the range
    assert report.report_main(["--grid", str(a), str(b), "--ratios", "classes.png"]) == 0
    assert capsys.readouterr().out.endswith("wrote classes.png\n")
    assert Path("classes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.report_main(["--readme", str(a), "--ratios", "other.png"]) == 2
    assert capsys.readouterr().err == "error: --readme takes only results files, not --ratios\n"
    assert not Path("other.png").exists()
    assert report.report_main(["--grid", str(a), str(b), "--ratios", "c\x1b[2J.png"]) == 0  # a name from outside
    assert capsys.readouterr().out.endswith("wrote c\\x1b[2J.png\n")  # said escaped, never raw to the terminal


CHART = re.compile(r"<!-- chart: python -m parity\.report --grid (?P<files>[^>]*?) --ratios (?P<png>\S+) -->")


def test_the_readme_chart_is_drawn_from_the_grids_files():
    """The chart under the grid names the command that drew it: the grid's own files, and the PNG the page shows."""
    text = README.read_text()
    m = CHART.search(text)
    assert m, "the README has no '<!-- chart: python -m parity.report --grid FILES --ratios PNG -->' line"
    assert [Path(f) for f in m["files"].split()] == grid.files_named(text)
    assert f"]({m['png']})" in text[m.end() :].split("\n\n")[0] and (ROOT / m["png"]).is_file()
