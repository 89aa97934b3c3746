"""What the README and the docs pages say about the project as it is now is what the project holds: the set-up
commands and the install's extras (pyproject.toml), the browser tests' rule (tests/test_html_browser.py, .ci/run),
the times quoted across `zen4` hosts (the class README, the logs, docs/tests.md), every flag (the parsers), every
file named under docs/results/ (it exists), the counts of workloads and frameworks (their tables), the schema, the
files a run writes, the presets and the claims the README's answer makes of its grid's files. No framework is
imported."""

import argparse
import ast
import json
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest
from phases import run_phases

from parity import launch
from parity.cli import flags
from parity.common import frameworks
from parity.engine.config import PRESETS
from parity.output import grid
from parity.output.files import RESULT_FILES
from parity.output.loading import current_names
from parity.record.schema import SCHEMA_VERSION
from parity.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
ZEN4 = DOCS / "results/zen4"
PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("results/*/README.md"))
WORDS = {"one": 1, "two": 2, "both": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def _flat(text: str) -> str:
    return " ".join(text.split())  # a page's line breaks fall anywhere in a sentence


@cache
def _doc(path: str) -> dict:
    return current_names(json.loads((ROOT / path).read_text()))  # older files: today's names


def _grid_files() -> list[Path]:
    return grid.files_named(README)


def _class_row(name: str, folder: Path = ZEN4) -> str:
    """A class README's table row for one file: the line that opens with its name."""
    return next(ln for ln in (folder / "README.md").read_text().splitlines() if ln.startswith(f"| `{name}."))


def _wall(log: Path) -> str:
    """'13 min 14 s' from a log's last lines: '/usr/bin/time -v's 'Elapsed ... 13:14.09', or 'WALL 602.11 s'."""
    text = log.read_text()
    if m := re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):(\d+(?:\.\d+)?)", text):
        s = round(int(m[1]) * 60 + float(m[2]))
    else:
        s = round(float(text.split()[-2]))
    return f"{s // 60} min {s % 60} s"


# --- the set-up ----------------------------------------------------------------------------------------------------


def _setup() -> tuple[list[str], str]:
    """The README's first code block's lines and the paragraph after it."""
    head = README[: README.index("## The answer")]
    block = head.split("```bash\n", 1)[1].split("```", 1)
    return block[0].strip().splitlines(), _flat(block[1].strip())


def test_the_readme_opens_with_the_two_set_up_commands():
    (run, tests), _ = _setup()
    assert run.startswith(". tools/venv.sh && ") and '-e ".[cpu]"' in run
    assert run.endswith("python -m parity.run --device cpu")
    assert '-e ".[test]"' in tests and tests.endswith("python -m pytest -q")


def test_the_sentence_after_them_says_the_browser_tests_skip_here_and_are_required_under_ci():
    _, after = _setup()
    source = (ROOT / "tests/test_html_browser.py").read_text()
    require = next(
        n.value.value
        for n in ast.parse(source).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "REQUIRE"
    )
    ci = (ROOT / ".ci/run").read_text()
    assert f"export {require}=1" in ci and "apt-get install" in ci and "chromium" in ci
    first = after.split(". ")[0]
    assert "browser tests are skipped, with a one-line reason, where Debian's `chromium` is absent" in first
    assert f"required under CI (`.ci/run` installs it and sets `{require}=1`)" in after


