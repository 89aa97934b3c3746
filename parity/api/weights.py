"""Weight files: the CNN's arrays in Keras's get_weights() order (parity.api.cnn.CNN_WEIGHTS) as a .npz, written
atomically and read defensively (no pickle, each array's header checked before its body is read). Each
implementation's save_weights and load_weights are these two functions around its get_weights and set_weights."""

from __future__ import annotations

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


def _caps() -> tuple[int, int, int]:
    """What a weight file of this CNN may hold: arrays, bytes in one array and bytes in all, from the model's own
    weights (CNN_WEIGHTS) at 8 bytes a value (float64 is the widest a weight list is given in)."""
    from parity.api.cnn import CNN_WEIGHTS

    sizes = [int(np.prod(w.shape)) * 8 for w in CNN_WEIGHTS]
    return len(CNN_WEIGHTS), max(sizes), sum(sizes)


def load_npz(path) -> list[np.ndarray]:
    """The weight list saved by save_npz. Raises ValueError naming the file on anything that is not one: not a
    regular file, not a zip, a corrupt or encrypted member, an unknown compression, a pickled (object) array, an
    array header with a negative dimension, more arrays or more bytes than the CNN's own weights hold."""
    import os
    import stat
    import zipfile
    import zlib

    count, one, total = _caps()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"{path}: not a regular file")
        with zipfile.ZipFile(path) as z:
            names = sorted(n.removesuffix(".npy") for n in z.namelist())
            if len(names) > count:
                raise ValueError(f"{path}: {len(names)} arrays, more than the CNN's {count} weights")
            if not names or names != [f"w{i:03d}" for i in range(len(names))]:
                raise ValueError(f"{path}: not a parity weight file (arrays {names[:3]}..., expected w000, w001, ...)")
            out, read = [], 0
            for n in names:
                out.append(_read_member(z, f"{n}.npy", path, min(one, total - read)))
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
            raise ValueError(f"{path}: {name}: header asks for {size} bytes, more than the CNN's weights leave ({cap})")
        body = f.read(size + 1)
    if len(body) != size:
        raise ValueError(f"{path}: {name}: {len(body)} bytes of data where the header says {size}")
    return np.frombuffer(body, dtype).reshape(shape, order="F" if fortran else "C").copy()
