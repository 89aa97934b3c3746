"""A trained model's Workload record, made from its TrainedModel: the row kinds and untimed calls
(parity.workloads.trained.model_cases), the parent side (model_suite.ModelSuite), the spec fields the command line may
set, and its schedules. What each model declares beyond its TrainedModel are its sizes, layers and place."""

from __future__ import annotations

from collections.abc import Callable

from parity.common.tolerances import tolerance
from parity.workloads.base import Workload, accelerator_schedule, notebook_schedule
from parity.workloads.trained import model_cases
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.model_suite import ModelSuite

OPTIONS = ("global_batch", "epochs", "steps_per_epoch")  # what --batch, --epochs and --steps-per-epoch set


def workload(
    model: TrainedModel,
    cpu,
    quick,
    layers: tuple[str, ...],
    *,
    infer_tolerance: Callable[[str, str, str], float] = tolerance,
    rank: int = 10,
    notebook: bool = True,
    accelerator: bool = False,
) -> Workload:
    """The Workload of `model` at its full size, `cpu` and `quick`.

    Args:
        layers: the model's layer names in order, then "loss": --profile's per-layer attribution.
        infer_tolerance: (device, precision, dtype) -> the inference row's tolerance where it brings no bound of its
            own (the device's agreement table; the row replaces it by its weights' bound, block_tolerances' "probs").
        rank: where a run takes it among the workloads (10: after the built-in ones).
        notebook: whether `--schedule notebook` sets the full size's schedule (base.notebook_schedule).
        accelerator: whether a GPU's and a TPU's default is base.accelerator_schedule of the full size, not it.
    """
    return Workload(
        model.name,
        model.full,
        cpu,
        quick,
        model_cases.kinds(model, infer_tolerance),
        options=OPTIONS,
        suite=ModelSuite(model),
        layers=layers,
        calls=model_cases.calls(model),
        notebook=notebook_schedule(model.full) if notebook else {},
        accelerator=accelerator_schedule(model.full) if accelerator else None,
        rank=rank,
    )
