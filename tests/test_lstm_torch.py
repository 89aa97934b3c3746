"""The row LSTM in PyTorch: what is its own beside the equations' tests it shares with Flax's (test_lstm_jax.py's
BOTH): one bias, Keras's initialisers, h passed on, every training variant on the one device, mixed precision and
inference; tiny widths."""

import numpy as np
import pytest
import torch
from adapter_checks import check_float32_counterparts, check_torch_variants_are_its_own
from frameworks_setup import JAX_DEVICES, TORCH_DEVICES
from test_lstm_jax import BATCH, TOL, UNITS, images, random_weights, ref_loss, reference, rel

import jax_impl
import torch_impl
from parity.api import DeviceUnavailable
from parity.api.lstm import LstmArchitecture
from parity.api.variants import ONE
from parity.workloads.lstm import oracle
from parity.workloads.lstm.tolerances import lstm_block_tolerances, lstm_bounds, lstm_tolerances
from parity.workloads.trained.checks import trajectory
from torch_impl import lstm

# oneDNN's bfloat16 LSTM, the only one autocast reaches: absent on an AVX2 CPU, where mixed precision is refused
BF16_LSTM = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def model_with(weights, units=UNITS):
    m = torch_impl.adapter("lstm").build(units)
    torch_impl.adapter("lstm").set_weights(m, weights)
    return m


# ---- weights ----


def test_parameters_are_counted_as_keras_does_and_only_kerass_train():
    m, n = torch_impl.adapter("lstm").build(UNITS), LstmArchitecture(UNITS).params()
    assert torch_impl.adapter("lstm").count_params(m) == {"total": n, "trainable": n, "non_trainable": 0}
    # torch's second bias (bias_hh, 4U a layer) is held out of training: what trains is Keras's weights
    assert sum(p.numel() for p in m.parameters()) == n + 2 * 4 * UNITS
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == n


def test_the_second_bias_is_zero_frozen_and_the_seed_draws():
    """Keras's initialisers themselves: test_lstm_jax.py's BOTH."""
    m = torch_impl.adapter("lstm").build(UNITS, seed=3)
    for name in ("lstm1", "lstm2"):  # torch's second bias: zero and frozen (Keras has one)
        assert not getattr(m, name).bias_hh_l0.any() and not getattr(m, name).bias_hh_l0.requires_grad
    first = torch_impl.adapter("lstm").get_weights(m)[0]
    assert not np.array_equal(
        first, torch_impl.adapter("lstm").get_weights(torch_impl.adapter("lstm").build(UNITS, seed=4))[0]
    )


# ---- the forward pass: Keras's equations, gate order, h passed on ----


def test_the_second_layer_receives_h_and_passes_on_its_last_h_not_c():
    # torch.nn.LSTM returns (sequence of h, (h_n, c_n)): lstm2 reads lstm1's h sequence and puts out h_n
    w, (x, _) = random_weights(), images()
    got, ref, tr = torch_impl.adapter("lstm").forward_layers(model_with(w), x), reference(w, x), oracle.lstm_trace(w, x)
    assert rel(got["lstm1"], ref["lstm1"]) < TOL and rel(got["lstm1"], ref["lstm1_c"]) > 1000 * TOL
    assert rel(got["lstm2"], ref["lstm2"]) < TOL and rel(got["lstm2"], tr.lstm2.c[:, -1]) > 1000 * TOL


# ---- training: every variant, on the one device ----


def _train(variant, w, steps=2, mod=torch_impl, devices=TORCH_DEVICES):
    x, y = images(steps * BATCH, seed=4)
    m = mod.adapter("lstm").build(UNITS)
    mod.adapter("lstm").set_weights(m, w)
    t = mod.adapter("lstm").make_trainer(m, devices[:1], variant)
    out = np.asarray(t.steps(x.reshape(steps, BATCH, 28, 28, 1), y.reshape(steps, BATCH)))
    return t, out