def test_the_install_is_said_as_pyproject_declares_it():
    """Each extra the README names exists; the `cpu` extra is the one with PyTorch, whose size the README gives as
    pyproject.toml's comment does; the install's time is the class README's; the `test` extra includes `cpu`."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {e for group in re.findall(r'"\.\[([\w,-]+)\]"', README) for e in group.split(",")}
    assert named >= {"cpu", "test", "jax", "tf"} and named <= set(extras), named - set(extras)
    assert "torch" in extras["cpu"][0] and not any("torch" in d for e in ("jax", "tf") for d in extras[e])
    _, after = _setup()
    assert '`-e ".[jax,tf]" matplotlib` in its place leaves PyTorch out' in after
    assert "charts" in extras["cpu"][0] and any(d.startswith("matplotlib") for d in extras["charts"])
    pyproject = _flat((ROOT / "pyproject.toml").read_text())
    size = re.search(r"about (\d+ GB) of wheels", after)[1]
    assert f"CUDA build (about {size} of wheels" in pyproject
    install = re.search(r"most of a (\d+ s) install on `zen4`", after)[1]
    assert f"after a {install} install of the README's first line" in _class_row("cpu-default")
    assert "parity[cpu]" in extras["test"] and "the `test` extra includes `cpu`" in after


# --- times across zen4 hosts -----------------------------------------------------------------------------------


def test_zen4s_times_across_hosts_are_the_files():
    """The README's `zen4` row: the default from the faster host's log (`cpu-default-conv32`) to the current run's,
    `--quick` as the class README gives its two runs with PyTorch and the ViT, the tests as docs/tests.md does."""
    cells = _readme_cells("zen4")
    fast, now = _wall(ZEN4 / "cpu-default-conv32-log.txt"), _wall(ZEN4 / "cpu-default-log.txt")
    assert cells[1].startswith(f"{fast} to {now} across hosts")
    assert now in _class_row("cpu-default") and "at 950051b" in _class_row("cpu-default")
    quick = [re.findall(r"\d+ min \d+ s", _class_row(n).split("|")[-2])[0] for n in ("cpu-quick-vit", "cpu-quick")]
    assert cells[3] == f"{quick[0]} to {quick[1]} across hosts"
    whole, tier = _tests_rows("zen4", "`python -m pytest -q`")
    span = re.search(r"\| (\d+ min \d+ s to \d+ min \d+ s) \(", whole)[1]
    assert cells[4] == f"{span}; fast tier {tier}"


def _readme_cells(host: str) -> list[str]:
    """The README's row for a class of host (`zen4`), cell by cell."""
    row = next(ln for ln in README.splitlines() if ln.startswith(f"| `{host}`:"))
    return [c.strip() for c in row.strip("|").split("|")]


def _tests_rows(host: str, whole: str) -> tuple[str, str]:
    """docs/tests.md on a class of host: its row for the whole suite (run as `whole`), and the fast tier's time."""
    tests = (DOCS / "tests.md").read_text().splitlines()
    row = next(ln for ln in tests if ln.startswith(f"| `{host}` | {whole} |"))
    tier = next(ln for ln in tests if ln.startswith(f'| `{host}` | `python -m pytest -q -m "not slow"` |'))
    return row, tier.split("|")[4].strip()


def test_the_third_zen4_hosts_runs_are_their_files():
    """The class README's rows for the default and `--quick` on a third host: each wall time from its log, its span
    from the first stamped line to the last, its commit and verdict from its file, and the host's conv and peak."""
    for name in ("cpu-default-third-host", "cpu-quick-third-host"):
        line, doc = _class_row(name), _doc(f"docs/results/zen4/{name}.json")
        log = ZEN4 / f"{name}-log.txt"
        checks, counts = _counts(doc)
        assert counts in line and False not in checks and f"at {doc['env']['git_commit']}" in line
        assert f"{_stamped(log)} from the first stamped line to the last" in line and line.endswith(f" {_wall(log)} |")
    line, doc = _class_row("cpu-default-third-host"), _doc("docs/results/zen4/cpu-default-third-host.json")
    conv = next(r for r in doc["rows"] if r["kind"] == "conv" and r["framework"] == "tf" and r["dtype"] == "float32")
    assert f"TF's conv on 32 images {conv['median_s'] * 1e3:.0f} ms" in line
    assert f"NumPy's matmul {doc['env']['peak']['measured_flops'] / 1e9:.1f} GFLOP/s" in line
    rp = run_phases()
    found = rp.phases((ZEN4 / "cpu-default-third-host-log.txt").read_text().splitlines())
    assert f"its floor {_mmss(round(sum(rp.floor(found, doc).values())))} (" in line
    said = "the CNN's parity checks ({}), the CNN's and the ViT's compiling and first epochs ({}, {}) and the CNN's "
    said += "and the conv's timed calls ({}, {})"
    phases = ("cnn parity checks", "cnn_train compiling, first epoch", "vit_train compiling, first epoch")
    phases += ("cnn_train timed calls", "conv timed calls")
    assert said.format(*(_mmss(found[p]) for p in phases)) in line


