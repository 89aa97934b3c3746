"""docs/numerics.md's figures are those of the files it names. Its table of what the shipped runs measured, cell by
cell: each figure the worst of its check over the five classes' default runs at the precision printed, held by the
class the cell names, and each tolerance the files'. Then the figures its prose quotes from those files and from
docs/results/numerics/, h200/, tpu-v5e/, xeon-avx512/ and zen4/: each sentence rendered from its file and found in
the page as written. No framework is imported."""

import json
import re
from functools import cache
from pathlib import Path

import pytest

from parity.output.loading import current_names
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance
from parity.workloads.trained.rounds import PARITY_BATCH

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs/numerics.md").read_text() + (ROOT / "docs/numerics-models.md").read_text()  # the LSTM's
TEXT = " ".join(PAGE.split())  # the page's line breaks fall anywhere in a sentence
CLASSES = ("zen1", "zen4", "zen5", "xeon-avx512bf16", "xeon-amx")
# each class's default run with three frameworks (TF, JAX, Keras 3 on JAX): the files the page's table reads
# zen4's, zen5's and xeon-amx's cpu-default.json hold four frameworks: their three-framework runs are named so
FILES = {k: f"{k}/cpu-default.json" for k in CLASSES} | {
    k: f"{k}/cpu-default-three-frameworks.json" for k in ("zen4", "zen5", "xeon-amx")
}
CITED = re.compile(r"(\S+) \(`([\w-]+)`(?:, (\w+))?\)")  # a table figure: '4.5e-7 (`zen5`, logits)'


@cache
def _doc(path: str) -> dict:
    return current_names(json.loads((ROOT / "docs/results" / path).read_text()))  # older files: today's names


def _default(klass: str) -> dict:
    return _doc(FILES[klass])


def _e(x: float, digits: int = 2) -> str:
    """3.8721e-07 -> '3.9e-7': `digits` significant digits, the exponent as the page writes it."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _as_said(x: float, said: str) -> str:
    """x at the precision of the figure `said`: '3.9e-7', '1e-5', '0.044', '1', '1,275'."""
    m = re.fullmatch(r"\d(?:\.(\d+))?e-?\d+", said)
    if m:
        return _e(x, len(m[1] or "") + 1)
    decimals = len(said.partition(".")[2])
    return f"{x:,.{decimals}f}" if "," in said else f"{x:.{decimals}f}"


def _missing(said: list[str]) -> list[str]:
    return [s for s in said if " ".join(s.split()) not in TEXT]


# --- check families: what each of a file's items is, as (figures by 'a_vs_b', tolerance, name) ------------------


def _items(klass: str, family: tuple) -> list[tuple[dict, float, str]]:
    """A family's items in a class's default run. ('rows', workload, dtype): each row's error against float64 and
    against the other frameworks'; (workload, prefix, bf16): the judged checks whose name starts with `prefix`, of
    trajectories only the mixed-precision ones ('+bf16' in the name, bf16 True) or only the float32 ones (False)."""
    doc = _default(klass)
    if family[0] == "rows":
        return [
            ({"row_vs_f64": r["max_rel_err"], "row_vs_others": r["xfw_max_rel_err"]}, r["tolerance"], r["variant"])
            for r in doc["rows"]
            if (r["kind"], r["dtype"]) == family[1:] and r["max_rel_err"] is not None
        ]
    workload, prefix, bf16 = (*family, None)[:3]
    return [
        (c["figures"], c["tolerance"], c["check"])
        for c in doc["checks"]
        if (c["workload"], c["passed"] is None) == (workload, False)
        and c["check"].startswith(prefix)
        and bf16 in (None, "+bf16" in c["check"])
    ]


def _tolerances(family: tuple) -> set[float]:
    return {t for k in CLASSES for _, t, _ in _items(k, family)}


def _side(figures: dict, side: str) -> list[float]:
    """An item's figures against float64 (side 'f64') or between frameworks or trainers (side 'x')."""
    return [v for k, v in figures.items() if v is not None and k.endswith("_vs_f64") == (side == "f64")]


def _worst(family, sides: str = "f64 x", klasses: tuple = CLASSES) -> tuple[float, list[tuple[str, str]]] | None:
    """A family's worst figure on the sides named over the files of `klasses`, and (class, item) of each that holds
    it; None where the files have no such figure."""
    found = [(v, k, n) for k in klasses for f, _, n in _items(k, family) for s in sides.split() for v in _side(f, s)]
    if not found:
        return None
    worst = max(v for v, _, _ in found)
    return worst, [(k, n) for v, k, n in found if v == worst]


