"""The figures docs pages quote from shipped results files are those files': tuning.md's per-class table cell by cell;
results.md's class table (commit, rows, checks); and every figure written `A` / `B` 0.80x (0.58-0.82) in
glossary.md, tuning.md and results.md, against a comparison of the files its paragraph names. No framework is
imported."""

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest
from phases import run_phases

from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CLASSES = ("zen1", "zen4", "zen5", "xeon-avx512bf16", "xeon-amx")
# each class's default run with three frameworks (TF, JAX, Keras 3 on JAX): the files tuning.md's table reads
# zen4's, zen5's and xeon-amx's cpu-default.json hold four frameworks: their three-framework runs are named so
THREE = {k: f"docs/results/{k}/cpu-default.json" for k in CLASSES} | {
    k: f"docs/results/{k}/cpu-default-three-frameworks.json" for k in ("zen4", "zen5", "xeon-amx")
}
FIGURE = re.compile(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)(; no difference)?")  # a comparison's text
QUOTED = re.compile(r"`([^`]+)` / `([^`]+)` (\d+\.\d\d)x \((\d+\.\d\d)-(\d+\.\d\d)(, no difference)?\)")
FILE = re.compile(r"docs/results/[\w./-]+?\.json\b")


@cache
def _doc(path: str) -> dict:
    return current_names(json.loads((ROOT / path).read_text()))  # older files: today's names


def _said(c: dict) -> str:
    """A comparison as the docs write it: '0.80x (0.58-0.82)', ', no difference' inside where its interval holds 1."""
    r, lo, hi, nd = FIGURE.search(c["text"]).groups()
    return f"{r}x ({lo}-{hi}{', no difference' if nd else ''})"


def _settings() -> list[str]:
    """JAX's setting names, read from jax_impl/catalog.py's source, longest first."""
    tree = ast.parse((ROOT / "jax_impl/catalog.py").read_text())
    names = [
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Setting" and isinstance(n.args[0], ast.Constant)
    ]
    return sorted(names, key=len, reverse=True)


SETTINGS = _settings()


def _variant(row_label: str) -> str:
    """'jit+pool+ynn+onednn+thp' -> 'jit+pool': the row's variant, its setting taken off."""
    for s in SETTINGS:
        if row_label.endswith(f"+{s}"):
            return row_label[: -len(s) - 1]
    return row_label


def _blocks(text: str) -> list[str]:
    """A page's paragraphs, each list item its own, each table row its own; a paragraph's lines joined by one space,
    so that a figure the page wraps across two lines is read as one."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith("|"):
            out += para.splitlines()
        else:
            out += [" ".join(item.split()) for item in re.split(r"\n(?=- )", para)]
    return out


# --- tuning.md's per-class table ---------------------------------------------------------------------------------

TUNING = (DOCS / "tuning.md").read_text()
WORKLOADS = {
    "conv": "conv",
    "matmul": "matmul",
    "CNN training": "cnn_train",
    "CNN inference": "cnn_infer",
    "LSTM training": "lstm_train",
    "LSTM inference": "lstm_infer",
}
FRAMEWORKS = {"JAX": "jax", "TF": "tf", "Keras-JAX": "keras-jax", "PyTorch": "torch"}
LABEL = re.compile(r"^(.+?) x(\d+)( bfloat16)?: (JAX|TF|Keras-JAX) `([^`]+)` / (?:`([^`]+)`|best out of the box)$")


def _class_table() -> tuple[list[str], list[list[str]]]:
    section = TUNING[TUNING.index("## What the best-known configuration buys, per class") :]
    lines = [ln for ln in section.split("\n## ")[0].splitlines() if ln.startswith("| ")]
    header = [c.strip().strip("`") for c in lines[0].strip("|").split("|")]
    return header[1:], [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


CLASS_COLUMNS, CLASS_ROWS = _class_table()


def test_the_per_class_table_covers_every_class_with_a_default_run():
    assert CLASS_COLUMNS == list(CLASSES)
    assert len(CLASS_ROWS) >= 20


@pytest.mark.parametrize("row", CLASS_ROWS, ids=[r[0] for r in CLASS_ROWS])
def test_each_per_class_cell_is_its_class_files_comparison(row):
    m = LABEL.match(row[0])
    assert m, row[0]
    workload, replicas, bf16, framework, variant, den = m.groups()
    for klass, cell in zip(CLASS_COLUMNS, row[1:], strict=True):
        found = [
            c
            for c in _doc(THREE[klass])["comparisons"]
            if c["pair"] == "tuned_vs_default"
            and c["kind"] == WORKLOADS[workload]
            and c["replicas"] == int(replicas)
            and c["dtype"] == ("bfloat16" if bf16 else "float32")
            and c["num"]["framework"] == FRAMEWORKS[framework]
            and (den is None or c["den"]["variant"] == den)
        ]
        if cell == "-":
            assert not found, (klass, row[0], [c["text"] for c in found])
            continue
        assert len(found) == 1, (klass, row[0])
        (c,) = found
        extra = re.fullmatch(r"(.+?)(?: with `(\+[^`]+)`)?", cell)[2] or ""
        assert cell == _said(c) + (f" with `{extra}`" if extra else ""), (klass, row[0], c["text"])
        assert _variant(c["num"]["variant"]) == variant + extra, (klass, row[0], c["num"]["variant"])


# --- results.md's class table ------------------------------------------------------------------------------------

RESULTS = (DOCS / "results.md").read_text()


def _grid_files() -> list[Path]:
    """The files the README's grid is made from, one a class (parity.output.grid reads its marker; no framework)."""
    from parity.output import grid

    return grid.files_named((ROOT / "README.md").read_text())


