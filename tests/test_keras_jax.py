"""Keras 3 on JAX (keras_jax_impl) on 8 simulated CPU devices, in a process of its own (tests/keras_jax_probe.py:
Keras's backend is fixed once a process, and this one's is TensorFlow's): its surface, weights that load across all
three implementations, DataParallel's trajectory against one device's, and a clear refusal to share a process with
Keras on TensorFlow. Its numbers against float64 and the others' (forward, gradients, trajectories), and its CLI
path, are the end-to-end runs' (tests/test_cli.py)."""

from pathlib import Path

import numpy as np
import pytest
from frameworks_setup import IMPLS
from probes import run_probe

from parity.api.cnn import CNN_WEIGHTS
from parity.api.weights import load_npz
from parity.common.frameworks import JAX, TF
from parity.workloads.cnn import checks
from parity.workloads.cnn.tolerances import cnn_tolerances

PROBE = Path(__file__).with_name("keras_jax_probe.py")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The probe's findings and arrays, from weights and batches this process wrote with TF's and JAX's
    implementations."""
    d = tmp_path_factory.mktemp("kj")
    weights = {}
    for fw in (TF, JAX):
        impl, _ = IMPLS[fw]
        weights[fw] = str(d / f"w-{fw}.npz")
        impl.adapter("cnn").save_weights(impl.adapter("cnn").build(1), weights[fw])
    rng = np.random.default_rng(0)
    np.save(d / "x.npy", (rng.random((4, 28, 28, 1)) * 255).astype(np.float32))
    np.savez(
        d / "batches.npz", x=(rng.random((3, 16, 28, 28, 1)) * 255).astype(np.float32), y=rng.integers(0, 10, (3, 16))
    )
    req = {"weights": weights, "x": str(d / "x.npy"), "seed": 2, "save": str(d / "w-kj.npz")}
    return (*run_probe(PROBE, d, req), req)


def test_its_surface_is_the_declared_one_on_8_devices(probe):
    found, _, _ = probe
    assert found["surface"] == [] and found["backend"] == "jax" and found["devices"] == 8
    for kind in ("conv", "matmul", "cnn_train"):  # every row kind at one device and data-parallel
        assert found["variants"][f"{kind}x1"] and found["variants"][f"{kind}x8"], kind
    assert found["variants"]["cnn_inferx1"] == ["predict"]
    assert found["fit/placement"] == ["cpu:0"]
    assert found["data_parallel/placement"] == [f"cpu:{i}" for i in range(8)]
    assert "unknown Keras (JAX) cnn_train variant 'data_parallel' for 1 replicas" in found["wrong_replicas"]
    labels, empty, channels, weights = found["refused"]  # each a ValueError naming the problem
    assert "labels must lie in 0..9" in labels and "no images" in empty
    assert "the kernels take 2" in channels and "expected a list of" in weights
    one, eight = found["conv_flops"]  # XLA's count of the global program: the same work however it is split
    assert one and eight == one


def test_a_model_built_with_its_weights_is_one_built_then_given_them(probe):
    """build_with leaves Keras's initialisers out (keras_models.models.unfilled): every variable two plain builds set
    alike is the same in it, a dropout layer's seed state among them (the CNN's), and the CNN trains from it as from
    the other, dropout on: the same two steps' losses and weights."""
    found, _, _ = probe
    built = found["built_with"]
    for wl in ("cnn", "lstm", "vit"):
        assert built[wl]["differ"] == [] and built[wl]["alike"] >= built[wl]["weights"], (wl, built[wl])
    assert built["cnn"]["alike"] > built["cnn"]["weights"]  # the dropout layers' seed states are compared too
    assert built["cnn_fit_same"]


def test_a_rewound_trainer_trains_as_a_new_one(probe):
    """A trainer that trained on other batches and was rewound (parity.workloads.trained.kept) takes the same steps as
    a new one, to the bit: the CNN with its dropout, on one device and data-parallel (tests/test_rewind.py: TF's,
    JAX's)."""
    found, _, _ = probe
    assert found["rewound"] == {"fit": True, "data_parallel": True}