def _share(*families) -> tuple[float, str]:
    """The largest figure over its tolerance in the families, over the five files, and the item that holds it."""
    return max((v / t, n) for fam in families for k in CLASSES for f, t, n in _items(k, fam) for v in _side(f, "f64 x"))


TRAJ_CNN = ("trajectory loss", "trajectory params", "trajectory BN")
TRAJ_LSTM = ("lstm trajectory loss", "lstm trajectory params")
FAMILIES = {
    "conv rows, float32": [("rows", "conv", "float32")],
    "conv rows, bfloat16": [("rows", "conv", "bfloat16")],
    "matmul rows, float32": [("rows", "matmul", "float32")],
    "matmul rows, bfloat16": [("rows", "matmul", "bfloat16")],
    "CNN forward, worst block": [("cnn", "forward ")],
    "CNN one batch's loss": [("cnn", "loss (one batch)")],
    "CNN gradients, every parameter": [("cnn", "gradients (every parameter)")],
    "CNN 20 steps, float32: loss, parameters, BN moving statistics": [("cnn", p, False) for p in TRAJ_CNN],
    "CNN 20 steps, mixed precision: the same three": [("cnn", p, True) for p in TRAJ_CNN],
    "LSTM forward, worst block": [("lstm", "lstm forward ")],
    "LSTM one batch's loss": [("lstm", "lstm loss (one batch)")],
    "LSTM gradients through time (share of bound)": [("lstm", "lstm gradients through time")],
    "LSTM 20 steps, float32: loss, parameters": [("lstm", p, False) for p in TRAJ_LSTM],
    "LSTM 20 steps, mixed precision: loss, parameters": [("lstm", p, True) for p in TRAJ_LSTM],
}


# --- the table of what the shipped runs measured -----------------------------------------------------------------


def _table(heading: str) -> list[list[str]]:
    section = PAGE[PAGE.index(heading) :].split("\n## ")[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]


TABLE = _table("## What the shipped runs measured")


def test_the_table_has_a_row_for_each_check_family_and_names_the_five_files():
    assert [r[0] for r in TABLE] == list(FAMILIES)
    files = [f"`docs/results/{FILES[k]}`" for k in CLASSES]
    assert not _missing([f"{', '.join(files[:-1])} and {files[-1]}"])
    assert [r[0] for r in MP_TABLE] == list(MULTIPROCESS)


@pytest.mark.parametrize("row", TABLE, ids=[r[0] for r in TABLE])
def test_each_table_figure_is_the_worst_over_the_five_files(row):
    """'3.5e-3 (`zen4`)': the family's worst figure over the five files at the precision printed, and the class
    named holds it (of several that hold it, any); a block named is the one that holds it there."""
    label, f64, between, _ = row
    for side, cell in (("f64", f64), ("x", between)):
        said = CITED.findall(cell)
        assert ", ".join(m[0] for m in CITED.finditer(cell)) == cell, (label, cell)
        families = FAMILIES[label]
        if not said:
            assert all(_worst(f, side) is None for f in families), (label, side, "blank, where the files have one")
            continue
        assert len(said) == len(families), (label, cell)
        for family, (figure, klass, block) in zip(families, said, strict=True):
            worst, holders = _worst(family, side)
            assert figure == _as_said(worst, figure), (label, side, figure, worst, holders)
            assert klass in [k for k, _ in holders], (label, side, klass, holders)
            assert not block or any(k == klass and n.endswith(f" {block}") for k, n in holders), (label, holders)


@pytest.mark.parametrize("row", TABLE, ids=[r[0] for r in TABLE])
def test_each_table_tolerance_is_the_files(row):
    """'5e-3, 2e-2, 2e-2': each family's tolerance in every file, at the precision printed; 'each block its own;
    logits 3.6e-6': the blocks' tolerances differ, and the one named is that block's in every file."""
    label, *_, cell = row
    families = FAMILIES[label]
    items = [[(t, n) for k in CLASSES for _, t, n in _items(k, fam)] for fam in families]
    own = re.fullmatch(r"each block its own; (\w+) (\S+)", cell)
    if own:
        (block_tols,) = items
        assert len({_e(t) for t, _ in block_tols}) > 1, (label, "the blocks share one tolerance")
        named = [t for t, n in block_tols if n.endswith(f" {own[1]}")]
        assert named and {_as_said(t, own[2]) for t in named} == {own[2]}, (label, named)
        return
    said = cell.split(", ")
    assert len(said) == len(families), (label, cell)
    for tols, figure in zip(items, said, strict=True):
        assert {_as_said(t, figure) for t, _ in tols} == {figure}, (label, figure, {t for t, _ in tols})