def _trajectory(mod, variant, t, out):
    """A trainer's trajectory as a worker saves it, for parity.workloads.trained.checks.trajectory."""
    saved = {f"traj/{variant}/loss": out[:, 0]}
    return saved | {f"traj/{variant}/w{i:03d}": a for i, a in enumerate(mod.adapter("lstm").get_weights(t.model()))}


def _judged(a, b, va, vb, dtype="float32"):
    """The harness's trajectory rows (loss, parameters) of `a` against `b`."""
    tols, table = lstm_tolerances("cpu", "highest", dtype), LstmArchitecture(UNITS).weights
    return trajectory(a, b, va, vb, tols, 1, ("a", "b"), None, table)


def test_every_eager_variant_trains_and_evaluates_what_it_exports():
    w, (x, y) = random_weights(), images(seed=9)
    variants = torch_impl.variants("lstm_train", 1)
    assert variants and all(v.span == ONE for v in variants)  # over several devices: test_torch_ddp.py
    assert any(v.options.compile for v in variants)  # the compiled one: test_the_compiled_step_is_the_eager_step
    saved = {}
    for v in (v for v in variants if not v.options.compile):
        if v.dtype == "bfloat16" and not BF16_LSTM:  # refused in one line, before it trains
            with pytest.raises(DeviceUnavailable, match="bfloat16 LSTM"):
                _train(v.name, w)
            continue
        t, out = _train(v.name, w)
        assert out.shape == (2, 2) and np.all(np.isfinite(out)), v.name
        assert t.compute_dtype == v.dtype and t.batchnorm == "none", v.name
        assert t.kernel_path == lstm.kernel_path(v.dtype == "bfloat16"), v.name
        assert t.placement() == ["cpu:0"] and t.step_cost() == (None, lstm.UNCOUNTED)
        assert all(p.dtype == torch.float32 for p in (*t.params, *t.state["m"], *t.state["v"])), v.name
        saved[v.name] = _trajectory(torch_impl, v.name, t, out)
        trained = torch_impl.adapter("lstm").get_weights(t.model())
        assert not any(np.array_equal(a, b) for a, b in zip(w, trained, strict=True)), v.name
        if v.dtype == "float32":  # what it evaluates is what it exports (torch's second bias still at 0)
            loss, bound = ref_loss(trained, x, y), lstm_bounds(trained, x, y, "cpu", "highest")["loss"]
            assert abs(t.evaluate(x, y)["loss"] - loss) <= bound * loss, v.name
    for v in variants:  # mixed precision against its float32 counterpart, within bfloat16's bounds
        if v.dtype == "bfloat16" and BF16_LSTM:
            rows = _judged(saved[v.name], saved[v.float32], v.name, v.float32, "bfloat16")
            assert all(r["passed"] for r in rows), rows


def test_the_eager_steps_are_jaxs_steps():
    """Two steps from the same weights on the same batches, judged as the harness judges them: PyTorch's eager steps
    against Flax's jitted ones."""
    w = random_weights()
    a = _trajectory(torch_impl, "eager", *_train("eager", w))
    b = _trajectory(jax_impl, "jit", *_train("jit", w, mod=jax_impl, devices=JAX_DEVICES))
    rows = _judged(a, b, "eager", "jit")
    assert len(rows) == 2 and all(r["passed"] for r in rows), rows


def test_the_compiled_step_is_the_eager_step():
    """The file's one compiled step (torch.compile: its first call compiles, tens of seconds): the eager step's loss
    and weights, to float32 rounding."""
    w = random_weights()
    (te, oe), (tc, oc) = _train("eager", w, steps=1), _train("compile", w, steps=1)
    assert tc.kernel_path == lstm.kernel_path(compiled=True) and tc.compute_dtype == "float32"
    # each step's loss within its derived bound of float64 (lstm_bounds): the two within twice it of each other
    x, y = images(BATCH, seed=4)
    bound = lstm_bounds(w, x, y, "cpu", "highest")["loss"] * abs(oe[0, 0])
    assert abs(oc[0, 0] - oe[0, 0]) <= 2 * bound and oc[0, 1] == oe[0, 1]
    for a, b in zip(
        torch_impl.adapter("lstm").get_weights(tc.model()),
        torch_impl.adapter("lstm").get_weights(te.model()),
        strict=True,
    ):
        assert rel(a, b) < TOL


