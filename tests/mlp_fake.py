"""The test MLP's one implementation (mlp_workload): FakeImpl (tests/fakeimpl.py) with the MLP's model functions,
in NumPy float32, so that its numbers meet the float64 oracle within the derived bounds. As a framework's
`<impl>/mlp.py` would: its variants of the MLP's row kinds, and its adapter (`adapter('mlp')`, a
parity.api.adapters.Trained) with the model functions the trained workloads' shared code calls (build, get_weights,
set_weights, forward_layers, loss_and_grads, make_trainer, prepare_inference). A planted relative `error` scales its
forward outputs and gradients."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
from fakeimpl import FakeImpl

from parity import api
from parity.api import adapters
from parity.api.variants import MANY, ONE

F32 = np.float32
MLP_VARIANTS = (("mlp_train", "loop", ONE), ("mlp_train", "sharded", MANY))
MLP_VARIANTS += (("mlp_infer", "predict", ONE), ("mlp_infer", "sharded", MANY))


@dataclass
class MlpModel:
    weights: list[np.ndarray]  # Keras order, float32: dense1's kernel and bias, dense2's


def forward32(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """The forward pass in float32: the flattened, scaled inputs, the hidden layer, the logits, the probabilities."""
    w1, b1, w2, b2 = weights
    xs = np.asarray(x, F32).reshape(len(x), -1) * F32(1 / 255)
    h = np.tanh(xs @ w1 + b1)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return {"x": xs, "dense1": h, "dense2": logits, "probs": e / e.sum(-1, keepdims=True)}


def loss_grads32(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[F32, list[np.ndarray], float]:
    """Mean cross-entropy, the 4 gradients (Keras order) and the batch's accuracy, in float32."""
    f, y = forward32(weights, x), np.asarray(y).astype(np.int64)
    b = len(y)
    top = f["dense2"].max(-1)
    lse = top + np.log(np.exp(f["dense2"] - top[:, None]).sum(-1))
    loss = np.mean(lse - f["dense2"][np.arange(b), y])
    d2 = f["probs"].copy()
    d2[np.arange(b), y] -= 1
    d2 /= F32(b)
    d1 = (d2 @ weights[2].T) * (1 - f["dense1"] * f["dense1"])
    grads = [f["x"].T @ d1, d1.sum(0), f["dense1"].T @ d2, d2.sum(0)]
    return loss, grads, float(np.mean(f["probs"].argmax(-1) == y))


class MlpTrainer:
    """Adam in float32 on the global batch (a data-parallel trainer's mean gradient is the global batch's)."""

    steps_per_dispatch, loss_every, compute_dtype, batchnorm, kernel_path = 1, 1, "float32", "replica", None

    def __init__(self, fake: MlpFake, model: MlpModel, devices, lr: float, eps: float):
        self.fake, self.m, self.devices, self.lr, self.eps = fake, model, devices, F32(lr), F32(eps)
        self.mom = [np.zeros_like(w) for w in model.weights]
        self.vel = [np.zeros_like(w) for w in model.weights]
        self.t = 0
        self.compiled = False  # a fake compile (MlpFake.compile_s) is paid once: ahead, or at the first steps()

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """The fake's compile (compile_s on its clock) paid now, where it has one; False where it has none."""
        self.fake.said.append(("ahead", x.shape))
        if not self.fake.compile_s:
            return False
        self._compile()
        return True

    def _compile(self) -> None:
        if self.fake.compile_s and not self.compiled:
            self.compiled = True
            self.fake.clock.advance(self.fake.compile_s) if self.fake.clock else time.sleep(self.fake.compile_s)

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        self.fake.said.append(("steps", x.shape))
        self._compile()
        out = []
        for xb, yb in zip(x, y, strict=True):
            loss, grads, acc = loss_grads32(self.m.weights, xb, yb)
            self.t += 1
            rate = self.lr * F32(np.sqrt(1 - 0.999**self.t) / (1 - 0.9**self.t))
            for i, g in enumerate(self.fake.planted(grads)):
                self.mom[i] = F32(0.9) * self.mom[i] + F32(0.1) * g
                self.vel[i] = F32(0.999) * self.vel[i] + F32(0.001) * g * g
                self.m.weights[i] = self.m.weights[i] - rate * self.mom[i] / (np.sqrt(self.vel[i]) + self.eps)
            out.append([float(loss), acc])
        self.fake.spend()
        return np.array(out)

    def step_cost(self):
        return None, "fake: no counter"

    def program_text(self):
        return None

    def model(self) -> MlpModel:
        return self.m

    def evaluate(self, x, y, batch_size: int = 1000) -> dict[str, float]:
        loss, _, acc = loss_grads32(self.m.weights, x, y)
        return {"loss": float(loss), "accuracy": acc}

    def placement(self) -> list[str]:
        return [f"cpu:{i}" for i in range(len(self.devices))]


