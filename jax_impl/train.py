"""Training any trained model in JAX: Keras's Adam as an optax transformation, the jitted (pmap,
shard_map) step, and the Trainer that make_trainer returns for any of them (mirror image of tf_impl.train)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from itertools import islice

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax._src import config as jax_config  # the thread's optimization level (jax_impl.devices.check_compiler)
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jax_impl.catalog import variant as variant_record
from jax_impl.devices import compiled_text, local_device, lowered_flops, placement, put_global
from jax_impl.models import TIME_LOOP, cross_entropy
from parity.api import Counted
from parity.api.adapters import Trained
from parity.api.inputs import check_count, check_examples

Model = nnx.Module  # what a trained adapter's `build` returns


def keras_adam(learning_rate: float, epsilon: float, b1: float = 0.9, b2: float = 0.999):
    """Keras 3's Adam update rule as an optax transformation.

    Keras adds epsilon to sqrt(v) before bias correction (lr * sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+eps));
    optax.adam adds it after, so the two differ slightly at every step. This is Keras's rule.
    """

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return {"m": zeros, "v": jax.tree.map(jnp.zeros_like, params), "t": jnp.zeros((), jnp.int32)}

    def update(grads, state, params=None):
        t = state["t"] + 1
        m = jax.tree.map(lambda m, g: m + (g - m) * (1 - b1), state["m"], grads)
        v = jax.tree.map(lambda v, g: v + (g * g - v) * (1 - b2), state["v"], grads)
        tf32 = t.astype(jnp.float32)
        alpha = learning_rate * jnp.sqrt(1 - b2**tf32) / (1 - b1**tf32)
        updates = jax.tree.map(lambda m, v: -alpha * m / (jnp.sqrt(v) + epsilon), m, v)
        return updates, {"m": m, "v": v, "t": t}

    return optax.GradientTransformation(init, update)


def _train_step(graphdef, tx, seed, axis, replicated, state, x, y, i):
    params, stats, opt = state
    # shard_map types replicated params as invariant, and autodiff would then psum (not average)
    # their gradients over replicas: differentiate a per-replica copy so pmean below averages.
    local = jax.lax.pcast(params, axis, to="varying") if replicated else params
    key = jax.random.fold_in(jax.random.key(seed), i)
    if axis:
        key = jax.random.fold_in(key, jax.lax.axis_index(axis))  # each replica its own dropout mask

    def f(m):
        logits = m.logits(x, train=True, key=key)
        return cross_entropy(logits, y), jnp.mean(jnp.argmax(logits, -1) == y)

    m = nnx.merge(graphdef, local, stats)
    (loss, acc), grads = nnx.value_and_grad(f, has_aux=True)(m)  # updates m's batch statistics
    new_stats = nnx.state(m, nnx.BatchStat)
    if axis:
        # Gradients averaged over replicas; batch statistics stay per replica (Keras's default,
        # synchronized=False) and the moving statistics are averaged, so every replica keeps the same.
        grads, loss, acc, new_stats = jax.lax.pmean((grads, loss, acc, new_stats), axis)
    with jax.named_scope("optimizer"):
        updates, opt = tx.update(grads, opt, params)
        params = optax.apply_updates(params, updates)
    return (params, new_stats, opt), jnp.stack([loss, acc])


def _scan_steps(step, unroll, state, xs, ys, i0):
    """len(xs) training steps in one program: `step` over the stacked batches, per-step metrics stacked."""

    def body(state, batch):
        x, y, i = batch
        return step(state, x, y, i)

    return jax.lax.scan(body, state, (xs, ys, i0 + jnp.arange(xs.shape[0])), unroll=unroll)


@nnx.jit
def _infer_logits(model, x):
    return model.logits(x, train=False)


# One device's jitted steps by what they compile (the model's graph, Adam's settings, the seed, the loop): trainers of
# one configuration share one jax.jit, so a variant that differs only in how its batches reach the device ('+prefetch')
# runs the program another's first call compiled, and compiles nothing of its own (JAX keeps each compiled program
# with its jax.jit). A lock per program and batch shape makes a second ahead() wait for the first, then find it.
_STEPS: dict[tuple, Callable] = {}
_COMPILING: dict[tuple, threading.Lock] = {}
_GUARD = threading.Lock()


def _shared(key: tuple, make: Callable[[], Callable]) -> Callable:
    with _GUARD:
        if key not in _STEPS:
            _STEPS[key] = make()
        return _STEPS[key]


def _compiling(step: Callable, x) -> threading.Lock:
    """The lock of one program (`step`) at one batch shape and this thread's optimization level."""
    key = (id(step), tuple(x.shape), str(x.dtype), str(jax_config.optimization_level.value))
    with _GUARD:
        return _COMPILING.setdefault(key, threading.Lock())