@pytest.mark.parametrize("path", _grid_files(), ids=lambda p: p.parent.name)
def test_the_results_class_table_gives_each_grid_files_commit_counts_and_wall_time(path):
    klass = path.parent.name
    line = next(ln for ln in RESULTS.splitlines() if ln.startswith(f"| [`{klass}`]"))
    doc = _doc(path.as_posix())
    checks = doc["checks"]
    passed = sum(c["passed"] is True for c in checks)
    unjudged = sum(c["passed"] is None for c in checks)
    assert f"`{path.name}`, commit {doc['env']['git_commit']}" in line
    assert f"{sum(r['verified'] for r in doc['rows'])} verified; {passed} of {len(checks)} passed" in line
    assert f"{unjudged} not judged" in line
    host = doc["env"].get("host")
    if host:
        assert f"family {host['family']}, model {host['model']}" in line
    readme = (DOCS / f"results/{klass}/README.md").read_text()
    run = next(ln for ln in readme.splitlines() if ln.startswith(f"| `{path.stem}."))
    assert doc["env"]["git_commit"] in run
    wall = re.search(r"\d+ min \d+ s", run.strip("| ").split("|")[-1])[0]
    assert f"| {wall} |" in line, (wall, "the class README's wall time")


# --- quoted comparisons in any page ------------------------------------------------------------------------------


def _quoted(page: str) -> list[tuple[str, tuple]]:
    out = []
    for block in _blocks((DOCS / page).read_text()):
        files = sorted(set(FILE.findall(block)))
        for fig in QUOTED.finditer(block):
            out.append((f"{page}: {fig[0]}", (tuple(files), fig.groups())))
    return out


QUOTES = [
    q
    for page in ("glossary.md", "tuning.md", "results.md", "keras-jax.md", "gaps.md", "pytorch.md")
    for q in _quoted(page)
]


def test_the_pages_quote_comparisons():
    assert len([q for q, _ in QUOTES if q.startswith("glossary.md")]) >= 15


@pytest.mark.parametrize("quote", [q for _, q in QUOTES], ids=[i for i, _ in QUOTES])
def test_each_quoted_comparison_is_in_a_file_its_paragraph_names(quote):
    files, (num, den, ratio, lo, hi, nd) = quote
    assert files, "a quoted figure names its file in its paragraph"
    said = f"{ratio}x ({lo}-{hi}{nd or ''})"
    found = [
        (f, _said(c))
        for f in files
        for c in _doc(f).get("comparisons", ())  # an ops file (benchmarks/op_sums.py) has none
        if c["num"]["variant"] == num and c["den"]["variant"] == den
    ]
    assert found, f"no comparison {num} / {den} in {files}"
    assert said in [s for _, s in found], found