def test_every_judged_check_in_the_five_files_passed_and_accuracy_was_not_judged():
    checks = [c for k in CLASSES for c in _default(k)["checks"]]
    assert not [c["check"] for c in checks if c["passed"] is False]
    unjudged = {
        (c["workload"], *re.fullmatch(r"not evaluated: (\d+) steps < (\d+)", c["detail"]).groups())
        for c in checks
        if c["passed"] is None
    }
    (steps, cnn), (steps_lstm, lstm) = ([u[1:] for u in unjudged if u[0] == w][0] for w in ("cnn", "lstm"))
    assert len(unjudged) == 2 and steps == steps_lstm, unjudged
    said = [
        "Every judged check in the five files passed.",
        f"a default CPU run trains {steps} steps, and accuracy is judged only from {cnn} steps on (the CNN) or "
        f"{int(lstm):,} (the LSTM",
    ]
    assert not _missing(said)


# --- figures the prose quotes ------------------------------------------------------------------------------------


def test_the_opening_paragraph_and_the_bfloat16_section_quote_the_five_files():
    """The CNN's gradients and forward blocks: the worst figure of either side; the LSTM: the largest share of a
    bound of any of its judged checks; the trajectories: the largest share of each tolerance, float32's and
    bfloat16's both in BatchNorm's moving statistics; the bfloat16 rows: zen4's worst."""
    grads, fwd = ("cnn", "gradients (every parameter)"), ("cnn", "forward ")
    (grad_tol,), (fwd_tol,) = _tolerances(grads), _tolerances(fwd)
    f32 = _share(("cnn", "trajectory ", False), ("lstm", "lstm trajectory ", False))
    bf16 = _share(("cnn", "trajectory ", True), ("lstm", "lstm trajectory ", True))
    assert "BN moving stats" in f32[1] and "BN moving stats" in bf16[1], (f32, bf16)
    rows = max(_worst(("rows", w, "bfloat16"), "f64", ("zen4",))[0] for w in ("conv", "matmul"))
    shares = [_share(("cnn", f"trajectory {q}", True))[0] for q in ("loss", "BN")]
    said = [
        f"the CNN's gradients within {_e(_worst(grads)[0])} of the largest gradient against a bound of "
        f"{_e(grad_tol)}, its forward blocks within {_e(_worst(fwd)[0])} against {_e(fwd_tol, 1)}, the row LSTM "
        f"within {_share(('lstm', 'lstm '))[0]:.2g} of each of its bounds",
        f"at most {f32[0]:.2g} of the float32 tolerance and {bf16[0]:.2g} of the bfloat16 one, both in BatchNorm's "
        "moving statistics",
        f"Measured: {_e(rows)} (`docs/results/{FILES['zen4']}`)",
        f"The worst figures, {shares[0]:.2g} of the loss tolerance and {shares[1]:.2g} of the statistics', are in",
        f"{_e(cnn_grad_tolerance(PARITY_BATCH))} at {PARITY_BATCH} (the batch the harness checks",
        f"`cnn_loss_tolerance`, the forward path alone, {_e(cnn_loss_tolerance(PARITY_BATCH))} at {PARITY_BATCH}.",
    ]
    assert not _missing(said)


def test_the_gradient_notes_and_the_lstm_bounds_are_the_files():
    """The conditioning zen5's note names; no near-tie among the five runs' pooling windows; zen5's LSTM bounds."""
    notes = {k: next(c["detail"] for c in _default(k)["checks"] if c["check"].startswith("gradients")) for k in CLASSES}
    ties = {re.search(r"([\d,]+) of ([\d,]+) pooling windows are near-ties", n).groups() for n in notes.values()}
    ((none, windows),) = ties
    assert none == "0"
    tol = {c["check"]: c["tolerance"] for c in _default("zen5")["checks"] if c["workload"] == "lstm"}
    blocks = ", ".join(f"{b} {_e(tol[f'lstm forward {b}'])}" for b in ("lstm1", "lstm2", "logits", "probs"))
    cancels = re.search(r"where a sum cancels \((.+)\)$", notes["zen5"])[1]
    said = [
        f'e.g. "{cancels}" (`docs/results/zen5/cpu-default-three-frameworks.json`)',
        f"none of the {windows} windows was one in the five default runs above (their gradient notes)",
        f"the bounds read {blocks}, and the loss {_e(tol['lstm loss (one batch)'])} "
        "(`docs/results/zen5/cpu-default-three-frameworks.json`)",
    ]
    assert not _missing(said)


