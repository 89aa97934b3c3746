"""Data parallelism in PyTorch on a CPU: DistributedDataParallel over gloo, one process per replica on this machine.

The trainer's own process is rank 0. It starts the other ranks once per replica count (spawned, each with
`threads() // replicas` compute threads) and keeps them for every trainer after; it hands each rank its share of
every global batch through shared memory (no copy per rank) over a pipe of its own, which holds no named
semaphore that a killed run would leave behind in /dev/shm (a queue's locks are), and every rank steps its own copy
of the model: DDP averages the gradients over the ranks as backward makes them (gloo's all-reduce), Keras's Adam
then steps each copy alike. BatchNorm's batch statistics stay each replica's own (no SyncBatchNorm: Keras's and
JAX's default), and the moving statistics are averaged over the ranks after every call, as TF's MirroredStrategy
reads them and JAX's trainers average them. Each rank draws its own dropout masks (seed + rank).
"""

from __future__ import annotations

import atexit
import copy
import datetime
import itertools
import os
import socket
import threading
from contextlib import contextmanager

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from parity.api import adapters
from torch_impl.adam import adam_state, keras_adam
from torch_impl.devices import placement, threads
from torch_impl.models import accuracy, computing, cross_entropy

# the longest a rank waits in a collective for the others (a rank that died ends every other's wait with an error
# sooner: gloo sees its sockets close)
TIMEOUT = datetime.timedelta(minutes=5)