# --- single figures pages quote ----------------------------------------------------------------------------------


def test_the_notebook_schedule_on_a_cpu_is_twice_each_rows_five_epoch_estimate():
    lines = (DOCS / "workloads.md").read_text().splitlines()
    line = next(ln for ln in lines if ln.startswith("| CPU, 2 cores: `zen4`"))
    for framework, tuned in (("tf", False), ("jax", True)):  # TF's `fit`; JAX's best-known float32 row, per class
        variants, minutes = [], []
        for klass in ("zen4", "zen5"):
            (row,) = [
                r
                for r in _doc(f"docs/results/{klass}/cpu-default.json")["rows"]
                if (r["kind"], r["framework"], r["replicas"], r["dtype"]) == ("cnn_train", framework, 1, "float32")
                and (r["tuned"] if tuned else r["variant"] == "fit")
            ]
            variants.append(row["variant"])
            minutes.append(f"{2 * row['est_5_notebook_epochs_s'] / 60:.1f}")
        named = "`fit`" if not tuned else f"JAX's best-known (`{variants[0]}` / `{variants[1]}`)"
        assert f"{named} about {minutes[0]} / {minutes[1]} min" in line


def test_the_comparing_machines_example_is_what_compare_prints(capsys):
    from parity import compare

    fmt = (DOCS / "results-format.md").read_text()
    command = next(ln for ln in fmt.splitlines() if ln.startswith("$ python -m parity.compare "))
    assert compare.main([str(ROOT / f) for f in command.split()[4:]]) == 2  # across machines: no verdict
    out = capsys.readouterr().out
    said = [ln for ln in fmt.splitlines() if ln.startswith("machines differ: OLD is AMD EPYC")]
    assert said[0] == out.splitlines()[0]  # the next is tests/test_machines.py's hand-made pair
    slower = re.search(r"\((\d+) row\(s\) slower beyond 10%, not judged\)", out)[1]
    assert f"The zen5 and zen4 files above: {slower} rows slower beyond 10%" in " ".join(fmt.split())


def test_the_article_comparison_gives_each_classes_conv_time():
    para = next(p for p in RESULTS.split("\n\n") if "2 cores of these classes take" in p)
    for klass in ("zen4", "xeon-avx512bf16", "zen5"):
        (row,) = [
            r
            for r in _doc(THREE[klass])["rows"]
            if (r["kind"], r["framework"], r["variant"], r["replicas"]) == ("conv", "tf", "function", 1)
        ]
        assert f"{row['median_s'] * 1000:.2f} ms (`{klass}`)" in para.replace("\n", " ")


def test_the_notebooks_quick_times_are_the_class_readmes():
    text = (ROOT / "notebooks/parity_colab.ipynb").read_text()
    for wall, klass in re.findall(r"(\d+ min \d+ s) \(`([\w-]+)`\)", text):
        readme = (DOCS / f"results/{klass}/README.md").read_text()
        quick = next(ln for ln in readme.splitlines() if ln.startswith("| `cpu-quick."))
        assert wall in quick, (klass, wall)


# --- a row's median, quoted as `JAX `jit+ynn+thp` 2.434 s` -------------------------------------------------------

MEDIAN = re.compile(r"\b(TF|JAX|Keras-JAX|PyTorch) `([^` ]+)` (\d+(?:\.\d+)?) (s|ms)\b")
LAYER = re.compile(r"\b(TF|JAX|Keras-JAX|PyTorch) `(\w+) (forward|backward)` (\d+\.\d\d) ms\b")  # a per-layer wall time


def _medians(page: str) -> list[tuple[str, tuple]]:
    out = []
    for block in _blocks((DOCS / page).read_text()):
        files = sorted(set(FILE.findall(block)))
        out += [(f"{page}: {m[0]}", (tuple(files), m.groups())) for m in MEDIAN.finditer(block)]
    return out


MEDIANS = _medians("gaps.md") + _medians("tuning.md") + _medians("pytorch.md")


def test_the_gaps_page_quotes_row_medians():
    assert len(MEDIANS) >= 10


