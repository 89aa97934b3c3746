"""The Fashion-MNIST CNN's training on several replicas and in mixed precision, and what its input pipelines feed:
the slower half of test_cnn.py, a file of its own so that the two halves run on two test processes at once."""

import os

import jax
import numpy as np
import pytest
from frameworks_setup import JAX_DEVICES, TF_DEVICES
from test_cnn import BF16, DS, TOL, _saved, batch, models, trained_weights

import jax_impl
import tf_impl
from parity.common.tolerances import F32_UNIT_ROUNDOFF
from parity.judging.roofline import isa_capped_below_bf16
from parity.workloads.cnn import checks
from parity.workloads.cnn.tolerances import cnn_loss_tolerance


@pytest.fixture(scope="module")
def weights():
    return trained_weights()


def test_eight_replica_trajectories(weights):
    """The 8-replica trainer pairs TF-vs-JAX (strategy-pmap, strategy-shard_map, loop-shard_map), each trainer
    trained once from the same weights over the same 2 steps of 16 images (2 a replica)."""
    x, y = batch(2, 16, seed=11)
    saved = {("tf", v): _saved(tf_impl, TF_DEVICES[:8], v, weights, x, y)[0] for v in ("strategy", "loop")}
    saved |= {("jax", v): _saved(jax_impl, JAX_DEVICES[:8], v, weights, x, y)[0] for v in ("pmap", "shard_map")}
    for tv, jv in (("strategy", "pmap"), ("strategy", "shard_map"), ("loop", "shard_map")):
        rows = checks.trajectory(saved["tf", tv], saved["jax", jv], tv, jv, TOL, 8, ("tf", "jax"))
        assert len(rows) == 3 and all(r["passed"] for r in rows), (tv, jv, rows)
    # per-replica batch statistics (2 images each) differ from global ones: the 1-replica loss must
    # not equal the 8-replica runs' first-step loss unless BN really was per replica
    l1 = tf_impl.adapter("cnn").loss_and_grads(models(weights)[0], x[0], y[0])[0]
    for tv in ("strategy", "loop"):
        l8 = saved["tf", tv][f"traj/{tv}/loss"][0]
        assert abs(l8 - l1) / l1 > 2 * cnn_loss_tolerance(16), tv  # more than two float32 runs of one loss differ


def test_moving_statistics_are_the_replica_mean(weights):
    n = 2  # replicas: MirroredStrategy's per-replica copies and their mean are the same code on 8 devices
    tm, _ = models(weights)
    t = tf_impl.adapter("cnn").make_trainer(tm, TF_DEVICES[:n], "strategy")
    x, y = batch(1, 16)
    t.steps(x, y)
    copies = [c.numpy() for c in t.m.get_layer("bn1").moving_mean.value.values]
    assert len(copies) == n and not np.array_equal(copies[0], copies[1])  # copies that differ: a mean to take
    expected = np.mean(copies, axis=0)  # each copy saw its own replica's 8 images
    out = tf_impl.adapter("cnn").get_weights(t.model())
    # two means of the same n positive copies, each within n - 1 additions' and a division's rounding
    np.testing.assert_allclose(out[2], expected, rtol=2 * n * F32_UNIT_ROUNDOFF)
    for layer in ("bn1", "bn2", "bn3"):  # and every replica now holds the same values
        c = [v.numpy() for v in t.m.get_layer(layer).moving_mean.value.values]
        assert all(np.array_equal(c[0], ci) for ci in c), layer


@pytest.mark.parametrize("mod,variant", [(tf_impl, "fit"), (jax_impl, "jit")], ids=["tf", "jax"])
def test_training_with_dropout_learns(mod, variant):
    model = mod.adapter("cnn").build(seed=0, dropout=True)
    t = mod.adapter("cnn").make_trainer(model, (TF_DEVICES if mod is tf_impl else JAX_DEVICES)[:1], variant)
    x, y = batch(12, 32, seed=2)
    out = np.asarray(t.steps(x, y))  # per step [loss, accuracy] on the training batch
    assert out.shape == (12, 2) and np.all(np.isfinite(out))
    assert out[-4:, 0].mean() < 0.5 * out[:2, 0].mean(), out[:, 0]
    assert out[-4:, 1].mean() > out[:2, 1].mean() + 0.2, out[:, 1]
    ev = t.evaluate(DS.x_test, DS.y_test)  # BN moving statistics have barely moved after 12 steps
    assert np.isfinite(ev["loss"]) and 0.0 <= ev["accuracy"] <= 1.0


