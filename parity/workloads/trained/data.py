"""The trained workloads' dataset (the CNN's and the row LSTM's): Fashion-MNIST's four IDX .gz files read and
checked, a learnable synthetic stand-in, and batch order (`sources` resolves where the data comes from: IDX files,
TFDS, a download, or synthetic).

Pixels stay raw 0..255 (float32 when used), as the notebook fed them: the first BatchNorm normalises.
"""

from __future__ import annotations

import gzip
import math
import os
import stat
import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}
HOW_TO = (
    "on a machine with a network, add --data download (TFDS fetches about 30 MB once, into --data-dir or TFDS's "
    "default ~/tensorflow_datasets); or put the four Fashion-MNIST IDX files ("
    + ", ".join(IDX_FILES.values())
    + ") in a directory and pass --data-dir DIR"
)


class DataError(ValueError):
    """Data that is absent, truncated or corrupt; the message says which file and why."""


class DataAbsent(DataError):
    """The data is not there at all (as opposed to there and corrupt): --data auto may fall back on this only."""


@dataclass
class Dataset:
    x_train: np.ndarray  # uint8 (n, 28, 28, 1)
    y_train: np.ndarray  # int32 (n,)
    x_test: np.ndarray
    y_test: np.ndarray
    source: str  # 'tfds', 'idx' or 'synthetic'

    def save(self, path: Path) -> None:
        np.savez(
            path,
            x_train=self.x_train,
            y_train=self.y_train,
            x_test=self.x_test,
            y_test=self.y_test,
            source=np.array(self.source),
        )

    @classmethod
    def load(cls, path: Path) -> Dataset:
        with np.load(path, allow_pickle=False) as f:
            return cls(f["x_train"], f["y_train"], f["x_test"], f["y_test"], str(f["source"]))


MAX_IDX_BYTES = 60000 * 28 * 28  # the largest Fashion-MNIST file's body; a header asking for more is refused


