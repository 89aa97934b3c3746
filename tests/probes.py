"""A probe script run in a process of its own (Keras on JAX fixes its backend once a process): its request written to
a file beside the batches it reads, its findings and arrays read back."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def run_probe(probe: Path, d: Path, req: dict) -> tuple[dict, dict]:
    """Run `probe` on `req` (to which the batches' file, d/batches.npz, and its arrays' file are added); returns its
    findings (d/found.json) and its arrays. A probe that fails fails the test with the end of its stderr."""
    req.update(batches=str(d / "batches.npz"), arrays=str(d / "arrays.npz"))
    (d / "req.json").write_text(json.dumps(req))
    p = subprocess.run(
        [sys.executable, str(probe), str(d / "req.json"), str(d / "found.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((d / "found.json").read_text()), dict(np.load(d / "arrays.npz"))


def mixed_precision_findings(adapter, model, x: np.ndarray, found: dict, arrays: dict) -> None:
    """In a probe: the adapter's mixed-precision copy of `model`, given the model's weights: its layers' compute dtypes
    (found["mixed/dtypes"]) and its probabilities on `x` (arrays["mixed/probs"])."""
    mixed = adapter.mixed_precision(model)
    adapter.set_weights(mixed, adapter.get_weights(model))
    found["mixed/dtypes"] = {layer.name: layer.compute_dtype for layer in mixed.layers}
    arrays["mixed/probs"] = adapter.forward_layers(mixed, x)["probs"]
