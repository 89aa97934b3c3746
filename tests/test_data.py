"""Fashion-MNIST loading: IDX files the test writes, TFDS under mock_data, corrupt files, fallback."""

import gzip
import struct

import numpy as np
import pytest

from parity.workloads.trained import data, sources


def write_idx(path, arr):
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


@pytest.fixture
def idx_dir(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 10)):
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    return tmp_path


def test_idx_files(idx_dir):
    ds, note = sources.load("real", str(idx_dir))
    assert ds.source == "idx" and "IDX" in note
    assert ds.x_train.shape == (40, 28, 28, 1) and ds.x_train.dtype == np.uint8
    assert ds.y_test.shape == (10,) and ds.y_test.dtype == np.int32


def test_truncated_idx_file_is_a_clear_error(idx_dir):
    p = idx_dir / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(p.read_bytes())
    p.write_bytes(gzip.compress(raw[:-100]))
    with pytest.raises(data.DataError, match="truncated or corrupt"):
        sources.load("real", str(idx_dir))


def test_not_gzip_is_a_clear_error(idx_dir):
    (idx_dir / "t10k-labels-idx1-ubyte.gz").write_bytes(b"garbage bytes")
    with pytest.raises(data.DataError, match="not a readable gzip file"):
        sources.load("auto", str(idx_dir))


def test_wrong_magic_is_a_clear_error(idx_dir):
    with gzip.open(idx_dir / "train-labels-idx1-ubyte.gz", "wb") as f:
        f.write(b"\x00\x00\x0d\x01" + b"\x00" * 8)
    with pytest.raises(data.DataError, match="not an unsigned-byte IDX file"):
        sources.load("auto", str(idx_dir))


@pytest.mark.parametrize("mode", ["auto", "real"])
def test_a_partial_set_of_idx_files_names_the_missing_one(idx_dir, mode):
    (idx_dir / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(data.DataError, match="3 of the 4 .* missing t10k-labels-idx1-ubyte.gz"):
        sources.load(mode, str(idx_dir))


@pytest.mark.parametrize("dims", [(60001, 28, 28), (65536, 65536, 65536, 65536)])
def test_a_gzip_bomb_is_refused_from_its_header(tmp_path, dims):
    # 65536^4 wraps NumPy's int64 product to 0; the header is checked with Python integers, before any body
    p = tmp_path / "bomb.gz"
    with gzip.open(p, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, len(dims)) + struct.pack(f">{len(dims)}I", *dims))
        f.write(bytes(2**20))  # a megabyte of zeros: the body is never read this far
    with pytest.raises(data.DataError, match="more than Fashion-MNIST's"):
        data.read_idx(p)


def test_a_body_longer_than_its_header_is_refused(idx_dir):
    p = idx_dir / "train-labels-idx1-ubyte.gz"
    p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes()) + b"\x01"))
    with pytest.raises(data.DataError, match="holds more"):
        data.read_idx(p)


def test_an_empty_test_set_is_a_data_error(idx_dir):
    write_idx(idx_dir / "t10k-images-idx3-ubyte.gz", np.zeros((0, 28, 28)))
    write_idx(idx_dir / "t10k-labels-idx1-ubyte.gz", np.zeros(0))
    with pytest.raises(data.DataError, match="the test set holds no images"):
        sources.load("real", str(idx_dir))


def test_absent_real_data_says_how_to_provide_it(tmp_path):
    with pytest.raises(data.DataError, match="--data-dir"):
        sources.load("real", str(tmp_path))


def test_absent_data_falls_back_to_synthetic_and_says_so(tmp_path):
    ds, note = sources.load("auto", str(tmp_path), train_size=100, test_size=20)
    assert ds.source == "synthetic" and "SYNTHETIC" in note
    assert ds.x_train.shape == (100, 28, 28, 1)


def test_synthetic_is_deterministic_and_has_ten_distinct_classes():
    a = data.synthetic(500, 50)
    b = data.synthetic.__wrapped__(500, 50)  # made again, not the process's copy
    assert a is data.synthetic(500, 50) and b is not a  # made once a process for each size
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    assert not a.x_train.flags.writeable  # shared: nobody may change it
    means = np.stack([a.x_train[a.y_train == c].mean(0).ravel() for c in range(10)])
    d = np.linalg.norm(means[:, None] - means[None], axis=-1)
    assert d[~np.eye(10, dtype=bool)].min() > 100  # class means far apart: learnable


