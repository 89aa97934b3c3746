"""The ViT in Keras 3 on JAX (keras_jax_impl), in a process of its own (Keras's backend is fixed once a process, and
the test process's is TensorFlow's): this module is that process's script too, `python tests/test_vit_keras_jax.py
request.json found.json`, with TensorFlow kept out as the harness's worker keeps it. Shared weights loaded there, its
layers and weights in the contract's order, every block, the loss and the gradients against the float64 oracle,
every vit_train and vit_infer variant, mixed precision. It also holds the ViT's Keras test helpers, free of
TensorFlow, which tests/test_vit_keras.py imports: the tiny architecture, its inputs, and its checks against the
float64 oracle within the bounds the workload derives (parity.workloads.vit.tolerances)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from probes import mixed_precision_findings

from parity.api.cnn import Weight
from parity.api.vit import ATTENTION_FIELDS, VitArchitecture
from parity.api.weights import load_npz, save_npz
from parity.common.float64 import errors
from parity.common.tolerances import F32_UNIT_ROUNDOFF
from parity.workloads.vit import oracle
from parity.workloads.vit.tolerances import vit_block_tolerances, vit_bounds

ARCH = VitArchitecture(dim=8, depth=1, heads=2, mlp=16)
BATCH, STEPS = 4, 2
REPLICAS = 2  # the data-parallel trainers: the same code as on 8 devices, in a quarter of the time
ROOT = Path(__file__).resolve().parent.parent
# each layer's compute dtype under mixed precision: bfloat16 but for the pixels' scaling, the logits and the softmax
MIXED = {"scale": "float32", "patch_embed": "bfloat16", "pos_embed": "bfloat16", "block1": "bfloat16",
         "norm": "bfloat16", "pool": "bfloat16", "dense": "float32", "probs": "float32"}  # fmt: skip


# ---- the helpers both Keras test modules share ----


def images(n: int = BATCH, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Raw pixels in [0, 255) (no empty patch: every token's row has its own scale) and labels."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, 28, 28, 1)) * 255).astype(np.float32), rng.integers(0, 10, n)


def batches() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The tests' images and labels, and STEPS training batches of BATCH beside them (the Keras tests' `data`)."""
    x, y = images()
    bx, by = images(STEPS * BATCH, seed=5)
    return x, y, bx.reshape(STEPS, BATCH, 28, 28, 1), by.reshape(STEPS, BATCH)


def random_weights(arch: VitArchitecture = ARCH, seed: int = 1) -> list[np.ndarray]:
    """Every array drawn, the biases and LayerNorms' offsets included, so that each matters to the blocks; the gains
    about 1 and each kernel's sd 1.5/sqrt(its fan-in), so that GELU's input spans its curved part."""
    rng = np.random.default_rng(seed)

    def sd(w: Weight) -> float:
        if not w.field.endswith("kernel"):
            return 0.3
        projection = w.field in ATTENTION_FIELDS and w.field != "output_kernel"  # (D, H, hd): fan-in D
        return 1.5 / np.sqrt(w.shape[0] if projection else np.prod(w.shape[:-1]))

    return [(rng.normal(0, sd(w), w.shape) + (w.field == "gamma")).astype(np.float32) for w in arch.weights]


def keras_path(w: Weight) -> str:
    """The tail of the weight's Keras path: '<layer>/<field>', the attention's '<layer>/<projection>/<kernel|bias>'
    (MultiHeadAttention names its output projection 'attention_output')."""
    if w.field not in ATTENTION_FIELDS:
        return f"{w.layer}/{w.field}"
    projection, kind = w.field.rsplit("_", 1)
    return f"{w.layer}/{'attention_output' if projection == 'output' else projection}/{kind}"


def block_bounds(weights: list[np.ndarray], x: np.ndarray) -> dict[str, float]:
    """Each forward block's float32 bound on these inputs, derived by the workload (parity.workloads.vit.tolerances)
    from the shared rounding model, relative to the block's max |float64 value|."""
    return vit_block_tolerances(weights, x, "cpu", "highest")


def over_bounds(got: dict[str, np.ndarray], weights: list[np.ndarray], x: np.ndarray) -> dict[str, float]:
    """Each block's error against float64 over its bound: below 1 where the block is within it."""
    ref, bounds = oracle.forward(weights, x), block_bounds(weights, x)
    return {k: errors(got[k], ref[k])["max_rel_err"] / bounds[k] for k in ref}


def grads_over_bound(grads: list[np.ndarray], weights, x, y) -> list[float]:
    """Each gradient's max absolute error against float64 over its derived bound (vit_bounds' grad_abs: the key
    bias's, zero in exact arithmetic, on its terms' scale)."""
    _, ref = oracle.loss_and_grads(weights, x, y)
    bounds = vit_bounds(weights, x, y, "cpu", "highest")["grad_abs"]
    return [float(np.max(np.abs(g - r))) / b for g, r, b in zip(grads, ref, bounds, strict=True)]


