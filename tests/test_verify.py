"""Each call's check against the float64 oracle: `errors`, a chunk at a time, gives the figures of the whole-array
expression to the bit; an operation's oracle rows are saved for the cross-framework check once, at the row's first
call (no framework, no timing of this machine)."""

import numpy as np
import pytest

from parity.common.float64 import CHUNK, errors
from parity.workloads.ops import _saving


def _whole_array(got, ref) -> dict[str, float]:
    """The expression `errors` must equal: a float64 copy of each side, an array at each step."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return {"max_abs_err": float("inf"), "max_rel_err": float("inf")}
    err = float(np.max(np.abs(got - ref))) if got.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return {"max_abs_err": err, "max_rel_err": err / scale if scale > 0 else err}


def _cases():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((2, 5, 7)) * 40.0
    near = (ref + rng.standard_normal(ref.shape) * 1e-3).astype(np.float32)
    nan, inf = near.copy(), near.copy()
    nan[1, 2, 3], inf[0, 0, 0] = np.nan, -np.inf
    ref_inf = ref.copy()
    ref_inf[1, 1, 1] = np.inf
    return {
        "float32": (near, ref),
        "float64": (ref + 1e-9, ref),
        "float16": (ref.astype(np.float16), ref),
        "float32 reference": (near, near[::-1].copy()),  # two frameworks' saved rows
        "a nan": (nan, ref),
        "an infinity": (inf, ref),
        "an infinite reference": (near, ref_inf),
        "a zero reference": (near, np.zeros_like(ref)),
        "negative only": (-np.abs(near), -np.abs(ref)),
        "empty": (np.zeros((0, 3), np.float32), np.zeros((0, 3))),
    }


@pytest.mark.parametrize("chunk", [1, 7, 64, CHUNK])  # a value, chunks that end inside a row, a nan in a later one
@pytest.mark.parametrize("case", list(_cases()))
def test_errors_gives_the_whole_array_figures_to_the_bit(case, chunk):
    got, ref = _cases()[case]
    before = got.copy()
    np.testing.assert_equal(errors(got, ref, chunk), _whole_array(got, ref))  # exactly; nan where both are nan
    assert np.array_equal(got, before, equal_nan=True)  # the copy is worked, never the caller's array


def test_errors_refuses_shapes_that_differ():
    with pytest.raises(ValueError, match="does not match"):
        errors(np.zeros((2, 3)), np.zeros((3, 2)))


def test_an_operations_rows_are_saved_at_its_first_call_only(tmp_path):
    path = tmp_path / "row.npy"
    read = _saving(lambda out, idx: out[idx], str(path))
    outputs = [np.full((4, 3), k, np.float32) for k in (1.0, 2.0, 3.0)]
    for out in outputs:
        assert np.array_equal(read(out, [0, 3]), out[[0, 3]])  # every call's rows go on to their check
    assert np.array_equal(np.load(path), outputs[0][[0, 3]])
    unsaved = _saving(lambda out, idx: out[idx], None)
    assert np.array_equal(unsaved(outputs[1], [1]), outputs[1][[1]]) and list(tmp_path.iterdir()) == [path]