def _ahead(units: Iterator, depth: int) -> Iterator:
    """`units` (each dispatch's batches, placed as they are drawn) drawn `depth` ahead of the one handed out: while
    the step of the one handed out runs, the next is put on the devices."""
    queue = deque(islice(units, depth))
    while queue:
        yield queue.popleft()
        queue.extend(islice(units, 1))


class Trainer:
    """Data-parallel training of any trained model: a pure jitted step over split state (no graph walk per step)."""

    UNROLL_ON = ("cpu",)  # platforms where '+scan' unrolls its loop (see __init__)

    batchnorm = (
        "replica"  # BatchNorm's statistics over each replica's share of the batch (a model without BatchNorm: "none")
    )
    kernel_path = None  # the recurrent layers' loop (the LSTM's: jax_impl.lstm.kernel_path); the CNN has none
    time_loop = False  # whether the time steps run in a lax.scan loop (XLA's cost analysis cannot count them)

    def __init__(
        self,
        adapter: Trained,
        model: Model,
        devices,
        variant: str,
        learning_rate: float,
        adam_epsilon: float,
        seed: int,
    ):
        n, code = len(devices), adapter.code
        o = variant_record(
            code.TRAIN, variant, n
        ).options  # the adapter's options record: catalog.CnnOptions, lstm.LstmOptions, ...
        self.scan, self.steps_per_dispatch = o.steps_per_dispatch > 1, o.steps_per_dispatch
        # batches put on the devices ahead of their steps (steps_from); 0 (or no such field): the host's feed
        self.prefetch = vars(o).get("prefetch", 0)
        self.loss_every = 1  # per-step figures are exact in every variant
        self.model_, self.parallel, self.n, self.i, self.devices = model, o.parallel, n, 0, devices
        # what trains and evaluates: the model itself, or its bfloat16-compute copy (Keras's evaluate runs the
        # mixed model too); model() writes the trained weights back to the model passed in, in both cases
        self.compute = adapter.mixed_precision(model) if o.mixed else model
        # static: part of the graph definition split below; the time steps in a lax.scan loop or not
        self.kernel_path, self.batchnorm, self.time_loop = code.train_with(self.compute, o)
        self.compute_dtype = code.compute_dtype(self.compute)
        # XLA:CPU runs simulated devices on one shared thread pool; with several multi-device steps
        # in flight their all-reduces can wait on each other forever (seen on 2 cores: a deadlock
        # within 20 steps). One step at a time there; accelerators keep asynchronous dispatch.
        self.serial = n > 1 and devices[0].platform == "cpu"
        graphdef, params, stats = nnx.split(self.compute, nnx.Param, nnx.BatchStat)
        # the step donates its state: it trains copies, so that the model passed in keeps working (as Keras's trainer
        # trains its own copy); model() writes the trained weights back
        params, stats = jax.tree.map(jnp.copy, (params, stats))
        tx = keras_adam(learning_rate, adam_epsilon)
        state = (params, stats, tx.init(params))
        self._start = jax.tree.map(jnp.copy, state)  # what rewind places again (the steps donate the placed state)
        axis = None if o.parallel == "jit" else "batch"
        step = partial(_train_step, graphdef, tx, seed, axis, o.parallel == "shard_map")
        # XLA:CPU runs a while loop's body without its fast convolution path (a rolled scan trains many times
        # slower: docs/tuning.md). Unrolled there, the same steps are straight-line code in one program;
        # accelerators keep the loop (a smaller program).
        unroll = devices[0].platform in self.UNROLL_ON
        multi = partial(_scan_steps, step, unroll)
        # what `step` compiles: the options but the feed, each by its repr (unroll True is no unroll 1, though equal)
        options = tuple((k, repr(v)) for k, v in sorted(vars(o).items()) if k != "prefetch")
        program = (graphdef, options, learning_rate, adam_epsilon, seed, unroll)
        self._place(state, step, multi, program)

    def _place(self, state, step, multi, program: tuple) -> None:
        """Put the training state on the devices and compile-wrap `step` (or `multi`, the scanned steps) for
        the variant; sets state, _step and the batches' data_sharding. On one device the jitted step is shared
        with every trainer of the same `program` (_shared)."""
        parallel, n, devices = self.parallel, self.n, self.devices
        if parallel == "jit":
            self.data_sharding, self.mesh = devices[0], None
            self.state = self._put(state)
            self._step = _shared(program, lambda: jax.jit(multi if self.scan else step, donate_argnums=0))
            return
        # pmap hands its outputs back on an Auto-typed mesh: state placed on make_mesh's default
        # (Explicit) mesh would differ from the step's output and cost a second compilation.
        axis_types = (AxisType.Auto,) if parallel == "pmap" else None
        self.mesh = mesh = jax.make_mesh((n,), ("batch",), devices=devices, axis_types=axis_types)
        self.data_sharding = NamedSharding(mesh, P("batch"))
        self.state = self._put(state)
        if parallel == "pmap":
            self._step = jax.pmap(step, axis_name="batch", in_axes=(0, 0, 0, None), devices=devices, donate_argnums=0)
        elif self.scan:  # stacked batches: the step axis first, each batch split over the replicas
            self.data_sharding = NamedSharding(mesh, P(None, "batch"))
            specs = (P(), P(None, "batch"), P(None, "batch"), P())
            self._step = jax.jit(
                jax.shard_map(multi, mesh=mesh, in_specs=specs, out_specs=(P(), P())), donate_argnums=0
            )
        else:
            self._step = jax.jit(
                jax.shard_map(step, mesh=mesh, in_specs=(P(), P("batch"), P("batch"), P()), out_specs=(P(), P())),
                donate_argnums=0,
            )

    def _put(self, state):
        """The training state placed as the variant's step takes it: on the one device, stacked per replica (pmap),
        or replicated over the mesh. put_global: in a multi-process run each process places only its own copies."""
        if self.parallel == "jit":
            return jax.device_put(state, self.devices[0])
        if self.parallel == "pmap":
            stacked = jax.tree.map(lambda a: np.broadcast_to(a, (self.n, *np.shape(a))), state)
            return jax.tree.map(lambda a: put_global(a, NamedSharding(self.mesh, P("batch"))), stacked)
        return jax.tree.map(lambda a: put_global(a, NamedSharding(self.mesh, P())), state)

    def rewind(self) -> None:
        """Back to where the trainer started: its first weights, a fresh optimizer state, step 0 (the dropout keys'
        count); the compiled steps kept (parity.workloads.trained.kept)."""
        self.state, self.i = self._put(jax.tree.map(jnp.copy, self._start)), 0

    def steps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Train on each global batch x[k], y[k] in turn; returns (K, 2) float64 per-step [loss, accuracy]
        (reading them waits for the last step). Each dispatch's batches are put on the devices just before it."""
        check_examples(x, y, 2)  # steps x batch images and their labels, before the framework sees them
        k = self.steps_per_dispatch if self.scan else 1
        return self._train(self._placed(x[s : s + k], y[s : s + k]) if self.scan else self._placed(x[s], y[s])
                           for s in range(0, len(x), k))  # fmt: skip

    def steps_from(self, epoch) -> np.ndarray:
        """steps() over an epoch handed over batch by batch (parity.workloads.trained.data.Epoch: epoch[k] is
        global batch k's images and labels): each dispatch's batches sliced, checked and put on the devices
        `prefetch` dispatches ahead of the step that takes them, while the steps before it run (the '+prefetch'
        variants; 2: double-buffered). The same steps and figures as steps() on the stacked arrays."""
        k = self.steps_per_dispatch if self.scan else 1

        def unit(s: int) -> tuple:
            if not self.scan:
                x, y = epoch[s]
                check_examples(x[None], y[None], 2)
                return self._placed(x, y)
            x, y = (np.stack(a) for a in zip(*(epoch[j] for j in range(s, min(s + k, len(epoch)))), strict=True))
            check_examples(x, y, 2)
            return self._placed(x, y)

        return self._train(_ahead(map(unit, range(0, len(epoch), k)), max(self.prefetch, 1)))

    def _train(self, placed: Iterator[tuple]) -> np.ndarray:
        """One step (or one scan of steps) per dispatch's placed batches, drawn as the steps are dispatched; the
        per-step [loss, accuracy] read once the last is dispatched."""
        out = []
        for xb, yb in placed:
            self._batch = (xb, yb)
            self.state, m = self._step(self.state, xb, yb, self.i)
            m = m.addressable_data(0)  # this process's copy (pmap: its first device's row)
            out.append(m[0] if self.parallel == "pmap" else m)
            self.i += xb.shape[0] if self.scan else 1
            if self.serial:
                jax.block_until_ready(m)
        return np.asarray(jnp.concatenate(out) if self.scan else jnp.stack(out), np.float64)

    def _placed(self, xb: np.ndarray, yb: np.ndarray) -> tuple:
        """One dispatch's batches (one global batch, or the scan's stack of them) placed as its step takes them."""
        if self.parallel == "pmap":
            xb, yb = xb.reshape(self.n, -1, *xb.shape[1:]), yb.reshape(self.n, -1)
        if self.parallel == "jit":
            return jax.device_put((xb, yb), self.data_sharding)
        # each process feeds only its own devices' share of the global batch
        return put_global(xb, self.data_sharding), put_global(yb, self.data_sharding)

    def ahead(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Compile, without running it, the program steps(x, y) would run first, so that its first call finds it
        compiled (JAX keeps it). XLA compiles with the GIL released: several trainers' ahead() on threads compile
        side by side, each on a core of its own."""
        check_examples(x, y, 2)
        k = self.steps_per_dispatch if self.scan else 1
        xb, yb = self._placed(x[:k], y[:k]) if self.scan else self._placed(x[0], y[0])
        with _compiling(self._step, xb):  # a trainer sharing the program waits, then finds it compiled
            self._step.lower(self.state, xb, yb, self.i).compile()
        return True

    def placement(self) -> list[str]:
        """Devices holding this process's copies of the parameters."""
        return placement(self.state[0])

    def step_cost(self) -> Counted:
        """FLOPs of one global training step by XLA's cost analysis (after at least one step), with the compiled
        program beside them (Counted: a scan's, one dispatch of its steps, counted 1/steps a step)."""
        per = 1 if self.parallel == "jit" else self.n  # sharded programs are costed per device
        args = (self.state, *self._batch, self.i)
        if self.scan or self.time_loop:  # XLA's cost analysis counts a loop's body once, whatever its trip count
            text = compiled_text(self._step.lower(*args))  # its text gives each loop's trip count
            said = "XLA cost analysis: not counted (several steps in one loop)" if self.scan else TIME_LOOP
            return Counted(None, said, text, 1 / self._batch[0].shape[0] if self.scan else 1)
        return lowered_flops(self._step, *args, devices=per)

    def program_text(self) -> str | None:
        """The compiled step's HLO, with each op's metadata (after at least one step): compiled again, the same
        program, so a profile's op names map back to the layers' named scopes."""
        return self._step.lower(self.state, *self._batch, self.i).compile().as_text()

    def model(self) -> Model:
        """The trained model (the passed-in model, updated in place)."""
        params, stats, _ = self.state
        # this process's first copy (every replica holds the same after the step's pmean)
        params, stats = jax.tree.map(lambda a: a.addressable_data(0), (params, stats))
        if self.parallel == "pmap":
            params, stats = jax.tree.map(lambda a: a[0], (params, stats))
        # one copy on one device: a replicated copy would make every later call run 8 times; never the trainer's own
        # buffers, which its next step donates
        params, stats = jax.device_put((params, stats), local_device(self.devices), may_alias=False)
        nnx.update(self.model_, params, stats)
        if self.compute is not self.model_:
            nnx.update(self.compute, params, stats)
        return self.model_

    def evaluate(self, x: np.ndarray, y: np.ndarray, batch_size: int = 1000) -> dict[str, float]:
        """Inference loss and accuracy of the current weights on (x, y), in the trainer's compute dtype."""
        check_examples(x, y, 1)
        check_count("batch_size", batch_size)
        self.model()
        model = self.compute
        loss = acc = 0.0
        for s in range(0, len(x), batch_size):
            logits = _infer_logits(model, jnp.asarray(x[s : s + batch_size], jnp.float32))
            yb = jnp.asarray(y[s : s + batch_size])
            loss += float(cross_entropy(logits, yb)) * len(yb)
            acc += float(jnp.sum(jnp.argmax(logits, -1) == yb))
        return {"loss": loss / len(x), "accuracy": acc / len(x)}


def make_trainer(
    adapter: Trained, model: Model, devices, variant: str, learning_rate: float, adam_epsilon: float, seed: int
) -> Trainer:
    """The one trainer, for a model of any trained adapter over `devices` ('jit' on one device; 'pmap' or 'shard_map'
    over several; the variants of its row kind, '<workload>_train'; the adapter has checked the rest). Raises
    ValueError for an unknown variant."""
    return Trainer(adapter, model, devices, variant, learning_rate, adam_epsilon, seed)