# several replicas: 2 run the same code as 8, in a third of the time
@pytest.mark.parametrize(
    "replicas,tv,jv",
    [(1, "fit", "jit"), (2, "strategy", "shard_map"), (2, "loop+spe", "shard_map")],
    ids=["1", "2", "2-loop"],
)
def test_mixed_precision_trains_in_bfloat16_and_keeps_the_trajectory(replicas, tv, jv):
    """'+bf16': bfloat16 compute, float32 parameters and optimizer state. TF against JAX, and each against its own
    float32 run, within bfloat16's tolerances; and far enough from float32 that bfloat16 really ran. From Keras's
    initial weights, as the harness's parity check starts. Under an ISA cap below bfloat16 (imitating a CPU without
    it) oneDNN refuses TF's bfloat16 convolutions, so JAX's (XLA emulates them) are checked alone."""
    capped = isa_capped_below_bf16(os.environ)
    weights = tf_impl.adapter("cnn").get_weights(tf_impl.adapter("cnn").build(seed=0))
    x, y = batch(3, 16, seed=11)
    s = {}
    for fw, mod, devs, v in (("tf", tf_impl, TF_DEVICES, tv), ("jax", jax_impl, JAX_DEVICES, jv)):
        for variant in (v, v + "+bf16") if not (capped and mod is tf_impl) else (v,):
            s[fw, variant], t = _saved(mod, devs[:replicas], variant, weights, x, y)
            assert t.compute_dtype == ("bfloat16" if variant.endswith("+bf16") else "float32")
            assert all(a.dtype == np.float32 for a in mod.adapter("cnn").get_weights(t.model())), (
                variant
            )  # float32 parameters
            if variant.endswith("+bf16") and mod is jax_impl:  # Adam's moments float32 too
                assert {a.dtype for a in jax.tree.leaves(t.state[2])} <= {np.dtype("float32"), np.dtype("int32")}
            if variant.endswith("+bf16") and mod is tf_impl:
                assert {v.dtype for v in t.m.optimizer.variables if "iteration" not in v.path} == {"float32"}
    ran = [(fw, v) for fw, v in (("tf", tv), ("jax", jv)) if (fw, v + "+bf16") in s]
    mixed = (
        []
        if capped
        else checks.trajectory(
            s["tf", tv + "+bf16"], s["jax", jv + "+bf16"], tv + "+bf16", jv + "+bf16", BF16, replicas
        )
    )
    own = [
        r
        for fw, v in ran
        for r in checks.trajectory(s[fw, v + "+bf16"], s[fw, v], v + "+bf16", v, BF16, replicas, (fw, fw))
    ]
    assert len(own) == 3 * len(ran) and all(r["passed"] for r in mixed + own), mixed + own
    # The first step's loss (one forward pass, nothing amplified yet): TF's and JAX's float32 within twice the
    # forward path's bound (and the replicas' mean); bfloat16 visibly off float32. That last is a lower bound no
    # model gives: 1e-5 is 170 float32 ulps, and bfloat16's roundings (u = 2^-8) moved it 1.7e-4 to 1.0e-3 on Zen 5
    # (docs/numerics.md); compute_dtype above is the exact check that bfloat16 was built.
    first = {k: float(v[f"traj/{k[1]}/loss"][0]) for k, v in s.items()}
    f32 = 2 * (cnn_loss_tolerance(16 // replicas) + (replicas - 1) * F32_UNIT_ROUNDOFF)
    assert abs(first["tf", tv] - first["jax", jv]) < f32 * first["tf", tv], first
    for fw, v in ran:
        assert abs(first[fw, v + "+bf16"] - first[fw, v]) > 1e-5 * first[fw, v], first


# 2 replicas: the same MirroredStrategy input path as 8 (per-replica pipelines), in a third of the time
@pytest.mark.parametrize("variant,replicas", [("fit", 1), ("strategy", 2), ("loop", 2), ("loop+spe", 2)])
def test_tf_training_input_is_not_autotuned(monkeypatch, variant, replicas):
    # tf.data's autotuning thread held each epoch's iterator teardown until its next wake-up (docs/tuning.md):
    # every dataset the trainer feeds, to fit or to its own loop, has it off
    import tensorflow as tf

    seen = []
    fit, distribute = tf_impl.models.keras.Model.fit, tf.distribute.MirroredStrategy.distribute_datasets_from_function

    def fit_spy(self, ds, *a, **k):
        seen.append(ds.options().autotune.enabled)
        return fit(self, ds, *a, **k)

    def distribute_spy(self, fn, options=None):
        # and one pipeline per replica, in host memory: no per-device pipelines, which are autotuned whatever we set
        per_replica = tf.distribute.InputReplicationMode.PER_REPLICA
        assert options.experimental_replication_mode == per_replica and not options.experimental_fetch_to_device
        seen.append(fn(tf.distribute.InputContext()).options().autotune.enabled)
        return distribute(self, fn, options)

    monkeypatch.setattr(tf_impl.models.keras.Model, "fit", fit_spy)
    monkeypatch.setattr(tf.distribute.MirroredStrategy, "distribute_datasets_from_function", distribute_spy)
    t = tf_impl.adapter("cnn").make_trainer(tf_impl.adapter("cnn").build(0), TF_DEVICES[:replicas], variant)
    t.steps(*batch(2, 16))
    assert seen == [False]