def _synthetic_at_once(train_size, test_size, seed):
    """synthetic()'s images as one whole-array expression each: what its chunks must equal to the bit."""
    rng, tpl = np.random.default_rng(seed), data._templates()

    def make(n):
        y = rng.integers(0, 10, n).astype(np.int32)
        dy, dx = rng.integers(-3, 4, (2, n))
        rows = (np.arange(28)[None, :] - dy[:, None]) % 28
        cols = (np.arange(28)[None, :] - dx[:, None]) % 28
        img = tpl[y[:, None, None], rows[:, :, None], cols[:, None, :]]
        img = img * rng.uniform(120, 255, (n, 1, 1)) + rng.normal(0, 30, (n, 28, 28))
        return np.clip(img, 0, 255).astype(np.uint8)[..., None], y

    return (*make(train_size), *make(test_size))


@pytest.mark.parametrize("chunk", [1, 7, 512])
def test_synthetic_made_in_chunks_is_the_whole_array_expression(monkeypatch, chunk):
    monkeypatch.setattr(data, "_CHUNK", chunk)
    got = data.synthetic.__wrapped__(600, 50, seed=3)
    for a, b in zip((got.x_train, got.y_train, got.x_test, got.y_test), _synthetic_at_once(600, 50, 3), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_tfds_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=12):
        ds = sources.load_tfds(None)
    assert ds.source == "tfds"
    assert ds.x_train.shape == (12, 28, 28, 1) and ds.x_train.dtype == np.uint8
    assert ds.y_train.dtype == np.int32 and ds.y_train.max() <= 9


def test_batch_order_is_the_notebooks_generator():
    ds = data.synthetic(100, 10)
    off = data.batch_offsets(0, 5, 100, 32)
    assert np.array_equal(off, data.batch_offsets(0, 5, 100, 32)) and off.max() <= 100 - 32
    x, y = data.batches(ds, off, 32)
    assert x.shape == (5, 32, 28, 28, 1) and x.dtype == np.float32
    assert np.array_equal(x[2], ds.x_train[off[2] : off[2] + 32].astype(np.float32))  # raw 0..255, contiguous
    with pytest.raises(ValueError, match="larger than the training set"):
        data.batch_offsets(0, 1, 10, 32)


# ---- --data download ---------------------------------------------------------------------------------


def test_download_without_a_network_fails_in_one_line_and_leaves_nothing(tmp_path):
    """For real: TFDS's own fetch, in the child process the harness uses. This machine has no network beyond
    the package registries, so here the first branch runs; on a machine with one, the second does."""
    import time

    root = tmp_path / "tfds" / "fresh"
    t0 = time.monotonic()
    try:
        ds, note = sources.load("download", str(root), timeout_s=300, progress=False)
    except data.DataError as e:
        took = time.monotonic() - t0
        msg = str(e)
        assert "\n" not in msg and "Traceback" not in msg
        assert "unreachable" in msg and "fashion-mnist" in msg and "--data-dir" in msg, msg
        assert took < 2 * sources.REACH_TIMEOUT_S + 30, (
            f"took {took:.0f} s: not bounded"
        )  # not TFDS's minutes of retries
        assert not (tmp_path / "tfds").exists()  # the folders it made are gone again, nothing half-written
    else:
        assert ds.source == "tfds" and ds.x_train.shape == (60000, 28, 28, 1) and ds.x_test.shape[0] == 10000
        assert (root / "fashion_mnist").is_dir() and not list(root.glob(".parity-download-*"))
        assert "downloaded through TFDS" in note


def test_tfds_download_path_under_mock_data(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=16):
        ds = sources.load_tfds(str(tmp_path), download=True)
    assert ds.source == "tfds" and ds.x_train.shape == (16, 28, 28, 1) and ds.y_test.dtype == np.int32


