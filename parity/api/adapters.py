"""An implementation's adapters: one module per workload, `<package>.<workload>` (`jax_impl.cnn`, `tf_impl.conv`),
found by listing the package, never by a table that names them. A module is an adapter when it declares
`WORKLOAD = '<its own name>'`; it then implements the protocol below for its kind of workload. A new workload adds its
module to each implementation and nothing else there: `adapter('<name>')` finds it. An operation's module is its
adapter; a trained model's is bound to the framework's trainer and model functions (`Trained`): the model functions
belong to the adapter, never to the implementation's surface (parity.api.FrameworkImpl). Each adapter declares its
workload's variants (`VARIANTS`, parity.api.variants records): an implementation's variants are its adapters', gathered
by `variants_of`."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Sequence
from functools import cache, partial
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from parity.api import Gradients, Prepared
from parity.api.inputs import check_examples, check_images, check_training
from parity.api.light import LIGHTS
from parity.api.variants import Variant
from parity.api.weights import load_npz, save_npz


class OpAdapter(Protocol):
    """An operation's (the conv's, the matmul's): one call prepared on the devices, its inputs placed beforehand."""

    WORKLOAD: str
    VARIANTS: tuple[Variant, ...]  # its row kind's variants (named as the workload)

    def prepare(self, variant: str, *operands_then_devices: Any, **op_args: Any) -> Prepared:
        """The call of `variant` (a variant of the row kind named as the workload), on the operands in the order the
        workload's spec gives them, then the devices, then the spec's `op_args()`."""


