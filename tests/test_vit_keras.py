"""The ViT in Keras 3 (keras_models.vit) on TensorFlow (tf_impl): its layers and weights in the contract's order
(parity.api.vit), its conventions set explicitly (a check that fails with Keras's default LayerNorm epsilon or the
tanh GELU put back), every block, the loss and the gradients against the float64 oracle, every training and
inference variant, mixed precision. Keras on JAX runs the same model code in a process of its own
(tests/test_vit_keras_jax.py, which also holds the helpers both use). Bounds: the workload's, derived on the run's
inputs (parity.workloads.vit.tolerances)."""

import keras
import numpy as np
import pytest
from adapter_checks import trained_variants
from frameworks_setup import TF_DEVICES
from test_vit_keras_jax import (
    ARCH,
    MIXED,
    REPLICAS,
    STEPS,
    batches,
    block_bounds,
    first_loss_bound,
    grads_over_bound,
    keras_path,
    over_bounds,
    random_weights,
)

import tf_impl
from keras_models import vit
from parity.api.vit import LN_EPSILON
from parity.common.float64 import errors
from parity.judging.roofline import native_bf16
from parity.workloads.vit import oracle
from parity.workloads.vit.tolerances import bf16_loss_tolerance, vit_bounds

SIZES = (ARCH.dim, ARCH.depth, ARCH.heads, ARCH.mlp)
# bfloat16 compute where the CPU multiplies it (the harness's rule for '+bf16' rows): TF's oneDNN convolution in
# bfloat16 has no primitive under an AVX2 cap ("could not create a primitive descriptor")
BF16 = native_bf16("cpu", "")


def build(weights=None, seed: int = 0):
    m = tf_impl.adapter("vit").build(*SIZES, seed=seed)
    if weights is not None:
        tf_impl.adapter("vit").set_weights(m, weights)
    return m


@pytest.fixture(scope="module")
def data():
    return batches()


@pytest.fixture(scope="module")
def model():
    return build(random_weights())


def test_its_layers_and_weights_are_the_contracts(model, tmp_path):
    """The layer names, each block's sublayers, and every weight's layer, field and shape in Keras's get_weights()
    order (parity.api.vit's table); set, saved, loaded back unchanged; a list of another size refused."""
    assert [layer.name for layer in model.layers] == list(ARCH.names)
    block = model.get_layer("block1")
    assert [s.name for s in (block.ln1, block.attn, block.ln2, block.mlp1, block.mlp2)] == [
        f"block1_{s}" for s in ("ln1", "attn", "ln2", "mlp1", "mlp2")
    ]
    assert all(v.path.endswith(keras_path(w)) for v, w in zip(model.weights, ARCH.weights, strict=True))
    assert [w.shape for w in tf_impl.adapter("vit").get_weights(model)] == [w.shape for w in ARCH.weights]
    other = tf_impl.adapter("vit").get_weights(build(seed=5))
    assert not np.array_equal(other[0], tf_impl.adapter("vit").get_weights(model)[0])
    m = build(other)
    tf_impl.adapter("vit").save_weights(m, tmp_path / "w.npz")
    back = build()
    tf_impl.adapter("vit").load_weights(back, tmp_path / "w.npz")
    assert all(np.array_equal(a, b) for a, b in zip(tf_impl.adapter("vit").get_weights(back), other, strict=True))
    n = ARCH.params()
    assert tf_impl.adapter("vit").count_params(m) == {"total": n, "trainable": n, "non_trainable": 0}
    wider = tf_impl.adapter("vit").get_weights(
        tf_impl.adapter("vit").build(ARCH.dim + 2, ARCH.depth, ARCH.heads, ARCH.mlp)
    )
    with pytest.raises(ValueError, match=r"weight 0 \(patch_embed.kernel\): shape \(4, 4, 1, 10\), expected"):
        tf_impl.adapter("vit").set_weights(m, wider)
    with pytest.raises(ValueError, match=f"expected {len(ARCH.weights)} weight arrays"):
        tf_impl.adapter("vit").set_weights(m, tf_impl.adapter("cnn").get_weights(tf_impl.adapter("cnn").build(0)))
    bad = [a.copy() for a in other]
    bad[2][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"weight 2 \(pos_embed.embeddings\): 1 value\(s\) not finite"):
        tf_impl.adapter("vit").set_weights(m, bad)


