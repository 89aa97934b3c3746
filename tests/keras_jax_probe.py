"""What tests/test_keras_jax.py checks inside Keras on JAX, run in a process of its own (Keras's backend is fixed once
a process: the test process's Keras is TensorFlow's). Reads a request (JSON) from argv[1], writes its findings
(JSON, and arrays to .npz) to argv[2]. Not a test module: pytest does not collect it."""

import inspect
import json
import sys
import typing

import numpy as np

sys.modules["tensorflow"] = None  # as the harness's worker does (parity.common.frameworks: keeps_out)
import keras_jax_impl as kj  # noqa: E402
from parity import api  # noqa: E402


def _params(f) -> list[tuple[str, object]]:
    return [(p.name, repr(p.default)) for p in inspect.signature(f).parameters.values()]


def surface() -> list[str]:
    """Every way the package differs from parity.api.FrameworkImpl (empty: none)."""
    bad = [] if sorted(kj.__all__) == sorted(api.SURFACE) else [f"__all__ {sorted(kj.__all__)}"]
    for name in api.SURFACE:
        declared = getattr(api.FrameworkImpl, name, None)
        got = getattr(kj, name, None)
        if got is None:
            bad.append(f"lacks {name}")
        elif declared is None:
            kind = typing.get_origin(typing.get_type_hints(api.FrameworkImpl)[name])
            bad += [] if isinstance(got, kind) else [f"{name} is {type(got)}"]
        elif _params(got) != _params(declared)[1:]:
            bad.append(f"{name}{_params(got)}")
    return bad


def kept_out() -> dict:
    """TensorFlow kept out of this process: importing it fails, a look-up does not, and JAX's compilation cache
    (whose paths etils opens after such a look-up) writes a program no other process compiles: a constant of its own."""
    import importlib.util
    import os

    import jax

    found = {"lookup": importlib.util.find_spec("tensorflow") is not None}
    try:
        import tensorflow  # noqa: F401
    except ModuleNotFoundError as e:
        found["import"] = str(e)
    found["in_sys_modules"] = "tensorflow" in sys.modules
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if cache:  # tests/conftest.py sets one for the session (or the caller's own)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        before = set(os.listdir(cache))
        mark = int.from_bytes(os.urandom(3), "little")

        def kept_out_cache_entry(v):
            return v * 3.0 + mark

        jax.block_until_ready(jax.jit(kept_out_cache_entry)(np.ones(4, np.float32)))
        found["cache_entries"] = [
            f for f in set(os.listdir(cache)) - before if f.startswith("jit_kept_out_cache_entry-")
        ]
    return found


def on_an_accelerator(devices, req: dict, x, y) -> dict:
    """A stand-in accelerator (JAX's default backend said to be 'tpu', its device cpu:1, the host cpu:0): the models
    built on the host (where the trainer's copy is made), trained and run on the device, the same numbers as without
    the stand-in."""
    import jax

    import keras_jax_impl.train as kt

    ad, device = kj.adapter("cnn"), devices[1:2]
    made_on = []
    copy = kt._copy
    kt._copy = lambda *a: made_on.append(str(jax.config.jax_default_device)) or copy(*a)
    found = {}
    try:
        for name, backend in (("accelerator", lambda: "tpu"), ("cpu", jax.default_backend)):
            real, jax.default_backend = jax.default_backend, backend
            try:
                m = ad.build(0, dropout=False)
                ad.load_weights(m, req["weights"]["tf"])
                t = ad.make_trainer(m, device, "fit")
                found[name] = {"losses": np.asarray(t.steps(x, y))[:, 0].tolist(), "placement": t.placement()}
                p = ad.prepare_inference(m, x[0], device, "predict")
                found[name]["predict_on"] = p.placement(p.run())
                found[name]["copy_made_on"] = made_on.pop()
            finally:
                jax.default_backend = real
    finally:
        kt._copy = copy
    return found


def built_with(devices, x, y) -> dict:
    """Per trained workload at tiny sizes: how many variables two plain builds set alike (build(), set_weights) and
    how many of those a build_with model holds otherwise (Keras's initialisers left out: keras_models.models.unfilled;
    a CNN dropout layer's seed state must stay its own); and the CNN with its dropout: whether two steps of `fit`
    from each give the same losses and weights."""
    out, sizes = {}, {"cnn": (), "lstm": (8,), "vit": (16, 1, 2, 32)}
    for wl, size in sizes.items():
        a = kj.adapter(wl)
        w = [v + np.asarray(0.25, v.dtype) for v in a.get_weights(a.build(*size, 1))]
        plain = [a.build(*size, 0) for _ in range(2)]
        for m in plain:
            a.set_weights(m, w)
        given = a.build_with(w, *size, 0)
        state = [[np.asarray(v.numpy()) for v in m.variables] for m in (given, *plain)]
        alike = [i for i, (p, q) in enumerate(zip(state[1], state[2], strict=True)) if np.array_equal(p, q)]
        out[wl] = {
            "alike": len(alike),
            "weights": len(w),
            "differ": [i for i in alike if not np.array_equal(state[0][i], state[1][i])],
        }
        if wl == "cnn":
            runs = []
            for m in (given, plain[0]):
                t = a.make_trainer(m, devices[:1], "fit")
                runs.append([np.asarray(t.steps(x[:2], y[:2]))] + a.get_weights(t.model()))
            out["cnn_fit_same"] = all(np.array_equal(p, q) for p, q in zip(*runs, strict=True))
    return out


