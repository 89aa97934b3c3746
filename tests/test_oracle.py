"""The float64 oracle against a direct loop, and the workload declarations."""

import numpy as np
import pytest

from parity import oracle
from parity.workloads import CONV_FULL, CONV_QUICK, check_divisible, conv_out_size, same_pads


def loop_conv(x, w, stride, padding):
    kh, kw, _, cout = w.shape
    n, h, wd, _ = x.shape
    ho, wo = conv_out_size(h, kh, stride, padding), conv_out_size(wd, kw, stride, padding)
    (pt, _), (pl, _) = (same_pads(h, kh, stride), same_pads(wd, kw, stride)) if padding == "SAME" else ((0, 0), (0, 0))
    out = np.zeros((n, ho, wo, cout))
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    y, z = i * stride + a - pt, j * stride + b - pl
                    if 0 <= y < h and 0 <= z < wd:
                        out[:, i, j, :] += x[:, y, z, :].astype(np.float64) @ w[a, b].astype(np.float64)
    return out


@pytest.mark.parametrize("shape", [(2, 7, 9, 3), (1, 8, 8, 2), (3, 5, 6, 1)])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_oracle_matches_direct_loop(shape, stride, padding):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((3, 2, shape[-1], 4))
    np.testing.assert_allclose(
        oracle.conv2d(x, w, stride, padding), loop_conv(x, w, stride, padding), rtol=1e-12, atol=1e-12
    )


def test_article_shapes_and_flops():
    assert CONV_FULL.output_shape == (128, 128, 128, 256)
    assert CONV_FULL.flops() == 2 * 128 * 128 * 128 * 256 * 5 * 5 * 3 == 80_530_636_800
    assert same_pads(256, 5, 2) == (1, 2)  # TF puts the extra pad row at the bottom
    assert CONV_FULL.min_bytes() == 4 * (128 * 256 * 256 * 3 + 5 * 5 * 3 * 256 + 128 * 128 * 128 * 256)
    assert CONV_QUICK.batch % 8 == 0 and CONV_QUICK.kernel_shape[:3] == CONV_FULL.kernel_shape[:3]


def test_inputs_are_deterministic():
    a, b = CONV_QUICK.inputs(), CONV_QUICK.inputs()
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert a[0].dtype == np.float32 and a[0].shape == CONV_QUICK.image_shape


def test_non_dividing_batch_is_an_error():
    assert check_divisible(128, 8) == 16
    with pytest.raises(ValueError, match="does not divide by 3 replicas"):
        check_divisible(128, 3)


def test_compare_flags_non_finite_and_shape():
    assert oracle.compare(np.array([np.nan]), np.array([1.0]))["max_rel_err"] == float("inf")
    with pytest.raises(ValueError, match="shape"):
        oracle.compare(np.zeros(2), np.zeros(3))


def test_cnn_oracle_blocks_have_the_notebook_shapes():
    rng = np.random.default_rng(0)
    shapes = [(1,)] * 4 + [(5, 5, 1, 64), (64,)] + [(64,)] * 4 + [(5, 5, 64, 128), (128,)] + [(128,)] * 4
    shapes += [(5, 5, 128, 256), (256,), (2304, 256), (256,), (256, 10), (10,)]
    w = [rng.standard_normal(s) * 0.05 for s in shapes]
    for i in (2, 8, 14):  # positive moving variances, unit gammas
        w[i + 1] = np.abs(w[i + 1]) + 1.0
    out = oracle.cnn_forward(w, rng.uniform(0, 255, (2, 28, 28, 1)))
    assert {k: v.shape for k, v in out.items()} == {
        "block1": (2, 14, 14, 64), "block2": (2, 7, 7, 128), "block3": (2, 3, 3, 256), "dense1": (2, 256),
        "logits": (2, 10), "probs": (2, 10),
    }  # fmt: skip
    np.testing.assert_allclose(out["probs"].sum(-1), 1.0)