def _counts(doc: dict) -> tuple[list, str]:
    """A results file's checks' verdicts (True, False, None), and its counts as the class README gives them: '40 of 42
    rows verified, 12 checks passed, 3 not judged'."""
    checks = [c["passed"] for c in doc["checks"]]
    counts = f"{sum(r['verified'] for r in doc['rows'])} of {len(doc['rows'])} rows verified, "
    counts += f"{checks.count(True)} checks passed, {checks.count(None)} not judged"
    return checks, counts


def _mmss(s: int) -> str:
    """'1 min 15 s', or '58 s' under a minute."""
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def _stamped(log: Path) -> str:
    """'1 min 27 s' from a run's log: its first stamped line ('[11:20:44] ...') to its last."""
    stamps = re.findall(r"^\[(\d\d):(\d\d):(\d\d)\]", log.read_text(), re.M)
    stamps = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in stamps]
    s = (stamps[-1] - stamps[0]) % 86400
    return f"{s // 60} min {s % 60} s"


def test_zen5s_times_are_its_current_files():
    """The README's `zen5` row: the default's and `--preset full`'s wall times from their logs, `--quick`'s from its
    stamped lines, each as the class README gives it beside its file's commit and counts; the tests as docs/tests.md
    gives them."""
    zen5 = DOCS / "results/zen5"
    cells = _readme_cells("zen5")
    default, full = _wall(zen5 / "cpu-default-log.txt"), _wall(zen5 / "cpu-full-log.txt")
    quick = _stamped(zen5 / "cpu-quick-log.txt")
    assert cells[1:4] == [f"{s} with PyTorch and the ViT" for s in (default, full, quick)]
    for name, said in (("cpu-default", default), ("cpu-full", full), ("cpu-quick", quick)):
        line, doc = _class_row(name, zen5), _doc(f"docs/results/zen5/{name}.json")
        checks, counts = _counts(doc)
        assert said in line and f"at {doc['env']['git_commit']}" in line and counts in line and False not in checks
    whole, tier = _tests_rows("zen5", "`.ci/run` on a clean clone")
    first = re.search(r"\| (\d+ min \d+ s(?: to \d+ min \d+ s)?), then", whole)[1]
    assert cells[4] == f"{first}; fast tier {tier}"


def test_every_classs_test_times_in_the_readme_are_docs_tests_mds():
    """The README's tests column: each time it gives for a class (and each fast-tier range) is one that docs/tests.md's
    rows for that class give, so a figure measured once and never updated cannot stand there alone."""
    tests = (DOCS / "tests.md").read_text().splitlines()
    rows = [ln for ln in README.splitlines() if re.match(r"\| `[a-z0-9-]+`: ", ln)]
    assert len(rows) >= 6
    for row in rows:
        klass = re.match(r"\| `([a-z0-9-]+)`", row)[1]
        cell = [c.strip() for c in row.strip("|").split("|")][4]
        theirs = " ".join(ln for ln in tests if ln.startswith(f"| `{klass}`"))
        if not theirs:  # a class docs/tests.md has no row for: its README folder is the source (zen1)
            continue
        said = re.findall(r"\d+ min \d+ s", cell) + re.findall(r"fast tier (\d+-\d+ s)", cell)
        assert said and all(t in theirs for t in said), (klass, cell)


def test_every_classs_run_times_in_the_readme_are_its_folders():
    """The README's default, `--preset full` and `--quick` columns: each time is one its class folder's README gives
    (beside the file and log it was read from)."""
    rows = [ln for ln in README.splitlines() if re.match(r"\| `[a-z0-9-]+`: ", ln)]
    assert len(rows) >= 7
    for row in rows:
        klass = re.match(r"\| `([a-z0-9-]+)`", row)[1]
        folder = " ".join((DOCS / f"results/{klass}/README.md").read_text().split())
        said = [t for c in row.strip("|").split("|")[1:4] for t in re.findall(r"\d+ min \d+ s", c)]
        assert [t for t in said if t not in folder] == [], klass


def test_each_grid_file_has_its_ratio_chart_beside_it():
    """docs/results.md: each file the README's grid reads has its summary chart beside it (`-ratios.png`)."""
    grid = re.search(r"<!-- results grid: python -m parity.report --grid (.+?) -->", README)[1].split()
    assert len(grid) >= 7
    said = " ".join((DOCS / "results.md").read_text().split())
    assert "each CPU class's file above has one beside it (`-ratios.png`)" in said
    missing = [f for f in grid if not (ROOT / f.replace(".json", "-ratios.png")).is_file()]
    assert not missing, missing


