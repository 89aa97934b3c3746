"""The docs speak with one voice, the tree's: the README's layout names the packages and modules the tree holds, a
Python version the docs require is pyproject.toml's, every preset and every docs page can be found from the README,
and no page, test or tool speaks of how the project is made (who ran a command, with what tool, in which sitting):
only of a chip, a command and a time limit. Read from the files; no framework is imported."""

import re
import tomllib
from pathlib import Path

import pytest

from parity.common.frameworks import TABLE
from parity.engine.config import PRESETS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _section(text: str, heading: str) -> str:
    """A Markdown section's text, from its `## heading` line to the next `## ` heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _layout() -> str:
    """The README's layout block: the code block under '## Layout', its lines joined where they wrap."""
    block = _section(README, "Layout").split("```")[1]
    return re.sub(r"\n {19}", " ", block)  # a wrapped description continues at the descriptions' column


def _line(prefix: str) -> str:
    return next(ln for ln in _layout().splitlines() if ln.startswith(prefix))


def _packages(folder: Path) -> set[str]:
    return {p.parent.name for p in folder.glob("*/__init__.py")}


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}


# --- the README's layout, from the tree ----------------------------------------------------------------------------


def test_the_layout_names_every_package_and_top_level_module_of_parity():
    named = set(re.findall(r"^parity/(\w+)/", _layout(), flags=re.M))
    assert named == _packages(ROOT / "parity"), named ^ _packages(ROOT / "parity")
    commands = set(re.findall(r"(\w+)\.py", _line("parity/run.py")))
    modules = commands | set(re.findall(r"^parity/(\w+)\.py", _layout(), flags=re.M))  # a module on a line of its own
    assert modules == _modules(ROOT / "parity"), modules ^ _modules(ROOT / "parity")


def test_the_layout_names_every_workload_package_and_what_the_trained_ones_share():
    """`parity/workloads/`'s line: the workloads in its parentheses are the packages that declare a `WORKLOAD` record;
    every other package there (trained/) is named on the same line."""
    line = _line("parity/workloads/")
    folder = ROOT / "parity/workloads"
    declared = {
        p for p in _packages(folder) if re.search(r"^WORKLOAD\b", (folder / p / "__init__.py").read_text(), re.M)
    }
    listed = set(re.findall(r"(\w+)/", line.split("(", 1)[1].split(")", 1)[0]))
    assert listed == declared, listed ^ declared
    assert {p for p in _packages(folder) if f" {p}/" not in line and f"({p}/" not in line} == set()


def test_the_layout_names_the_modules_every_implementation_holds():
    """The mirror images' line names each implementation's package (the frameworks table's) and the modules all of them
    hold, no more and no fewer; keras_models' line its modules."""
    line = _line("jax_impl/")
    packages = [f.module for f in TABLE.values()]
    assert set(re.findall(r"(\w+_impl)/", line)) == set(packages)
    shared = set.intersection(*(_modules(ROOT / p) for p in packages))
    listed = set(re.findall(r"\w+", line.split("one module each:", 1)[1]))
    assert listed == shared, listed ^ shared
    listed = set(re.findall(r"\w+", _line("keras_models/").split(":", 1)[1]))
    assert listed == _modules(ROOT / "keras_models"), listed ^ _modules(ROOT / "keras_models")


# --- one Python version -----------------------------------------------------------------------------------------

LEAST = re.compile(r"Python (3\.\d+)(?:\+| or (?:newer|later)| and (?:newer|later))|Python older than (3\.\d+)")


# Files issue 108 lists whose mending is still to land beside this test: each entry goes when its file is mended
# (the test then passes there and says so, XPASS).
PYTHON_TO_MEND: dict[str, str] = {}
WORDS_TO_MEND: dict[str, str] = {}


def _params(paths: list[Path], to_mend: dict[str, str]) -> list:
    """`paths` as test parameters, each named by its path; one still to mend is expected to fail, and why."""
    out = []
    for p in paths:
        name = str(p.relative_to(ROOT))
        marks = [pytest.mark.xfail(reason=to_mend[name], strict=False)] if name in to_mend else []
        out.append(pytest.param(p, marks=marks, id=name))
    return out


