"""The Fashion-MNIST CNN: same network in both frameworks, same numbers, same training."""

import dataclasses
import functools
import hashlib
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from frameworks_setup import JAX_DEVICES, TF_DEVICES

import jax_impl
import tf_impl
from parity.api.cnn import CNN_PARAMS, CNN_WEIGHTS
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance, cnn_tolerances
from parity.workloads.trained import data

TOL = cnn_tolerances("cpu", "highest")
DS = data.synthetic(512, 64, seed=3)


def batch(steps, size, seed=0):
    return data.batches(DS, data.batch_offsets(seed, steps, len(DS.x_train), size), size)


def trained_weights():
    """Trained-looking weights: Keras's init, then a few steps so BN moving statistics are not 0/1 (a copy of this
    process's one training: its tests come one at a time, between other files' tests, conftest.SPREAD)."""
    return [a.copy() for a in _trained_weights()]


@functools.cache
def _trained_weights():
    model = tf_impl.adapter("cnn").build(seed=0, dropout=False)
    t = tf_impl.adapter("cnn").make_trainer(model, TF_DEVICES[:1], "fit")
    t.steps(*batch(3, 32))
    return tf_impl.adapter("cnn").get_weights(t.model())


@pytest.fixture(scope="module")
def weights():
    return trained_weights()


def models(w, dropout=False):
    tm, jm = tf_impl.adapter("cnn").build(0, dropout=dropout), jax_impl.adapter("cnn").build(0, dropout=dropout)
    tf_impl.adapter("cnn").set_weights(tm, w)
    jax_impl.adapter("cnn").set_weights(jm, w)
    return tm, jm


@pytest.mark.parametrize("mod", [tf_impl, jax_impl], ids=["tf", "jax"])
def test_parameter_counts(mod):
    assert mod.adapter("cnn").count_params(mod.adapter("cnn").build(seed=0)) == CNN_PARAMS


@pytest.mark.parametrize("replicas", [1, 2])  # 2 replicas run the code 8 run (TF's 8: 3x the time)
def test_trainers_keep_one_contract(impl, replicas):
    # api.Trainer: the same methods and return types on both sides
    mod, devices = impl
    torch = mod.__name__ == "torch_impl"
    if torch:  # one process a replica (DDP over gloo): the same device handle for each
        devices = mod.setup_devices("cpu", replicas)
    t = mod.adapter("cnn").make_trainer(
        mod.adapter("cnn").build(0), devices[:replicas], mod.variants("cnn_train", replicas)[0].name
    )
    assert all(callable(getattr(t, m, None)) for m in ("steps", "step_cost", "model", "evaluate", "placement"))
    out = t.steps(*batch(2, 16))
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (2, 2)
    # each replica's device (PyTorch's: each rank's, each a process on the CPU)
    ranks = [f"cpu:0 (rank {i})" for i in range(replicas)] if torch and replicas > 1 else None
    assert t.placement() == (ranks or [f"cpu:{i}" for i in range(replicas)])
    assert set(t.evaluate(DS.x_test[:32], DS.y_test[:32])) == {"loss", "accuracy"}


def test_weights_round_trip_bit_exact(tmp_path):
    w0 = tf_impl.adapter("cnn").get_weights(tf_impl.adapter("cnn").build(seed=7))
    assert len(w0) == 22
    jm = jax_impl.adapter("cnn").build(seed=1)
    jax_impl.adapter("cnn").set_weights(jm, w0)
    jax_impl.adapter("cnn").save_weights(jm, tmp_path / "w.npz")
    tm = tf_impl.adapter("cnn").build(seed=2)
    tf_impl.adapter("cnn").load_weights(tm, tmp_path / "w.npz")
    back = tf_impl.adapter("cnn").get_weights(tm)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(w0, back, strict=True))


@pytest.mark.parametrize("mod", [tf_impl, jax_impl], ids=["tf", "jax"])
def test_bad_weights_name_the_layer(mod):
    model = mod.adapter("cnn").build(0)
    w = mod.adapter("cnn").get_weights(model)
    with pytest.raises(ValueError, match="expected 22 weight arrays"):
        mod.adapter("cnn").set_weights(model, w[:-1])
    bad = list(w)
    bad[10] = bad[10][..., :3]
    with pytest.raises(ValueError, match=r"layer conv2\): shape \(5, 5, 64, 3\)"):
        mod.adapter("cnn").set_weights(model, bad)
    bad = list(w)
    bad[2] = bad[2].astype(np.float64)
    with pytest.raises(ValueError, match=r"layer bn1\): dtype float64"):
        mod.adapter("cnn").set_weights(model, bad)