def test_the_readme_quotes_no_zen4_time_outside_its_table():
    """The times are said once, in the table: none before "## The answer" and none in the run commands' comments."""
    head = README[: README.index("## The answer")]
    assert not re.findall(r"\d+ min \d+ s", head)


# --- flags, files, counts ----------------------------------------------------------------------------------------


def _options(ap: argparse.ArgumentParser) -> set[str]:
    return {o for a in ap._actions for o in a.option_strings}


PARSERS = {"parity.run": flags.parser, "parity.launch": launch.parser}


COMMAND_PAGES = [ROOT / "README.md"] + [DOCS / f"{n}.md" for n in ("gpu", "multihost", "tpu")]


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: p.name)
def test_every_flag_a_command_line_shows_is_its_parsers(page):
    """`python -m parity.run --flag ...` in a page's code blocks: each --flag is the parser's (a launched command's
    own flags after `--` are parity.run's)."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S)
    wrong = []
    for line in (ln.split("#")[0] for b in blocks for ln in b.splitlines()):
        for part in re.split(r"&&|;", line):
            m = re.search(r"python -m (parity\.run|parity\.launch)\b(.*)", part)
            if not m:
                continue
            own, _, rest = m[2].partition(" -- ")
            if m[1] == "parity.launch" and "--module" in own:
                rest = ""  # the launched script's own flags
            for cmd, args in ((m[1], own), ("parity.run", rest)):
                wrong += [(cmd, f) for f in re.findall(r"(?<!\S)(--[\w-]+)", args) if f not in _options(PARSERS[cmd]())]
    assert not wrong


def _named_files(text: str) -> list[str]:
    out = []
    for path in re.findall(r"docs/results/[\w./{},*-]+", text):
        path = path.rstrip(".,")
        if "*" in path or path.endswith("/"):
            continue
        m = re.search(r"\{([^}]+)\}", path)
        out += [path[: m.start()] + alt + path[m.end() :] for alt in m[1].split(",")] if m else [path]
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_names_under_docs_results_exists(page):
    text = page.read_text()
    missing = [p for p in _named_files(text) if not (ROOT / p).exists()]
    assert not missing


def test_the_pages_count_workloads_and_frameworks_as_the_tables_do():
    """'Both workloads', 'four frameworks' in a page about the code (not a results file's description): the
    number of entries in parity.workloads.WORKLOADS and parity.common.frameworks.TABLE. multihost.md and
    workloads.md's 'both frameworks' are TF and JAX by name, so only their workloads are counted."""
    counts = {"workloads": len(WORKLOADS), "frameworks": len(frameworks.TABLE)}
    wrong = []
    pages = {"README.md": counts, "docs/architecture.md": counts}
    pages |= {p: {"workloads": len(WORKLOADS)} for p in ("docs/multihost.md", "docs/workloads.md")}
    for page, counted in pages.items():
        text = (ROOT / page).read_text()
        text = text[: text.index(grid.BEGIN.split("{")[0])] + text[text.index(grid.END) :] if grid.END in text else text
        for word, noun in re.findall(r"\b(both|two|three|four|five|six|seven) (workloads|frameworks)\b", text, re.I):
            if noun in counted and WORDS[word.lower()] != counted[noun]:
                wrong.append((page, word, noun))
    assert not wrong
    question = _flat(README[: README.index("```")])
    named = re.split(r", | or ", question.split("which is faster, ")[1].split(", each out of the box")[0])
    assert len(named) == len(frameworks.TABLE), named


# --- single facts the issue found wrong --------------------------------------------------------------------------


def test_the_default_is_the_devices_sizes_as_the_specs_declare():
    fmt = _flat((DOCS / "results-format.md").read_text())
    cpu = {w: WORKLOADS[w].cpu for w in ("conv", "matmul", "lstm", "vit")}
    said = (
        f"the device's sizes (on a CPU: the conv on {cpu['conv'].batch} images, the matmul at {cpu['matmul'].m}, "
        f"the LSTM at {cpu['lstm'].units} units, the ViT at width {cpu['vit'].dim};"
    )
    assert said in fmt
    usage = next(ln for ln in README.splitlines() if ln.startswith("python -m parity.run --device cpu  "))
    assert "article's sizes" not in usage


def test_the_notebook_preset_runs_every_trained_workload():
    fmt = (DOCS / "results-format.md").read_text()
    row = next(ln for ln in fmt.splitlines() if ln.startswith("| `notebook` |"))
    names = {"cnn": "the CNN", "lstm": "the row LSTM", "vit": "the ViT"}
    assert [w for w, spec in WORKLOADS.items() if spec.notebook] == list(names)  # the notebook schedule's own
    assert f"every trained workload ({', '.join(names.values())})" in row
    assert PRESETS["notebook"].specs == "notebook"


def test_the_schema_statistics_md_describes_is_the_records():
    text = _flat((DOCS / "statistics.md").read_text())
    assert re.findall(r"`results.json`, schema (\d+)", text) == [str(SCHEMA_VERSION)]
    doc = json.loads((ZEN4 / "cpu-default.json").read_text())
    assert doc["env"]["schema_version"] == SCHEMA_VERSION
    fields = re.search(r"\(`pair`: `jax_vs_tf` or `tuned_vs_default`; (.*?)\)\.", text)[1]
    named = {"pair"} | set(re.findall(r"`(\w+)`(?::|;|\))", fields))
    assert named <= set(doc["comparisons"][0]), named - set(doc["comparisons"][0])


def test_which_grid_files_have_a_host_record():
    fmt = _flat((DOCS / "results-format.md").read_text())
    files = _grid_files()
    without = [p.parent.name for p in files if "host" not in _doc(p.as_posix())["env"]]
    said = f"(of the {WORDS_BY[len(files)]} class files the README's grid reads, "
    said += f"{', '.join(f'`{k}`' for k in without)}'s; the other {WORDS_BY[len(files) - len(without)]} have it)"
    assert said in fmt


WORDS_BY = {v: k for k, v in WORDS.items() if k != "both"}


def test_tfs_best_known_bfloat16_over_several_devices_is_its_catalogs():
    """tf_impl/cnn.py's first-ranked bfloat16 variant over several devices is the one tuning.md names, and its
    measured row is in the file the page names."""
    tree = ast.parse((ROOT / "tf_impl/cnn.py").read_text())
    first = [
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "id", "") == "Variant"
        and any(getattr(a, "id", "") == "MANY" for a in n.args)
        and any(isinstance(a, ast.Constant) and a.value == "bfloat16" for a in n.args)
        and any(k.arg == "rank" and k.value.value == 0 for k in n.keywords)
    ]
    assert len(first) == 1
    tuning = _flat((DOCS / "tuning.md").read_text())
    assert f"`loop+spe` and `{first[0]}` at 8," in tuning
    assert "its own speed is unmeasured" not in tuning
    rows = _doc("docs/results/zen4/cpu-full.json")["rows"]
    assert any(r["variant"] == first[0] and r["verified"] and r["replicas"] == 8 for r in rows)