class _Logits(torch.nn.Module):
    """The model's training forward pass as a module's forward: what DDP wraps (its hooks run on forward)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.logits(x, train=True)


class Replica:
    """One rank's copy of the model in DDP, its Adam state and its steps (the same code on every rank)."""

    def __init__(self, model, workload: str, options, learning_rate: float, adam_epsilon: float, seed: int):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        # channels-last memory format where the variant says (the workload's module: a rank gets its name)
        adapters.find(__package__, workload).train_with(model, options)
        self.model, self.mixed = model, options.mixed or model.mixed
        self.learning_rate, self.adam_epsilon = learning_rate, adam_epsilon
        torch.manual_seed(seed + self.rank)  # each replica its own dropout masks
        # rank 0's weights to every rank as it wraps (a collective); buffers (BatchNorm's moving statistics) are
        # each rank's own between calls (averaged by sync_statistics), not rank 0's broadcast at every forward
        self.ddp = DistributedDataParallel(_Logits(model), forward_sync_buffers=False)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.state = adam_state(self.params)

    def steps(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """This rank's share of each global batch in turn; returns (K, 2) float32 [loss, accuracy] of each global
        batch (the replicas' mean: equal shares)."""
        out = []
        for xb, yb in zip(xs, ys, strict=True):
            with computing(self.mixed, xb.device):
                logits = self.ddp(xb)
            loss = cross_entropy(logits, yb)
            loss.backward()  # DDP's all-reduce averages each gradient over the ranks as it is made
            grads = [p.grad for p in self.params]
            keras_adam(self.params, grads, self.state, self.learning_rate, self.adam_epsilon)
            for p in self.params:
                p.grad = None
            out.append(torch.stack([loss.detach(), accuracy(logits.detach(), yb)]))
        metrics = torch.stack(out)
        dist.all_reduce(metrics)
        self.sync_statistics()
        return metrics / self.world

    def placement(self) -> list[str]:
        """Every rank's devices holding its copy's parameters, as '<device> (rank r)' (a collective)."""
        every: list = [None] * self.world
        dist.all_gather_object(every, placement(self.params))
        return [f"{d} (rank {r})" for r, devices in enumerate(every) for d in devices]

    def sync_statistics(self) -> None:
        """Every rank's moving statistics set to their mean over the ranks (none: nothing)."""
        buffers = [b for b in self.model.buffers() if b.is_floating_point()]
        if not buffers:
            return
        flat = torch.cat([b.reshape(-1) for b in buffers])
        dist.all_reduce(flat)
        flat /= self.world
        with torch.no_grad():
            for b, v in zip(buffers, flat.split([b.numel() for b in buffers]), strict=True):
                b.copy_(v.view_as(b))


def rank_threads(world: int) -> int:
    """Compute threads a rank: the other frameworks' count shared out (at least one each)."""
    return max(1, threads() // world)


def share(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank `rank`'s share of each global batch of `x` (steps x batch x ...): a view, no copy."""
    b = x.shape[1] // world
    return x[:, rank * b : (rank + 1) * b]


def _join(rank: int, world: int, port: int) -> None:
    """This process as rank `rank` of `world`, over gloo, rank 0's store on localhost:`port`."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=TIMEOUT)


def _exit_with_parent() -> None:
    mp.parent_process().join()  # returns once rank 0's process has ended
    os._exit(1)


def _serve(rank: int, world: int, port: int, inbox) -> None:
    """A rank other than 0: its replicas built, stepped and dropped as rank 0 says, until it says stop, or until rank
    0's process has ended without saying so (killed: the inbox's write end closes, and the watcher sees it end)."""
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    torch.set_num_threads(rank_threads(world))
    _join(rank, world, port)
    replicas: dict[int, Replica] = {}
    while True:
        try:
            message = inbox.recv()
        except EOFError:  # rank 0's process ended without saying stop
            os._exit(1)
        if message[0] == "stop":
            break
        verb, key, *args = message
        if verb == "build":  # a private copy: the model came in shared memory, shared by every rank
            model, *rest = args
            replicas[key] = Replica(copy.deepcopy(model), *rest)
        elif verb == "steps":
            replicas[key].steps(*(share(a, rank, world) for a in args))
        elif verb == "placement":
            replicas[key].placement()
        else:
            replicas.pop(key, None)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """Ranks 1 to world - 1, started for one replica count, and this process as rank 0 of their process group."""

    def __init__(self, world: int):
        ctx, port = mp.get_context("spawn"), _free_port()
        self.world, self.keys, self.open = world, itertools.count(), True
        pipes = [ctx.Pipe(duplex=False) for _ in range(world - 1)]  # (read end, write end): rank r reads pipes[r - 1]
        self.inboxes = [w for _, w in pipes]
        self.procs = [
            ctx.Process(target=_serve, args=(r, world, port, inbox), daemon=True, name=f"parity-ddp-rank{r}")
            for r, (inbox, _) in enumerate(pipes, 1)
        ]
        for p in self.procs:
            p.start()
        for inbox, _ in pipes:
            inbox.close()  # each rank has its own copy
        _join(0, world, port)

    def send(self, *message) -> None:
        """The same message to every other rank (tensors in it go by shared memory)."""
        if self.open:
            for w in self.inboxes:
                w.send(message)

    def close(self) -> None:
        if not self.open:
            return
        self.send("stop")
        self.open = False
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
        for w in self.inboxes:
            w.close()
        dist.destroy_process_group()


_RANKS: list[Ranks] = []  # the one set of ranks this process holds (one process group a process)


def ranks(world: int) -> Ranks:
    """The ranks for `world` replicas: those already started, or new ones (the others closed first)."""
    if _RANKS and _RANKS[0].world == world and _RANKS[0].open:
        return _RANKS[0]
    close_ranks()
    _RANKS.append(Ranks(world))
    return _RANKS[0]


@atexit.register
def close_ranks() -> None:
    while _RANKS:
        _RANKS.pop().close()


@contextmanager
def compute_threads(n: int):
    """This process's compute threads at `n` for the block's time (rank 0's: the worker's own count after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def shared(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """`a` as a tensor in shared memory (one copy): what the other ranks read their shares from."""
    t = torch.empty(a.shape, dtype=dtype).share_memory_()
    t.numpy()[...] = a
    return t