@pytest.mark.parametrize("quote", [q for _, q in MEDIANS], ids=[i for i, _ in MEDIANS])
def test_each_quoted_median_is_a_row_of_a_file_its_paragraph_names(quote):
    """'JAX `jit+ynn+thp` 2.434 s': a verified row of that framework and label in a file the paragraph names, its
    median written to the figure's own precision."""
    files, (fw, variant, figure, unit) = quote
    assert files, "a quoted median names its file in its paragraph"
    scale = 1e3 if unit == "ms" else 1.0
    decimals = len(figure.partition(".")[2])
    found = [
        f"{r['median_s'] * scale:.{decimals}f}"
        for f in files
        for r in _doc(f)["rows"]
        if r.get("verified") and r["framework"] == FRAMEWORKS[fw] and r["variant"] == variant
    ]
    assert figure in found, (figure, found)


LAYERS = [
    (f"gaps.md: {m[0]}", (tuple(sorted(set(FILE.findall(block)))), m.groups()))
    for block in _blocks((DOCS / "gaps.md").read_text())
    for m in LAYER.finditer(block)
]


@pytest.mark.parametrize("quote", [q for _, q in LAYERS], ids=[i for i, _ in LAYERS])
def test_each_quoted_layer_time_is_a_profiled_rows_line(quote):
    """'Keras-JAX `pool1 backward` 109.60 ms': a line of a profiled row of that framework in a file the paragraph
    names, its wall time per step or call (as the per-layer table prints it)."""
    files, (fw, layer, pass_, figure) = quote
    assert files, "a quoted layer time names its file in its paragraph"
    found = [
        f"{ln['wall_s'] * 1e3:.2f}"
        for f in files
        for r in _doc(f)["rows"]
        if r["framework"] == FRAMEWORKS[fw]
        for ln in r.get("layers") or []
        if (ln["layer"], ln["pass"]) == (layer, pass_) and "wall_s" in ln
    ]
    assert figure in found, (figure, found)


def test_the_gaps_page_quotes_layer_times():
    assert len(LAYERS) >= 6


# "PyTorch's `aten::lstm` 144.43 ms (forward, 4 ops)": one op name's time and count summed over a profiled call
PASS = "forward|backward|optimizer|other"
OP = re.compile(rf"\b(TF|JAX|Keras-JAX|PyTorch)'s `([^`]+)` (\d+\.\d\d) ms \(({PASS}), (\d+) ops?\)")
SPLIT = re.compile(r"\b(TF|JAX|Keras-JAX|PyTorch): products (\d+\.\d) ms, the rest (\d+\.\d) ms")  # one row's two parts
OPS = [
    (f"gaps.md: {m[0]}", (tuple(sorted(set(FILE.findall(block)))), m.re.pattern, m.groups()))
    for block in _blocks((DOCS / "gaps.md").read_text())
    for m in [*OP.finditer(block), *SPLIT.finditer(block)]
]


@pytest.mark.parametrize("quote", [q for _, q in OPS], ids=[i for i, _ in OPS])
def test_each_quoted_op_sum_is_a_profiled_rows_sum(quote):
    """An op's or a row's summed time in an ops file its paragraph names (benchmarks/op_sums.py wrote it), as said."""
    files, pattern, (fw, *said) = quote
    rows = [r for f in files if f.endswith("-ops.json") for r in _doc(f)["rows"] if r["framework"] == FRAMEWORKS[fw]]
    assert rows, "a quoted op sum names its ops file in its paragraph"
    if pattern == OP.pattern:
        found = [[o["op"], f"{o['seconds'] * 1e3:.2f}", o["pass"], str(o["count"])] for r in rows for o in r["ops"]]
    else:
        found = [[f"{r['products_s'] * 1e3:.1f}", f"{r['rest_s'] * 1e3:.1f}"] for r in rows]
    assert said in found, said


def test_the_gaps_page_quotes_op_sums():
    assert len(OPS) >= 20


def _counts(doc: dict) -> tuple[int, int, int]:
    """(rows verified, checks passed, checks not judged); asserts that every row verified and no check failed."""
    verified = sum(r["verified"] for r in doc["rows"])
    assert verified == len(doc["rows"]) and not any(c["passed"] is False for c in doc["checks"])
    return verified, sum(c["passed"] is True for c in doc["checks"]), sum(c["passed"] is None for c in doc["checks"])