def test_keras_on_jax_on_a_tpu_is_said_as_its_files_hold():
    text = _flat((DOCS / "keras-jax.md").read_text())
    section = text[text.index("## On a GPU or a TPU") :]
    said = "On one TPU v5e chip Keras 3 on JAX ran the conv, the matmul, the row LSTM and the ViT, every row verified"
    assert said in section
    for name in ("conv", "matmul", "lstm", "vit"):
        rows = [r for r in _doc(f"docs/results/tpu-v5e/{name}.json")["rows"] if r["framework"] == "keras-jax"]
        assert rows and all(r["verified"] for r in rows), name


def test_the_gpu_default_is_the_presets():
    assert PRESETS["default"].replica_counts("gpu") == (1, 0)  # 0: every chip
    text = _flat((DOCS / "gpu.md").read_text())
    assert "the default times one GPU, then every local GPU" in text
    assert "default replica count is every local GPU" not in text


def test_the_readme_names_every_file_a_run_writes():
    para = _flat(README[README.index("A run writes ") :].split("\n\n")[0])
    named = set()
    for stem, alts in re.findall(r"results/(results)\.\{([\w,]+)\}", para):
        named |= {f"{stem}.{a}" for a in alts.split(",")}
    named |= set(re.findall(r"`(?:results/)?(results_\w+\.png)`", para))
    assert named == set(RESULT_FILES), set(RESULT_FILES) ^ named


