"""A run's first screen (parity.output.screen): the answer within WIDTH columns and about 40 lines, the verdict's
counts, every failure in full, what was not measured; from shipped results files (no framework imported)."""

import copy
import json
from pathlib import Path

import pytest

from parity.output import screen
from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parents[1]
# the widest shipped file (1 and 8 replicas, three frameworks, both number formats) and a one-device one
FULL = ROOT / "docs/results/xeon-amx/cpu-default.json"


@pytest.fixture(scope="module")
def doc():
    return current_names(json.loads(FULL.read_text()))  # older files: today's names


def test_the_answer_fits_the_first_screen(doc):
    lines = screen.first_screen(doc).splitlines()
    assert len(lines) <= 40
    assert max(map(len, lines)) <= screen.WIDTH, max(lines, key=len)
    groups = {(r["kind"], r["replicas"], r.get("dtype") or "float32") for r in doc["rows"] if r["verified"]}
    assert sum(ln.split("  ")[0].strip() in {f"{w} x{n}" for w, n, _ in groups} for ln in lines) == len(groups)


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
    "s, shown", [(0.09348, "93.5 ms"), (0.27028, "270 ms"), (1.4213, "1.42 s"), (0.00012, "0.12 ms")]
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
    jax_env = next(r["config_env"] for r in doc["rows"] if r["framework"] == "jax" and r.get("config_env"))
    d = copy.deepcopy(doc)
    assert not screen.same_runtime(d["rows"])  # a file from before Keras on JAX had settings
    tuned = copy.deepcopy(next(r for r in d["rows"] if r["framework"] == "keras-jax"))
    d["rows"].append({**tuned, "variant": tuned["variant"] + "+ynn", "config_env": {"XLA_FLAGS": "--other"}})
    assert not screen.same_runtime(d["rows"])  # a setting of its own: no common runtime to speak of
    d["rows"].append({**tuned, "variant": tuned["variant"] + "+ynn+thp", "config_env": dict(jax_env)})
    assert "the same runtime as JAX's" in screen.first_screen(d).splitlines()[-1 - len(screen.not_measured(d["env"]))]


def test_four_frameworks_split_the_answer_into_times_then_ratios(doc):
    """Four frameworks' times and three ratios with intervals are wider than the screen: two grids, each within it,
    each naming every group once."""
    four = copy.deepcopy(doc)
    four["rows"] += [{**r, "framework": "torch"} for r in doc["rows"] if r["framework"] == "jax"]
    lines = screen.first_screen(four).splitlines()
    assert max(map(len, lines)) <= screen.WIDTH, max(lines, key=len)
    heads = [ln.split() for ln in lines if ln.startswith("workload ")]
    assert heads == [["workload", "format", "TF", "JAX", "Keras-JAX", "PyTorch"],
                     ["workload", "format", "JAX/TF", "Keras-JAX/TF", "PyTorch/TF"]]  # fmt: skip
    groups = {(r["kind"], f"x{r['replicas']}", screen.FORMATS[r.get("dtype") or "float32"]) for r in doc["rows"]}
    named = [tuple(ln.split()[:3]) for ln in lines]
    assert all(named.count(g) == 2 for g in groups), groups