def _wall(log: Path) -> str:
    """'10 min 54 s' from a log's last line, /usr/bin/time's '654.41 s'."""
    seconds = round(float(log.read_text().split()[-2]))
    return f"{seconds // 60} min {seconds % 60} s"


@pytest.mark.parametrize(
    "klass,name",
    [
        ("zen3", "cpu-default"),
        ("zen3", "cpu-full-cnn-x8"),
        ("xeon-amx", "cpu-levers-pytorch-cnn"),
        ("xeon-amx", "cnn-pytorch-cl"),
        ("xeon-amx", "cpu-default"),
        ("xeon-amx", "cpu-default-adapters"),
        ("xeon-amx", "cpu-default-variants"),
        ("xeon-amx", "cpu-default-names"),
        ("xeon-amx", "cpu-default-trained"),
        ("zen4", "cpu-default-trained"),
        ("zen4", "cpu-default-conv32"),
        ("xeon-amx", "cpu-levers-vit"),
        ("xeon-amx", "cpu-levers-lstm"),
    ],
)
def test_a_class_runs_counts_commits_and_wall_times_are_their_files(klass, name):
    """A class README's line for each of these files, its counts, commit and wall time; zen3's default run in the
    README's table of run times, its CNN over 8 replicas (PyTorch by DDP) in docs/pytorch.md."""
    doc = _doc(f"docs/results/{klass}/{name}.json")
    verified, passed, unjudged = _counts(doc)
    text = (DOCS / f"results/{klass}/README.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{name}.{{json,md}}`"))
    assert f"at commit {doc['env']['git_commit']}" in line
    assert line.endswith(f"| {_wall(DOCS / f'results/{klass}/{name}-log.txt')} |")
    said = f"{verified} of {verified} rows verified against float64, {passed} checks passed, {unjudged} not judged"
    assert said in " ".join(text.split())
    if name == "cpu-default":  # the README's table of run times
        readme = (ROOT / "README.md").read_text()
        assert f"AVX2 only | {_wall(DOCS / 'results/zen3/cpu-default-log.txt')} with PyTorch and the ViT |" in readme
    if name == "cpu-full-cnn-x8":
        assert "torch" in {r["framework"] for r in doc["rows"] if r["replicas"] == 8}
        pytorch = " ".join((DOCS / "pytorch.md").read_text().split())
        assert f"{verified} rows verified, {passed} checks passed, {unjudged} not judged" in pytorch


def test_the_pytorch_vit_inference_runs_alone_are_their_file():
    """The xeon-amx README's medians of PyTorch's ViT inference: in the default runs before and after the adapters
    took the model functions, then alone, two runs at each commit in turn, from their files."""
    runs = [json.loads(line) for line in (DOCS / "results/xeon-amx/torch-vit-infer-ab.jsonl").read_text().splitlines()]
    ms = {c: [f"{r['median_s'] * 1e3:.1f}" for r in runs if r["commit"] == c] for c in ("bfe4083", "dc1c933")}
    assert [r["commit"] for r in runs] == ["bfe4083", "dc1c933"] * 2 and all(r["verified"] for r in runs)
    text = " ".join((DOCS / "results/xeon-amx/README.md").read_text().split())
    (a, b), (c, d) = ms["bfe4083"], ms["dc1c933"]
    assert f"it read {a} and {b} ms before, {c} and {d} ms after" in text
    row = {
        name: next(
            r["median_s"] * 1e3
            for r in _doc(f"docs/results/xeon-amx/{name}.json")["rows"]
            if (r["kind"], r["framework"], r["variant"]) == ("vit_infer", "torch", "predict")
        )
        for name in ("cpu-default-names", "cpu-default-trained")
    }
    assert f"({row['cpu-default-trained']:.1f} ms against {row['cpu-default-names']:.1f} ms)" in text


