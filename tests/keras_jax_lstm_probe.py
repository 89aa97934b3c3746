"""What tests/test_lstm_keras.py checks of the row LSTM inside Keras on JAX, run in a process of its own (Keras's
backend is fixed once a process: the test process's Keras is TensorFlow's). Reads a request (JSON) from argv[1],
writes its findings (JSON, and arrays to .npz) to argv[2]. Not a test module: pytest does not collect it."""

import json
import re
import sys

import numpy as np

sys.modules["tensorflow"] = None  # as the harness's worker does (parity.common.frameworks: keeps_out)
from probes import mixed_precision_findings  # noqa: E402

import keras_jax_impl as kj  # noqa: E402


def _trained(found: dict, arrays: dict, weights: str, x: np.ndarray, y: np.ndarray, devices) -> None:
    """Two steps of every lstm_train variant from the same weights: losses, and what each trainer says it runs."""
    for n in (1, len(devices)):
        for v in kj.variants("lstm_train", n):
            m = kj.adapter("lstm").build(found["units"], 0)
            kj.adapter("lstm").load_weights(m, weights)
            t = kj.adapter("lstm").make_trainer(m, devices[:n], v.name)
            arrays[f"train/{v.name}/loss"] = np.asarray(t.steps(x, y))[:, 0]
            found[v.name] = {
                "kernel_path": t.kernel_path,
                "compute_dtype": t.compute_dtype,
                "batchnorm": t.batchnorm,
                "placement": t.placement(),
            }
            arrays[f"train/{v.name}/w0"] = kj.adapter("lstm").get_weights(t.model())[
                0
            ]  # against the file's: it trained
            if v.name == "fit":  # the layers' scopes in the compiled step's op metadata, which --profile reads
                text = t.program_text()
                found["fit"]["scopes"] = [s for s in ("lstm1", "lstm2", "dense") if re.search(rf"[(/]{s}[)/]", text)]


def main(request: str, out: str) -> None:
    req = json.loads(open(request).read())
    devices = kj.setup_devices("cpu", 8)
    kj.set_precision("highest")
    units, x = req["units"], np.load(req["x"])
    found: dict = {"units": units, "backend": __import__("keras").backend.backend(), "devices": len(devices)}
    found["variants"] = {
        f"{k}x{n}": [v.name for v in kj.variants(k, n)] for k in ("lstm_train", "lstm_infer") for n in (1, 8)
    }
    arrays = {}
    model = kj.adapter("lstm").build(units, 0)
    kj.adapter("lstm").load_weights(model, req["weights"])  # TF's file, loaded here
    arrays["w0"] = kj.adapter("lstm").get_weights(model)[0]
    for block, a in kj.adapter("lstm").forward_layers(model, x).items():
        arrays[f"forward/{block}"] = a
    g = kj.adapter("lstm").loss_and_grads(model, x, np.load(req["y"]))
    found["loss"], found["routing"] = g.loss, len(g.routing)
    for i, a in enumerate(g.grads):
        arrays[f"grad/{i}"] = a
    for v in ("predict", "predict+unroll"):
        p = kj.adapter("lstm").prepare_inference(model, x, devices[:1], v)
        arrays[f"infer/{v}"] = np.asarray(p.run())
        found[f"infer/{v}"] = {"kernel_path": p.kernel_path, "cost": list(p.cost())}
    mixed_precision_findings(kj.adapter("lstm"), model, x, found, arrays)
    try:
        kj.adapter("lstm").set_weights(
            model, kj.adapter("lstm").get_weights(kj.adapter("lstm").build(units + 2, 0))
        )  # another width's list
    except ValueError as e:
        found["wrong_width"] = str(e)
    with np.load(req["batches"]) as f:
        _trained(found, arrays, req["weights"], f["x"], f["y"], devices)
    np.savez(req["arrays"], **arrays)
    with open(out, "w") as f:
        json.dump(found, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