@dataclass
class MlpFake(FakeImpl):
    """FakeImpl, and the MLP: its variants ('loop', 'predict' on one device; 'sharded' on several) and model.
    compile_s: a trainer's fake compile, paid once (ahead or at its first steps); `said`: its trainers' calls; `built`:
    its models' sizes (a warm-up's is MLP's warm size)."""

    compile_s: float = 0.0
    said: list = field(default_factory=list)
    built: list = field(default_factory=list)  # each model's hidden units, as built

    @property
    def VARIANTS(self) -> tuple[api.Variant, ...]:  # noqa: N802 - the surface's name
        return super().VARIANTS + tuple(api.Variant(name, kind, span) for kind, name, span in MLP_VARIANTS)

    def planted(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [a * F32(1 + self.error) for a in arrays]

    def spend(self) -> None:
        """A training call's time: delay_s on the fake clock (or asleep)."""
        if self.clock:
            self.clock.advance(self.delay_s)
        else:
            time.sleep(self.delay_s)

    def adapter(self, workload):
        """The MLP's adapter, and the fake's own for the others."""
        if workload != "mlp":
            return super().adapter(workload)
        functions = ("get_weights", "set_weights", "forward_layers", "loss_and_grads", "prepare_inference")
        code = SimpleNamespace(
            __name__="mlp_fake.mlp",
            WORKLOAD="mlp",
            TRAIN="mlp_train",
            INFER="mlp_infer",
            MODEL=MlpModel,
            VARIANTS=tuple(v for v in self.VARIANTS if v.kind.startswith("mlp_")),
            build=self._build,
            fake=self,
            **{name: getattr(self, name) for name in functions},
        )
        return adapters.Trained(code, __name__)  # its trainer: make_trainer below

    def _build(self, hidden: int, seed: int = 0) -> MlpModel:
        """Glorot-uniform kernels, zero biases (Keras's Dense defaults)."""
        self.built.append(hidden)
        rng = np.random.default_rng(seed)
        shapes = ((28 * 28, hidden), (hidden, 10))
        kernels = [rng.uniform(-1, 1, s) * np.sqrt(6 / sum(s)) for s in shapes]
        return MlpModel([kernels[0].astype(F32), np.zeros(hidden, F32), kernels[1].astype(F32), np.zeros(10, F32)])

    def get_weights(self, model: MlpModel) -> list[np.ndarray]:
        return [w.copy() for w in model.weights]

    def set_weights(self, model: MlpModel, weights) -> None:
        model.weights = [np.asarray(w, F32).copy() for w in weights]

    def forward_layers(self, model: MlpModel, x: np.ndarray) -> dict[str, np.ndarray]:
        f = forward32(model.weights, x)
        return {k: self.planted([f[k]])[0] for k in ("dense1", "dense2", "probs")}

    def loss_and_grads(self, model: MlpModel, x: np.ndarray, y: np.ndarray) -> api.Gradients:
        loss, grads, _ = loss_grads32(model.weights, x, y)
        return api.Gradients(float(loss), self.planted(grads), [])

    def prepare_inference(self, model: MlpModel, images, devices, variant: str = "predict") -> api.Prepared:
        return self._prepared(lambda: forward32(model.weights, images)["probs"], devices)  # error planted there


def make_trainer(adapter: adapters.Trained, model: MlpModel, devices, variant: str, lr: float, eps: float, seed: int):
    """The MLP's one trainer, as a framework's train module has it: the fake that built the adapter trains it."""
    return MlpTrainer(adapter.code.fake, model, devices, lr, eps)