def test_tfs_traced_coverage_with_xlas_ops_is_its_file():
    """The share of its profiled call each TF row of the LSTM holds once XLA's ops are traced, as two docs say it."""
    from parity.judging.layers import coverage

    rows = _doc("docs/results/layers/xeon-amx-lstm-tf-profile-xla.json")["rows"]
    walls = [coverage(r)[0] for r in rows]
    assert {r["variant"] for r in rows} >= {"fit+xla", "predict+xla"} and all(w is not None for w in walls)
    said = f"{round(100 * min(walls))}-{round(100 * max(walls))}% of"
    for doc in ("layers.md", "results/layers/README.md"):
        assert said in " ".join((DOCS / doc).read_text().split()), doc


def test_every_zen4_profiled_rows_coverage_is_its_files():
    """On zen4, the share of its profiled call each row of every workload's best-known run holds in traced wall time,
    and the profiled call against the median, as the two docs say them."""
    from parity.judging.layers import coverage, overhead

    rows = [
        r
        for w in ("cnn", "vit", "lstm", "conv", "matmul")
        for r in _doc(f"docs/results/layers/zen4-{w}-profile-warm.json")["rows"]
        if r.get("layers")
    ]
    walls = [coverage(r)[0] for r in rows]
    assert all(w is not None for w in walls) and all(r["verified"] for r in rows)
    said = f"all {len(rows)} profiled rows"
    for doc in ("layers.md", "results/layers/README.md"):
        text = " ".join((DOCS / doc).read_text().split())
        assert f"{said} of every workload's best-known run hold" in text or f"{said} hold" in text, doc
        assert f"{round(100 * min(walls))}-{round(100 * max(walls))}% of their" in text, doc
    readme = " ".join((DOCS / "results/layers/README.md").read_text().split())
    tf = [w for r, w in zip(rows, walls, strict=True) if r["framework"] == "tf"]
    assert f"TF's rows {round(100 * min(tf))}-{round(100 * max(tf))}%" in readme
    calls = [overhead(r) for r in rows]
    assert f"The profiled call reads {min(calls):.2f}-{max(calls):.2f}x the row's median" in readme
    idle = max(  # the share of a row's wall time with no traced op running, and the row
        (
            sum(ln["wall_s"] for ln in r["layers"] if (ln["layer"], ln["pass"]) == ("other", "idle"))
            / sum(ln["wall_s"] for ln in r["layers"]),
            r["kind"].split("_")[0].upper(),
            r["variant"],
        )
        for r in rows
    )
    assert f"holds more than {round(100 * idle[0])}% of its wall time, the most TF's {idle[1]} `{idle[2]}`" in readme
    for w in ("cnn", "vit", "lstm", "conv", "matmul"):  # each command's wall time, its log's last line
        took = _wall(DOCS / f"results/layers/zen4-{w}-profile-warm-log.txt").replace("0 min ", "")
        assert re.search(rf"--workload {w} [^#]*# {took}\b", readme), w


def test_zen4s_default_run_with_the_conv_on_32_images_is_its_files():
    """Its phases and floor, the conv's phases against the run at 128, TF's conv call and its estimate at 128, the
    parity checks in turn and at once, and the rows compare found slower, as the class README gives them."""
    rp = run_phases()
    klass, now, before = DOCS / "results/zen4", "cpu-default-conv32", "cpu-default-trained"
    new, old = _doc(f"docs/results/zen4/{now}.json"), _doc(f"docs/results/zen4/{before}.json")
    found, earlier = (rp.phases((klass / f"{n}-log.txt").read_text().splitlines()) for n in (now, before))
    text = " ".join((klass / "README.md").read_text().split())

    def mmss(s):
        return f"{round(s) // 60} min {round(s) % 60} s" if s >= 60 else f"{round(s)} s"

    total, least = sum(found.values()), sum(rp.floor(found, new).values())
    assert f"{mmss(total)} from its first stamped line to its last, its floor {mmss(least)}" in text
    conv = [sum(f[f"conv {p}"] for p in ("timed calls", "compiling, first epoch")) for f in (found, earlier)]
    assert f"The conv's phases took {mmss(conv[0])}, where at 128 they took {mmss(conv[1])}" in text
    parity = [mmss(f[f"{w} parity checks"]) for f in (found, earlier) for w in ("cnn", "vit")]
    assert f"the CNN's parity checks took {parity[0]} and the ViT's {parity[1]}, where at once" in text
    assert f"they took {parity[2]} and {parity[3]}" in text

    def ms(doc, kind, fw, variant):
        return next(r for r in doc["rows"] if (r["kind"], r["framework"], r["variant"]) == (kind, fw, variant))

    tf, full = ms(new, "conv", "tf", "function"), ms(old, "conv", "tf", "function")
    assert tf["spec"]["batch"] == 32 and tf["flops"] * 4 == full["flops"]
    said = f"TF's `function` {tf['median_s'] * 1e3:.2f} ms a call, {tf['median_s'] * 4e3:.2f} ms at the article's 128"
    assert said in text and f"the run at 128 measured {full['median_s'] * 1e3:.2f} ms" in text
    results = " ".join((DOCS / "results.md").read_text().split())
    said = f"TF `function` {tf['median_s'] * 4e3:.2f} ms (est.) (`zen4/{now}.json`), where the class's run at 128 "
    assert said + f"measured {full['median_s'] * 1e3:.2f} ms (`zen4/{before}.json`)" in results
    infer = [
        ms(d, "cnn_infer", "torch", v)["median_s"] for d in (new, old) for v in ("predict", "predict+cl+compile+thp")
    ]
    assert (
        "PyTorch's CNN inference {:.0f} and {:.0f} ms against {:.0f} and {:.0f} ms".format(*(1e3 * t for t in infer))
        in text
    )