def test_corrupt_weight_file(tmp_path):
    (tmp_path / "w.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="weight file"):
        jax_impl.adapter("cnn").load_weights(jax_impl.adapter("cnn").build(0), tmp_path / "w.npz")


def test_forward_layer_by_layer_matches_oracle(weights):
    tm, jm = models(weights)
    x = DS.x_test[:6].astype(np.float32)
    ref = cnn_oracle.cnn_forward(weights, x)
    rows = checks.forward(
        {
            "tf": _prefixed(tf_impl.adapter("cnn").forward_layers(tm, x)),
            "jax": _prefixed(jax_impl.adapter("cnn").forward_layers(jm, x)),
        },
        ref,
        TOL["forward"],
    )
    assert [r["check"] for r in rows] == [f"forward {b}" for b in checks.BLOCKS]
    for r in rows:
        assert r["passed"], r
        assert set(r["figures"]) == {"tf_vs_f64", "jax_vs_f64", "tf_vs_jax"}


def _prefixed(blocks):
    return {f"forward/{k}": v for k, v in blocks.items()}


def test_every_inference_variant_is_the_forward_pass(impl, weights):
    """Every CNN inference variant of each framework (PyTorch's channels-last and compiled ones among them) gives
    the float64 forward pass's probabilities within the forward bound, from the same weights."""
    from parity.common.float64 import errors

    mod, devices = impl
    model = mod.adapter("cnn").build(0, dropout=False)
    mod.adapter("cnn").set_weights(model, weights)
    x = DS.x_test[:16].astype(np.float32)
    ref = cnn_oracle.cnn_forward(weights, x)["probs"]
    for v in mod.variants("cnn_infer", 1):
        p = mod.adapter("cnn").prepare_inference(model, x, devices[:1], v.name)
        assert errors(p.rows(p.run(), range(len(x))), ref)["max_rel_err"] < TOL["forward"], v.name


def test_inference_with_ynnpack_on_its_dots_only_is_the_same_forward_pass(weights):
    """'predict+dots' changes which library computes the convolutions, not what: its probabilities meet the float64
    oracle within the forward bound, as 'predict's do; its program leaves every convolution out of YNNPACK's
    fusions (out of the box JAX 0.12 fuses them with their bias adds); an unknown variant is refused in both
    frameworks."""
    import re

    from parity.common.float64 import errors

    tm, jm = models(weights)
    x = DS.x_test[:16].astype(np.float32)
    ref = cnn_oracle.cnn_forward(weights, x)["probs"]
    for v in (v.name for v in jax_impl.variants("cnn_infer", 1)):
        p = jax_impl.adapter("cnn").prepare_inference(jm, x, JAX_DEVICES[:1], v)
        assert errors(np.asarray(p.run()), ref)["max_rel_err"] < TOL["forward"], v
    # a YNNPACK fusion's computation holding a convolution: named in the fusion's calls=
    text = p.program()  # predict+dots's, the last variant
    ynn = [re.search(r"calls=%([\w.\-]+)", ln).group(1) for ln in text.splitlines() if '"__ynn_fusion"' in ln]
    bodies = [text.split(f"%{c} (", 1)[1].split("\n}", 1)[0] for c in ynn]
    assert v == "predict+dots" and not any(" convolution(" in b for b in bodies)
    for mod, m, d in ((jax_impl, jm, JAX_DEVICES), (tf_impl, tm, TF_DEVICES)):
        with pytest.raises(ValueError, match="predict\\+nothing"):
            mod.adapter("cnn").prepare_inference(m, x, d[:1], "predict+nothing")


def test_loss_and_gradients_agree_with_float64(weights):
    tm, jm = models(weights)
    x, y = batch(1, 16, seed=5)
    saved = {}
    _, _, f64 = cnn_oracle.cnn_loss_and_grads(weights, x[0], y[0])
    for fw, mod, m in (("tf", tf_impl, tm), ("jax", jax_impl, jm)):
        g = mod.adapter("cnn").loss_and_grads(m, x[0], y[0])
        assert len(g.grads) == len(checks.GRAD_NAMES) == 16 and len(g.routing) == 3
        for r, a in zip(g.routing, f64["pool_inputs"], strict=True):
            win, vals = cnn_oracle._windows(r), cnn_oracle._windows(a)
            np.testing.assert_array_equal(win.sum(-1), 1.0)  # each window's gradient goes to one position
            chosen = (win * vals).sum(-1)  # ... which holds that window's largest value, to float32 rounding:
            # the framework's pooling input and float64's each within the forward path's bound
            assert np.all(vals.max(-1) - chosen <= 2 * cnn_loss_tolerance(16) * np.abs(a).max()), fw
        saved[fw] = {
            "loss": g.loss,
            **{f"grad/{i:03d}": a for i, a in enumerate(g.grads)},
            **{f"routing/{i}": a for i, a in enumerate(g.routing)},
        }
    rows = checks.grads(saved, weights, x[0], y[0], cnn_grad_tolerance(16), cnn_loss_tolerance(16))
    assert [r["check"] for r in rows] == ["loss (one batch)", "gradients (every parameter)"]
    for r in rows:
        assert r["passed"], r
    assert np.array_equal(tf_impl.adapter("cnn").get_weights(tm), weights) or all(
        np.array_equal(a, b) for a, b in zip(tf_impl.adapter("cnn").get_weights(tm), weights, strict=True)
    )  # the model is left unchanged


def test_gradients_refuse_dropout(weights):
    tm, jm = models(weights, dropout=True)
    x, y = batch(1, 4)
    for mod, m in ((tf_impl, tm), (jax_impl, jm)):
        with pytest.raises(ValueError, match="dropout=False"):
            mod.adapter("cnn").loss_and_grads(m, x[0], y[0])


def _trajectory(w, replicas, tf_variant, jax_variant, steps=3, size=16, jax_lr=1e-3):
    x, y = batch(steps, size, seed=11)
    tm, jm = models(w)
    tt = tf_impl.adapter("cnn").make_trainer(tm, TF_DEVICES[:replicas], tf_variant)
    jt = jax_impl.adapter("cnn").make_trainer(jm, JAX_DEVICES[:replicas], jax_variant, learning_rate=jax_lr)
    saved = {
        "tf": {f"traj/{tf_variant}/loss": tt.steps(x, y)[:, 0]},
        "jax": {f"traj/{jax_variant}/loss": np.asarray(jt.steps(x, y))[:, 0]},
    }
    for fw, mod, t in (("tf", tf_impl, tt), ("jax", jax_impl, jt)):
        v = tf_variant if fw == "tf" else jax_variant
        for i, a in enumerate(mod.adapter("cnn").get_weights(t.model())):
            saved[fw][f"traj/{v}/w{i:03d}"] = a
        saved[fw][f"traj/{v}/loss_every"] = np.array(t.loss_every)
    return checks.trajectory(saved["tf"], saved["jax"], tf_variant, jax_variant, TOL, replicas), saved


@pytest.mark.parametrize("tf_variant", ["fit", "fit+xla"])
def test_three_step_trajectory_one_replica(weights, tf_variant):
    rows, _ = _trajectory(weights, 1, tf_variant, "jit")
    assert len(rows) == 3
    for r in rows:
        assert r["passed"], r


def test_a_multi_step_variant_is_judged_by_the_same_trajectory_check(weights):
    """fit under steps_per_execution logs once per dispatch: the loss is compared as each dispatch's mean
    (12 steps: one full dispatch of 10 and a remainder of 2), the parameters as always."""
    rows, saved = _trajectory(weights, 1, "fit+spe", "jit", steps=12)
    assert all(r["passed"] for r in rows), rows
    assert "mean of each 10 steps" in rows[0]["detail"]
    lt = saved["tf"]["traj/fit+spe/loss"]
    assert len(lt) == 12 and np.all(lt[:10] == lt[0]) and np.all(lt[10:] == lt[10]) and lt[0] != lt[10]


def _steps(v, name: str, k: int):
    """A variant record, with `k` steps to a dispatch if it is the one named."""
    if v.kind != "cnn_train" or v.name != name:
        return v
    return dataclasses.replace(v, options=dataclasses.replace(v.options, steps_per_dispatch=k))


@pytest.mark.parametrize(
    "mod,replicas,one,several",
    [
        (tf_impl, 1, "fit", "fit+spe"),
        (tf_impl, 2, "strategy", "strategy+spe"),  # several replicas; 2 run the same code as 8, in a third the time
        (tf_impl, 2, "loop", "loop+spe"),
        (jax_impl, 1, "jit", "jit+scan"),
        (jax_impl, 2, "shard_map", "shard_map+scan"),
        (jax_impl, 1, "jit", "jit+scan+rolled"),
    ],
    ids=["tf-fit", "tf-strategy", "tf-loop", "jax-jit", "jax-shard_map", "jax-jit-rolled-loop"],
)
def test_several_steps_per_dispatch_are_the_same_steps(weights, mod, replicas, one, several, monkeypatch):
    """3 steps with 2 to a dispatch (the variant's declared steps_per_dispatch, 10, set to 2: JAX compiles its unrolled
    scan once per dispatch length, and 2 steps are the same code as 10): a dispatch of 2 and a shorter one, of 1. The
    same weights after them, and the same per-step loss (or, where the framework logs once per dispatch, the same
    mean over each dispatch). JAX unrolls its scan on a CPU; the rolled loop accelerators run is checked here
    too (a rolled loop's code is the same whatever its length). Batches of 4 images (2 a replica): a step's code is
    the same at any batch, and XLA:CPU runs the scanned convolutions slowly."""
    size, k, steps = 4, 2, 3
    cnn = mod.adapter("cnn")  # the adapter declares the CNN's variants
    declared = [v for v in cnn.VARIANTS if v.kind == "cnn_train" and v.name == several.removesuffix("+rolled")]
    assert declared and declared[0].options.steps_per_dispatch > 1
    if several.endswith("+rolled"):
        several = several.removesuffix("+rolled")
        monkeypatch.setattr(jax_impl.train.Trainer, "UNROLL_ON", ())
    monkeypatch.setattr(cnn.code, "VARIANTS", tuple(_steps(v, several, k) for v in cnn.VARIANTS))
    x, y = batch(steps, size, seed=5)
    devices = (TF_DEVICES if mod is tf_impl else JAX_DEVICES)[:replicas]
    out = {}
    for v in (one, several):
        model = mod.adapter("cnn").build(seed=0, dropout=False)
        mod.adapter("cnn").set_weights(model, weights)
        t = mod.adapter("cnn").make_trainer(model, devices, v)
        out[v] = (np.asarray(t.steps(x, y)), mod.adapter("cnn").get_weights(t.model()), t)
    (l1, w1, _), (lk, wk, tk) = out[one], out[several]
    assert tk.steps_per_dispatch == k and lk.shape == (steps, 2)
    diff = np.sqrt(sum(np.sum((a.astype(np.float64) - b) ** 2) for a, b in zip(w1, wk, strict=True)))
    assert diff / np.sqrt(sum(np.sum(a.astype(np.float64) ** 2) for a in w1)) < 1e-4
    if tk.loss_every > 1:
        l1 = np.concatenate([np.full((len(l1[s : s + k]), 2), l1[s : s + k].mean(0)) for s in range(0, steps, k)])
    np.testing.assert_allclose(lk, l1, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize(
    "shape,dtype", [((3, 28, 28, 4), "float32"), ((3, 7, 7, 8), "float32"), ((3, 14, 14, 4), "bfloat16")]
)
def test_the_elementwise_pool_gradient_is_jaxs_own_under_ties(shape, dtype):
    """'+pool' routes each window's cotangent to its first maximum, as JAX's own gradient does: the same array,
    element for element, on inputs where most windows tie (values 0, 1, 2), an odd size (7 -> 3) and bfloat16.
    Exact on any machine: routing moves values, it adds nothing."""
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    h = jnp.asarray(rng.integers(0, 3, shape), dtype=dtype)
    g = jnp.asarray(rng.standard_normal((shape[0], shape[1] // 2, shape[2] // 2, shape[3])), dtype=dtype)
    own = jax.vjp(jax_impl.conv_grads.max_pool, h)[1](g)[0]
    elementwise = jax.vjp(jax_impl.conv_grads.pool_elementwise, h)[1](g)[0]
    assert elementwise.dtype == own.dtype and np.array_equal(np.asarray(elementwise), np.asarray(own))
    assert np.array_equal(jax_impl.conv_grads.pool_elementwise(h), jax_impl.conv_grads.max_pool(h))


def test_the_elementwise_pool_variant_keeps_the_trajectory(weights):
    rows, _ = _trajectory(weights, 1, "fit", "jit+pool")
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows


def test_trajectory_check_catches_a_different_learning_rate(weights):
    rows, _ = _trajectory(weights, 1, "fit", "jit", jax_lr=1.5e-3)
    assert not rows[0]["passed"] and not rows[1]["passed"], rows


@pytest.mark.parametrize("mod", [tf_impl, jax_impl], ids=["tf", "jax"])
def test_unknown_variant(mod):
    with pytest.raises(ValueError, match="unknown"):
        mod.adapter("cnn").make_trainer(
            mod.adapter("cnn").build(0), (TF_DEVICES if mod is tf_impl else JAX_DEVICES)[:1], "nope"
        )


def test_keras_backend_is_pinned():
    import keras

    assert keras.backend.backend() == "tensorflow"


def test_keras_backend_env_cannot_change_tf_impl():
    code = "import tf_impl, keras; print(keras.backend.backend())"
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KERAS_BACKEND": "jax"},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "tensorflow"


def _acc_row(fw, variant, acc, steps, seed):
    spec = {"epochs": 1, "steps_per_epoch": steps}
    return {"framework": fw, "variant": variant, "replicas": 1, "test_accuracy": acc, "spec": spec, "seed": seed}


def test_accuracy_check_compares_seed_means_and_refuses_short_runs():
    rows = [
        _acc_row("tf", "fit", 0.90, 500, 0),
        _acc_row("tf", "fit", 0.86, 500, 1),
        _acc_row("jax", "jit", 0.85, 500, 0),
        _acc_row("jax", "jit", 0.87, 500, 1),
    ]
    (c,) = checks.accuracy(rows, band=0.05)
    assert c["passed"] is True and c["figures"] == pytest.approx({"tf fit": 0.88, "jax jit": 0.86})
    assert c["max_abs_gap"] == pytest.approx(0.02) and "2 seed(s)" in c["detail"]
    (c,) = checks.accuracy(rows, band=0.01)
    assert c["passed"] is False
    short = [dict(r, spec={"epochs": 1, "steps_per_epoch": 10}) for r in rows]
    (c,) = checks.accuracy(short, band=0.05)
    assert c["passed"] is None and "not judged" in c["detail"]
    # judged from the step where BatchNorm's moving statistics keep under 1% of their initial values
    m = checks.MIN_ACCURACY_STEPS
    assert checks.BN_MOMENTUM**m <= 0.01 < checks.BN_MOMENTUM ** (m - 1)
    for steps, judged in ((m - 1, None), (m, True)):
        (c,) = checks.accuracy([dict(r, spec={"epochs": 1, "steps_per_epoch": steps}) for r in rows], band=0.05)
        assert c["passed"] is judged


BF16 = cnn_tolerances("cpu", "highest", "bfloat16")


def _saved(mod, devices, variant, w, x, y, lr=1e-3):
    """A trajectory's arrays as cnn_parity saves them, and the trainer."""
    model = mod.adapter("cnn").build(0, dropout=False)
    mod.adapter("cnn").set_weights(model, w)
    t = mod.adapter("cnn").make_trainer(model, devices, variant, learning_rate=lr)
    out = {f"traj/{variant}/loss": np.asarray(t.steps(x, y))[:, 0], f"traj/{variant}/loss_every": np.array(1)}
    out.update({f"traj/{variant}/w{i:03d}": a for i, a in enumerate(mod.adapter("cnn").get_weights(t.model()))})
    return out, t


def test_the_elementwise_pool_in_mixed_precision_keeps_the_trajectory(weights):
    """'+bf16+pool': the elementwise pooling gradient in bfloat16 compute (the same routing as JAX's own there:
    test above) trains as '+bf16' does, within bfloat16's tolerances, and is judged against the float32 '+pool'."""
    from parity.workloads.trained.trajectories import _float32

    x, y = batch(3, 16, seed=11)
    mixed, t = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool", weights, x, y)
    plain, _ = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16", weights, x, y)
    assert t.compute_dtype == "bfloat16" and t.compute.elementwise_pool
    rows = checks.trajectory(mixed, plain, "jit+bf16+pool", "jit+bf16", BF16, 1, ("jax", "jax"))
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows
    saved = {f"traj/{v}/loss": np.ones(2) for v in ("jit", "jit+pool", "jit+bf16", "jit+bf16+pool")}
    saved.update({f"traj/{v}/dtype": np.array("bfloat16") for v in ("jit+bf16", "jit+bf16+pool")})
    # each mixed variant's counterpart as the worker saves it: its declared float32 (Variant.float32)
    saved.update(
        {f"traj/{v.name}/float32": np.array(v.float32) for v in jax_impl.variants("cnn_train", 1) if v.float32}
    )
    assert [_float32(saved, v) for v in ("jit+bf16", "jit+bf16+pool")] == ["jit", "jit+pool"]


def test_the_float32_bias_gradient_keeps_the_trajectory(weights):
    """'+bias': each conv's bias added by conv_grads.bias_add, whose bias gradient is the cotangent's float32 sum (JAX's
    own is a bfloat16 one): the same forward pass, the same training within bfloat16's tolerances."""
    import jax.numpy as jnp

    g = jnp.asarray(np.random.default_rng(3).standard_normal((4, 5, 5, 8)), jnp.bfloat16)
    h, b = jnp.zeros_like(g), jnp.arange(8, dtype=jnp.float32) / 8
    out, vjp = jax.vjp(jax_impl.conv_grads.bias_add, h, b)
    dh, db = vjp(g)
    assert out.dtype == jnp.bfloat16 and np.array_equal(np.asarray(out[0, 0, 0], np.float32), np.asarray(b, np.float32))
    assert dh is not None and np.array_equal(np.asarray(dh), np.asarray(g)) and db.dtype == jnp.float32
    # 100 bfloat16 terms, each exact in float32: any summation order is within gamma_(n-1) sum|g| of the exact sum,
    # gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4)
    exact, terms, u = np.asarray(g, np.float64), 4 * 5 * 5, 2.0**-24
    bound = (terms - 1) * u / (1 - (terms - 1) * u) * np.abs(exact).sum(axis=(0, 1, 2))
    assert np.all(np.abs(np.asarray(db, np.float64) - exact.sum(axis=(0, 1, 2))) <= bound)
    x, y = batch(3, 16, seed=11)
    biased, t = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool+bias", weights, x, y)
    plain, _ = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool", weights, x, y)
    assert t.compute_dtype == "bfloat16" and t.compute.float32_bias_grad and not t.compute.conv1.use_bias
    rows = checks.trajectory(biased, plain, "jit+bf16+pool+bias", "jit+bf16+pool", BF16, 1, ("jax", "jax"))
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows


def test_the_flipped_input_gradient_keeps_the_trajectory(weights):
    """'+dgrad': each conv computed by conv_grads.conv_flipped_grad, whose input gradient is a forward convolution with
    the flipped kernel: Flax's forward pass, JAX's own input gradient within float32's rounding of the same sums,
    and the same training as '+bias' within bfloat16's tolerances; with '+wgrad' too (chunks of 32 images, a batch
    of 48 = 32 + 16), the same training as '+dgrad'."""
    import jax.numpy as jnp

    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((2, 7, 7, 3)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((5, 5, 3, 4)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((2, 7, 7, 4)), jnp.float32)
    layer = jax_impl.adapter("cnn").build(0).conv1
    layer.use_bias = False
    layer.kernel[...] = jnp.asarray(rng.standard_normal((5, 5, 1, 64)), jnp.float32)
    h = jnp.asarray(rng.standard_normal((2, 28, 28, 1)), jnp.float32)
    assert np.array_equal(np.asarray(jax_impl.conv_grads.conv_flipped_grad(h, layer.kernel[...])), np.asarray(layer(h)))
    (dx,) = jax.vjp(jax_impl.conv_grads.conv_flipped_grad, x, k)[1](g)[:1]
    (want,) = jax.vjp(jax_impl.conv_grads.conv, x, k)[1](g)[:1]
    # each element a sum of 5 x 5 x 4 = 100 products: each side, in any order, within gamma_n sum|g||k| of the sum
    # (Higham eq. 3.5), and gamma_100 < 101 u; the magnitude below, itself rounded, is low by at most gamma_100
    magnitude = jax_impl.conv_grads.conv(jnp.abs(g), jnp.abs(jnp.flip(k, (0, 1)).transpose(0, 1, 3, 2)))
    assert np.all(np.abs(np.asarray(dx) - np.asarray(want)) <= 2 * 101 * 2.0**-24 * np.asarray(magnitude))
    xs, ys = batch(3, 48, seed=11)
    flipped, t = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool+bias+dgrad", weights, xs, ys)
    biased, _ = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool+bias", weights, xs, ys)
    assert t.compute_dtype == "bfloat16" and t.compute.flipped_input_grad and t.compute.float32_bias_grad
    rows = checks.trajectory(flipped, biased, "jit+bf16+pool+bias+dgrad", "jit+bf16+pool+bias", BF16, 1, ("jax", "jax"))
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows
    chunked, t = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16+pool+bias+dgrad+wgrad", weights, xs, ys)
    assert t.compute.kernel_grad_chunk == 32 and t.compute.flipped_input_grad and t.compute_dtype == "bfloat16"
    names = ("jit+bf16+pool+bias+dgrad+wgrad", "jit+bf16+pool+bias+dgrad")
    rows = checks.trajectory(chunked, flipped, *names, BF16, 1, ("jax", "jax"))
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows


def test_the_chunked_kernel_gradient_keeps_the_trajectory(weights):
    """'+wgrad': each conv computed by conv_grads.conv_chunked_kernel_grad, whose kernel gradient is JAX's own
    summed over chunks of the batch: Flax's forward pass and input gradient, JAX's own kernel gradient within
    float32's rounding of the same sums, and TF's training within the float32 trajectory tolerances, at a batch
    that leaves a smaller last chunk (24 = 16 + 8)."""
    import jax.numpy as jnp

    from jax_impl.conv_grads import conv, conv_chunked_kernel_grad, conv_flipped_grad, conv_rewritten_grads

    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.standard_normal((5, 7, 7, 3)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((5, 5, 3, 4)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((5, 7, 7, 4)), jnp.float32)
    layer = jax_impl.adapter("cnn").build(0).conv1
    h = jnp.asarray(rng.standard_normal((2, 28, 28, 1)), jnp.float32)
    flax = np.asarray(layer(h))
    assert np.array_equal(np.asarray(conv_chunked_kernel_grad(h, layer.kernel[...], 1) + layer.bias[...]), flax)
    dx, dk = jax.vjp(lambda a, b: conv_chunked_kernel_grad(a, b, 2), x, k)[1](g)
    want_dx, want_dk = jax.vjp(conv, x, k)[1](g)
    assert np.array_equal(np.asarray(dx), np.asarray(want_dx))
    # each kernel element a sum of 5 x 7 x 7 = 245 products: each side, in any order (chunks of 2, 2 and 1 images,
    # or the whole batch at once), within gamma_245 sum|x||g| of the exact sum (Higham eq. 3.5), gamma_245 < 246 u;
    # the magnitude below, itself rounded, is low by at most gamma_245
    magnitude = jax.vjp(lambda kk: conv(jnp.abs(x), kk), k)[1](jnp.abs(g))[0]
    assert np.all(np.abs(np.asarray(dk) - np.asarray(want_dk)) <= 2 * 246 * 2.0**-24 * np.asarray(magnitude))
    # both rewrites at once ('+dgrad+wgrad'): each gradient as its rewrite alone computes it, bit for bit
    both = jax.vjp(lambda a, b: conv_rewritten_grads(a, b, True, 2), x, k)[1](g)
    assert np.array_equal(np.asarray(both[0]), np.asarray(jax.vjp(conv_flipped_grad, x, k)[1](g)[0]))
    assert np.array_equal(np.asarray(both[1]), np.asarray(dk))
    t = jax_impl.adapter("cnn").make_trainer(
        jax_impl.adapter("cnn").build(0, dropout=False), JAX_DEVICES[:1], "jit+pool+wgrad"
    )
    assert t.compute.kernel_grad_chunk == 16 and t.compute.elementwise_pool and not t.compute.float32_bias_grad
    rows, _ = _trajectory(weights, 1, "fit", "jit+pool+wgrad", size=24)
    assert len(rows) == 3 and all(r["passed"] for r in rows), rows


def test_the_straight_line_masks_are_jaxs():
    """'+masks': masks.keep_mask draws jax.random.bernoulli's masks bit for bit (integer arithmetic: no rounding, the
    same on every machine), at the CNN's rates and shapes and at odd ones; the trainer sets it, in the bfloat16 copy
    too; and in a training pass with dropout on the same elements are dropped as with JAX's own masks."""
    from flax import nnx

    from jax_impl.masks import keep_mask
    from parity.api.cnn import CNN_ARCHITECTURE

    key = jax.random.key(7)
    shapes = [(6, 14, 14, 64), (6, 7, 7, 128), (6, 256), (3, 5, 7), (1,)]
    for i, (shape, rate) in enumerate(zip(shapes, (*CNN_ARCHITECTURE.dropout_rates, 1 / 3), strict=True)):
        k = jax.random.fold_in(key, i)
        mine = jax.jit(keep_mask, static_argnums=(1, 2))(k, 1.0 - rate, shape)
        assert np.array_equal(np.asarray(mine), np.asarray(jax.random.bernoulli(k, 1.0 - rate, shape))), shape
    with pytest.raises(ValueError, match="threefry2x32"):
        keep_mask(jax.random.key(0, impl="rbg"), 0.5, (4,))
    with jax.enable_x64(True), pytest.raises(ValueError, match="jax_enable_x64"):  # bernoulli's uniforms: 64 bits
        keep_mask(key, 0.5, (4,))
    t = jax_impl.adapter("cnn").make_trainer(
        jax_impl.adapter("cnn").build(0), JAX_DEVICES[:1], "jit+bf16+pool+bias+dgrad+wgrad+masks"
    )
    assert t.compute.straight_line_masks and t.compute.kernel_grad_chunk == 32 and t.compute.flipped_input_grad
    x = jax.numpy.asarray(batch(1, 4, seed=3)[0][0])

    def dropped(straight_line):
        model = jax_impl.adapter("cnn").build(0)
        model.straight_line_masks = straight_line
        out = nnx.jit(lambda m, x, k: m.blocks(x, train=True, key=k))(model, x, key)
        return [np.asarray(out[f"block{i}"]) == 0 for i in (1, 2, 3)]  # after each conv block's dropout

    mine, jaxs = dropped(True), dropped(False)
    assert all(np.array_equal(a, b) for a, b in zip(mine, jaxs, strict=True))
    assert 0.2 < mine[0].mean() < 0.3  # the first block's rate, 0.25: the masks were drawn


def test_mixed_precision_trajectory_check_catches_a_different_learning_rate(weights):
    x, y = batch(6, 16, seed=11)
    a, _ = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16", weights, x, y)
    b, _ = _saved(jax_impl, JAX_DEVICES[:1], "jit+bf16", weights, x, y, lr=1e-2)
    rows = checks.trajectory(a, b, "jit+bf16", "jit+bf16", BF16, 1, ("jax", "jax"))
    assert not rows[0]["passed"] and not rows[1]["passed"], rows


def test_bf16_tolerances_follow_from_the_mantissa():
    assert BF16["trajectory_loss"] == pytest.approx(3 * 2.0**-8 * np.sqrt(2 * 23))
    assert BF16["trajectory_params"] == 2 * BF16["trajectory_loss"]


def test_each_trainer_is_judged_once_against_one_reference():
    """Every float32 trainer against the reference (the first framework's first float32 one), its own framework's
    other trainers too; each mixed-precision one against its own framework's float32 one, on bfloat16's tolerances.
    No pair of two non-reference trainers is judged (the triangle inequality bounds it: trajectories' docstring)."""
    from parity.workloads.trained.trajectories import reference, trajectories

    def fake(variants, dtypes, scale=1.0):
        out = {}
        for v, d in zip(variants, dtypes, strict=True):
            out.update({f"traj/{v}/loss": np.linspace(2, 1, 4) * scale, f"traj/{v}/dtype": np.array(d)})
            out.update({f"traj/{v}/w{i:03d}": np.ones(3) for i in range(len(checks.WEIGHT_NAMES))})
        return out

    tf = fake(["fit", "fit+spe", "fit+bf16"], ["float32", "float32", "bfloat16"])
    jx = fake(["jit", "jit+pool", "jit+bf16"], ["float32", "float32", "bfloat16"], scale=1.01)
    assert reference({"jax": jx, "tf": tf}) == ("tf", "fit")
    rows, _ = trajectories({"jax": jx, "tf": tf}, {"tf": 1, "jax": 1}, TOL, 1, BF16, CNN_WEIGHTS, "cnn")
    checks_run = [r["check"] for r in rows if r["check"].startswith("trajectory loss")]
    assert checks_run == [
        "trajectory loss (tf fit vs tf fit+spe, 4 steps)",
        "trajectory loss (tf fit vs jax jit, 4 steps)",
        "trajectory loss (tf fit vs jax jit+pool, 4 steps)",
        "trajectory loss (tf fit+bf16 vs tf fit, 4 steps)",
        "trajectory loss (jax jit+bf16 vs jax jit, 4 steps)",
    ]
    # 1% apart: a float32 failure against the reference, within bfloat16's tolerance of its own float32 trainer
    assert [r["passed"] for r in rows if r["check"].startswith("trajectory loss")] == [True, False, False, True, True]


def test_accuracy_check_holds_mixed_precision_to_float32():
    rows = [
        _acc_row("tf", "fit", 0.90, 500, 0),
        _acc_row("jax", "jit", 0.89, 500, 0),
        {**_acc_row("jax", "jit+bf16", 0.83, 500, 0), "dtype": "bfloat16"},
    ]
    (c,) = checks.accuracy(rows, band=0.05)
    assert c["passed"] is False and c["max_abs_gap"] == pytest.approx(0.07)  # against TF's float32 fit
    rows[2]["test_accuracy"] = 0.87
    (c,) = checks.accuracy(rows, band=0.05)
    assert c["passed"] is True and c["max_abs_gap"] == pytest.approx(0.03)


def _npz(path, arrays: dict[str, bytes]):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, raw in arrays.items():
            z.writestr(f"{name}.npy", raw)


def _npy(shape, dtype="<f4", body=b"") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue() + body


@pytest.mark.parametrize("case", ["bad crc", "pickle", "huge header", "short body", "not a zip"])
def test_a_bad_weight_file_is_one_valueerror_naming_it(tmp_path, case):
    from parity.api.weights import load_npz, save_npz

    p = tmp_path / "w.npz"
    if case == "bad crc":
        save_npz([np.arange(1000, dtype=np.float32)], p)
        raw = bytearray(p.read_bytes())
        raw[200] ^= 0xFF  # inside the stored array's bytes
        p.write_bytes(bytes(raw))
    elif case == "pickle":
        _npz(p, {"w000": _npy((1,), "|O", b"cos\nsystem\n(S'echo pwned'\ntR.")})
    elif case == "huge header":
        _npz(p, {"w000": _npy((2**20, 2**20), body=b"\0" * 64)})
    elif case == "short body":
        _npz(p, {"w000": _npy((100,), body=b"\0" * 40)})
    else:
        p.write_bytes(b"PK not really")
    with pytest.raises(ValueError, match=str(p)):
        load_npz(p, CNN_WEIGHTS)


@functools.cache
def _fresh(init: str):
    """A gradient batch (64 images of the synthetic data) and weights freshly initialised by either
    framework: the harness's first worker initialises them, so a verdict must hold for both (JAX's init
    leaves bn1.gamma's gradient a sum of 50,176 terms that cancel 60,000-fold)."""
    mod = {"tf": tf_impl, "jax": jax_impl}[init]
    w = mod.adapter("cnn").get_weights(mod.adapter("cnn").build(0))
    ds = data.synthetic(2048, 512)
    x, y = data.batches(ds, data.batch_offsets(1, 1, len(ds.x_train), 64), 64)
    saved = {}
    for fw, impl in (("tf", tf_impl), ("jax", jax_impl)):
        m = impl.adapter("cnn").build(0, dropout=False)
        impl.adapter("cnn").set_weights(m, w)
        g = impl.adapter("cnn").loss_and_grads(m, x[0], y[0])
        saved[fw] = {
            "loss": g.loss,
            **{f"grad/{i:03d}": a for i, a in enumerate(g.grads)},
            **{f"routing/{i}": a for i, a in enumerate(g.routing)},
        }
    return w, x[0], y[0], saved


@pytest.fixture
def oracle_once(monkeypatch):
    """The float64 oracle once per distinct input (it is deterministic): a test that judges one batch under several
    sets of frameworks pays for each max-pool routing once, as one parity round does (checks._references)."""
    real, done = cnn_oracle.cnn_loss_and_grads, {}

    def once(weights, x, y, routing=None):
        key = hashlib.sha256()
        for a in (*weights, x, y, *(routing or ())):  # each array's type and shape, then its values
            a = np.ascontiguousarray(a)
            key.update(f"{a.dtype}{a.shape}".encode() + a.tobytes())
        key = key.hexdigest()
        if key not in done:
            done[key] = real(weights, x, y, routing)
        return done[key]

    monkeypatch.setattr(cnn_oracle, "cnn_loss_and_grads", once)


@pytest.mark.usefixtures("oracle_once")
@pytest.mark.parametrize("init", ["tf", "jax"])
def test_gradients_hold_whoever_initialises(init):
    w, x, y, saved = _fresh(init)
    for fws in (("tf",), ("jax",), ("tf", "jax")):  # one framework alone, as --framework runs it, and both
        rows = checks.grads({fw: saved[fw] for fw in fws}, w, x, y, cnn_grad_tolerance(64), cnn_loss_tolerance(64))
        assert all(r["passed"] for r in rows), rows[1]["detail"]


def test_frameworks_that_routed_alike_share_one_oracle(monkeypatch):
    """The float64 oracle runs once per distinct max-pool routing: the same inputs give the same reference, so a
    second framework with the same routing reuses it (a second of the parity round), and one that routed a
    window elsewhere gets its own (whether TF and JAX route a tied window apart depends on the host's kernels, so
    both cases are made here)."""
    w, x, y, saved = _fresh("tf")
    routing = [k for k in saved["tf"] if k.startswith("routing/")]
    calls = []
    real = cnn_oracle.cnn_loss_and_grads
    monkeypatch.setattr(cnn_oracle, "cnn_loss_and_grads", lambda *a: calls.append(a) or real(*a))
    tol, ltol = cnn_grad_tolerance(64), cnn_loss_tolerance(64)
    alike = {"tf": saved["tf"], "jax": {**saved["jax"], **{k: saved["tf"][k] for k in routing}}}
    checks.grads(alike, w, x, y, tol, ltol)
    assert len(calls) == 1
    apart = {"tf": saved["tf"], "jax": {**saved["jax"], "routing/0": np.roll(saved["tf"]["routing/0"], 1)}}
    checks.grads(apart, w, x, y, tol, ltol)  # every pool1 window routed elsewhere: a reference of its own
    assert len(calls) == 3


@pytest.mark.usefixtures("oracle_once")
def test_a_planted_gradient_error_of_1e3_fails():
    """An error of 1e-3 of max |gradient| in one element fails wherever the parameter's sum leaves float32 able
    to resolve it (tolerance x conditioning < 1e-3): conv2's kernel and every parameter from bn3 on, at
    these inputs. Each parameter is judged on its own, so one error in each of them is named each."""
    w, x, y, saved = _fresh("jax")
    tol = cnn_grad_tolerance(64)
    clean = checks.grads({"jax": saved["jax"]}, w, x, y, tol, cnn_loss_tolerance(64))[1]
    resolvable = [n for n, p in clean["per_parameter"].items() if tol * p["conditioning"] < 1e-3]
    assert {"conv2.kernel", *checks.GRAD_NAMES[8:]} <= set(resolvable)  # bn3 onwards: no sum cancels much
    planted = dict(saved["jax"])
    for name in resolvable:
        i = checks.GRAD_NAMES.index(name)
        g = planted[f"grad/{i:03d}"].copy()
        flat = g.reshape(-1)
        k = int(np.argmax(np.abs(flat)))
        flat[k] += np.float32(1e-3 * np.abs(flat).max())
        planted[f"grad/{i:03d}"] = g
    row = checks.grads({"jax": planted}, w, x, y, tol, cnn_loss_tolerance(64))[1]
    assert not row["passed"]
    named = {n for n, p in row["per_parameter"].items() if p["jax_vs_f64"] > tol}
    assert named == set(resolvable), (named, resolvable)
    assert all(n in row["detail"] for n in resolvable), row["detail"]
