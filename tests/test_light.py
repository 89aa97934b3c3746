"""A model on one page (parity.api.light, docs/your-workload.md): its record refuses what it cannot judge; its
example (examples/parity-dwsep, a depthwise-separable CNN in JAX and PyTorch) passes every check against JAX's
float64 run; and each porting bug planted in its PyTorch copy is caught and named by framework and by the first
block it reaches (or, where the weights do not fit, by the weight). The same naming on the ViT's full road for
LayerNorm's epsilon and GELU's form, which the light road's derived bounds do not cover."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from parity.api.light import Light, check_shapes
from parity.api.vit import VitArchitecture
from parity.common import frameworks
from parity.judging.judge import by_checks
from parity.record.rows import Row
from parity.workloads.trained.model_checks import _first_to_leave

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "parity-dwsep" / "parity_dwsep"
WEIGHTS = {"dense.kernel": (784, 10), "dense.bias": (10,)}


# ---- the record and the lines it gives (no framework imported) ----


@pytest.mark.parametrize(
    "blocks, weights, said",
    [
        (("conv",), WEIGHTS, "ending with 'logits'"),
        (("logits", "probs"), WEIGHTS, "ending with 'logits'"),
        (("a", "a", "logits"), WEIGHTS, "distinct"),
        (("logits",), {}, "no weights"),
        (("logits",), {"kernel": (3,)}, "'<layer>.<field>'"),
        (("logits",), {"dense.kernel": (0, 10)}, "positive"),
    ],
)
def test_a_record_it_cannot_judge_is_refused_in_one_line(blocks, weights, said):
    with pytest.raises(ValueError, match=said):
        Light("bad_record", blocks, weights)


def test_the_example_is_one_page():
    """The issue's target: the depthwise-separable CNN in JAX and PyTorch in at most 120 lines and 3 files."""
    files = sorted(EXAMPLE.glob("*.py"))
    assert [f.name for f in files] == ["__init__.py", "jax_impl.py", "torch_impl.py"]
    lines = sum(len(f.read_text().splitlines()) for f in files)
    assert lines <= 120 and f"three files, {lines} lines" in (ROOT / "docs" / "your-workload.md").read_text()


def test_a_weight_that_does_not_fit_is_named_with_the_first_one_off():
    light = Light("fit_check", ("logits",), {"a.kernel": (3, 3, 1, 16), "a.bias": (16,), "b.kernel": (16, 10)})
    check_shapes(light, [(3, 3, 1, 16), (16,), (16, 10)], "PyTorch")
    with pytest.raises(ValueError, match=r"weight 1 \(b.weight\) is \(16, 10\).* declares a.bias \(16,\)"):
        check_shapes(light, [(3, 3, 1, 16), (16, 10)], "PyTorch", ["a.weight", "b.weight"])  # a missing bias
    with pytest.raises(ValueError, match=r"weight 0 is \(3, 3, 16, 16\).* declares a.kernel \(3, 3, 1, 16\)"):
        check_shapes(light, [(3, 3, 16, 16), (16,), (16, 10)], "PyTorch")  # a depthwise conv of groups=1


def test_the_bounds_numerics_derived_md_quotes_are_its_files():
    """docs/numerics-derived.md's figures of the example's quick run, read from the file it names."""
    import json

    doc = json.loads((ROOT / "docs" / "results" / "xeon-amx" / "dwsep-quick.json").read_text())
    forward = {c["check"].split()[-1]: c for c in doc["checks"] if " forward " in c["check"]}
    page = (ROOT / "docs" / "numerics-derived.md").read_text()
    worst = max(v for c in forward.values() for k, v in c["figures"].items() if k.endswith("_vs_f64"))
    said = f"{forward['conv']['tolerance']:.1e} at the first convolution to {forward['logits']['tolerance']:.1e}"
    assert said.replace("e-05", "e-5").replace("e-02", "e-2") in page
    assert f"errors of at most {worst:.1e}".replace("e-07", "e-7") in page
    assert all(c["passed"] for c in doc["checks"] if c["passed"] is not None)


