"""An implementation's adapters: one module per workload, `<package>.<workload>` (`jax_impl.cnn`, `tf_impl.conv`),
found by listing the package, never by a table that names them. A module is an adapter when it declares
`WORKLOAD = '<its own name>'`; it then implements the protocol below for its kind of workload. A new workload adds its
module to each implementation and nothing else there: `adapter('<name>')` finds it, and the model functions of the
surface (parity.api.FrameworkImpl) find a model's module through `MODEL`, also by listing. Each adapter declares its
workload's variants (`VARIANTS`, parity.api.variants records): an implementation's variants are its adapters', gathered
by `variants_of`."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, Protocol

from parity.api import Prepared
from parity.api.variants import Variant


class OpAdapter(Protocol):
    """An operation's (the conv's, the matmul's): one call prepared on the devices, its inputs placed beforehand."""

    WORKLOAD: str
    VARIANTS: tuple[Variant, ...]  # its row kind's variants (named as the workload)

    def prepare(self, variant: str, *operands_then_devices: Any, **op_args: Any) -> Prepared:
        """The call of `variant` (a variant of the row kind named as the workload), on the operands in the order the
        workload's spec gives them, then the devices, then the spec's `op_args()`."""


class TrainedAdapter(Protocol):
    """A trained model's: it builds the model; every model function of the surface (weights in and out, forward by
    layer, loss and gradients, the trainer, inference) takes what it built and finds this module again by
    `MODEL`, the type (or Keras model name) of what `build` returns."""

    WORKLOAD: str
    TRAIN: str  # its row kinds, under which its trainer and inference look their variants up
    INFER: str
    MODEL: Any
    VARIANTS: tuple[Variant, ...]  # the variants of both row kinds

    def build(self, *sizes: int, seed: int = 0, **options: Any) -> Any:
        """A new model of the workload at the architecture's sizes (none for the CNN), initialised from `seed`."""


def declaring(package: str, declares: Callable[[str, ModuleType], bool]) -> list[ModuleType]:
    """The modules of `package` (each imported), in their order, for which `declares(its name, it)` holds: how
    adapters here and the workloads' packages (parity.workloads) are found by listing."""
    modules = (
        importlib.import_module(f"{package}.{info.name}")
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
    )
    return [m for m in modules if declares(m.__name__.rsplit(".", 1)[1], m)]


@cache
def listed(package: str) -> tuple[str, ...]:
    """The workloads `package` has an adapter for, in its modules' order."""
    found = declaring(package, lambda name, module: getattr(module, "WORKLOAD", None) == name)
    return tuple(m.WORKLOAD for m in found)


def find(package: str, workload: str) -> ModuleType:
    """`package`'s adapter for `workload`. Raises ValueError naming those it has, for a workload it has none for."""
    if workload not in listed(package):
        raise ValueError(f"{package} has no adapter for workload {workload!r}; it has: {', '.join(listed(package))}")
    return importlib.import_module(f"{package}.{workload}")


def variants_of(package: str) -> tuple[Variant, ...]:
    """Every variant `package` declares: its adapters' `VARIANTS`, each adapter's in its own order, the adapters in
    their modules' order (read at each call, so that a test may replace one adapter's table)."""
    return tuple(v for name in listed(package) for v in find(package, name).VARIANTS)


def of_model(package: str, model: Any) -> ModuleType:
    """The trained-model adapter of `package` whose `MODEL` built `model`: a type it is an instance of, or a Keras
    model's name. Raises ValueError for a model none of them built, never running it as another's."""
    for name in listed(package):
        module = find(package, name)
        kind = getattr(module, "MODEL", None)
        if (isinstance(kind, type) and isinstance(model, kind)) or (isinstance(kind, str) and _name(model) == kind):
            return module
    raise ValueError(f"not a model {package} builds: {_name(model) or type(model).__name__!r}")


def _name(model: Any) -> str | None:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) else None