def test_zen4s_default_run_after_the_adapters_is_its_files():
    """Its phases and floor (benchmarks/run_phases.py on its log), and the three steps compare calls slower, each
    against the class's file before and the profiled runs of the same code, as the class README gives them."""
    rp = run_phases()
    klass = DOCS / "results/zen4"
    new = _doc("docs/results/zen4/cpu-default-trained.json")
    found = rp.phases((klass / "cpu-default-trained-log.txt").read_text().splitlines())
    text = " ".join((klass / "README.md").read_text().split())
    total, least = sum(found.values()), sum(rp.floor(found, new).values())
    for s, said in ((total, "{} from its first stamped line to its last"), (least, "its floor {}")):
        assert said.format(f"{round(s) // 60} min {round(s) % 60} s") in text

    def ms(doc, kind, fw, key="median_s"):
        variant = "fit" if fw == "tf" else "eager"
        return next(r[key] for r in doc["rows"] if (r["kind"], r["framework"], r["variant"]) == (kind, fw, variant))

    old = _doc("docs/results/zen4/cpu-default-vit.json")
    cases = [("lstm_train", "torch", "lstm"), ("vit_train", "tf", "vit"), ("vit_train", "torch", "vit")]
    names = ("PyTorch's LSTM `eager` (", "TF's ViT `fit` (", "`eager` (")
    for (kind, fw, _), before in zip(cases, names, strict=True):
        assert f"{before}{ms(new, kind, fw) * 1e3:.0f} against {ms(old, kind, fw) * 1e3:.0f}" in text
    alone = [f"{ms(_doc(f'docs/results/layers/zen4-{w}-profile-warm.json'), k, fw) * 1e3:.0f}" for k, fw, w in cases]
    assert f"which read {alone[0]}, {alone[1]} and {alone[2]} ms in the profiled runs" in text
    gone, came = ([ms(doc, k, fw) * 1e3 for k, fw, _ in cases] for doc in (old, new))
    nearer = [abs(float(a) - b) < abs(float(a) - c) for a, b, c in zip(alone, gone, came, strict=True)]
    assert nearer[:2] == [True, True] and float(alone[2]) > max(gone[2], came[2])
    assert "the first two nearer the file before's, PyTorch's ViT slower than either" in text
    epochs = ms(new, "lstm_train", "torch", key="times_s")
    assert f"its epochs rising from {epochs[0] * 1e3:.0f} to {max(epochs) * 1e3:.0f} ms" in text


