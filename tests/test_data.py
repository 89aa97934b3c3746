"""Fashion-MNIST loading: IDX files the test writes, TFDS under mock_data, corrupt files, fallback."""

import gzip
import struct

import numpy as np
import pytest

from parity import data


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
    ds, note = data.load("real", str(idx_dir))
    assert ds.source == "idx" and "IDX" in note
    assert ds.x_train.shape == (40, 28, 28, 1) and ds.x_train.dtype == np.uint8
    assert ds.y_test.shape == (10,) and ds.y_test.dtype == np.int32


def test_truncated_idx_file_is_a_clear_error(idx_dir):
    p = idx_dir / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(p.read_bytes())
    p.write_bytes(gzip.compress(raw[:-100]))
    with pytest.raises(data.DataError, match="truncated or corrupt"):
        data.load("real", str(idx_dir))


def test_not_gzip_is_a_clear_error(idx_dir):
    (idx_dir / "t10k-labels-idx1-ubyte.gz").write_bytes(b"garbage bytes")
    with pytest.raises(data.DataError, match="not a readable gzip file"):
        data.load("auto", str(idx_dir))


def test_wrong_magic_is_a_clear_error(idx_dir):
    with gzip.open(idx_dir / "train-labels-idx1-ubyte.gz", "wb") as f:
        f.write(b"\x00\x00\x0d\x01" + b"\x00" * 8)
    with pytest.raises(data.DataError, match="not an unsigned-byte IDX file"):
        data.load("auto", str(idx_dir))


@pytest.mark.parametrize("mode", ["auto", "real"])
def test_a_partial_set_of_idx_files_names_the_missing_one(idx_dir, mode):
    (idx_dir / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(data.DataError, match="3 of the 4 .* missing t10k-labels-idx1-ubyte.gz"):
        data.load(mode, str(idx_dir))


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
        data.load("real", str(idx_dir))


def test_absent_real_data_says_how_to_provide_it(tmp_path):
    with pytest.raises(data.DataError, match="--data-dir"):
        data.load("real", str(tmp_path))


def test_absent_data_falls_back_to_synthetic_and_says_so(tmp_path):
    ds, note = data.load("auto", str(tmp_path), train_size=100, test_size=20)
    assert ds.source == "synthetic" and "SYNTHETIC" in note
    assert ds.x_train.shape == (100, 28, 28, 1)


def test_synthetic_is_deterministic_and_has_ten_distinct_classes():
    a, b = data.synthetic(500, 50), data.synthetic(500, 50)
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    means = np.stack([a.x_train[a.y_train == c].mean(0).ravel() for c in range(10)])
    d = np.linalg.norm(means[:, None] - means[None], axis=-1)
    assert d[~np.eye(10, dtype=bool)].min() > 100  # class means far apart: learnable


def test_tfds_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=12):
        ds = data.load_tfds(None)
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