class Trained:
    """A trained model's adapter, in every implementation: what `adapter(<its workload>)` returns, the implementation's
    module of the workload (`code`: build, WORKLOAD, TRAIN, INFER, MODEL, VARIANTS and the model code) bound to the
    framework's one trainer, `make_trainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)` in the
    module named `trainer` (imported at first use: it imports the model code). What comes in is checked here, once for
    every framework, before any framework sees it: a model this workload's `build` did not make (or a copy of one:
    the bfloat16 copy) is refused, never run as another's; images, labels and the trainer's numbers go through
    parity.api.inputs. `model_code` is the module whose model functions it calls: `code` itself, or where a framework
    writes the model once for two implementations (Keras's keras_models.<workload>), that one. `unfilled(build)`: the
    model build() makes with placeholders for weights, its initialisers not run, where the framework's initialisers
    cost what set_weights then discards (JAX's and Keras 3 on JAX's compile each at its first use: seconds a model);
    None: build() itself."""

    def __init__(
        self,
        code: ModuleType,
        trainer: str,
        model_code: ModuleType | None = None,
        unfilled: Callable[[Callable[[], Any]], Any] | None = None,
    ):
        self.code, self.model_code, self.trainer = code, model_code or code, trainer
        self._unfilled = unfilled
        self.WORKLOAD, self.TRAIN, self.INFER = code.WORKLOAD, code.TRAIN, code.INFER  # its row kinds

    def __repr__(self) -> str:
        return f"<{self.code.__name__} adapter>"

    @property
    def VARIANTS(self) -> tuple[Variant, ...]:  # noqa: N802 (the module's declaration, read at each call)
        """The variants of both row kinds."""
        return self.code.VARIANTS

    def build(self, *sizes: int, **options: Any) -> Any:
        """A new model of the workload at the architecture's sizes (none for the CNN), initialised from `seed`."""
        return self.code.build(*sizes, **options)

    def unfilled(self, *sizes: int, **options: Any) -> Any:
        """A new model as build() makes it, its weights placeholders for set_weights to replace (build_with), its
        initialisers not run where the framework's cost seconds (`unfilled`, above); else build() itself."""
        return self.unfilled_of(partial(self.build, *sizes, **options))

    def unfilled_of(self, make: Callable[[], Any]) -> Any:
        """make() (a model, or a copy of one, whose weights are to be set), its initialisers not run where the
        framework leaves them out (`unfilled`)."""
        return make() if self._unfilled is None else self._unfilled(make)

    def build_with(self, weights: Sequence[np.ndarray], *sizes: int, **options: Any) -> Any:
        """A new model holding `weights` (Keras's order, checked as set_weights checks them): what build() then
        set_weights() make, without the initialisers' work where the framework leaves it out (unfilled)."""
        model = self.unfilled(*sizes, **options)
        self.set_weights(model, weights)
        return model

    def owned(self, model: Any) -> Any:
        """`model`, when this workload's `build` made it (its MODEL: a type it is an instance of, or a Keras model's
        name). Raises ValueError for any other."""
        kind, name = self.code.MODEL, _name(model)
        if (isinstance(kind, type) and isinstance(model, kind)) or (isinstance(kind, str) and name == kind):
            return model
        raise ValueError(f"not a model {self.code.__name__} builds: {name or type(model).__name__!r}")

    def mixed_precision(self, model: Any) -> Any:
        """A bfloat16-compute copy of `model` (float32 parameters, the same values): what the '+bf16' variants train."""
        return self.model_code.mixed_precision(self.owned(model))

    def count_params(self, model: Any) -> dict[str, int]:
        """{'total', 'trainable', 'non_trainable'} as Keras's summary counts them."""
        return self.model_code.count_params(self.owned(model))

    def get_weights(self, model: Any) -> list[np.ndarray]:
        """All weights as NumPy arrays, in Keras's get_weights() order."""
        return self.model_code.get_weights(self.owned(model))

    def set_weights(self, model: Any, weights: Sequence[np.ndarray]) -> None:
        """Load weights in Keras's order. Raises ValueError naming the layer on a length/shape/dtype mismatch."""
        self.model_code.set_weights(self.owned(model), weights)

    def save_weights(self, model: Any, path: Any) -> None:
        """Save to .npz in Keras's get_weights() order: loadable by every implementation."""
        save_npz(self.get_weights(model), path)

    def load_weights(self, model: Any, path: Any) -> None:
        """Load a .npz any implementation's save_weights wrote (bounded by this model's weights, checked as set)."""
        self.set_weights(model, load_npz(path, self.get_weights(model)))

    def forward_layers(self, model: Any, x: np.ndarray) -> dict[str, np.ndarray]:
        """Inference: every block's output as NumPy, by block name (the workload's architecture names them)."""
        check_images(x)
        return self.model_code.forward_layers(self.owned(model), x)

    def loss_and_grads(self, model: Any, x: np.ndarray, y: np.ndarray) -> Gradients:
        """One batch's loss and gradients in Keras's trainable_weights order, and each max-pooling layer's routing."""
        check_examples(x, y, 1)
        return self.model_code.loss_and_grads(self.owned(model), x, y)

    def make_trainer(
        self, model: Any, devices: Sequence[Any], variant: str, learning_rate=1e-3, adam_epsilon=1e-7, seed=0
    ):
        """The framework's one trainer (parity.api.Trainer) of `model` by a variant of TRAIN over `devices`."""
        seed = check_training(learning_rate, adam_epsilon, seed)
        trainer = importlib.import_module(self.trainer).make_trainer
        return trainer(self, self.owned(model), devices, variant, learning_rate, adam_epsilon, seed)

    def prepare_inference(self, model: Any, images: np.ndarray, devices: Sequence[Any], variant: str = "predict"):
        """Softmax probabilities of `images` on devices[0], inputs placed beforehand: a variant of INFER (Prepared)."""
        check_images(images)  # once, here: not in the timed call
        return self.model_code.prepare_inference(self.owned(model), images, devices, variant)


def declaring(package: str, declares: Callable[[str, ModuleType], bool]) -> list[ModuleType]:
    """The modules of `package` (each imported), in their order, for which `declares(its name, it)` holds: how
    adapters here and the workloads' packages (parity.workloads) are found by listing."""
    modules = (
        importlib.import_module(f"{package}.{info.name}")
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
    )
    return [m for m in modules if declares(m.__name__.rsplit(".", 1)[1], m)]