def test_the_zen5_pytorch_matmul_gap_is_its_files():
    """docs/gaps.md's zen5 matmul: the default run's rows and ratio, and each setting's `torch.mm` and NumPy's
    product from benchmarks/torch_matmul_blas.py's records."""
    text = " ".join((DOCS / "gaps.md").read_text().split())
    doc = _doc("docs/results/zen5/cpu-default.json")
    ms = {
        r["framework"]: r["median_s"] * 1e3
        for r in doc["rows"]
        if (r["kind"], r["dtype"], r["variant"]) in {("matmul", "float32", "eager"), ("matmul", "float32", "function")}
    }
    (c,) = [
        c for c in doc["comparisons"] if c["pair"] == "torch_vs_tf" and (c["kind"], c["dtype"]) == ("matmul", "float32")
    ]
    lo, hi = c["ci95"]
    said = f"PyTorch `eager` {ms['torch']:.2f} ms against TF `function` {ms['tf']:.2f} ms, `eager` / `function` "
    assert said + f"{c['ratio']:.2f}x ({lo:.2f}-{hi:.2f})" in text
    rows = [r for r in doc["rows"] if (r["kind"], r["dtype"]) == ("matmul", "float32")]
    fast = min(rows, key=lambda r: r["median_s"])
    said = f"{ms['torch'] / (fast['median_s'] * 1e3):.2f}x the fastest framework's time (JAX `{fast['variant']}` "
    assert fast["framework"] == "jax" and f"{said}{fast['median_s'] * 1e3:.2f} ms)" in text
    recs = {r["setting"]: r for r in map(json.loads, (DOCS / "results/zen5/torch-matmul-blas.jsonl").open())}
    mm = {k: f"{r['torch_mm_ms']:.1f} ms" for k, r in recs.items()}
    assert f"{mm['default']} as it is, {mm['MKL_ENABLE_INSTRUCTIONS=AVX512']} with `MKL_ENABLE_INSTRUCTIONS" in text
    assert (
        f"{mm['MKL_DEBUG_CPU_TYPE=5']} with `MKL_DEBUG_CPU_TYPE=5`" in text and f"and {mm['compiled']} compiled" in text
    )
    numpy = sorted(r["numpy_ms"] for r in recs.values())
    assert f"NumPy's product (OpenBLAS) in the same processes took {numpy[0]:.1f}-{numpy[-1]:.1f} ms" in text
    assert {r["blas"] for r in recs.values()} == {"mkl"} and all(
        "oneMKL 2024.0 Update 2" in r["mkl"] for r in recs.values()
    )


def test_zen5s_cnn_rows_from_the_default_to_the_full_run_are_their_files():
    """The zen5 README's CNN rows of TF and PyTorch in the default run, then in `--preset full`, and how far each
    framework's moved."""
    text = " ".join((DOCS / "results/zen5/README.md").read_text().split())
    runs = [_doc(f"docs/results/zen5/{n}.json") for n in ("cpu-default", "cpu-full")]

    def ms(doc, fw, kind, variant):
        key = (kind, {"TF": "tf", "PyTorch": "torch"}[fw], variant, 1)
        (r,) = [r for r in doc["rows"] if (r["kind"], r["framework"], r["variant"], r["replicas"]) == key]
        return r["median_s"] * 1e3

    for fw, kind, variant in [
        ("TF", "cnn_train", "fit+spe"),
        ("TF", "cnn_infer", "predict"),
        ("PyTorch", "cnn_train", "eager+cl+thp"),
        ("PyTorch", "cnn_infer", "predict+cl+compile+thp"),
    ]:
        before, after = (ms(doc, fw, kind, variant) for doc in runs)
        assert f"{fw} `{variant}` {before:.2f} ms, then {after:.2f} ms" in text
    # how far every one-device CNN row of each framework in both files moved, not only the rows quoted
    moved = {}
    for fw in ("TF", "PyTorch"):
        rows = [
            {
                (r["kind"], r["variant"])
                for r in doc["rows"]
                if r["kind"].startswith("cnn_")
                and r["replicas"] == 1
                and r["framework"] == {"TF": "tf", "PyTorch": "torch"}[fw]
            }
            for doc in runs
        ]
        moved[fw] = [ms(runs[1], fw, *k) / ms(runs[0], fw, *k) for k in rows[0] & rows[1]]
    assert len(moved["TF"]) >= 3 and max(abs(m - 1) for m in moved["TF"]) <= 0.03
    assert min(moved["PyTorch"]) > 1, "the sentence says every PyTorch row was slower"
    assert f"PyTorch's by {min(moved['PyTorch']):.2f}x to {max(moved['PyTorch']):.2f}x" in text