def first_loss_bound(weights, x: np.ndarray, y: np.ndarray, replicas: int) -> float:
    """A trainer's first-step loss against float64, relative to it: over `replicas` devices each computes its share's
    mean (its own derived bound, vit_bounds' loss), and their mean rounds once more."""
    share = len(y) // replicas
    parts = [slice(r * share, (r + 1) * share) for r in range(replicas)]
    worst = max(vit_bounds(weights, x[s], y[s], "cpu", "highest")["loss"] for s in parts)
    return worst + (F32_UNIT_ROUNDOFF if replicas > 1 else 0.0)


# ---- the probe: Keras on JAX, in this module's own process ----


def _train(kj, found: dict, arrays: dict, req: dict, devices) -> None:
    """Two steps of every vit_train variant from the shared weights: losses, and what each trainer says it runs."""
    arch = VitArchitecture(**req["arch"])
    with np.load(req["batches"]) as f:
        bx, by = f["x"], f["y"]
    for n in (1, len(devices)):
        for v in kj.variants("vit_train", n):
            m = kj.adapter("vit").build(arch.dim, arch.depth, arch.heads, arch.mlp)
            kj.adapter("vit").load_weights(m, req["weights"])
            t = kj.adapter("vit").make_trainer(m, devices[:n], v.name)
            arrays[f"train/{v.name}/loss"] = np.asarray(t.steps(bx, by))[:, 0]
            found[v.name] = {"kernel_path": t.kernel_path, "compute_dtype": t.compute_dtype,
                             "batchnorm": t.batchnorm, "placement": t.placement()}  # fmt: skip
            arrays[f"train/{v.name}/w0"] = kj.adapter("vit").get_weights(t.model())[0]
            if v.name == "fit":  # the layers' scopes in the compiled step's op metadata, which --profile reads
                text = t.program_text()
                scopes = ("patch_embed", "pos_embed", "block1_attn", "block1_mlp1", "norm", "dense")
                found["fit"]["scopes"] = [s for s in scopes if re.search(rf"[(/]{s}[)/]", text)]
                found["fit"]["cost"] = list(t.step_cost())


def probe(request: str, out: str) -> None:
    """Keras on JAX (TensorFlow kept out): what the tests below read, to `out` (JSON) and req['arrays'] (.npz)."""
    req = json.loads(Path(request).read_text())
    sys.modules["tensorflow"] = None  # as the harness's worker does (parity.common.frameworks: keeps_out)
    import keras_jax_impl as kj  # before Keras: it keeps TensorFlow out by an import hook, then picks JAX

    keras = sys.modules["keras"]
    devices = kj.setup_devices("cpu", REPLICAS)
    kj.set_precision("highest")
    arch = VitArchitecture(**req["arch"])
    found = {"backend": keras.backend.backend(), "devices": len(devices), "surface": sorted(kj.__all__)}
    found["adapter"] = kj.adapter("vit").code.__name__
    found["variants"] = {f"{k}x{n}": [v.name for v in kj.variants(k, n)] for k in ("vit_train", "vit_infer")
                         for n in (1, REPLICAS)}  # fmt: skip
    model = kj.adapter("vit").build(arch.dim, arch.depth, arch.heads, arch.mlp, seed=5)
    kj.adapter("vit").load_weights(model, req["weights"])  # the test process's file, loaded here
    found["names"], found["paths"] = [la.name for la in model.layers], [v.path for v in model.weights]
    x, y = np.load(req["x"]), np.load(req["y"])
    arrays = {f"forward/{k}": a for k, a in kj.adapter("vit").forward_layers(model, x).items()}
    g = kj.adapter("vit").loss_and_grads(model, x, y)
    found["loss"], found["routing"] = g.loss, len(g.routing)
    arrays.update({f"grad/{i}": a for i, a in enumerate(g.grads)})
    p = kj.adapter("vit").prepare_inference(model, x, devices[:1], "predict")
    arrays["infer/predict"] = np.asarray(p.run())
    found["infer/predict"] = {"kernel_path": p.kernel_path, "cost": list(p.cost())}
    mixed_precision_findings(kj.adapter("vit"), model, x, found, arrays)
    try:
        kj.adapter("vit").set_weights(
            model,
            kj.adapter("vit").get_weights(kj.adapter("vit").build(arch.dim + 2, arch.depth, arch.heads, arch.mlp)),
        )
    except ValueError as e:
        found["wrong_width"] = str(e)
    kj.adapter("vit").save_weights(model, req["save"])
    _train(kj, found, arrays, req, devices)
    np.savez(req["arrays"], **arrays)
    Path(out).write_text(json.dumps(found))


if __name__ == "__main__":
    probe(sys.argv[1], sys.argv[2])


# ---- the tests, in the test process ----


@pytest.fixture(scope="module")
def data():
    return batches()


