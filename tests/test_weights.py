"""Weight files, hostile (parity.api.weights, parity.api.cnn.check_weights): no TensorFlow or JAX needed."""

import io
import os
import struct
import zipfile

import numpy as np
import pytest

from parity.api.cnn import CNN_WEIGHTS, check_weights
from parity.api.weights import load_npz, save_npz


def _npy(shape, dtype="<f4", body=b"") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue() + body


def _zip(path, members: dict[str, bytes], method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=method) as z:
        for name, raw in members.items():
            z.writestr(f"{name}.npy", raw)


def _patch(path, offset_of, fmt, value):
    """Overwrite a field of every local and central header of the zip (offset from each header's signature)."""
    raw = bytearray(path.read_bytes())
    for sig, off in ((b"PK\x03\x04", offset_of[0]), (b"PK\x01\x02", offset_of[1])):
        i = raw.find(sig)
        while i >= 0:
            raw[i + off : i + off + struct.calcsize(fmt)] = struct.pack(fmt, value)
            i = raw.find(sig, i + 4)
    path.write_bytes(bytes(raw))


def _refused(path, match):
    with pytest.raises(ValueError, match=match) as e:
        load_npz(path)
    assert str(path) in str(e.value)


def test_a_corrupt_deflate_stream_is_a_valueerror(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((1000,), body=np.arange(1000, dtype="<f4").tobytes())}, zipfile.ZIP_DEFLATED)
    raw = bytearray(p.read_bytes())
    start = 30 + len("w000.npy")  # the local header, then the deflate stream
    raw[start] = 0xFF  # a reserved block type
    p.write_bytes(bytes(raw))
    _refused(p, "unreadable weight file")


def test_an_encrypted_member_is_a_valueerror(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((4,), body=b"\0" * 16)})
    _patch(p, (6, 8), "<H", 1)  # general purpose flag bit 0: encrypted
    _refused(p, "unreadable weight file")


def test_an_unknown_compression_is_a_valueerror(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((4,), body=b"\0" * 16)})
    _patch(p, (8, 10), "<H", 99)  # compression method 99: none zipfile knows
    _refused(p, "unreadable weight file")


def test_a_negative_dimension_is_refused_before_reading(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((-1,), body=b"\0" * 1000)})
    _refused(p, "a negative dimension")


def test_more_arrays_than_the_model_holds_are_refused(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {f"w{i:03d}": _npy((60 * 2**20 // 4,)) for i in range(40)})  # 40 headers of 60 MB, no bodies
    _refused(p, f"40 arrays, more than the CNN's {len(CNN_WEIGHTS)} weights")


def test_arrays_larger_than_the_models_own_are_refused(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((60 * 2**20 // 4,), body=b"\0" * 64)})
    _refused(p, "more than the CNN's weights leave")


def test_a_fifo_is_refused_at_once(tmp_path):
    p = tmp_path / "w.npz"
    os.mkfifo(p)
    _refused(p, "not a regular file")


def test_saving_onto_something_that_is_not_a_file_is_refused_and_leaves_nothing(tmp_path):
    w = [np.zeros(3, np.float32)]
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)  # as /dev/full: a special file, never to be replaced by a regular one
    with pytest.raises(ValueError, match="not a regular file"):
        save_npz(w, fifo)
    assert not fifo.is_file() and fifo.exists()
    folder = tmp_path / "dir.npz"
    folder.mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        save_npz(w, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.npz", "fifo.npz"]  # no temporary file left


def test_saving_through_a_symlink_writes_its_target(tmp_path):
    target, link = tmp_path / "real.npz", tmp_path / "link.npz"
    save_npz([np.zeros(2, np.float32)], target)
    link.symlink_to(target)
    save_npz([np.ones(2, np.float32)], link)
    assert link.is_symlink() and np.array_equal(load_npz(target)[0], np.ones(2, np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_weights_that_are_not_finite_are_refused_naming_the_layer(bad):
    weights = [np.zeros(w.shape, np.float32) for w in CNN_WEIGHTS]
    weights[4].flat[7] = bad
    with pytest.raises(ValueError, match=rf"weight 4 \(layer {CNN_WEIGHTS[4].layer}\): 1 value\(s\) not finite"):
        check_weights(weights)