def _pool(doc: dict, routed: str) -> tuple[int, dict]:
    """The one pooling layer (1-based) where the pair `routed` ('f64_tf') routed a window differently."""
    ((i, pool),) = [(i, p) for i, p in enumerate(doc["pools"], 1) if p[f"routed_differently_{routed}"]]
    return i, pool


def _most(doc: dict, key: str) -> str:
    """The largest per-parameter figure `key` ('tf_vs_f64_own') of a grad_routing file, as the page writes it."""
    return _e(max(v[key] for v in doc["per_parameter"].values()))


def test_the_grad_routing_examples_and_the_avx2_cap_are_their_files():
    syn, zero, dither = (
        _doc(f"numerics/grad-routing-{n}.json") for n in ("avx512-synthetic", "avx512-zero-bg", "avx2-dither")
    )
    (i, p), (j, q), (k, r) = _pool(syn, "jax_tf"), _pool(zero, "f64_tf"), _pool(dither, "f64_jax")
    assert p["near_ties"] == p["routed_differently_f64_tf"] == 1 and not p["routed_differently_f64_jax"], p
    assert q["routed_differently_f64_tf"] == 1 and q["near_ties"] == 0, q
    assert r["routed_differently_f64_jax"] == r["near_ties"] == 1, r
    apart, param = max((v["tf_vs_jax"], name) for name, v in syn["per_parameter"].items())
    native, capped = (_doc(f"numerics/default-run-zen4-{n}.json") for n in ("avx512", "avx2-cap"))
    verdicts = [[(c["check"], c["passed"]) for c in d["checks"]] for d in (native, capped)]
    assert verdicts[0] == verdicts[1]
    g, h = (next(c["figures"] for c in d["checks"] if c["check"].startswith("gradients")) for d in (native, capped))
    conv = {r["variant"]: r["median_s"] * 1e3 for r in _doc("numerics/onednn-avx2-conv.json")["rows"]}
    avx2, own = conv["function+avx2"], conv["function"]
    said = [
        f"(batch {syn['batch']}, `adapter('cnn').build(0)`'s weights, the harness's {syn['images']} images): one of "
        f"pool{i}'s {p['windows']:,} windows is a near-tie that TF routes differently from JAX and float64.",
        f"TF and JAX then differ by {_e(apart)} at `{param}`, over the {_e(*_tolerances(('cnn', 'gradients')))} "
        f"bound, while with its own routing TF agrees with float64 to {_most(syn, 'tf_vs_f64_own')} and JAX to "
        f"{_most(syn, 'jax_vs_f64_own')} (`docs/results/numerics/grad-routing-avx512-synthetic.json`)",
        f"one pool{j} window that TF routes differently (not a near-tie within 4 ulps) moves TF's gradients "
        f"{_most(zero, 'tf_vs_f64_argmax')} off float64's argmax routing, and TF still agrees with float64 to "
        f"{_most(zero, 'tf_vs_f64_own')} under its own (`docs/results/numerics/grad-routing-avx512-zero-bg.json`)",
        f"Capping both at AVX2 ({', '.join(f'`{f}={v}`' for f, v in dither['flags'].items())})",
        f"on the {dither['images']}ed batch JAX still breaks a pool{k} near-tie differently "
        "(`docs/results/numerics/grad-routing-avx2-dither.json`)",
        f"its gradients, own routing, JAX {_e(g['jax_vs_f64'])} and TF {_e(g['tf_vs_f64'])} with AVX-512 kernels, "
        f"{_e(h['jax_vs_f64'])} and {_e(h['tf_vs_f64'])} capped",
        f"conv {avx2 / own:.2f}x ({avx2:.0f} against {own:.0f} ms, `docs/results/numerics/onednn-avx2-conv.json`)",
    ]
    assert not _missing(said)