def _printed(text: str) -> tuple[float, float]:
    """A time as printed ('1.23 s', '72.5 ms') in seconds, and half its last digit's unit (its rounding)."""
    number, unit = text.split()
    scale = {"s": 1.0, "ms": 1e-3}[unit]
    digits = len(number.split(".")[1]) if "." in number else 0
    return float(number) * scale, 0.5 * 10.0**-digits * scale


def test_the_speed_your_workload_md_quotes_is_its_files():
    """docs/your-workload.md's depthwise table and ratios, each median read from the file it names."""
    import json
    import re

    doc = json.loads((ROOT / "docs" / "results" / "xeon-amx" / "dwsep-levers.json").read_text())
    median = {(r["framework"], r["variant"]): r["median_s"] for r in doc["rows"]}
    page = (ROOT / "docs" / "your-workload.md").read_text()
    label = {"JAX": frameworks.JAX, "PyTorch": frameworks.TORCH}
    cells = re.findall(r"\| (JAX|PyTorch) `([\w+]+)` \| ([\d.]+ m?s) ", page)
    assert len(cells) == 8
    for fw, variant, time in cells:
        value, rounding = _printed(time)
        assert abs(median[(label[fw], variant)] - value) <= rounding, (fw, variant, time)
    jit, shifts, eager = (median[k] for k in (("jax", "jit"), ("jax", "jit+shifts"), ("torch", "eager")))
    assert f"{jit / shifts:.1f} times faster in training, still\n{shifts / eager:.1f} times" in page


def test_the_page_quotes_the_example_as_it_is():
    """docs/your-workload.md's python blocks are the example's own lines, and its tree names its files."""
    import re

    text = (ROOT / "docs" / "your-workload.md").read_text()
    sources = "\n".join(f.read_text() for f in sorted(EXAMPLE.glob("*.py")))
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 3 and all(b in sources for b in blocks)
    tree = re.search(r"```\nexamples/parity-dwsep/parity_dwsep/\n(.*?)```", text, flags=re.S)[1]
    assert set(re.findall(r"^\s*(\S+\.py)\s", tree, flags=re.M)) == {p.name for p in EXAMPLE.glob("*.py")}


def test_the_frameworks_a_package_has_no_module_for_are_one_line():
    from parity.output.screen import not_measured

    skipped = [{"framework": fw, "reason": "no adapter for dwsep"} for fw in ("tf", "keras-jax")]
    assert not_measured({"skipped": skipped}) == ["not run: tf, keras-jax: no adapter for dwsep"]


def test_framework_lists():
    assert frameworks.parse("all") == frameworks.KEYS
    assert frameworks.chosen("torch,jax", False) == ((frameworks.JAX, frameworks.TORCH), [])
    with pytest.raises(ValueError, match="'foo'"):
        frameworks.parse("jax,foo")


def _rows(blocks: list[tuple[str, dict[str, float], float]]) -> list[dict]:
    return [{"check": f"forward {b}", "figures": f, "tolerance": t, "detail": ""} for b, f, t in blocks]


def test_each_framework_is_named_once_at_the_first_block_it_leaves():
    rows = _first_to_leave(
        _rows(
            [
                ("conv", {"jax_vs_f64": 1e-7, "torch_vs_f64": 1e-7}, 1e-5),
                ("dw1", {"jax_vs_f64": 1e-7, "torch_vs_f64": 1.07}, 4e-5),
                ("pw1", {"jax_vs_f64": 1e-3, "torch_vs_f64": 0.9}, 2e-4),
            ]
        ),
        ["jax", "torch"],
    )
    assert rows[0]["detail"] == "" and "leaves" not in rows[0]
    assert rows[1]["detail"].startswith("PyTorch leaves float64 at block dw1 (1.07 against a bound of 4e-05)")
    assert rows[1]["leaves"] == ["torch"] and rows[2]["leaves"] == ["jax"]
    assert rows[2]["detail"].startswith("JAX leaves float64 at block pw1") and "PyTorch" in rows[2]["detail"]