@pytest.mark.parametrize("page", _params(PAGES, PYTHON_TO_MEND))
def test_the_least_python_a_page_names_is_pyprojects(page):
    """'Python 3.11 or newer', 'Python 3.11+', 'older than 3.11': each the version pyproject.toml requires."""
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    least = re.fullmatch(r">=\s*(3\.\d+)", required)[1]
    text = " ".join(page.read_text().split())
    said = [a or b for a, b in LEAST.findall(text)]
    assert [v for v in said if v != least] == [], f"{page.name} names Python {said}; pyproject.toml: {required}"


# --- presets and pages, found from the README ------------------------------------------------------------------


def test_every_preset_is_in_the_presets_table_and_the_readmes_commands():
    """docs/results-format.md's table holds one row per preset of parity.engine.config.PRESETS; the README shows
    each one's command (`--quick` for quick, the bare command for the default)."""
    table = _section((DOCS / "results-format.md").read_text(), "A run's extent")
    rows = re.findall(r"^\| `(\w+)`", table, flags=re.M)
    assert sorted(rows) == sorted(PRESETS)
    shown = {"default"} | ({"quick"} if "--quick" in README else set())
    shown |= set(re.findall(r"--preset (\w+)", README))
    assert shown >= set(PRESETS), set(PRESETS) - shown


def test_every_results_folder_has_a_readme():
    """Each folder under docs/results/ says what its files are, which is current and why each other is kept."""
    assert [d.name for d in (DOCS / "results").iterdir() if d.is_dir() and not (d / "README.md").is_file()] == []


def test_every_docs_page_is_in_the_readmes_index():
    index = _section(README, "Docs")
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert linked == pages, {"not in the index": pages - linked, "no such page": linked - pages}


# --- the project speaks of itself alone ---------------------------------------------------------------------------

# Words about how the project is made: who ran a command, with what tool, in which sitting. A page says which chip or
# host, which command and which time limit, never whose. Each pattern is as tight as the words it catches.
MAKING = {
    "the device tool": r"\bdevice tool\b",
    "the device machine": r"\bthe device machine\b",
    "a lent or borrowed machine": r"\b(?:lent|lends|borrow(?:s|ed|ing)?)\b",
    "a person at work": r"\b(?:engineers?|developers?|colleagues?)\b",
    "a workplace": r"\bworkplace\b",
    "a work session": r"\bsessions? (?:on|of) (?:this|a|the|that) class\b"  # 'six sessions on this class'
    r"|\b(?:in|during|later in|earlier in) (?:one|another|the same|this|that) session\b"  # 'later in the session'
    r"|\bthis class's sessions?\b|\bsessions? that (?:added|ran|made)\b",
}
# In the docs (prose for a reader) a session is always one of work, but a profiler's; in tests and tools 'session' is
# pytest's or a process group's, and only the phrases above are about work.
DOCS_ONLY = {"a session": r"\bsessions?\b(?<!profiler session)"}
FILES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
# this file's own examples below are about the words, not in them
CODE = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.name != Path(__file__).name]
CODE += sorted(p for p in (ROOT / "tools").iterdir() if p.is_file())


def _making(path: Path, patterns: dict[str, str]) -> list[str]:
    found = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        found += [
            f"{path.relative_to(ROOT)}:{number}: {what}" for what, p in patterns.items() if re.search(p, line, re.I)
        ]
    return found


@pytest.mark.parametrize("path", _params(FILES + CODE, WORDS_TO_MEND))
def test_no_words_about_how_the_project_is_made(path):
    patterns = MAKING | (DOCS_ONLY if path.suffix == ".md" else {})
    assert _making(path, patterns) == []


def test_the_words_are_caught_where_they_stand():
    """Each pattern catches the words it is for, and lets the same words about something else stand."""
    caught = {
        "no GPU was lent to the session that added the workload": {
            "a lent or borrowed machine",
            "a work session",
            "a session",
        },
        "stopped by the device tool's 10-minute limit": {"the device tool"},
        "another engineer's tests running beside it": {"a person at work"},
        "six sessions on this class: 67-68 s": {"a work session", "a session"},
    }
    stands = (
        "a profiler session started and stopped",
        "the test processes are silently started",
        "start_new_session=True",
    )
    every = MAKING | DOCS_ONLY
    for text, what in caught.items():
        assert {w for w, p in every.items() if re.search(p, text, re.I)} == what, text
    for text in stands:
        assert not [w for w, p in every.items() if re.search(p, text, re.I)], text