def test_a_cnn_trainer_has_no_recurrent_kernel():
    t = torch_impl.adapter("cnn").make_trainer(torch_impl.adapter("cnn").build(0), TORCH_DEVICES, "eager")
    assert t.kernel_path is None and t.batchnorm == "replica"


def test_lstm_variants_are_their_own_row_kinds():
    adapter = torch_impl.adapter("lstm")
    check_torch_variants_are_its_own(adapter, adapter.build(UNITS), images()[0], TORCH_DEVICES, "lstm")
    check_float32_counterparts(torch_impl, "lstm_train")  # each bfloat16 variant's float32 counterpart: the same step


# ---- mixed precision, inference, the kernel it runs ----


def test_mixed_precision_computes_in_bfloat16_on_float32_parameters():
    w, (x, _) = random_weights(), images()
    if not BF16_LSTM:  # this CPU has no bfloat16 LSTM: the copy is refused, in one line
        with pytest.raises(DeviceUnavailable, match="bfloat16 LSTM"):
            torch_impl.adapter("lstm").mixed_precision(model_with(w))
        return
    m = torch_impl.adapter("lstm").mixed_precision(model_with(w))
    assert m.mixed and all(
        np.array_equal(a, b) and b.dtype == np.float32
        for a, b in zip(w, torch_impl.adapter("lstm").get_weights(m), strict=True)
    )
    out, ref = torch_impl.adapter("lstm").forward_layers(m, x), reference(w, x)["probs"]
    assert out["lstm1"].dtype.name == "bfloat16" and out["logits"].dtype == out["probs"].dtype == np.float32
    assert rel(out["probs"], ref) < 0.05  # bfloat16's 8 bits through 56 steps
    assert rel(out["probs"], ref) > 100 * rel(
        torch_impl.adapter("lstm").forward_layers(model_with(w), x)["probs"], ref
    )  # not float32


@pytest.mark.parametrize("variant", ["predict", "predict+compile"])
def test_inference_is_the_forward_pass(variant):
    w, (x, _) = random_weights(), images()
    m = model_with(w)
    p = torch_impl.adapter("lstm").prepare_inference(m, x, TORCH_DEVICES, variant)
    assert p.kernel_path == lstm.kernel_path(compiled=variant.endswith("+compile"))
    out = p.run()
    assert p.shape(out) == (BATCH, 10) and p.placement(out) == ["cpu:0"]
    # each within the probabilities' derived bound of float64 (lstm_block_tolerances): the two within twice it
    bound = lstm_block_tolerances(w, x, "cpu", "highest")["probs"]
    assert rel(p.rows(out, range(BATCH)), torch_impl.adapter("lstm").forward_layers(m, x)["probs"]) <= 2 * bound
    assert p.cost() == (None, lstm.UNCOUNTED)


def test_the_kernel_path_is_the_one_the_profiler_sees():
    x = images()[0]
    for mixed in (False, True) if BF16_LSTM else (False,):  # none in bfloat16 on a CPU without (above)
        m = model_with(random_weights())
        with torch.profiler.profile() as prof:
            torch_impl.adapter("lstm").forward_layers(torch_impl.adapter("lstm").mixed_precision(m) if mixed else m, x)
        onednn = "aten::mkldnn_rnn_layer" in {e.key for e in prof.key_averages()}  # oneDNN's fused layer ran
        assert lstm.kernel_path(mixed).startswith("oneDNN's" if onednn else "ATen's"), mixed
    assert lstm.kernel_path(compiled=True) == lstm.kernel_path() + ", eager between compiled pieces"