def rewound(devices, x, y) -> dict:
    """The CNN with its dropout, `fit` on one device and `data_parallel` on all: whether a trainer that took steps
    on other batches and was rewound (its `rewind`) takes the same two steps' losses and weights as it took new."""
    a, out = kj.adapter("cnn"), {}
    w = a.get_weights(a.build(3))
    for name, devs in (("fit", devices[:1]), ("data_parallel", devices)):
        t = a.make_trainer(a.build_with(w, 0), devs, name)
        new = [np.asarray(t.steps(x[:2], y[:2]))] + a.get_weights(t.model())
        t.steps(x[1:], y[1:])
        t.rewind()
        again = [np.asarray(t.steps(x[:2], y[:2]))] + a.get_weights(t.model())
        out[name] = all(np.array_equal(p, q) for p, q in zip(new, again, strict=True))
    return out


def main(request: str, out: str) -> None:
    req = json.loads(open(request).read())
    devices = kj.setup_devices("cpu", 8)
    kj.set_precision("highest")
    found: dict = {"surface": surface(), "devices": len(devices), "backend": __import__("keras").backend.backend()}
    found["variants"] = {
        f"{k}x{n}": [v.name for v in kj.variants(k, n)]
        for k in ("conv", "matmul", "cnn_train", "cnn_infer")
        for n in (1, 8)
    }
    arrays = {}
    for fw, path in req["weights"].items():  # another implementation's file, loaded and forward-passed here
        model = kj.adapter("cnn").build(0, dropout=False)
        kj.adapter("cnn").load_weights(model, path)
        arrays[f"{fw}/probs"] = kj.adapter("cnn").forward_layers(model, np.load(req["x"]))["probs"]
    model = kj.adapter("cnn").build(req["seed"])
    kj.adapter("cnn").save_weights(model, req["save"])
    with np.load(req["batches"]) as f:
        x, y = f["x"], f["y"]
    for name, devs in (("fit", devices[:1]), ("data_parallel", devices), ("fit+bf16", devices[:1])):
        m = kj.adapter("cnn").build(0, dropout=False)
        kj.adapter("cnn").load_weights(m, req["weights"]["tf"])
        t = kj.adapter("cnn").make_trainer(m, devs, name)
        arrays[f"traj/{name}/loss"] = np.asarray(t.steps(x, y))[:, 0]
        found[f"{name}/placement"] = t.placement()
        found[f"{name}/compute_dtype"] = t.compute_dtype
        found[f"{name}/batchnorm"] = t.batchnorm
        for i, w in enumerate(kj.adapter("cnn").get_weights(t.model())):
            arrays[f"traj/{name}/w{i:03d}"] = w
    try:
        kj.adapter("cnn").make_trainer(kj.adapter("cnn").build(0), devices[:1], "data_parallel")
    except ValueError as e:
        found["wrong_replicas"] = str(e)
    refused = []  # inputs checked where they enter (parity.api.inputs), as in the other implementations
    t = kj.adapter("cnn").make_trainer(kj.adapter("cnn").build(0, dropout=False), devices[:1], "fit")
    for call in (
        lambda: t.steps(x, y + 10),
        lambda: t.evaluate(x[0, :0], y[0, :0]),
        lambda: kj.adapter("conv").prepare(
            "ops", np.zeros((2, 8, 8, 3), np.float32), np.zeros((3, 3, 2, 4), np.float32), devices[:1]
        ),
        lambda: kj.adapter("cnn").set_weights(kj.adapter("cnn").build(0), None),
    ):
        try:
            call()
            refused.append(None)
        except ValueError as e:
            refused.append(str(e))
    found["refused"] = refused
    x8, k8 = np.ones((8, 8, 8, 3), np.float32), np.ones((3, 3, 3, 4), np.float32)
    found["conv_flops"] = [
        kj.adapter("conv").prepare(v, x8, k8, d).cost()[0]
        for v, d in (("ops", devices[:1]), ("data_parallel", devices))
    ]
    found["built_with"] = built_with(devices, x, y)
    found["rewound"] = rewound(devices, x, y)
    found["kept_out"] = kept_out()
    found["on_host"] = on_an_accelerator(devices, req, x, y)
    np.savez(req["arrays"], **arrays)
    with open(out, "w") as f:
        json.dump(found, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
