"""A user's own model on one page (docs/your-workload.md): the record `Light` a package declares as its WORKLOAD,
beside one module per framework that holds only the model as that framework writes models (`jax_impl.py`: an
`nnx.Module`; `torch_impl.py`: a `torch.nn.Module`), each named `Model`. The harness brings the rest: each
implementation's generic adapter (`jax_impl.light`, `torch_impl.light`) turns that module into a trained model's
adapter, and parity.workloads.trained.light turns the record into a workload, its float64 run and its bounds derived
from it. This module is the contract both sides read: the record, and the registry by name that an implementation's
adapter looks it up in."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from parity.api.cnn import Weight

IMAGE = (28, 28, 1)  # Fashion-MNIST's images, as every trained workload reads them: raw 0-255 float32, NHWC
CLASSES = 10
LOGITS, PROBS = "logits", "probs"  # the last block a model returns; the softmax the harness adds after it


@dataclass(frozen=True)
class Size:
    """A training run's size: the global batch, steps an epoch, epochs, and the data's images (train, test)."""

    batch: int
    steps: int = 2
    epochs: int = 6
    train: int = 60000
    test: int = 10000


@dataclass(frozen=True)
class Light:
    """A model on one page. name: the workload's (its rows' prefix: `<name>_train`, `<name>_infer`); blocks: what
    every framework's `Model` returns, in order, as a dict by these names, the last the logits (the harness adds the
    softmax, `probs`); weights: the shared order and shape of every trained array, `'<layer>.<field>': shape`, in
    the layout of JAX/Flax (a conv kernel (h, w, in, out), a depthwise one (h, w, 1, channels), a dense kernel
    (in, out)); cpu, quick, full: the sizes of the CPU's default run, `--quick` and an accelerator's; oracle: the
    framework whose float64 run judges the others ('jax' or 'torch'; None: the first the package has a module for).
    The input is Fashion-MNIST's: (batch, 28, 28, 1) raw 0-255 float32, 10 classes; the loss, the mean
    cross-entropy of the logits."""

    name: str
    blocks: tuple[str, ...]
    weights: dict[str, tuple[int, ...]]
    cpu: Size = Size(256)
    quick: Size = Size(16, steps=2, epochs=2, train=256, test=64)
    full: Size = Size(1024, steps=100, epochs=10)
    oracle: str | None = None
    package: str | None = field(default=None, compare=False)  # set when the harness loads it (its adapters' package)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a light workload's name is an identifier, got {self.name!r}")
        blocks = tuple(self.blocks)
        object.__setattr__(self, "blocks", blocks)
        if not blocks or blocks[-1] != LOGITS or PROBS in blocks or len(set(blocks)) < len(blocks):
            raise ValueError(f"{self.name}: blocks are distinct names ending with {LOGITS!r} (not {PROBS!r}): {blocks}")
        if not self.weights:
            raise ValueError(f"{self.name}: no weights declared")
        for k, shape in self.weights.items():
            if k.count(".") != 1 or not all(isinstance(d, int) and d > 0 for d in shape):
                raise ValueError(f"{self.name}: weight {k!r}: a '<layer>.<field>' name and a shape of positive ints")
        LIGHTS[self.name] = self  # the record its name finds, in every process that imports the package

    @property
    def table(self) -> tuple[Weight, ...]:
        """The weights as Weight records, in the shared order."""
        return tuple(Weight(*k.split("."), tuple(s)) for k, s in self.weights.items())

    @property
    def block_names(self) -> tuple[str, ...]:
        """Every block a forward pass returns to the harness: the model's, then the softmax."""
        return (*self.blocks, PROBS)

    def fan_ins(self) -> list[int]:
        """Each kernel's terms a sum (every array of 2 or more dimensions: the product of all but its last one)."""
        return [math.prod(s[:-1]) for s in self.weights.values() if len(s) >= 2]


# by name: what an implementation's generic adapter looks its workload up in; a record of a name already here
# replaces it (the copy the harness makes when it loads the package, its `package` set)
LIGHTS: dict[str, Light] = {}


def check_shapes(light: Light, shapes: list[tuple[int, ...]], framework: str, names: list[str] | None = None) -> None:
    """Raise ValueError naming the first weight where a framework's arrays (in the shared layout, in order; `names`:
    its own names for them) do not fit the declared table: a missing bias, a depthwise kernel of groups=1."""
    table = list(light.weights.items())
    for i in range(max(len(shapes), len(table))):
        want = table[i] if i < len(table) else None
        got = tuple(shapes[i]) if i < len(shapes) else None
        if want is None or got != tuple(want[1]):
            own = f" ({names[i]})" if names and i < len(names) else ""
            has = f"{framework}'s weight {i}{own} is {got}" if got is not None else f"{framework}'s model ends"
            said = f"{light.name} declares {want[0]} {tuple(want[1])}" if want else f"{light.name} declares no more"
            raise ValueError(f"{has} in the shared layout where {said} ({len(shapes)} weights, {len(table)} declared)")
