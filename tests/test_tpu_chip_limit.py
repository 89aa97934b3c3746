"""The chip at its limit (docs/tpu.md, tuning-tpu.md, docs/results/tpu-v5e/): how busy each timed epoch kept the chip
(profile.json), each row's share of its attainable time (default.json), the layers that hold the CNN's and the ViT's
steps back (the compiled steps beside profile.json's traces), the `+prefetch` lever's gain, and the results folder's
words. Each sentence or table is rendered from its file and must appear as written. No framework is imported."""

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "docs/results/tpu-v5e"
BEST = {("cnn_train", "jit+prefetch"), ("cnn_train", "jit+bf16+prefetch"), ("vit_train", "jit+prefetch")}
BEST |= {("vit_train", "jit+bf16+prefetch"), ("lstm_train", "jit+unroll+prefetch"), ("lstm_train", "jit+bf16+prefetch")}


def _doc(name: str) -> dict:
    return json.loads((TPU / name).read_text())


def _page(name: str = "docs/tpu.md") -> str:
    return " ".join((ROOT / name).read_text().split())


def _row(doc: dict, kind: str, variant: str) -> dict:
    (r,) = [r for r in doc["rows"] if (r["kind"], r["variant"], r["framework"]) == (kind, variant, "jax")]
    return r


def _step_ms(row: dict, what: str) -> str:
    if what == "ops":
        return f"{sum(line['seconds'] for line in row['layers']) * 1e3:.2f} ms"
    return f"{row['median_s'] / row['spec']['steps_per_epoch'] * 1e3:.2f} ms"


def test_each_best_known_epoch_keeps_the_chip_busy_as_the_page_says():
    """Every best-known training row whose trace reads op by op is busy at least 90% of its timed epoch; the host-fed
    `jit` rows are not; the table is the file's."""
    doc = _doc("profile.json")
    for kind, variant in BEST:
        cover = _row(doc, kind, variant)["profile_coverage"]
        assert cover >= 0.9, (kind, variant, cover)  # the rolled loop's (over 1) counts its loop and body both
    assert all(_row(doc, k, "jit")["profile_coverage"] < 0.9 for k in ("cnn_train", "vit_train"))
    page = _page()
    for kind, variant in [
        (k, v) for k in ("cnn_train", "vit_train") for v in ("jit", "jit+prefetch", "jit+bf16+prefetch")
    ]:
        r = _row(doc, kind, variant)
        busy = f"{r['profile_coverage']:.0%}" if variant == "jit" else f"{r['profile_coverage']:.1%}"
        said = f"| {kind.split('_')[0]} `{variant}`{' (the host' + chr(39) + 's feed)' if variant == 'jit' else ''} | "
        said += f"{r['median_s'] * 1e3:.2f} ms | {busy} | {_step_ms(r, 'ops')} of {_step_ms(r, 'step')} |"
        assert said in page, said
    r = _row(doc, "lstm_train", "jit+unroll+prefetch")
    said = f"| lstm `jit+unroll+prefetch` | {r['median_s'] * 1e3:.2f} ms | {r['profile_coverage']:.1%} | "
    assert said + f"{_step_ms(r, 'ops')} of {_step_ms(r, 'step')} |" in page