def test_the_trajectory_accuracy_gpu_and_tpu_runs_are_their_files():
    full = {c["check"]: c for c in _doc("xeon-avx512/cpu-full.json")["checks"]}
    xla, loop = (
        full[f"trajectory loss (tf {a} vs tf {b}, 20 steps)"] for a, b in (("fit", "fit+xla"), ("strategy", "loop"))
    )
    acc = _doc("zen4/cnn-accuracy-bf16.json")
    rows = [r for r in acc["rows"] if r["kind"] == "cnn_train"]
    assert {r["replicas"] for r in rows} == {1} and {r["dtype"] for r in rows} == {"float32", "bfloat16"}
    ((steps, batch),) = {(r["spec"]["epochs"] * r["spec"]["steps_per_epoch"], r["spec"]["global_batch"]) for r in rows}
    (short,) = [r for r in rows if f"{r['test_accuracy']:.4f}" != "1.0000"]
    (band,) = [c for c in acc["checks"] if c["check"].startswith("test accuracy")]
    gap = max(r["test_accuracy"] for r in rows) - min(r["test_accuracy"] for r in rows)
    assert short["dtype"] == "float32" and band["detail"].startswith(f"gap {gap:.4f}"), (short, band)
    judged = [c["passed"] for c in acc["checks"]]
    h200, tpu = _doc("h200/jax-default.json"), _doc("tpu-v5e/conv.json")
    row = {(r["kind"], r["variant"]): r for r in h200["rows"] if r["dtype"] == "float32"}
    (grads,) = [c["max_rel_err"] for c in h200["checks"] if c["check"].startswith("gradients")]
    tpu_rows = [r for r in tpu["rows"] if r["dtype"] == "float32"]
    (gpu_tol,), (tpu_tol,) = (
        {r["tolerance"] for r in rs} for rs in ((row["conv", "jit"], row["matmul", "jit"]), tpu_rows)
    )
    assert h200["env"]["precision"] == "default"
    said = [
        f"`fit+xla` reads {_e(xla['max_rel_err'])} and `strategy` against `loop` {_e(loop['max_rel_err'])}, of a "
        f"{_e(xla['tolerance'], 1)} loss tolerance",
        f"{steps} steps at batch {batch} (`docs/results/zen4/cnn-accuracy-bf16.json`): {judged.count(True)} of "
        f"{len(judged)} checks passed; every row 1.0000 but TF `{short['variant']}` {short['test_accuracy']:.4f}, the "
        f"mixed-precision rows all 1.0000, a gap of {gap:.4f} against {band['tolerance']}.",
        f"GPU {_e(gpu_tol, 1)}, TPU {_e(tpu_tol, 1)} (rows)",
        f"an H200 at TF32 read conv {_e(row['conv', 'jit']['max_rel_err'])}, matmul "
        f"{_e(row['matmul', 'jit']['max_rel_err'])}, gradients {_e(grads)} (`docs/results/h200/jax-default.json`; "
        f"[gpu.md](gpu.md)); a TPU v5e's conv {_e(max(r['max_rel_err'] for r in tpu_rows))} "
        "(`docs/results/tpu-v5e/conv.json`)",
    ]
    assert not _missing(said)


MULTIPROCESS = {  # the table's first column -> each of its figures, as the words all its keys hold
    "JAX conv, `pmap` and `shard_map`, 2x4 vs 1x8; TF conv, 2 workers vs 1 process": [(" conv ",)],
    "JAX CNN step, `pmap` and `shard_map`, both processes, 2x4 vs 1x8": [("jax ", " cnn step")],
    "TF CNN step, 2 workers vs the same loop in one process": [("tf loop cnn step", " vs loop")],
    "TF CNN step, 2 workers vs `strategy`": [("tf loop cnn step", " vs strategy")],
    "fault: missed all-reduce / gradient halved": [("fault: missed all-reduce",), ("fault: gradient halved",)],
}
MP_TABLE = _table("## Multi-process comparisons")


@pytest.mark.parametrize("row", MP_TABLE, ids=[r[0] for r in MP_TABLE])
def test_each_multiprocess_share_is_the_largest_in_its_file(row):
    """A cell is the largest share of its bound over the comparisons of its row in the AVX-512 or the capped file;
    '0' is exactly 0, '(bit-identical)' included."""
    label, *cells = row
    for name, cell in zip(("avx512", "avx2-cap"), cells, strict=True):
        doc = _doc(f"numerics/multiprocess-bounds-zen5-{name}.json")
        share = {k: v["excess"] if isinstance(v, dict) else v for k, v in doc.items() if k != "flags"}
        keys = [[k for k in share if all(w in k for w in words)] for words in MULTIPROCESS[label]]
        said = cell.removesuffix(" (bit-identical)").split(" / ")
        assert len(said) == len(keys) and all(keys), (label, cell, keys)
        for ks, figure in zip(keys, said, strict=True):
            worst = max(share[k] for k in ks)
            assert (worst == 0) if figure == "0" else figure == _as_said(worst, figure), (label, name, figure, worst)