def test_a_download_is_staged_then_moved_into_place(tmp_path, monkeypatch):
    root = tmp_path / "tfds"
    staged = []

    def child(args, timeout_s, progress):  # stands in for TFDS: writes its prepared folder into the stage
        assert args[0] == "--download"
        stage = __import__("pathlib").Path(args[1])
        staged.append(stage)
        (stage / "fashion_mnist" / "3.0.1").mkdir(parents=True)
        (stage / "fashion_mnist" / "3.0.1" / "dataset_info.json").write_text("{}")
        return data.synthetic(20, 5)

    monkeypatch.setattr(sources, "_child", child)
    ds, note = sources.load("download", str(root), progress=False)
    assert len(ds.x_train) == 20 and "downloaded" in note
    assert staged[0].parent == root and not staged[0].exists()  # the stage is gone
    assert (root / "fashion_mnist" / "3.0.1" / "dataset_info.json").exists()
    monkeypatch.setattr(sources, "_child", lambda *a: pytest.fail("downloaded again"))
    monkeypatch.setattr(sources, "_tfds_in_child", lambda d: data.synthetic(30, 5))
    ds, note = sources.load("download", str(root), progress=False)  # already on disk: read, not fetched again
    assert len(ds.x_train) == 30 and "from TFDS" in note


def test_a_failed_download_leaves_the_data_dir_as_it_was(tmp_path, monkeypatch):
    (tmp_path / "other_dataset").mkdir()

    def child(args, timeout_s, progress):
        (__import__("pathlib").Path(args[1]) / "fashion_mnist" / "3.0.1.incomplete").mkdir(parents=True)
        raise data.DataError("TFDS fashion_mnist could not be downloaded (ConnectionError: reset)")

    monkeypatch.setattr(sources, "_child", child)
    with pytest.raises(data.DataError, match="ConnectionError"):
        sources.load("download", str(tmp_path), progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other_dataset"]


def test_a_child_past_its_time_is_stopped():
    with pytest.raises(data.DataError, match=r"did not finish within 0\.01 s"):
        sources._child(["--tfds", ""], timeout_s=0.01, progress=False)


def test_an_unreachable_host_is_one_line_in_seconds():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # a port nobody listens on (bound, never listening: connections are refused)
    port = s.getsockname()[1]
    try:
        with pytest.raises(data.DataError, match=rf"127\.0\.0\.1:{port} is unreachable"):
            sources.reachable(f"http://127.0.0.1:{port}/train.gz", timeout_s=5)
    finally:
        s.close()


def test_the_synthetic_warning_gives_the_exact_command():
    from parity.workloads.cnn.suite import with_data_download

    cmd = ["python", "-m", "parity.run", "--data", "auto", "--quick", "--data=real", "--out", "r"]
    assert with_data_download(cmd) == ["python", "-m", "parity.run", "--quick", "--out", "r", "--data", "download"]


def test_a_corrupt_deflate_stream_is_said_as_corrupt(idx_dir):
    p = idx_dir / "train-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.compress(gzip.decompress(p.read_bytes()), mtime=0))  # a 10-byte gzip header
    raw[10] = 0xFF  # the first deflate block's header: block type 3, which deflate reserves (zlib.error)
    p.write_bytes(bytes(raw))
    with pytest.raises(data.DataError, match="corrupt"):
        sources.load("auto", str(idx_dir))


def test_an_idx_file_that_is_a_fifo_is_refused_at_once(idx_dir):
    import os

    p = idx_dir / "t10k-labels-idx1-ubyte.gz"
    p.unlink()
    os.mkfifo(p)  # reading it would block until a writer came
    with pytest.raises(data.DataError, match="not a regular file"):
        sources.load("real", str(idx_dir))


def test_an_idx_symlink_loop_is_said_as_such_not_as_missing(idx_dir):
    p = idx_dir / "t10k-labels-idx1-ubyte.gz"
    p.unlink()
    p.symlink_to(p)
    with pytest.raises(data.DataError, match="a symbolic link that leads nowhere"):
        sources.load("auto", str(idx_dir))


def test_corrupt_tfds_data_is_an_error_even_under_auto(tmp_path, monkeypatch):
    (tmp_path / "fashion_mnist" / "3.0.1").mkdir(parents=True)

    def corrupt(args, timeout_s, progress):
        raise data.DataError(f"TFDS fashion_mnist in {tmp_path} is corrupt or unreadable (ParseError: bad)")

    monkeypatch.setattr(sources, "_child", corrupt)
    for mode in ("auto", "real"):
        with pytest.raises(data.DataError, match="corrupt or unreadable"):
            sources.load(mode, str(tmp_path))  # never a fallback to synthetic data, never "not found"
    ds, note = sources.load("auto", str(tmp_path / "elsewhere"), train_size=64, test_size=8)
    assert ds.source == "synthetic" and "not found" in note  # absent: the one case auto falls back on
