"""Training any trained model in TensorFlow: Keras's fit (with a strategy's scope), the harness's own
distributed loop, their in-memory input pipelines, and the Trainer that make_trainer returns (mirror image of
jax_impl.train)."""

from __future__ import annotations

from contextlib import nullcontext

import keras
import numpy as np
import tensorflow as tf

from keras_models.models import KerasTrained, StepLogs, cross_entropy, restore_state, trained_state
from parity.api.inputs import check_count, check_examples
from tf_impl import catalog
from tf_impl.devices import graph_flops, multiworker, strategy
from tf_impl.models import kernel_path, uncounted


def _in_memory(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` with tf.data's autotuning off: its input is arrays already in memory, with nothing to tune. With it on,
    each epoch's iterator, when destroyed, waited for its autotuning thread's next wake-up, at intervals that double
    from the epoch's start: `fit`'s epoch times jumped between doublings at random (docs/tuning.md, "TensorFlow
    variants", `loop`)."""
    opts = tf.data.Options()
    opts.autotune.enabled = False
    return ds.with_options(opts)


def _worker_batches(s: tf.distribute.Strategy, x: np.ndarray, y: np.ndarray) -> tf.distribute.DistributedDataset:
    """This worker's share of each global batch x[k], y[k]: global replica r gets rows r*per .. (r+1)*per,
    as MirroredStrategy splits a batch over its devices in one process. Only those rows enter its pipeline."""
    n = s.num_replicas_in_sync
    per = y.shape[1] // n

    def fn(ctx: tf.distribute.InputContext):
        local = n // ctx.num_input_pipelines  # replicas fed by this pipeline, in order
        first = ctx.input_pipeline_id * local
        parts = [slice((first + j) * per, (first + j + 1) * per) for j in range(local)]
        xs = np.concatenate([x[:, p] for p in parts], axis=1).reshape(-1, per, *x.shape[2:])
        ys = np.concatenate([y[:, p] for p in parts], axis=1).reshape(-1, per)
        ds = tf.data.Dataset.from_tensor_slices((xs, ys))  # already per-replica batches, replica order
        opts = tf.data.Options()
        opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return _in_memory(ds.with_options(opts))

    if multiworker() is not None:  # one pipeline per process; PER_REPLICA is MirroredStrategy's alone
        return s.distribute_datasets_from_function(fn)
    # One pipeline per replica, left in host memory (which the logical CPUs share): per worker, TF copies to each
    # device through per-device pipelines whose autotuning cannot be turned off, and every epoch waited for them
    # (docs/tuning.md, "TensorFlow variants", `loop`).
    per_replica = tf.distribute.InputOptions(
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
        experimental_fetch_to_device=False,
    )
    return s.distribute_datasets_from_function(fn, per_replica)


def _replica_step(n: int, model, xla: bool = False):
    """One training step on one replica as Keras's fit takes it: per-replica loss scaled by 1/replicas (the
    optimizer all-reduces by sum), per-replica BatchNorm statistics, Keras's Adam; the replica's loss and
    accuracy. `xla`: the forward and backward pass XLA-compiled on the replica's device (jit_compile=True), the
    all-reduce and Adam's update outside it (fit's jit_compile under MirroredStrategy fails on logical CPUs: XLA
    reads one replica's variables from another's device)."""

    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            probs = model(tf.cast(x, tf.float32), training=True)
            loss = cross_entropy(probs, y)
            scaled = loss / n
        grads = tape.gradient(scaled, model.trainable_weights)
        acc = tf.reduce_mean(
            tf.cast(tf.equal(tf.argmax(probs, -1, output_type=tf.int32), tf.cast(y, tf.int32)), tf.float32)
        )
        return loss, acc, grads

    compute = tf.function(forward_backward, jit_compile=True) if xla else forward_backward

    def replica_step(x, y):
        loss, acc, grads = compute(x, y)
        model.optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss, acc

    return replica_step


def _loop_step(s: tf.distribute.Strategy, model, xla: bool) -> tf.types.experimental.PolymorphicFunction:
    """One global step of the custom loop; returns the global batch's mean loss and accuracy."""
    replica_step = _replica_step(s.num_replicas_in_sync, model, xla)

    @tf.function
    def step(x, y):
        loss, acc = s.run(replica_step, args=(x, y))
        return s.reduce("MEAN", loss, axis=None), s.reduce("MEAN", acc, axis=None)

    return step


def _loop_steps(s: tf.distribute.Strategy, model, xla: bool) -> tf.types.experimental.PolymorphicFunction:
    """`count` global steps of the custom loop in one tf.function (one host dispatch), reading the distributed
    iterator; per-step mean loss and accuracy, stacked. `count` is a Python int: one trace per length."""
    replica_step = _replica_step(s.num_replicas_in_sync, model, xla)

    @tf.function
    def steps(iterator, count: int):
        losses = tf.TensorArray(tf.float32, size=count)
        accs = tf.TensorArray(tf.float32, size=count)
        for i in tf.range(count):
            loss, acc = s.run(replica_step, args=next(iterator))
            losses = losses.write(i, s.reduce("MEAN", loss, axis=None))
            accs = accs.write(i, s.reduce("MEAN", acc, axis=None))
        return losses.stack(), accs.stack()

    return steps


def _copy(code, model, o: catalog.TrainOptions):
    """The copy of `model` a trainer trains (its weights not set): unrolled (the LSTM's '+unroll'), then under the
    mixed-precision policy ('+bf16') or a plain clone. `code`: the model's Keras code (keras_models.<workload>)."""
    model = code.variant_copy(model, o)
    return code.mixed_precision(model) if o.mixed else keras.models.clone_model(model)


class Trainer:
    """model.compile + model.fit ('loop': a custom strategy.run loop) under the strategy's scope (a copy
    of the model lives there): the variants of the model's row kind ('<workload>_train')."""

    def __init__(
        self, adapter: KerasTrained, model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
    ):
        n, code = len(devices), adapter.model_code
        o = catalog.variant(
            code.TRAIN, variant, n
        ).options  # tf_impl.catalog.TrainOptions (the LSTM's: tf_impl.lstm.LstmOptions)
        if multiworker() is not None and o.api == "fit":
            raise ValueError("Keras 3's fit fails under MultiWorkerMirroredStrategy (tensorflow#72388): use 'loop'")
        self.spe = o.steps_per_dispatch
        # fit under steps_per_execution logs once per execution: its per-step loss is that execution's mean
        self.steps_per_dispatch, self.loss_every = self.spe, self.spe if o.api == "fit" else 1
        self.src, self.api, self.distributed, self.devices = model, o.api, o.distributed, devices
        keras.utils.set_random_seed(seed)  # dropout masks: Keras's own RNG (never the same as JAX's)
        scope = strategy(devices).scope() if self.distributed else nullcontext()
        with scope, tf.device(devices[0]) if not self.distributed else nullcontext():
            self.m = _copy(code, model, o)
            self.m.set_weights(model.get_weights())
            self.m.compile(
                optimizer=keras.optimizers.Adam(learning_rate, epsilon=adam_epsilon),  # epsilon set on both sides
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                jit_compile=True if o.xla else "auto",
                steps_per_execution=self.spe if o.api == "fit" else 1,
            )
            # built here, not at fit's first call (the loop's step must not create variables), so that rewind has
            # the state the first step starts from
            self.m.optimizer.build(self.m.trainable_variables)
            self._start = trained_state(self.m)
        self.compute_dtype = self.m.get_layer(code.FIRST).compute_dtype
        # BatchNorm's statistics over each replica's share of the batch (a model without BatchNorm has none)
        self.batchnorm = "replica" if code.BATCHNORM else "none"
        self.kernel_path = kernel_path(code, self.m, devices[0])  # which loop its LSTM layers run (the CNN: None)
        self.device = devices[0]
        self.logs = StepLogs()
        if o.api == "loop":
            self.s = strategy(devices)
            self._step = (_loop_step if self.spe == 1 else _loop_steps)(self.s, self.m, o.xla)

    def rewind(self) -> None:
        """Back to where the trainer started (its weights, seed states and optimizer state as made); its traced
        functions kept (parity.workloads.trained.kept)."""
        scope = strategy(self.devices).scope() if self.distributed else nullcontext()
        with scope, tf.device(self.device) if not self.distributed else nullcontext():
            restore_state(self.m, self._start)

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Nothing compiled ahead: fit's and the loop's tf.function trace and compile at their first call (False)."""
        return False

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn (one model.fit epoch); returns (K, 2) [loss, acc]."""
        check_examples(x, y, 2)  # steps x batch images and their labels, before the framework sees them
        k, b = y.shape
        self.batch = b
        if self.api == "loop" and self.spe == 1:
            return np.array([[float(v) for v in self._step(xb, yb)] for xb, yb in _worker_batches(self.s, x, y)])
        if self.api == "loop":
            it = iter(_worker_batches(self.s, x, y))
            out = [
                np.stack([v.numpy() for v in self._step(it, min(self.spe, k - s))], 1) for s in range(0, k, self.spe)
            ]
            # Run the pipeline to its end before the iterator goes: destroying a distributed iterator whose input
            # threads still wait for a next element hung TF for good at 8 logical CPUs (in ~LogicalThreadWrapper).
            for _ in it:
                raise RuntimeError("the input pipeline held more batches than the steps took")
            return np.concatenate(out).astype(np.float64)
        ds = _in_memory(tf.data.Dataset.from_tensor_slices((x.reshape(k * b, *x.shape[2:]), y.reshape(k * b))).batch(b))
        with tf.device(self.device) if not self.distributed else nullcontext():
            self.m.fit(ds, epochs=1, steps_per_epoch=k, verbose=0, callbacks=[self.logs], shuffle=False)
        return self.logs.per_step(k)

    def placement(self) -> list[str]:
        """Devices holding the first weight (every replica's copy under a strategy)."""
        v = self.m.trainable_weights[0].value
        copies = getattr(v, "values", (v,))
        return sorted(
            {
                f"{tf.DeviceSpec.from_string(c.device).device_type.lower()}:"
                f"{tf.DeviceSpec.from_string(c.device).device_index}"
                for c in copies
            }
        )

    def program_text(self) -> str | None:
        """None: TensorFlow's profiled op names carry Keras's layer scopes themselves."""
        return None

    def step_cost(self) -> tuple[float | None, str]:
        """FLOPs of one global training step by TF's profiler on Keras's train_step graph."""
        if self.distributed:
            return None, "TF profiler: not traced under a strategy"
        if self.spe > 1:
            return None, "TF profiler: not counted (several steps in one loop)"
        if uncounted(self.kernel_path):
            return None, uncounted(self.kernel_path)
        shape = (self.batch, *self.m.input_shape[1:])  # the images, (28, 28, 1) for every model
        spec = (tf.TensorSpec(shape, tf.float32), tf.TensorSpec((self.batch,), tf.int32))
        with tf.device(self.device):
            return graph_flops(tf.function(self.m.train_step), spec)

    def _average_moving_stats(self) -> None:
        # Keras 3 creates BatchNorm moving statistics with aggregation='none': under a strategy each
        # replica's copy follows only its own batches, and get_weights() would return replica 0's.
        # The EMA is linear, so the mean of the copies is the EMA of the replica-mean statistics:
        # exactly what the JAX side keeps (and what tf.keras's ON_READ/MEAN variables gave).
        s = multiworker()
        if s is not None and self.distributed:  # the copies live on several workers: all-reduce
            stats = self.m.non_trainable_weights
            copies = s.run(lambda: [tf.identity(v.value) for v in stats])
            for v, c in zip(stats, copies, strict=True):
                v.assign(s.reduce(tf.distribute.ReduceOp.MEAN, c, axis=None))
            return
        for v in self.m.non_trainable_weights:
            copies = getattr(v.value, "values", None)
            if copies and len(copies) > 1:
                v.assign(np.mean([c.numpy() for c in copies], axis=0))

    def model(self):
        """The trained model (the passed-in model, updated in place)."""
        self._average_moving_stats()
        self.src.set_weights(self.m.get_weights())
        return self.src

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference loss and accuracy of the current weights on (x, y)."""
        check_examples(x, y, 1)
        check_count("batch_size", batch_size)
        if self.api == "loop":  # every worker the same, from its copy of the trained weights (no collectives)
            m = self.model()
            probs = np.concatenate(
                [
                    m(x[i : i + batch_size].astype(np.float32), training=False).numpy()
                    for i in range(0, len(x), batch_size)
                ]
            )
            loss = float(cross_entropy(tf.constant(probs), tf.constant(y)))
            return {"loss": loss, "accuracy": float(np.mean(np.argmax(probs, -1) == y))}
        self._average_moving_stats()
        r = self.m.evaluate(x.astype(np.float32), y, batch_size=batch_size, verbose=0, return_dict=True)
        return {"loss": float(r["loss"]), "accuracy": float(r["accuracy"])}


def make_trainer(
    adapter: KerasTrained, model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
) -> Trainer:
    """The one trainer, for a model of any trained adapter, over `devices` ('fit' on one device; 'strategy' over
    several; the variants of its row kind, '<workload>_train'; the adapter has checked the rest). Raises ValueError
    for an unknown variant."""
    return Trainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)