# Adapters from outside an implementation's package: a plug-in workload's (parity.workloads.plugins), by implementation
# package, then workload -> the module that holds it ('parity_gru.jax_impl'), imported at first use as
# `<package>.<workload>`, so that every lookup here, and Keras's of keras_models.<workload>, finds it as its own.
PLUGGED: dict[str, dict[str, str]] = {}
SHARED = ("keras_models",)  # model code an implementation imports by workload (keras_models.models.KerasTrained)


def plug(package: str, workload: str, module: str) -> None:
    """Make `module` (a plug-in's, not imported yet) `package`'s adapter for `workload`, after its own ones."""
    PLUGGED.setdefault(package, {})[workload] = module
    listed.cache_clear()


class _Plugged(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `<package>.<workload>` as the plug-in's module PLUGGED names (the one module, not a copy)."""

    def find_spec(self, name, path=None, target=None):
        package, _, workload = name.rpartition(".")
        return importlib.util.spec_from_loader(name, self) if workload in PLUGGED.get(package, {}) else None

    def create_module(self, spec):
        package, _, workload = spec.name.rpartition(".")
        module = importlib.import_module(PLUGGED[package][workload])
        if workload in LIGHTS and not hasattr(module, "TRAIN"):  # a light workload's model: its generic adapter
            module = importlib.import_module(f"{package}.light").adapt(module, workload)
        module.__dict__.setdefault("__plugged_spec__", module.__spec__ or spec)
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = module.__plugged_spec__  # its own name kept: the import system gave it the alias's


sys.meta_path.append(_Plugged())


@cache
def listed(package: str) -> tuple[str, ...]:
    """The workloads `package` has an adapter for, in its modules' order, then the plug-ins' (PLUGGED)."""
    found = declaring(package, lambda name, module: getattr(module, "WORKLOAD", None) == name)
    own = tuple(m.WORKLOAD for m in found)
    return own + tuple(w for w in PLUGGED.get(package, {}) if w not in own)


def find(package: str, workload: str) -> ModuleType:
    """`package`'s adapter for `workload`. Raises ValueError naming those it has, for a workload it has none for."""
    if workload not in listed(package):
        raise ValueError(f"{package} has no adapter for workload {workload!r}; it has: {', '.join(listed(package))}")
    if workload not in PLUGGED.get(package, {}):
        return importlib.import_module(f"{package}.{workload}")
    try:
        return importlib.import_module(f"{package}.{workload}")
    except Exception as e:  # the plug-in's code: one line naming it, whatever it raised
        raise ImportError(f"workload plug-in {PLUGGED[package][workload]}: its adapter failed: {e!r}") from e


def variants_of(package: str) -> tuple[Variant, ...]:
    """Every variant `package` declares: its adapters' `VARIANTS`, each adapter's in its own order, the adapters in
    their modules' order (read at each call, so that a test may replace one adapter's table). A plug-in's adapter
    that fails to import offers none (its own workload's rows say why: `find` raises), never another's."""
    return tuple(v for name in listed(package) for v in _declared(package, name))


def _declared(package: str, workload: str) -> tuple[Variant, ...]:
    if workload not in PLUGGED.get(package, {}):
        return find(package, workload).VARIANTS
    try:
        return find(package, workload).VARIANTS
    except Exception:  # the plug-in's code, whatever it raises
        return ()


def bound(package: str, workload: str, bind: Callable[[ModuleType], Trained]) -> Any:
    """`package`'s adapter for `workload`: an operation's module as it is (OpAdapter), a trained model's module bound
    by `bind` (to a Trained). Raises ValueError naming those it has, for a workload it has none for."""
    module = find(package, workload)
    return bind(module) if hasattr(module, "TRAIN") else module


def _name(model: Any) -> str | None:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) else None