def test_the_seed_gives_keras_initialisers_their_own_values():
    """One seed, one set of weights; each of the attention's four kernels its own draw (MultiHeadAttention alone
    would clone one seeded initialiser into four equal kernels); LayerNorms at gain 1, offset 0."""
    w, again = tf_impl.adapter("vit").get_weights(build(seed=3)), tf_impl.adapter("vit").get_weights(build(seed=3))
    assert all(np.array_equal(a, b) for a, b in zip(w, again, strict=True))
    table = {x.name: a for x, a in zip(ARCH.weights, w, strict=True)}
    q, k, v = (table[f"block1_attn.{p}_kernel"] for p in ("query", "key", "value"))
    assert not np.array_equal(q, k) and not np.array_equal(k, v)
    assert np.all(table["norm.gamma"] == 1) and np.all(table["block1_ln1.beta"] == 0)


def test_the_conventions_are_set_explicitly(model):
    """Where Keras's defaults differ from the contract, or could change under a setting, the values are set."""
    norms = [
        model.get_layer("norm"),
        *(getattr(model.get_layer(b), n) for b in ARCH.block_names for n in ("ln1", "ln2")),
    ]
    assert all(n.epsilon == LN_EPSILON != 1e-3 for n in norms)  # Keras's default: 1e-3
    attn = model.get_layer("block1").attn.get_config()
    assert (attn["num_heads"], attn["key_dim"], attn["value_dim"]) == (ARCH.heads, ARCH.head_dim, ARCH.head_dim)
    assert attn["use_bias"] and attn["dropout"] == 0
    # flash attention at Keras's default, the backend's choice: not in the layer's config (a clone takes the default
    # again), and no process-wide setting made
    assert "flash_attention" not in attn and keras.config.is_flash_attention_enabled() is None
    conv = model.get_layer("patch_embed").get_config()
    assert (conv["kernel_size"], conv["strides"], conv["padding"]) == ((4, 4), (4, 4), "valid")
    assert conv["data_format"] == model.get_layer("pool").get_config()["data_format"] == "channels_last"


def _tanh_gelu(monkeypatch):
    exact = keras.activations.gelu
    monkeypatch.setattr(keras.activations, "gelu", lambda z, approximate=False: exact(z, approximate=True))


CONVENTIONS = {  # what keras_models.vit sets, and how its default comes back (the tanh form: jax.nn.gelu's, Flax's)
    "layernorm-epsilon": lambda monkeypatch: monkeypatch.setattr(vit, "LN_EPSILON", 1e-3),
    "exact-gelu": _tanh_gelu,
}


@pytest.mark.parametrize("undo", CONVENTIONS.values(), ids=CONVENTIONS.keys())
def test_each_convention_keeps_the_blocks_within_their_bound_where_the_default_does_not(undo, monkeypatch, data):
    """The check: every block against float64 within its bound. It passes as built, and fails (by far) once Keras's
    LayerNorm epsilon (1e-3) or the tanh GELU is put back."""
    x, w = data[0], random_weights()
    assert max(over_bounds(tf_impl.adapter("vit").forward_layers(build(w), x), w, x).values()) < 1
    undo(monkeypatch)
    assert max(over_bounds(tf_impl.adapter("vit").forward_layers(build(w), x), w, x).values()) > 1


def test_every_block_the_loss_and_the_gradients_meet_the_float64_oracle(model, data):
    x, y, _, _ = data
    w = tf_impl.adapter("vit").get_weights(model)
    assert max(over_bounds(tf_impl.adapter("vit").forward_layers(model, x), w, x).values()) < 1
    g = tf_impl.adapter("vit").loss_and_grads(model, x, y)
    loss, grads = oracle.loss_and_grads(w, x, y)
    assert g.routing == [] and [a.shape for a in g.grads] == [a.shape for a in grads]
    assert abs(g.loss - loss) <= vit_bounds(w, x, y, "cpu", "highest")["loss"] * loss
    assert max(grads_over_bound(g.grads, w, x, y)) <= 1


