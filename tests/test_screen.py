"""A run's first screen (parity.output.screen): the answer at each framework's fastest and out of the box within WIDTH
columns and about 45 lines, the verdict's counts, every failure in full, what was not measured; from shipped results
files (no framework imported)."""

import copy
import json
import re
from pathlib import Path

import pytest

from parity.common.frameworks import short
from parity.judging import summary
from parity.output import grid, screen
from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parents[1]
# a default CPU run: four frameworks, five workloads, both number formats at one device
FULL = ROOT / "docs/results/xeon-amx/cpu-default.json"
LINES = 45  # the first screen's lines, about (a few dozen: docs/STYLE's first screen)


@pytest.fixture(scope="module")
def doc():
    return current_names(json.loads(FULL.read_text()))  # older files: today's names


def test_the_answer_fits_the_first_screen(doc):
    assert len(summary.frameworks_in(doc["rows"])) == 4 and len(summary.groups(doc["rows"])) >= 13
    lines = screen.first_screen(doc).splitlines()
    assert len(lines) <= LINES
    assert max(map(len, lines)) <= screen.WIDTH, max(lines, key=len)
    named = [tuple(ln.split()[:3]) for ln in lines]
    for kind, n, dtype in summary.groups(doc["rows"]):
        assert named.count((kind, f"x{n}", screen.FORMATS[dtype])) == 2  # its times, then its ratios
    assert "then out of the box: each one's fastest untuned variant" in "\n".join(lines)


@pytest.mark.parametrize("left_out", [(), ("tf",), ("tf", "jax")])
def test_the_screen_fits_whichever_framework_is_the_reference(doc, left_out):
    """Its lines name the reference ('x/Keras-JAX: its time over Keras-JAX's'): within WIDTH for the longest name."""
    d = copy.deepcopy(doc)
    d["rows"] = [r for r in d["rows"] if r["framework"] not in left_out]
    lines = screen.first_screen(d).splitlines()
    ref = short(summary.frameworks_in(d["rows"])[0])
    assert any(ln.startswith(f"x/{ref}: its fastest time over {ref}'s fastest") for ln in lines)
    assert len(lines) <= LINES and max(map(len, lines)) <= screen.WIDTH, max(lines, key=len)


def test_each_ratio_is_at_the_fastest_then_out_of_the_box_as_the_readmes_grid_gives_it(doc):
    """A user checks the README's grid ('1.13x / 3.01x': fastest, then out of the box) against their own first screen:
    each float32 cell at one device carries the grid's out-of-the-box figure after its fastest's interval."""
    _, body = screen.fastest_lines(doc, plain=True)
    fws = summary.frameworks_in(doc["rows"])
    seen = 0
    for line in body:
        kind, n = line[0].rsplit(" x", 1)
        for fw, shown in zip(fws[1:], line[2 + len(fws) :], strict=True):
            if line[1] == "bf16":
                assert " / " not in shown  # bfloat16 is a lever: no framework has it out of the box
            elif n == "1":
                best, plain = grid.cell(doc["rows"], kind, "float32", fw, fws[0]).split(" / ")
                assert re.fullmatch(
                    rf"{re.escape(best.removesuffix(grid.SAME))} \(\d\.\d\d-\d\.\d\d\) / {re.escape(plain)}", shown
                ), shown
                seen += 1
    float32 = [g for g in summary.groups(doc["rows"]) if g[1:] == (1, "float32")]
    assert seen == (len(fws) - 1) * len(float32) > 0  # every framework over TF on each float32 row kind, one device


def test_out_of_the_box_is_each_frameworks_fastest_untuned_row(doc):
    rows = doc["rows"]
    tf, jax = (summary.fastest(rows, "cnn_train", 1, "float32", fw, tuned=False) for fw in ("tf", "jax"))
    assert (
        screen.plain_ratio(rows, "cnn_train", 1, "float32", "jax", "tf") == f"{jax['median_s'] / tf['median_s']:.2f}x"
    )
    lone = copy.deepcopy(doc)
    for r in lone["rows"]:
        if r["kind"] == "cnn_train" and r["framework"] == "jax":
            r["tuned"] = True  # JAX not measured out of the box: its fastest alone
    assert screen.plain_ratio(lone["rows"], "cnn_train", 1, "float32", "jax", "tf") is None
    line = next(b for b in screen.fastest_lines(lone, plain=True)[1] if b[:2] == ("cnn_train x1", "f32"))
    assert re.fullmatch(r"\d\.\d\dx \(\d\.\d\d-\d\.\d\d\)", line[2 + 4]), line  # JAX/TF: after 4 times
    tie = copy.deepcopy(doc)
    for r in tie["rows"]:
        if (r["kind"], r["framework"], r["variant"]) == ("cnn_train", "jax", jax["variant"]):
            r["times_s"], r["median_s"], r["rounds"] = list(tf["times_s"]), tf["median_s"], tf.get("rounds")
    assert screen.plain_ratio(tie["rows"], "cnn_train", 1, "float32", "jax", "tf") == "1.00x" + screen.SAME
    assert screen.SAME == grid.SAME  # the README's mark


def test_the_page_keeps_its_ratios_at_the_fastest_alone(doc):
    """results.html's summary (parity.output.page) reads fastest_lines without `plain`: one ratio a cell."""
    _, body = screen.fastest_lines(doc)
    assert body and not any(" / " in cell for line in body for cell in line)