def test_weights_load_across_all_three_implementations(probe):
    """TF's and JAX's files load into Keras on JAX and give their own forward pass; its file loads into both."""
    found, arrays, req = probe
    x = np.load(req["x"])
    tol = cnn_tolerances("cpu", "highest")["forward"]
    for fw in (TF, JAX):
        impl, _ = IMPLS[fw]
        model = impl.adapter("cnn").build(0, dropout=False)
        impl.adapter("cnn").load_weights(model, req["weights"][fw])
        ref = impl.adapter("cnn").forward_layers(model, x)["probs"]
        assert np.max(np.abs(arrays[f"{fw}/probs"] - ref)) / np.max(np.abs(ref)) < tol, fw
        mine = impl.adapter("cnn").build(0)
        impl.adapter("cnn").load_weights(mine, req["save"])
        kept = load_npz(req["save"], CNN_WEIGHTS)
        assert all(np.array_equal(a, b) for a, b in zip(impl.adapter("cnn").get_weights(mine), kept, strict=True)), fw


def test_data_parallel_trains_as_one_device_on_the_global_batch(probe):
    """Keras's DataParallel is one SPMD program: BatchNorm's statistics are the global batch's, so its trajectory
    over 8 devices is one device's on the same batches (float32 summation orders apart)."""
    found, arrays, _ = probe
    assert found["data_parallel/batchnorm"] == "global" and found["fit/batchnorm"] == "replica"
    tols = cnn_tolerances("cpu", "highest")
    rows = checks.trajectory(arrays, arrays, "fit", "data_parallel", tols, 8, ("x1", "x8"))
    assert all(r["passed"] for r in rows), rows
    assert found["fit+bf16/compute_dtype"] == "bfloat16" and found["fit/compute_dtype"] == "float32"


def test_tensorflow_kept_out_fails_its_import_and_leaves_jaxs_compilation_cache_working(probe):
    """As the harness's worker runs it (TensorFlow kept out): importing TF fails and leaves no entry in sys.modules
    (Keras's preprocessing reads one as TF loaded), while a look-up does not fail: etils, opening JAX's compilation
    cache's folder, makes one, and a look-up that raised left the cache off in Keras on JAX's processes."""
    found = probe[0]["kept_out"]
    assert found["lookup"] and not found["in_sys_modules"]
    assert "import of tensorflow halted: kept out of Keras on JAX's process" in found["import"]
    # in tests/conftest.py's JAX_COMPILATION_CACHE_DIR (or the caller's): the program, beside its access time
    assert [f.endswith("-cache") for f in found["cache_entries"]].count(True) == 1, found


def test_it_refuses_to_share_a_process_with_keras_on_tensorflow():
    import tf_impl  # noqa: F401 (Keras loaded on TensorFlow, as in this process)

    with pytest.raises(ImportError, match="needs Keras on the JAX backend.*process of its own"):
        import keras_jax_impl  # noqa: F401


def test_on_an_accelerator_its_models_are_built_on_the_host_and_run_on_the_device(probe):
    """Keras's initialisers compile in milliseconds on the host's CPU, for seconds each on a TPU: on an accelerator
    (a stand-in here: JAX's backend said to be 'tpu', the device cpu:1, the host cpu:0) the trainer's copy is made on
    the host, then trains on the device, to the same numbers; inference runs on the device too."""
    found = probe[0]["on_host"]
    acc, cpu = found["accelerator"], found["cpu"]
    assert acc["copy_made_on"] == "cpu:0" and cpu["copy_made_on"] == "cpu:1", found  # without it: on the device
    assert acc["placement"] == cpu["placement"] == ["cpu:1"] and acc["predict_on"] == ["cpu:1"], found
    assert acc["losses"] == cpu["losses"], found  # the same training, to the bit
