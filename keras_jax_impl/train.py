"""Training any trained model with Keras 3 on JAX: model.compile + model.fit, on one device or under
keras.distribution.DataParallel over several; the Trainer that make_trainer returns (mirror image of
tf_impl.train, whose model code it shares)."""

from __future__ import annotations

import threading
from contextlib import nullcontext

import jax
import keras
import numpy as np
from keras.src.backend.jax import trainer as keras_jax_trainer

from keras_jax_impl import catalog
from keras_jax_impl.devices import distribution
from keras_jax_impl.models import built_for, kernel_path, uncounted
from keras_models.models import (
    KerasTrained,
    StepLogs,
    logits_copy,
    logits_loss,
    restore_state,
    trained_state,
    unfilled,
)
from parity.api.inputs import check_count, check_examples


def _copy(code, model, o: catalog.TrainOptions):
    """The copy of `model` a trainer trains (its weights not set): unrolled (the LSTM's '+unroll'), under the
    mixed-precision policy ('+bf16'), its softmax replaced by the logits (the loss from the logits, as TF's Keras and
    Flax compute it: keras_models.models.cross_entropy says why). `code`: the model's Keras code
    (keras_models.<name>)."""
    model = code.variant_copy(model, o)
    return logits_copy(code.mixed_precision(model) if o.mixed else model)