def test_the_verdict_counts_rows_and_checks(doc):
    said = screen.verdict(doc)
    checks = doc["checks"]
    passed = sum(c["passed"] is True for c in checks)
    assert said == (
        f"verdict: {len(doc['rows'])} of {len(doc['rows'])} rows verified against float64; {passed} checks passed, "
        f"0 failed, {len(checks) - passed} not judged"
    )


def test_a_failure_is_printed_in_full(doc):
    bad = copy.deepcopy(doc)
    check = next(c for c in bad["checks"] if c["check"].startswith("trajectory loss"))
    check["passed"], check["detail"] = False, "a detail " + "x" * 200
    row = bad["rows"][0]
    row["verified"], row["invalid_reason"] = False, "output differs from float64 by 1e-1"
    out = screen.first_screen(bad)
    assert f"FAIL [{check['workload']} x{check['replicas']}] {check['check']}: " in out
    assert "a detail " + "x" * 200 in out  # not cut to the screen's width
    assert f"INVALID: {row['kind']} {row['framework']} {row['variant']} x{row['replicas']}: output differs" in out
    assert "1 failed" in out


@pytest.mark.parametrize(
    "variant, shown",
    [
        ("fit", "fit"),
        ("jit+bf16+pool+bias+dgrad+wgrad+masks+ynn+onednn+thp", "jit*"),
        ("data_parallel+bf16", "data_parallel*"),
        ("a_very_long_code_path", "a_very_long.."),
    ],
)
def test_a_label_is_its_code_path_and_a_mark_for_its_levers(variant, shown):
    assert screen.short_label(variant) == shown


@pytest.mark.parametrize(
    "s, shown",
    [(0.09348, "93.5 ms"), (0.27028, "270 ms"), (0.9996, "1 s"), (1.4213, "1.42 s"), (0.00012, "0.12 ms")],
)
def test_times_have_three_significant_figures(s, shown):
    assert screen.compact_time(s) == shown


def test_what_was_not_measured_is_on_the_first_screen(doc):
    d = copy.deepcopy(doc)
    d["env"]["notes"] = ["'+bf16' variants not run (no native bfloat16): reason; more", "cnn: something else"]
    d["env"]["skipped"] = [{"framework": "tf", "reason": "tf is not installed"}]
    out = screen.first_screen(d)
    assert "'+bf16' variants not run (no native bfloat16): reason" in out and "something else" not in out
    assert "not run: tf: tf is not installed" in out


def test_a_rounds_progress_lines_give_failures_in_full_and_passes_as_counts():
    from types import SimpleNamespace

    from parity.workloads.trained import log_checks

    def check(name, passed):
        return {"check": name, "passed": passed, "figures": {"tf_vs_jax": 1e-3}, "tolerance": 1e-2, "detail": "why"}

    rows = [check("lstm forward h", True), check("lstm trajectory loss (a vs b)", True)]
    rows += [check("lstm trajectory params (a vs c)", False), check("lstm gradients", True)]
    said = []
    log_checks(SimpleNamespace(verbose=False), lambda cfg, line: said.append(line), "lstm", 1, rows)
    assert said == [
        "  FAIL lstm trajectory params (a vs c): tf_vs_jax 1.00e-03 (tolerance 0.01); why",
        "  lstm x1: 3 checks passed (forward 1, trajectory 1, gradients 1; each in results.md)",
    ]
    said.clear()
    log_checks(SimpleNamespace(verbose=True), lambda cfg, line: said.append(line), "lstm", 1, rows)
    assert len(said) == 4 and said[0].startswith("  PASS lstm forward h: ")


def test_keras_on_jax_with_jaxs_settings_is_said_under_the_answer(doc):
    """Where Keras on JAX's tuned rows ran with a setting JAX's rows ran with, the screen says they share a runtime;
    not where they did not."""
    jax_env = next(r["setting_env"] for r in doc["rows"] if r["framework"] == "jax" and r.get("setting_env"))
    d = copy.deepcopy(doc)
    for r in d["rows"]:
        if r["framework"] == "keras-jax":
            r["setting_env"] = {}  # as in a file from before Keras on JAX had settings
    assert not screen.same_runtime(d["rows"])
    tuned = copy.deepcopy(next(r for r in d["rows"] if r["framework"] == "keras-jax"))
    d["rows"].append({**tuned, "variant": tuned["variant"] + "+ynn", "setting_env": {"XLA_FLAGS": "--other"}})
    assert not screen.same_runtime(d["rows"])  # a setting of its own: no common runtime to speak of
    d["rows"].append({**tuned, "variant": tuned["variant"] + "+ynn+thp", "setting_env": dict(jax_env)})
    assert "the same runtime as JAX's" in screen.first_screen(d).splitlines()[-1 - len(screen.not_measured(d["env"]))]


def test_four_frameworks_split_the_answer_into_times_then_ratios(doc):
    """Four frameworks' times and three ratios, each at its fastest and out of the box, are wider than the screen: two
    grids, each under the lines that say how to read it."""
    lines = screen.first_screen(doc).splitlines()
    at = [i for i, ln in enumerate(lines) if ln.startswith("kind ")]
    heads = [lines[i].split() for i in at]
    assert heads == [["kind", "format", "TF", "JAX", "Keras-JAX", "PyTorch"],
                     ["kind", "format", "JAX/TF", "Keras-JAX/TF", "PyTorch/TF"]]  # fmt: skip
    assert lines[at[0] - 1].startswith("Each framework's fastest verified configuration: median per call")
    assert lines[at[1] - 2].startswith("x/TF: its fastest time over TF's fastest, with a 95% interval")
    assert lines[at[1] - 1].startswith("then out of the box: each one's fastest untuned variant (~: no difference")