def test_a_training_row_whose_framework_fails_a_float64_check_is_not_verified():
    def row(fw: str, kind: str) -> Row:
        return Row(kind=kind, framework=fw, variant="v", replicas=1, device="cpu", precision="default", verified=True)

    rows = [row("torch", "m_train"), row("jax", "m_train"), row("torch", "m_infer"), row("torch", "other_train")]
    check = {"workload": "m", "check": "m forward dw1", "figures": {"jax_vs_f64": 1e-7, "torch_vs_f64": 1.07}}
    by_checks(rows, [{**check, "tolerance": 4e-5, "passed": False}])
    assert [r.verified for r in rows] == [False, True, True, True]
    assert "m forward dw1: 1.07 against a bound of 4e-05" in rows[0].invalid_reason


# ---- the example and its planted bugs: JAX and PyTorch in this process, JAX's float64 run in a child ----

SAME = 'self.dw1(F.pad(out["conv"], SAME_STRIDE_2))'
BUGS = {  # name: (PyTorch's line, the bug in its place), what the failure names
    "symmetric_padding": ((SAME, 'self.dw1(F.pad(out["conv"], (1, 1, 1, 1))[:, :, :-1, :-1])'), "block dw1"),
    "dw_kernel_transposed": (
        (SAME, 'F.conv2d(F.pad(out["conv"], SAME_STRIDE_2), self.dw1.weight.mT, self.dw1.bias, 2, groups=16)'),
        "block dw1",
    ),
    "groups_1": (("Conv2d(16, 16, 3, stride=2, groups=16)", "Conv2d(16, 16, 3, stride=2)"), "declares dw1.kernel"),
    "missing_bias": (("nn.Conv2d(16, 32, 1)", "nn.Conv2d(16, 32, 1, bias=False)"), "declares pw1.bias"),
    "dropout_in_inference": (
        ('out["pool"] = out["pw2"].mean((2, 3))', 'out["pool"] = F.dropout(out["pw2"].mean((2, 3)), 0.5, True)'),
        "block pool",
    ),
}  # fmt: skip


def _plant(folder: Path, name: str, change: tuple[str, str] | None) -> None:
    """The example copied as package `name` (its workload named so too), PyTorch's line replaced by the bug."""
    shutil.copytree(EXAMPLE, folder / name)
    init = folder / name / "__init__.py"
    init.write_text(init.read_text().replace('"dwsep"', f'"{name}"'))
    if change:
        path = folder / name / "torch_impl.py"
        assert change[0] in path.read_text(), change[0]
        path.write_text(path.read_text().replace(*change, 1))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A folder on the path holding the example (`dwsep_ok`) and each bug in its own package."""
    folder = tmp_path_factory.mktemp("planted")
    _plant(folder, "dwsep_ok", None)
    for name, (change, _) in BUGS.items():
        _plant(folder, f"dwsep_{name}", change)
    import copy

    import frameworks_setup  # noqa: F401 (the frameworks started as every test process starts them, before any)

    import parity.workloads as wl
    from parity.api import adapters, light
    from parity.workloads import plugins
    from parity.workloads.trained import light as trained_light

    # every registry a plug-in's loading adds to, and the variables it sets, put back after (as test_plugins' site)
    lists = (wl.WORKLOADS, wl.PLUGINS, wl.PLUGIN_ERRORS, adapters.PLUGGED, light.LIGHTS, trained_light.MODELS)
    saved, before = [copy.deepcopy(x) if x is adapters.PLUGGED else copy.copy(x) for x in lists], set(sys.modules)
    env = {k: os.environ.get(k) for k in ("PYTHONPATH", plugins.ENV)}
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env["PYTHONPATH"]) if p)  # the float64 child's
    yield folder
    sys.path.remove(str(folder))
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    for name in set(sys.modules) - before:
        del sys.modules[name]
    for live, old in zip(lists, saved, strict=True):
        live.clear()
        live.update(old) if isinstance(live, dict) else live.extend(old)
    adapters.listed.cache_clear()


def test_the_example_passes_every_check_against_float64(planted):
    from parity import check

    verdict = check.numerics("dwsep_ok", (frameworks.JAX, frameworks.TORCH))
    assert verdict, verdict.failures
    assert len(verdict.checks) == 8 + 2  # every block (7 and the softmax), the loss, the gradients
    assert all(c["oracle"] == "JAX float64 (x64)" for c in verdict.checks)


@pytest.mark.parametrize("bug", BUGS)
def test_a_planted_bug_is_caught_and_named(planted, bug):
    from parity import check

    verdict = check.numerics(f"dwsep_{bug}", (frameworks.JAX, frameworks.TORCH))
    assert not verdict
    first, named = verdict.failures[0], BUGS[bug][1]
    assert "PyTorch" in first and named in first, verdict.failures
    if named.startswith("block"):
        assert verdict.leaves == {frameworks.TORCH: named.split()[1]}


def test_a_run_times_both_and_does_not_verify_the_training_row_of_a_framework_that_fails(planted):
    """The whole harness on the example and its padding bug at once (--quick, JAX and PyTorch): the example's rows all
    verified and its checks passed; the bug's PyTorch training row not verified, saying which check it fails."""
    from parity import check

    flags = ("--quick", "--framework", "jax,torch", "--replicas", "1", "--data", "synthetic", "--budget", "0")
    verdict = check.run(["dwsep_ok", "dwsep_symmetric_padding"], *flags, "--reps", "2")
    ok = [r for r in verdict.rows if r["kind"].startswith("dwsep_ok")]
    assert len(ok) == 4 and all(r["verified"] for r in ok)
    assert all(c["passed"] is not False for c in verdict.checks if c["workload"] == "dwsep_ok")
    bad = {(r["kind"], r["framework"]): r for r in verdict.rows if r["kind"].startswith("dwsep_symmetric")}
    torch_row = bad[("dwsep_symmetric_padding_train", frameworks.TORCH)]
    assert not torch_row["verified"] and "forward dw1" in torch_row["invalid_reason"]
    assert bad[("dwsep_symmetric_padding_train", frameworks.JAX)]["verified"]
    assert verdict.leaves == {frameworks.TORCH: "dw1"}
    assert "PyTorch/JAX" in verdict.screen and "verdict:" in verdict.screen  # the speed table, as printed