def test_the_tuning_tables_files_and_commits_are_those_files():
    text = _flat((DOCS / "tuning.md").read_text())
    said = re.search(r"three frameworks \(`python -m parity.run --device cpu`\): (.*?), each under", text)[1]
    for path, commit in re.findall(r"`([\w-]+/[\w-]+\.json)` at (\w+)", said):
        assert _doc(f"docs/results/{path}")["env"]["git_commit"] == commit, path


# --- the README's answer, against its grid's files -------------------------------------------------------------


def _best(doc: dict, kind: str, fw: str) -> float | None:
    times = [
        r["median_s"]
        for r in doc["rows"]
        if r["verified"] and (r["kind"], r["framework"], r["replicas"], r["dtype"]) == (kind, fw, 1, "float32")
    ]
    return min(times, default=None)


def test_they_agree_in_every_grid_file():
    """'every row verified against float64 and every judged check passed, on all seven classes'."""
    files = _grid_files()
    assert f"on all {WORDS_BY[len(files)]} classes" in _flat(README)
    for p in files:
        doc = _doc(p.as_posix())
        assert all(r["verified"] for r in doc["rows"]), p
        assert not [c for c in doc["checks"] if c["passed"] is False], p


def test_the_row_lstm_bullet_holds_in_every_grid_file():
    """PyTorch trains the row LSTM fastest on each class that ran it; JAX infers it faster than TF on each class
    but those the README names as ties, where the interval holds 1."""
    bullet = _flat(README[README.index("- **The row LSTM**") :].split("\n- ")[0])
    ties = set(re.findall(r"`([\w-]+)`", bullet.split("but ")[1].split(", ties")[0]))
    torch, tied = [], set()
    for p in _grid_files():
        doc = _doc(p.as_posix())
        if _best(doc, "lstm_train", "torch") is not None:
            torch.append(p.parent.name)
            fastest = min((_best(doc, "lstm_train", fw) or 1e9, fw) for fw in frameworks.TABLE)
            assert fastest[1] == "torch", p
        (c,) = [
            c
            for c in doc["comparisons"]
            if c["pair"] == "jax_vs_tf" and (c["kind"], c["replicas"], c["dtype"]) == ("lstm_infer", 1, "float32")
        ] or [None]
        if c is None:
            continue
        lo, hi = c["ci95"]
        if lo <= 1 <= hi:
            tied.add(p.parent.name)
        else:
            assert hi < 1, p
    assert tied == ties
    assert f"PyTorch trains it fastest on the {WORDS_BY[len(torch)]} classes that ran it" in bullet


def test_the_cnn_training_bullets_hold_in_every_grid_file():
    """'Out of the box, TF trains the article's CNN fastest on AVX-512'; 'at each framework's best in float32, TF
    leads or ties CNN training on AVX-512 ...; JAX leads on AVX2': on each grid class, AVX-512 or AVX2 as
    docs/results.md's table of classes says."""
    from parity.judging import summary

    text = _flat(README)
    assert "TF trains the article's CNN fastest on AVX-512" in text
    assert "TF leads or ties CNN training on AVX-512" in text and "JAX leads on AVX2" in text
    table = (DOCS / "results.md").read_text().splitlines()
    avx512 = {re.search(r"`([\w-]+)`", ln)[1] for ln in table if ln.startswith("| [`") and ": AVX-512" in ln}
    avx512 |= {re.search(r"`([\w-]+)`", ln)[1] for ln in table if ln.startswith("| [`") and "(AVX-512" in ln}
    assert {"zen4", "zen5", "xeon-amx"} <= avx512 and not {"zen1", "zen3"} & avx512
    for p in _grid_files():
        rows, klass = _doc(p.as_posix())["rows"], p.parent.name
        plain = {fw: summary.fastest(rows, "cnn_train", 1, "float32", fw, False) for fw in frameworks.TABLE}
        best = {fw: summary.fastest(rows, "cnn_train", 1, "float32", fw) for fw in frameworks.TABLE}
        others = [fw for fw in frameworks.TABLE if fw != "tf" and best[fw]]
        if klass in avx512:
            assert all(plain[fw]["median_s"] > plain["tf"]["median_s"] for fw in others if plain[fw]), klass
            assert not [fw for fw in others if summary.ratio(best[fw], best["tf"]).high < 1], klass
        else:
            assert min(others + ["tf"], key=lambda fw: best[fw]["median_s"]) == "jax", klass
            assert summary.ratio(best["jax"], best["tf"]).high < 1, klass


