"""Weight files, hostile (parity.api.weights, parity.api.cnn.check_weights), and the declared CNN (parity.api.cnn)
that both implementations build: only the tests that take the `impl` fixture start TensorFlow and JAX."""

import dataclasses
import io
import os
import struct
import zipfile

import numpy as np
import pytest

from parity.api import inputs
from parity.api.cnn import (
    CNN_ARCHITECTURE,
    CNN_BLOCKS,
    CNN_CONVS,
    CNN_DENSE,
    CNN_PARAMS,
    CNN_WEIGHTS,
    Architecture,
    ConvBlock,
    DenseBlock,
    Output,
    check_weights,
)
from parity.api.lstm import LstmArchitecture
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


def _refused(path, match, table=CNN_WEIGHTS):
    with pytest.raises(ValueError, match=match) as e:
        load_npz(path, table)
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
    _refused(p, f"40 arrays, more than the model's {len(CNN_WEIGHTS)} weights")


def test_arrays_larger_than_the_models_own_are_refused(tmp_path):
    p = tmp_path / "w.npz"
    _zip(p, {"w000": _npy((60 * 2**20 // 4,), body=b"\0" * 64)})
    _refused(p, "more than the model's weights leave")


def test_the_caps_are_the_model_being_loaded(tmp_path):
    """A file is bounded by the model it is read for, not by the CNN: an LSTM of 1024 units (a (1024, 4096) array,
    larger than any of the CNN's) loads into its own model, and is refused by a narrower one."""
    wide, narrow = LstmArchitecture(1024).weights, LstmArchitecture(600).weights
    p = tmp_path / "w.npz"
    save_npz([np.zeros(w.shape, np.float32) for w in wide], p)
    assert [a.shape for a in load_npz(p, wide)] == [w.shape for w in wide]
    _refused(p, "more than the model's weights leave", narrow)


def test_members_that_are_not_arrays_are_a_valueerror(tmp_path):
    p = tmp_path / "w.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("w000", np.zeros(3, np.float32).tobytes())  # no .npy: not a member np.savez writes
    _refused(p, r"not a parity weight file \(members \['w000'\]")


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
    assert link.is_symlink() and np.array_equal(load_npz(target, [np.ones(2)])[0], np.ones(2, np.float32))


def test_a_link_planted_where_a_temporary_file_would_go_is_never_written_through(tmp_path):
    """The temporary file is made fresh (mkstemp) each write: a link waiting at the old fixed name, or at any
    name, is left as it was, and so is its target."""
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / ".w.tmp.npz").symlink_to(victim)
    save_npz([np.ones(2, np.float32)], tmp_path / "w.npz")
    assert victim.read_text() == "keep me" and (tmp_path / ".w.tmp.npz").is_symlink()
    assert np.array_equal(load_npz(tmp_path / "w.npz", [np.ones(2)])[0], np.ones(2, np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".w.tmp.npz", "victim", "w.npz"]  # nothing left behind


def test_savers_of_one_file_at_once_never_fail_each_other(tmp_path):
    import threading

    errors, path = [], tmp_path / "w.npz"

    def save(k: int) -> None:
        for _ in range(30):
            try:
                save_npz([np.full(1000, k, np.float32)], path)
            except ValueError as e:
                errors.append(e)

    threads = [threading.Thread(target=save, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and load_npz(path, [np.ones(1000)])[0][0] in (0, 1)  # the last whole file, one writer's
    assert [p.name for p in tmp_path.iterdir()] == ["w.npz"]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_weights_that_are_not_finite_are_refused_naming_the_layer(bad):
    weights = [np.zeros(w.shape, np.float32) for w in CNN_WEIGHTS]
    weights[4].flat[7] = bad
    with pytest.raises(ValueError, match=rf"weight 4 \(layer {CNN_WEIGHTS[4].layer}\): 1 value\(s\) not finite"):
        check_weights(weights)


# A smaller CNN of another shape, to show that both implementations build whatever parity.api.cnn declares: two
# conv blocks (3x3 kernels, a 3x3 pooling, an odd size), two dense blocks.
SMALL = Architecture(
    image=(9, 9, 2),
    convs=(
        ConvBlock(("bn1", "conv1", "pool1", "drop1"), size=9, channels=2, filters=4, kernel=3, pool=3, dropout=0.1),
        ConvBlock(("bn2", "conv2", "pool2", "drop2"), size=3, channels=4, filters=6, kernel=3, pool=2, dropout=0.2),
    ),
    dense=(
        DenseBlock(("dense1", "elu3", "drop3"), units_in=6, units=8, dropout=0.3),
        DenseBlock(("dense2", "elu4", "drop4"), units_in=8, units=7, dropout=0.4),
    ),
    output=Output(("dense3", "probs"), units_in=7, units=5),
    bn_epsilon=1e-3,
    bn_momentum=0.99,
)


def test_the_declaration_is_the_notebooks_cnn():
    assert CNN_PARAMS == {"total": 1_619_470, "trainable": 1_619_084, "non_trainable": 386}
    assert CNN_CONVS == ((28, 1, 64), (14, 64, 128), (7, 128, 256)) and CNN_DENSE == (2304, 256, 10)
    assert CNN_BLOCKS == ("block1", "block2", "block3", "dense1", "logits", "probs")
    assert CNN_ARCHITECTURE.dropout_rates == (0.25, 0.25, 0.25, 0.5)


def test_a_block_that_does_not_take_what_the_one_before_puts_out_is_refused():
    convs = (CNN_ARCHITECTURE.convs[0], dataclasses.replace(CNN_ARCHITECTURE.convs[1], channels=32))
    with pytest.raises(ValueError, match="bn2: declared input 14x14x32, gets 14x14x64"):
        dataclasses.replace(CNN_ARCHITECTURE, convs=convs)
    with pytest.raises(ValueError, match="dense1: declared 2304 inputs, gets 6272"):
        dataclasses.replace(CNN_ARCHITECTURE, convs=CNN_ARCHITECTURE.convs[:2])


def _block_shapes(arch: Architecture, n: int) -> dict[str, tuple[int, ...]]:
    """What each of forward_layers()'s outputs should hold for `n` images, from the declaration alone."""
    shapes = {f"block{i}": (n, b.size_out, b.size_out, b.filters) for i, b in enumerate(arch.convs, 1)}
    shapes |= {d.names[0]: (n, d.units) for d in arch.dense}
    return shapes | {"logits": (n, arch.output.units), "probs": (n, arch.output.units)}


@pytest.mark.parametrize("arch", [CNN_ARCHITECTURE, SMALL], ids=["notebook", "small"])
def test_both_implementations_build_the_declared_cnn(impl, monkeypatch, arch):
    """The model, its weights in Keras's order, its parameter count, every block's output and every gradient have
    the declaration's shapes, whatever it declares."""
    module = impl[0]
    # where the model is built from the declaration: tf_impl's is the shared Keras model code, keras_models.cnn
    monkeypatch.setattr(module.adapter("cnn").model_code, "CNN_ARCHITECTURE", arch)
    monkeypatch.setattr(inputs, "CNN_ARCHITECTURE", arch)  # and where images and labels are checked against it
    model = module.adapter("cnn").build(0, dropout=False)
    assert [tuple(w.shape) for w in module.adapter("cnn").get_weights(model)] == [w.shape for w in arch.weights]
    sizes = {w.name: int(np.prod(w.shape)) for w in arch.weights}
    assert module.adapter("cnn").count_params(model)["total"] == sum(sizes.values())
    x = np.random.default_rng(0).uniform(0, 255, (2, *arch.image)).astype(np.float32)
    out = module.adapter("cnn").forward_layers(model, x)
    assert {k: v.shape for k, v in out.items()} == _block_shapes(arch, len(x))
    g = module.adapter("cnn").loss_and_grads(model, x, np.arange(len(x)) % arch.output.units)
    assert [a.shape for a in g.grads] == [w.shape for w in arch.weights if w.trainable]
    assert [a.shape for a in g.routing] == [(len(x), b.size, b.size, b.filters) for b in arch.convs]