# ---- the ViT (the full road, its hand-derived bounds): LayerNorm's epsilon and GELU's form, named alike ----


UNDONE = {  # the torch_impl.vit name the model reads, PyTorch's other choice put back
    "layernorm epsilon 1e-3 (the ViT's 1e-6)": ("LN_EPSILON", 1e-3),
    "gelu's tanh form (the ViT's erf)": ("_gelu", "tanh"),
}


@pytest.mark.parametrize("name, value", UNDONE.values(), ids=UNDONE)
def test_a_vit_convention_undone_is_named_at_its_first_block(name, value, monkeypatch):
    import frameworks_setup  # noqa: F401 (the frameworks started as every test process starts them, before any)
    import torch

    import jax_impl
    import torch_impl
    from parity.workloads.trained import model_checks
    from parity.workloads.vit import MODEL
    from torch_impl import vit

    arch = VitArchitecture(dim=8, depth=1, heads=2, mlp=16)
    rng = np.random.default_rng(1)  # every array drawn; LayerNorm's gammas about 1, the embeddings small (sd 0.03)
    w = [
        ((1.0 if t.field == "gamma" else 0.0) + rng.normal(0, 0.03 if "embed" in t.layer else 0.2, t.shape)).astype(
            np.float32
        )
        for t in arch.weights
    ]
    x = rng.integers(0, 256, (4, 28, 28, 1)).astype(np.float32)
    sizes, saved = (arch.dim, arch.depth, arch.heads, arch.mlp), {}
    for fw, impl in ((frameworks.JAX, jax_impl), (frameworks.TORCH, torch_impl)):
        if fw == frameworks.TORCH:
            monkeypatch.setattr(vit, name, (lambda: torch.nn.GELU(approximate="tanh")) if value == "tanh" else value)
        a = impl.adapter("vit")
        saved[fw] = {f"forward/{k}": v for k, v in a.forward_layers(a.build_with(w, *sizes), x).items()}
    rows = model_checks.forward(MODEL, saved, w, x, "cpu", "default")
    left = [r for r in rows if r.get("leaves")]
    assert left and left[0]["leaves"] == [frameworks.TORCH], [r["detail"] for r in rows]
    assert left[0]["detail"].startswith("PyTorch leaves float64 at block"), left[0]["detail"]