class Trainer:
    """model.compile + model.fit, under DataParallel's scope where the variant is distributed (a copy of the model
    is built there, its variables replicated over the mesh, each global batch split along it): the variants of the
    model's row kind ('<workload>_train')."""

    def __init__(
        self, adapter: KerasTrained, model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
    ):
        code = adapter.model_code
        # keras_jax_impl.catalog.TrainOptions (the LSTM's: keras_jax_impl.lstm.LstmOptions)
        o = catalog.variant(code.TRAIN, variant, len(devices)).options
        self.spe, self.distributed = o.steps_per_execution, o.distributed
        # fit under steps_per_execution logs once per execution (its per-step loss is that execution's mean), but on
        # JAX each step is still its own dispatch of the jitted step
        self.steps_per_dispatch, self.loss_every = 1, self.spe
        self.src, self.devices = model, devices
        keras.utils.set_random_seed(seed)  # dropout masks: Keras's own RNG (never the same as TF's or Flax's)
        # a copy for one device is built where built_for says (an accelerator's host), its weights then set on the
        # device; a distributed one in its scope
        with self._scope(), nullcontext() if self.distributed else built_for(devices[0]):
            self.m = unfilled(lambda: _copy(code, model, o))  # its weights set below
        with self._scope(), jax.default_device(devices[0]):
            self.m.set_weights(model.get_weights())
            self.m.compile(
                optimizer=keras.optimizers.Adam(learning_rate, epsilon=adam_epsilon),  # epsilon set on every side
                loss=logits_loss(),
                metrics=["accuracy"],
                jit_compile="auto",  # Keras's default: XLA on the JAX backend
                steps_per_execution=self.spe,
            )
            self.m.optimizer.build(self.m.trainable_variables)  # as fit's first call would: rewind's state has it
            self._start = trained_state(self.m)
        self.compute_dtype = self.m.get_layer(code.FIRST).compute_dtype
        # DataParallel runs one SPMD program over the global batch: BatchNorm's statistics are the global batch's,
        # where TF's MirroredStrategy and Flax's pmap/shard_map take each replica's own (no BatchNorm: 'none')
        self.batchnorm = "none" if not code.BATCHNORM else "global" if self.distributed else "replica"
        self.kernel_path = kernel_path(code, self.m, devices[0])  # which loop its LSTM layers run (the CNN: None)
        self.logs = StepLogs()
        self.batch: tuple[np.ndarray, np.ndarray] | None = None

    def rewind(self) -> None:
        """Back to where the trainer started (its weights, seed states and optimizer state as made); its compiled
        steps kept (parity.workloads.trained.kept)."""
        with self._scope(), jax.default_device(self.devices[0]):
            restore_state(self.m, self._start)

    def _scope(self):
        return distribution(self.devices).scope() if self.distributed else nullcontext()

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn (one model.fit epoch); returns (K, 2) [loss, acc]."""
        check_examples(x, y, 2)  # steps x batch images and their labels, before the framework sees them
        k, b = y.shape
        flat_x, flat_y = x.reshape(k * b, *x.shape[2:]), y.reshape(k * b)
        self.batch = (flat_x[:b], flat_y[:b])
        with self._scope(), jax.default_device(self.devices[0]):
            self.m.fit(flat_x, flat_y, batch_size=b, epochs=1, verbose=0, callbacks=[self.logs], shuffle=False)
        return self.logs.per_step(k)

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Compile, without running it, the step steps(x, y)'s fit would run first, so that fit finds it compiled:
        Keras's own jitted step (its trainer's `jit`, caught as make_train_function wraps it) lowered on the state and
        first batch fit passes it. XLA compiles with the GIL released: several trainers' ahead() on threads compile
        side by side. Rests on Keras 3's JAX trainer (`_symbolic_build`, `_get_jax_state`, `_distribute_data`)."""
        check_examples(x, y, 2)
        m, batch = self.m, (x[0], y[0])
        with self._scope(), jax.default_device(self.devices[0]):
            with _BUILDING:  # one trainer at a time: Keras's global state, and the `jit` caught below
                m._symbolic_build(data_batch=batch)  # the optimizer's and the metrics' variables, as fit builds them
                step = _jitted_train_step(m)
                state = m._get_jax_state(
                    trainable_variables=True,
                    non_trainable_variables=True,
                    optimizer_variables=True,
                    metrics_variables=True,
                )
            step.lower(state, keras_jax_trainer._distribute_data(batch)).compile()  # side by side
        return True

    def placement(self) -> list[str]:
        """Devices holding the first weight (every replica's copy under DataParallel)."""
        v = self.m.trainable_weights[0].value
        return sorted(f"{d.platform}:{d.id}" for d in v.sharding.device_set)

    def _lowered(self):
        """Keras's own train step, jitted as fit jits it, lowered on the current state and one global batch."""
        m = self.m
        state = (
            [v.value for v in m.trainable_variables],
            [v.value for v in m.non_trainable_variables],
            [v.value for v in m.optimizer.variables],
            [v.value for v in m.metrics_variables],
        )
        with self._scope():
            return jax.jit(m.train_step).lower(state, self.batch)

    def program_text(self) -> str | None:
        """The compiled step's HLO, with each op's metadata (Keras's layer scopes are JAX named scopes), after at
        least one step: compiled again, the same program."""
        return self._lowered().compile().as_text()

    def step_cost(self) -> tuple[float | None, str]:
        """FLOPs of one global training step by XLA's cost analysis (after at least one step)."""
        if self.distributed:  # the SPMD program is costed per device
            return None, "XLA cost analysis: not counted (one SPMD program over the mesh)"
        if uncounted(self.kernel_path):
            return None, uncounted(self.kernel_path)
        try:
            ca = self._lowered().cost_analysis()
        except Exception as e:  # best effort: the analytic count stays the primary figure
            return None, f"XLA cost analysis failed ({type(e).__name__})"
        flops = ca.get("flops") if isinstance(ca, dict) else None
        return (float(flops) if flops else None), "XLA cost analysis"

    def model(self):
        """The trained model (the passed-in model, updated in place). Under DataParallel every variable is one
        replicated array: the moving statistics are the global batch's (see docs/numerics.md)."""
        self.src.set_weights(self.m.get_weights())
        return self.src

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference loss and accuracy of the current weights on (x, y), by Keras's evaluate."""
        check_examples(x, y, 1)
        check_count("batch_size", batch_size)
        with self._scope(), jax.default_device(self.devices[0]):
            r = self.m.evaluate(x.astype(np.float32), y, batch_size=batch_size, verbose=0, return_dict=True)
        return {"loss": float(r["loss"]), "accuracy": float(r["accuracy"])}


_BUILDING = threading.Lock()  # ahead() runs on threads (parity.engine.ahead); the compiling is what overlaps


def _jitted_train_step(m):
    """The jitted step fit runs (make_train_function keeps only a wrapper around it): made again, its `jit` caught."""
    made, jit = [], keras_jax_trainer.jit

    def catch(*args, **kwargs):
        made.append(jit(*args, **kwargs))
        return made[-1]

    keras_jax_trainer.jit = catch
    try:
        m.make_train_function(force=True)
    finally:
        keras_jax_trainer.jit = jit
    return made[0]


def make_trainer(
    adapter: KerasTrained, model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
) -> Trainer:
    """The one trainer, for a model of any trained adapter, over `devices` ('fit' on one device; 'data_parallel' over
    several; the variants of its row kind, '<workload>_train'; the adapter has checked the rest). Raises ValueError
    for an unknown variant."""
    return Trainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)
