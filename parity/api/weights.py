"""Weight files: a model's arrays in Keras's get_weights() order (parity.api.cnn.CNN_WEIGHTS, the LSTM's
parity.api.lstm.LstmArchitecture.weights) as a .npz, written atomically and read defensively (no pickle, each array's
header checked before its body is read, bounded by the model it is read for). Every trained adapter's save_weights and
load_weights are these two functions around its get_weights and set_weights (parity.api.adapters.Trained)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def save_npz(weights: Sequence[np.ndarray], path) -> None:
    """Weights in Keras's get_weights() order to a .npz file (no pickle), written atomically: into a temporary file
    beside the target, then renamed over it. A symbolic link is written through (its target replaced); a target
    that exists and is not a regular file (a directory, a device such as /dev/full, a FIFO) is refused with
    ValueError, and a failed write leaves no temporary file behind."""
    import os
    import stat
    import tempfile
    from pathlib import Path

    path = Path(path)
    if path.is_symlink():
        path = path.resolve()  # write through the link: the link stays, its target is replaced
    if path.exists() and not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path}: exists and is not a regular file; a weight file is written only as one")
    tmp = None
    try:  # a fresh temporary name each time: two writers of one file never share (or remove) each other's
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{f"w{i:03d}": np.asarray(w) for i, w in enumerate(weights)})
        os.replace(tmp, path)
    except OSError as e:
        raise ValueError(f"{path}: cannot write the weight file ({e.strerror or e})") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _caps(table: Sequence) -> tuple[int, int, int]:
    """What a weight file for the model whose weights are `table` may hold: arrays, bytes in one array and bytes in
    all, from the model's own weights (anything with a shape: its arrays, or its declared table of Weight records) at
    8 bytes a value (float64 is the widest a weight list is given in)."""
    sizes = [math.prod(tuple(w.shape)) * 8 for w in table]
    if not sizes:
        raise ValueError("a weight file is read for a model with weights: its table is empty")
    return len(sizes), max(sizes), sum(sizes)


def load_npz(path, table: Sequence) -> list[np.ndarray]:
    """The weight list saved by save_npz, for the model whose weights are `table` (its arrays, or its declared
    Weight records: parity.api.cnn.CNN_WEIGHTS, parity.api.lstm.LstmArchitecture(units).weights). Raises ValueError
    naming the file on anything that is not one: not a regular file, not a zip, members other than w000.npy,
    w001.npy, ..., a corrupt or encrypted member, an unknown compression, a pickled (object) array, an array header
    with a negative dimension, more arrays than the model has, or more bytes than its largest array (or all of
    them) would take in float64."""
    import os
    import stat
    import zipfile
    import zlib

    count, one, total = _caps(table)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"{path}: not a regular file")
        with zipfile.ZipFile(path) as z:
            names = sorted(z.namelist())
            if len(names) > count:
                raise ValueError(f"{path}: {len(names)} arrays, more than the model's {count} weights")
            if not names or names != [f"w{i:03d}.npy" for i in range(len(names))]:
                raise ValueError(
                    f"{path}: not a parity weight file (members {names[:3]}..., expected w000.npy, w001.npy, ...)"
                )
            out, read = [], 0
            for n in names:
                out.append(_read_member(z, n, path, min(one, total - read)))
                read += out[-1].nbytes
            return out
    # zipfile raises RuntimeError for an encrypted member, NotImplementedError for an unknown compression
    except (
        OSError,
        EOFError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        RuntimeError,
        NotImplementedError,
    ) as e:
        raise ValueError(f"{path}: unreadable weight file ({type(e).__name__}: {e})") from None


def _read_member(z, name: str, path, cap: int) -> np.ndarray:
    """One array of the zip, its header checked before its body is read (at most `cap` bytes)."""
    with z.open(name) as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                raise ValueError(f"array format version {version}")
            shape, fortran, dtype = read_header[version](f, max_header_size=10000)
        except ValueError as e:
            raise ValueError(f"{path}: {name}: not an array file ({e})") from None
        if dtype.hasobject:
            raise ValueError(f"{path}: {name}: holds Python objects (a pickle); refused without loading it")
        if any(d < 0 for d in shape):
            raise ValueError(f"{path}: {name}: a negative dimension in its shape {shape}")
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize  # Python integers: no wrap-around
        if size > cap:
            raise ValueError(
                f"{path}: {name}: header asks for {size} bytes, more than the model's weights leave ({cap})"
            )
        body = f.read(size + 1)
    if len(body) != size:
        raise ValueError(f"{path}: {name}: {len(body)} bytes of data where the header says {size}")
    return np.frombuffer(body, dtype).reshape(shape, order="F" if fortran else "C").copy()


def check_table(weights: Sequence[np.ndarray], table: Sequence, dtype=np.float32, label=lambda w: w.name) -> None:
    """Raise ValueError naming the array (its index and `label(Weight)`, its name unless told) when a weight list
    does not fit `table` (length, shape, dtype), or holds a value that is not finite (a NaN or an infinity would only
    come back as NaN from the forward pass): the one check of a trained model's weight list."""
    if isinstance(weights, np.ndarray | str | bytes) or not isinstance(weights, Sequence):
        raise ValueError(f"expected a list of {len(table)} weight arrays, got {type(weights).__name__}")
    if len(weights) != len(table):
        raise ValueError(f"expected {len(table)} weight arrays (Keras get_weights() order), got {len(weights)}")
    for i, (a, w) in enumerate(zip(weights, table, strict=True)):
        a = np.asarray(a)
        if tuple(a.shape) != w.shape:
            raise ValueError(f"weight {i} ({label(w)}): shape {tuple(a.shape)}, expected {w.shape}")
        if a.dtype != dtype:
            raise ValueError(f"weight {i} ({label(w)}): dtype {a.dtype}, expected {np.dtype(dtype)}")
        if not np.all(np.isfinite(a)):
            bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
            raise ValueError(f"weight {i} ({label(w)}): {bad} value(s) not finite (NaN or infinity); refused")


def by_name(weights: Sequence[np.ndarray], table: Sequence, dtype=np.float64) -> dict[str, np.ndarray]:
    """A weight list in Keras's order as arrays by their `Weight.name` ('lstm1.kernel', ...), in `dtype` (a float64
    oracle's). Raises ValueError naming the array where the list does not fit `table` in length or shape."""
    if len(weights) != len(table):
        raise ValueError(f"expected {len(table)} weight arrays (Keras order), got {len(weights)}")
    out = {}
    for w, a in zip(table, weights, strict=True):
        if np.shape(a) != w.shape:
            raise ValueError(f"{w.name}: shape {np.shape(a)}, expected {w.shape}")
        out[w.name] = np.asarray(a, dtype)
    return out