@pytest.fixture(scope="module")
def trained(model, data):
    """Every vit_train variant's two steps from the model's weights: (per-step losses, trainer) by name."""
    _, _, bx, by = data

    def copy():
        return build(tf_impl.adapter("vit").get_weights(model))

    def skip(v):
        return v.dtype == "bfloat16" and not BF16

    return trained_variants(tf_impl, "vit", REPLICAS, TF_DEVICES, copy, bx, by, skip)


@pytest.mark.slow
def test_every_training_variant_trains_from_the_float64_loss(trained, model, data):
    """fit, fit+xla, fit+bf16, MirroredStrategy: finite losses, the weights moved, the first step's loss (before any
    update) the float64 loss within its bound (over replicas one more rounding, their mean's; in bfloat16 the
    mixed-precision bound, bf16_loss_tolerance); no BatchNorm, no recurrent kernel, float32 but for fit+bf16."""
    assert set(trained) == {"fit", "fit+xla", "strategy"} | ({"fit+bf16"} if BF16 else set())
    _, _, bx, by = data
    w = tf_impl.adapter("vit").get_weights(model)
    first, _ = oracle.loss_and_grads(w, bx[0], by[0])
    for name, (losses, t) in trained.items():
        assert losses.shape == (STEPS,) and np.all(np.isfinite(losses)), name
        replicas, mixed = REPLICAS if name == "strategy" else 1, name == "fit+bf16"
        bound = bf16_loss_tolerance(ARCH.depth) if mixed else first_loss_bound(w, bx[0], by[0], replicas)
        assert abs(losses[0] - first) <= bound * first, name
        assert not np.array_equal(tf_impl.adapter("vit").get_weights(t.model())[0], w[0]), name
        dtype = "bfloat16" if mixed else "float32"
        assert (t.batchnorm, t.kernel_path, t.compute_dtype) == ("none", None, dtype), name
    assert trained["strategy"][1].placement() == [f"cpu:{i}" for i in range(REPLICAS)]
    r = trained["fit"][1].evaluate(data[0], data[1])
    assert np.isfinite(r["loss"]) and 0 <= r["accuracy"] <= 1
    with pytest.raises(ValueError, match="unknown TF vit_train variant 'fit\\+unroll'"):
        tf_impl.adapter("vit").make_trainer(build(), TF_DEVICES[:1], "fit+unroll")


@pytest.mark.parametrize("variant", ["predict", "predict+xla"])
def test_inference_gives_the_float64_probabilities(model, data, variant):
    x = data[0]
    p = tf_impl.adapter("vit").prepare_inference(model, x, TF_DEVICES[:1], variant)
    w = tf_impl.adapter("vit").get_weights(model)
    assert errors(p.run().numpy(), oracle.forward(w, x)["probs"])["max_rel_err"] < block_bounds(w, x)["probs"]
    assert p.kernel_path is None and p.cost()[1].startswith("TF profiler")


def test_mixed_precision_builds_in_bfloat16(model):
    """bfloat16 compute but for the pixels' scaling, the logits and the softmax; float32 weights (on any CPU: built,
    not run)."""
    mixed = tf_impl.adapter("vit").mixed_precision(model)
    assert {layer.name: layer.compute_dtype for layer in mixed.layers} == MIXED
    assert mixed.get_layer("block1").attn.compute_dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in mixed.weights)


@pytest.mark.skipif(not BF16, reason="no bfloat16 unit on this CPU: TF's oneDNN has no bfloat16 convolution there")
def test_mixed_precision_computes_in_bfloat16(model, data):
    """Its probabilities off the float32 model's by more than float32's rounding could make them (run where the CPU
    multiplies bfloat16, as the harness runs '+bf16' rows)."""
    mixed = tf_impl.adapter("vit").mixed_precision(model)
    tf_impl.adapter("vit").set_weights(mixed, tf_impl.adapter("vit").get_weights(model))
    x = data[0]
    w = tf_impl.adapter("vit").get_weights(model)
    err = errors(tf_impl.adapter("vit").forward_layers(mixed, x)["probs"], oracle.forward(w, x)["probs"])["max_rel_err"]
    assert err > block_bounds(w, x)["probs"]
