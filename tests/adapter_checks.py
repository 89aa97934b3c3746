"""What every implementation's trained-model adapter is held to, checked the same way in each framework's tests."""

import numpy as np
import pytest

from parity.api.variants import ONE


def check_weights_round_trip(adapter, model, w: list, other, path, table) -> None:
    """`model`, built from `w`, gives them back in Keras's order (`table`'s shapes); saved to `path` and loaded into
    `other` (built at another seed), they are `other`'s too."""
    assert [a.shape for a in adapter.get_weights(model)] == [t.shape for t in table]
    assert all(np.array_equal(a, b) for a, b in zip(w, adapter.get_weights(model), strict=True))
    adapter.save_weights(model, path)
    adapter.load_weights(other, path)
    assert all(np.array_equal(a, b) for a, b in zip(w, adapter.get_weights(other), strict=True))


def check_float32_counterparts(impl, kind: str) -> None:
    """Each bfloat16 variant of row kind `kind` names its float32 counterpart, the same program in float32: its
    options with `mixed` off."""
    for v in impl.VARIANTS:
        if v.kind == kind and v.dtype == "bfloat16":
            f32 = impl.catalog.variant(v.kind, v.float32, 1 if v.span == ONE else 2)
            assert f32.options == type(v.options)(**{**vars(v.options), "mixed": False}), v.name


def check_torch_variants_are_its_own(adapter, model, x, devices, workload: str) -> None:
    """PyTorch's adapter of `workload` refuses the CNN's training variant, one device's over several, and an inference
    variant it does not declare, each naming the row kind it looked in."""
    with pytest.raises(ValueError, match=f"{workload}_train"):
        adapter.make_trainer(model, devices, "eager+cl")  # the CNN's
    with pytest.raises(ValueError, match=f"{workload}_train"):
        adapter.make_trainer(model, devices * 2, "eager")  # one device's, over several
    with pytest.raises(ValueError, match=f"{workload}_infer"):
        adapter.prepare_inference(model, x, devices, "predict+nothing")


def trained_variants(impl, workload: str, replicas: int, devices, copy, bx, by, skip=lambda v: False) -> dict:
    """Every `workload`_train variant of `impl` at one device and at `replicas` (but those `skip` names), each on a
    fresh model from `copy()` and `devices[:n]`, run over the batches `bx`, `by`: (per-step losses, trainer) by name."""
    out = {}
    for n in (1, replicas):
        for v in impl.variants(f"{workload}_train", n):
            if skip(v):
                continue
            t = impl.adapter(workload).make_trainer(copy(), devices[:n], v.name)
            out[v.name] = (t.steps(bx, by)[:, 0], t)
    return out