def _ratio(doc: dict, kind: str, dtype: str, num: str) -> str:
    (c,) = [
        c
        for c in doc["comparisons"]
        if c["pair"] == "tuned_vs_default" and (c["kind"], c["dtype"]) == (kind, dtype) and c["text"].startswith(num)
    ]
    return "{}x ({}-{})".format(*re.search(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)", c["text"]).groups())


def test_the_prefetch_levers_gain_is_the_default_runs():
    doc = _doc("default.json")
    cnn, vit = (_ratio(doc, k, "float32", "jit+prefetch/jit") for k in ("cnn_train", "vit_train"))
    assert f"`jit+prefetch` took {cnn} of `jit`'s epoch for the CNN and {vit} for the ViT" in _page()
    tuning = _page("docs/tuning-tpu.md")
    for kind, dtype, num in (
        ("cnn_train", "float32", "jit+prefetch"), ("cnn_train", "bfloat16", "jit+bf16+prefetch"),
        ("lstm_train", "float32", "jit+unroll+prefetch"), ("lstm_train", "bfloat16", "jit+bf16+prefetch"),
        ("vit_train", "float32", "jit+prefetch"), ("vit_train", "bfloat16", "jit+bf16+prefetch"),
    ):  # fmt: skip
        fmt = " bfloat16" if dtype == "bfloat16" else ""
        said = f"| {kind} x1{fmt}: JAX `{num}` / `jit` | {_ratio(doc, kind, dtype, num + '/jit')} |"
        assert said in tuning, said


def test_every_row_against_its_attainable_time_is_the_default_runs():
    """The page's table: every row with an attainable time, as default.json has it; the best-known training rows'
    range; every JAX row but the row LSTM's rolled inference has one; Keras 3 on JAX's inference rows too."""
    doc = _doc("default.json")
    page = _page()
    counted = [r for r in doc["rows"] if r["attainable_s"]]
    for r in counted:
        said = (
            f"| {r['kind']} {r['framework']} `{r['variant']}` | {r['median_s'] * 1e3:.2f} ms | {r['pct_peak']:.1f}% | "
            f"{r['attainable_s'] * 1e3:.2f} ms | {r['pct_attainable']:.1f}% |"
        )
        assert said in page, said
        assert r["pct_attainable"] == 100 * r["attainable_s"] / r["median_s"] and r["attainable_source"]
    jax = {(r["kind"], r["variant"]) for r in doc["rows"] if r["framework"] == "jax" and not r["attainable_s"]}
    assert jax == {("lstm_infer", "predict")}
    assert {r["kind"] for r in counted if r["framework"] == "keras-jax"} == {"cnn_infer", "lstm_infer", "vit_infer"}
    best = sorted(_row(doc, k, v)["pct_attainable"] for k, v in BEST)
    rolled = _row(doc, "lstm_train", "jit+bf16+prefetch")["pct_attainable"]
    assert best[0] == rolled and f"the row LSTM's rolled bfloat16 loop {rolled:.0f}%" in page
    assert f"they reach {best[1]:.0f}-{best[-1]:.0f}% of the time their compiled programs could attain" in page
    for kind, variant, said in (
        ("cnn_train", "jit+prefetch", "the CNN's float32 step {}%"),
        ("vit_train", "jit+prefetch", "the ViT's {}%"),
        ("lstm_train", "jit+unroll+prefetch", "the row LSTM's unrolled {}%"),
        ("cnn_train", "jit+bf16+prefetch", "in bfloat16 the CNN's {}%"),
        ("vit_train", "jit+bf16+prefetch", "and the ViT's {}%"),
    ):
        assert said.format(f"{_row(doc, kind, variant)['pct_attainable']:.1f}") in page, (kind, variant)


def _layers():
    spec = importlib.util.spec_from_file_location("layers", ROOT / "benchmarks/tpu_attainable_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layers_that_hold_the_steps_back_are_the_compiled_steps_against_their_traces():
    lay, doc = _layers(), _doc("profile.json")
    cnn = lay.attainable_by_layer(lay.read(TPU / "cnn-prefetch-step.hlo.txt.gz"))
    traced = lay.traced_by_layer(doc, "cnn_train", "jit+prefetch")
    total = sum(cnn.values())
    assert (
        f"{total * 20 * 1e3:.2f}"
        == f"{_row(_doc('default.json'), 'cnn_train', 'jit+prefetch')['attainable_s'] * 1e3:.2f}"
    )
    share = {k: cnn.get(k, 0.0) / t for k, t in traced.items() if t}
    best = [share[k] for k in (("conv2", "backward"), ("conv3", "backward"), ("conv3", "forward"))]
    c1, d1 = ("conv1", "backward"), ("drop1", "backward")
    page = _page()
    said = (
        f"reaches {min(best) * 100:.0f}-{max(best) * 100:.0f}% in conv2's and conv3's backward passes and conv3's "
        f"forward, but {share[c1]:.0%} in conv1's backward pass ({traced[c1] * 1e3:.3f} ms a step against "
        f"{cnn[c1] * 1e3:.3f} ms: one input channel"
    )
    assert said in page, said
    assert f"{share[d1]:.0%} in the first dropout's ({traced[d1] * 1e3:.3f} ms against {cnn[d1] * 1e3:.3f} ms)" in page
    vit = lay.attainable_by_layer(lay.read(TPU / "vit-prefetch-step.hlo.txt.gz"))
    vt = {k: t for k, t in lay.traced_by_layer(doc, "vit_train", "jit+prefetch").items() if k[0].startswith("block")}
    back = [vit[k] / t for k, t in vt.items() if k[1] == "backward"]
    fwd = sum(vit[k] for k in vt if k[1] == "forward") / sum(t for k, t in vt.items() if k[1] == "forward")
    assert len(back) == 6
    said = f"{min(back) * 100:.0f}-{max(back) * 100:.0f}% in each block's backward pass and {fwd:.0%} in its forward"
    assert said in page, said


def test_the_results_folder_says_a_chip_a_command_a_limit():
    """The folder's README describes the runs as the project's own: the chip, each command, its limit, each file."""
    text = (TPU / "README.md").read_text()
    assert "under a limit of 10 minutes a command" in " ".join(text.split())  # its words: tests/test_docs_voice.py
    for name in ("default.json", "quick.json", "profile.json", "clock.txt", "cnn-prefetch-step.hlo.txt.gz"):
        assert f"`{name.split('.')[0]}" in text or name in text, name


def test_the_tpu_pages_stay_short_and_link_each_other():
    lines = {
        p: len((ROOT / p).read_text().splitlines()) for p in ("docs/tpu.md", "docs/tpu-time.md", "docs/tpu-install.md")
    }
    assert all(n < 350 for n in lines.values()), lines
    page = (ROOT / "docs/tpu.md").read_text()
    assert "(tpu-time.md)" in page and "(tpu-install.md)" in page
