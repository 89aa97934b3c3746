"""The test MLP's worker side: its timed cases (a training epoch per call, inference) and its untimed calls (set-up,
shared initial weights, parity arrays). What it shares with the CNN and the LSTM is parity.workloads.trained's."""

from __future__ import annotations

import numpy as np

from mlp_workload import oracle
from mlp_workload.spec import CLASSES, MlpSpec
from mlp_workload.tolerances import mlp_block_tolerances
from parity.api.variants import Variant
from parity.api.weights import load_npz, save_npz
from parity.workloads.base import RowKind, Timed, output_verifier
from parity.workloads.ops import _saving
from parity.workloads.trained import Epochs, dataset, parity_arrays


def _model(impl, s: MlpSpec, weights: str):
    model = impl.adapter("mlp").build(s.hidden, s.seed)
    impl.adapter("mlp").set_weights(model, load_npz(weights, s.weights))  # every framework starts from the same weights
    return model


def mlp_train_case(
    impl, devices, kind: RowKind, spec: MlpSpec, variant: Variant, device, precision, save, data, weights, validate: str
):
    """One epoch per timed call (steps_per_epoch global batches in the trained workloads' batch order)."""
    s, ds = spec, dataset(data)
    model = _model(impl, s, weights)
    trainer = impl.adapter("mlp").make_trainer(model, devices, variant.name, s.learning_rate, s.adam_epsilon, s.seed)
    epochs = Epochs(impl, devices, device, variant, s, ds, trainer, validate)
    k = s.steps_per_epoch
    info = {
        "flops": s.step_flops() * k,
        "flops_formula": MlpSpec.step_flops.__doc__,
        "min_bytes": s.step_min_bytes() * k,
        "images": k * s.global_batch,
        "data": ds.source,
        "kernel_path": trainer.kernel_path,
        "cost": epochs.cost,
        "program": trainer.program_text,
    }
    return Timed(epochs.run, epochs.verify, info, epochs.finish)


def mlp_infer_case(
    impl, devices, kind: RowKind, spec: MlpSpec, variant: Variant, device, precision, save, data, weights, **_
):
    """Inference on one global batch of test images, checked against the float64 forward pass within the bound
    derived for these weights and images."""
    ds = dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    w = load_npz(weights, spec.weights)
    ref = oracle.mlp_forward(w, x[idx])["probs"]
    tol = mlp_block_tolerances(w, x[idx], device, precision)["probs"]
    p = impl.adapter("mlp").prepare_inference(_model(impl, spec, weights), x, devices, variant.name)
    verify = output_verifier(
        p.shape, _saving(p.rows, save), p.placement, (len(x), CLASSES), idx, ref, tol, device, len(devices)
    )
    info = {
        "flops": spec.forward_flops() * len(x),
        "flops_formula": spec.forward_flops.__doc__,
        "min_bytes": spec.infer_min_bytes(len(x)),
        "images": len(x),
        "data": ds.source,
        "kernel_path": p.kernel_path,
        "tolerance": tol,
        "cost": p.cost,
        "program": p.program,
    }
    return Timed(p.run, verify, info)


# Untimed requests by name (mlp_workload.WORKLOAD.calls): fn(impl, devices, request) -> answer.


def mlp_warm(impl, devices, req: dict) -> dict:
    """A framework's first model build runs its one-off set-up: done before anything is timed."""
    impl.adapter("mlp").build(req.get("hidden", 4))
    return {}


def mlp_init_weights(impl, devices, req: dict) -> dict:
    """This framework's freshly initialised weights for a seed and width, to a .npz every framework starts from."""
    mlp = impl.adapter("mlp")
    save_npz(mlp.get_weights(mlp.build(req["hidden"], req["seed"])), req["out"])
    return {}


def mlp_parity(impl, devices, req: dict) -> dict:
    """Forward blocks, one batch's loss and gradients, and a short trajectory per variant, to .npz."""
    s = MlpSpec(**req["spec"])
    return parity_arrays(impl, impl.adapter("mlp"), devices, req, lambda w: _model(impl, s, w), s)
