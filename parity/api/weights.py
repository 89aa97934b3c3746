"""Weight files: the 22 arrays in Keras's get_weights() order as a .npz, written atomically and read defensively
(no pickle, each array's header checked before its body is read)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def save_npz(weights: Sequence[np.ndarray], path) -> None:
    """Weights in Keras's get_weights() order to a .npz file (no pickle), written atomically."""
    import os
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    np.savez(tmp, **{f"w{i:03d}": np.asarray(w) for i, w in enumerate(weights)})
    os.replace(tmp, path)


MAX_WEIGHT_BYTES = 64 * 2**20  # one array of a weight file: the CNN's largest is 2.4 MB


def load_npz(path) -> list[np.ndarray]:
    """The weight list saved by save_npz. Raises ValueError naming the file on anything that is not one:
    not a zip, a bad CRC, a pickled (object) array, an array header asking for more than MAX_WEIGHT_BYTES."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            names = sorted(n.removesuffix(".npy") for n in z.namelist())
            if not names or names != [f"w{i:03d}" for i in range(len(names))]:
                raise ValueError(f"{path}: not a parity weight file (arrays {names[:3]}..., expected w000, w001, ...)")
            return [_read_member(z, f"{n}.npy", path) for n in names]
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise ValueError(f"{path}: unreadable weight file ({type(e).__name__}: {e})") from None


def _read_member(z, name: str, path) -> np.ndarray:
    """One array of the zip, its header checked before its body is read."""
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
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize  # Python integers: no wrap-around
        if size > MAX_WEIGHT_BYTES:
            raise ValueError(f"{path}: {name}: header asks for {size} bytes, more than a weight array can hold")
        body = f.read(size + 1)
    if len(body) != size:
        raise ValueError(f"{path}: {name}: {len(body)} bytes of data where the header says {size}")
    return np.frombuffer(body, dtype).reshape(shape, order="F" if fortran else "C").copy()