def read_idx(path: Path, max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """One gzipped IDX file (unsigned bytes). Raises DataError on a truncated or corrupt file.

    The header is read first and the body never beyond what it declares (at most `max_bytes`), so a small
    file that unpacks to gigabytes is refused without unpacking it. Only a regular file is opened: a FIFO would
    block and a device would never end."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise DataError(f"{path}: a symbolic link that leads nowhere (a loop, or a missing target)")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise DataError(f"{path}: not a regular file")
        with gzip.open(path, "rb") as f:
            head = f.read(4)
            if len(head) < 4:
                raise DataError(f"{path}: truncated ({len(head)} bytes, no IDX header)")
            zero, dtype, ndim = struct.unpack(">HBB", head)
            if zero != 0 or dtype != 0x08 or not 1 <= ndim <= 4:
                raise DataError(f"{path}: not an unsigned-byte IDX file (magic {head.hex()})")
            dims = f.read(4 * ndim)
            if len(dims) < 4 * ndim:
                raise DataError(f"{path}: truncated header")
            shape = struct.unpack(f">{ndim}I", dims)
            need = math.prod(shape)  # Python integers: no int64 wrap-around to a small number
            if need > max_bytes:
                raise DataError(
                    f"{path}: header says {shape} = {need} bytes, more than Fashion-MNIST's "
                    f"{max_bytes}: not this data set"
                )
            body = f.read(need + 1)  # one more byte than declared shows a file longer than its header says
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise DataError(f"{path}: not a readable gzip file, corrupt ({type(e).__name__}: {e})") from None
    if len(body) != need:
        held = "more" if len(body) > need else len(body)
        raise DataError(f"{path}: header says {shape} = {need} bytes, file holds {held}: truncated or corrupt")
    return np.frombuffer(body, np.uint8).reshape(shape)


def load_idx(directory: Path) -> Dataset:
    """The four standard files from `directory`, checked for shape and label range."""
    arrays = {k: read_idx(directory / name) for k, name in IDX_FILES.items()}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 3 or x.shape[1:] != (28, 28) or y.shape != (x.shape[0],):
            raise DataError(f"{directory}: {split} images {x.shape} and labels {y.shape} are not Fashion-MNIST")
        if not len(x):
            raise DataError(f"{directory}: the {split} set holds no images")
        if y.max(initial=0) > 9:
            raise DataError(f"{directory}: {split} labels outside 0..9")
    return Dataset(
        arrays["x_train"][..., None],
        arrays["y_train"].astype(np.int32),
        arrays["x_test"][..., None],
        arrays["y_test"].astype(np.int32),
        "idx",
    )


def stack(batches) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = zip(*batches, strict=True)
    return np.concatenate(xs), np.concatenate(ys)


def _templates() -> np.ndarray:
    """Ten visually distinct 28x28 patterns, one per class."""
    r, c = np.mgrid[:28, :28]
    d = np.hypot(r - 13.5, c - 13.5)
    t = [
        (abs(r - 14) < 3),  # horizontal bar
        (abs(c - 14) < 3),  # vertical bar
        (abs(r - c) < 3),  # diagonal
        (abs(r + c - 27) < 3),  # anti-diagonal
        (abs(r - 14) < 7) & (abs(c - 14) < 7),  # filled square
        (abs(d - 9) < 2),  # ring
        (abs(r - 14) < 2) | (abs(c - 14) < 2),  # plus
        (abs(r - c) < 2) | (abs(r + c - 27) < 2),  # X
        ((r // 7 + c // 7) % 2 == 0),  # checkerboard
        (c < 12),  # left half
    ]
    return np.stack(t).astype(np.float32)


_CHUNK = 512  # images: 3 MB of float64 a temporary


@lru_cache(maxsize=2)
def synthetic(train_size: int = 60000, test_size: int = 10000, seed: int = 0) -> Dataset:
    """A deterministic, learnable stand-in with Fashion-MNIST's shapes: shifted, scaled, noisy patterns. Made once a
    process for each size (a run's trained workloads share it), its arrays read-only."""
    rng = np.random.default_rng(seed)
    tpl = _templates()

    def make(n):
        y = rng.integers(0, 10, n).astype(np.int32)
        dy, dx = rng.integers(-3, 4, (2, n))
        rows = (np.arange(28)[None, :] - dy[:, None]) % 28
        cols = (np.arange(28)[None, :] - dx[:, None]) % 28
        scale = rng.uniform(120, 255, (n, 1, 1))
        out = np.empty((n, 28, 28, 1), np.uint8)
        # `_CHUNK` images at a time, in the cache: the same draws in the same order (a Generator's normals are one
        # stream, however many calls take them) and the same float64 arithmetic as the whole array at once
        # (tests/test_data.py), without three whole-set float64 temporaries to fault in, once a run
        for s in range(0, n, _CHUNK):
            e = min(n, s + _CHUNK)
            img = tpl[y[s:e, None, None], rows[s:e, :, None], cols[s:e, None, :]]
            img = img * scale[s:e] + rng.normal(0, 30, (e - s, 28, 28))
            out[s:e, ..., 0] = np.clip(img, 0, 255)
        return out, y

    xtr, ytr = make(train_size)
    xte, yte = make(test_size)
    for a in (xtr, ytr, xte, yte):
        a.setflags(write=False)
    return Dataset(xtr, ytr, xte, yte, "synthetic")


def batch_offsets(seed: int, steps: int, n_train: int, batch: int) -> np.ndarray:
    """The notebook's train_gen: contiguous `batch`-image slices at uniformly random offsets."""
    if batch > n_train:
        raise ValueError(f"batch {batch} is larger than the training set ({n_train})")
    return np.random.default_rng(seed).integers(0, n_train - batch + 1, steps)


@dataclass(frozen=True)
class Epoch:
    """An epoch's global batches at `offsets`, each sliced when asked for: epoch[k] is batches()'s x[k], y[k] (what a
    trainer that puts each batch on its devices ahead of its step takes: parity.workloads.trained.Prefetching)."""

    ds: Dataset
    offsets: np.ndarray
    batch: int

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        o = self.offsets[k]
        return self.ds.x_train[o : o + self.batch].astype(np.float32), self.ds.y_train[o : o + self.batch]


def batches(ds: Dataset, offsets: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, batch, 28, 28, 1) float32 raw pixels and (steps, batch) int32 labels for `offsets`."""
    x = np.stack([ds.x_train[o : o + batch] for o in offsets]).astype(np.float32)
    y = np.stack([ds.y_train[o : o + batch] for o in offsets])
    return x, y