def test_the_vit_clause_and_what_is_not_measured_hold_in_the_grid_files():
    """'PyTorch trains the ViT fastest on three of the four classes that ran it (0.57x, `xeon-amx`)', and 'PyTorch and
    the ViT on `zen1` and the Xeons without AMX' not measured: counted from the grid's files."""
    text = _flat(README)
    ran, fastest, lacking = [], [], set()
    for p in _grid_files():
        doc = _doc(p.as_posix())
        if _best(doc, "vit_train", "torch") is None:
            lacking.add(p.parent.name)
            continue
        ran.append(p.parent.name)
        if min((_best(doc, "vit_train", fw) or 1e9, fw) for fw in frameworks.TABLE)[1] == "torch":
            fastest.append(p.parent.name)
    said = f"PyTorch trains the ViT fastest on {WORDS_BY[len(fastest)]} of the {WORDS_BY[len(ran)]} classes that ran it"
    assert said in text and "xeon-amx" in fastest
    amx = _doc("docs/results/xeon-amx/cpu-default.json")
    assert f"({_best(amx, 'vit_train', 'torch') / _best(amx, 'vit_train', 'tf'):.2f}x, `xeon-amx`)" in text
    assert "PyTorch and the ViT on `zen1` and the Xeons without AMX" in text
    xeons = {p.parent.name for p in _grid_files() if p.parent.name.startswith("xeon-")}
    assert lacking == {"zen1"} | xeons - {"xeon-amx"}


def test_the_gaps_pages_bests_on_xeon_amx_are_each_frameworks_fastest_row():
    """gaps.md's 'the others' bests are over the line: ...': each row it quotes outside parentheses is its
    framework's fastest verified row of that kind in the file the paragraph names."""
    text = _flat((DOCS / "gaps.md").read_text())
    para = text[text.index("In the README's file for the class") : text.index("TF's ViT training is best under XLA")]
    path = re.search(r"`(docs/results/xeon-amx/[\w-]+\.json)`", para)[1]
    rows = [r for r in _doc(path)["rows"] if r["verified"] and r["replicas"] == 1 and r["dtype"] == "float32"]
    names = {"TF": "tf", "JAX": "jax", "Keras-JAX": "keras-jax", "PyTorch": "torch"}
    outside = re.sub(r"\([^)]*\)", "", para)
    quotes = re.findall(r"\b(TF|JAX|Keras-JAX|PyTorch) `([^` ]+)` (\d+\.\d) ms", outside)
    assert len(quotes) >= 10
    for fw, variant, ms in quotes:
        found = [
            r
            for r in rows
            if r["framework"] == names[fw] and r["variant"] == variant and f"{r['median_s'] * 1e3:.1f}" == ms
        ]
        assert found, (fw, variant, ms)
        fastest = {(o["framework"], o["kind"]): o["median_s"] for o in sorted(rows, key=lambda o: -o["median_s"])}
        assert any(r["median_s"] == fastest[r["framework"], r["kind"]] for r in found), (fw, variant, ms)


def test_the_results_format_page_lists_every_variable_a_framework_reads():
    """docs/results-format.md names each variable parity.engine.environment records or refuses, each prefix too."""
    from parity.engine.environment import COMMON_FLAGS, FRAMEWORK_FLAGS, FRAMEWORK_PREFIXES, REFUSED

    page = (ROOT / "docs/results-format.md").read_text()
    names = {*COMMON_FLAGS, *(n for ns in FRAMEWORK_FLAGS.values() for n in ns)}
    names |= {n for r in REFUSED.values() for n in r} | {f"{p}*" for ps in FRAMEWORK_PREFIXES.values() for p in ps}
    assert sorted(n for n in names if f"`{n}`" not in page) == []