@pytest.fixture(scope="module")
def found(data, tmp_path_factory):
    """The probe's findings and arrays, from shared weights (parity.api.weights' file, every implementation's) and
    the batches above. The probe imports this checkout's packages (PYTHONPATH), as the test process does."""
    d = tmp_path_factory.mktemp("kj-vit")
    x, y, bx, by = data
    save_npz(random_weights(), d / "w.npz")
    np.save(d / "x.npy", x), np.save(d / "y.npy", y), np.savez(d / "batches.npz", x=bx, y=by)
    req = {"arch": {"dim": ARCH.dim, "depth": ARCH.depth, "heads": ARCH.heads, "mlp": ARCH.mlp}}
    req.update(weights=str(d / "w.npz"), x=str(d / "x.npy"), y=str(d / "y.npy"), batches=str(d / "batches.npz"))
    req.update(arrays=str(d / "arrays.npz"), save=str(d / "saved.npz"))
    (d / "req.json").write_text(json.dumps(req))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run(
        [sys.executable, __file__, str(d / "req.json"), str(d / "found.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((d / "found.json").read_text()), dict(np.load(d / "arrays.npz")), req


def test_keras_on_jax_builds_the_contracts_layers_and_takes_shared_weights(found):
    got, arrays, req = found
    assert got["backend"] == "jax" and got["devices"] == REPLICAS and got["adapter"] == "keras_jax_impl.vit"
    assert got["names"] == list(ARCH.names)
    assert all(p.endswith(keras_path(w)) for p, w in zip(got["paths"], ARCH.weights, strict=True))
    sent, saved = load_npz(req["weights"], ARCH.weights), load_npz(req["save"], ARCH.weights)
    assert all(np.array_equal(a, b) for a, b in zip(saved, sent, strict=True))  # in, out, in Keras's order
    assert "weight 0 (patch_embed.kernel): shape (4, 4, 1, 10), expected (4, 4, 1, 8)" in got["wrong_width"]
    assert got["variants"] == {"vit_trainx1": ["fit", "fit+bf16"], f"vit_trainx{REPLICAS}": ["data_parallel"],
                               "vit_inferx1": ["predict"], f"vit_inferx{REPLICAS}": []}  # fmt: skip


def test_keras_on_jax_meets_the_float64_oracle(found, data):
    """Every block, the loss and every gradient within their bounds from the shared rounding model."""
    got, arrays, req = found
    x, y, _, _ = data
    w = load_npz(req["weights"], ARCH.weights)
    blocks = {k.split("/")[1]: a for k, a in arrays.items() if k.startswith("forward/")}
    assert max(over_bounds(blocks, w, x).values()) < 1
    loss, _ = oracle.loss_and_grads(w, x, y)
    assert got["routing"] == 0 and abs(got["loss"] - loss) <= vit_bounds(w, x, y, "cpu", "highest")["loss"] * loss
    assert max(grads_over_bound([arrays[f"grad/{i}"] for i in range(len(w))], w, x, y)) <= 1


def test_keras_on_jax_trains_every_variant(found, data):
    """fit and DataParallel: finite losses, the weights moved, the first step's loss (before any update) the float64
    loss within its bound (over replicas one more rounding, their mean's), no BatchNorm, no recurrent kernel."""
    got, arrays, req = found
    _, _, bx, by = data
    w = load_npz(req["weights"], ARCH.weights)
    first, _ = oracle.loss_and_grads(w, bx[0], by[0])
    for name, n in (("fit", 1), ("data_parallel", REPLICAS)):
        losses, f = arrays[f"train/{name}/loss"], got[name]
        assert losses.shape == (STEPS,) and np.all(np.isfinite(losses)), name
        assert abs(losses[0] - first) <= first_loss_bound(w, bx[0], by[0], n) * first, name
        assert not np.array_equal(arrays[f"train/{name}/w0"], w[0]), name
        assert f["batchnorm"] == "none" and f["kernel_path"] is None and f["compute_dtype"] == "float32", name
    assert got["fit"]["placement"] == ["cpu:0"]
    assert got["data_parallel"]["placement"] == [f"cpu:{i}" for i in range(REPLICAS)]
    assert set(got["fit"]["scopes"]) == {"patch_embed", "pos_embed", "block1_attn", "block1_mlp1", "norm", "dense"}
    flops, counter = got["fit"]["cost"]  # XLA's count of the step: at least the forward pass's products, three times
    assert flops >= 3 * BATCH * ARCH.forward_flops() and counter == "XLA cost analysis"


def test_keras_on_jax_infers_and_computes_mixed_precision_in_bfloat16(found, data):
    got, arrays, req = found
    x = data[0]
    w = load_npz(req["weights"], ARCH.weights)
    ref, bound = oracle.forward(w, x)["probs"], block_bounds(w, x)["probs"]
    assert errors(arrays["infer/predict"], ref)["max_rel_err"] < bound
    flops, counter = got["infer/predict"]["cost"]
    assert got["infer/predict"]["kernel_path"] is None and flops >= len(x) * ARCH.forward_flops(), counter
    assert got["mixed/dtypes"] == MIXED
    # bfloat16's rounding, not float32's: beyond the float32 bound of the probabilities
    assert errors(arrays["mixed/probs"], ref)["max_rel_err"] > bound
