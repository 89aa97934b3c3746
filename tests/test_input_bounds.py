"""One check, one bound, one answer in every implementation (parity.api.inputs): the ViT's sizes (check_vit, bounded
by this machine's memory as the LSTM's units are) and the conv's shapes and stride (check_conv). Keras on JAX's in a
process of its own (its backend is fixed once a process)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from parity.api import inputs
from parity.api.inputs import check_conv, check_vit
from parity.common.frameworks import JAX, TF, TORCH

GIB = 2**30
HUGE = r"parameters, more than this machine's [0-9.]+ GiB holds trained"

# (build's sizes, the ValueError it must raise; None: it builds)
VIT_CASES = {
    "bools": ((True, True, True, True), r"dim must be an integer of 1 or more, got True"),
    "numpy-ints": ((np.int64(16), np.int32(1), np.int64(2), np.uint8(32)), None),
    "float": ((16.0, 1, 2, 32), r"dim must be an integer of 1 or more, got 16.0"),
    "deep": ((16, 10**9, 2, 32), r"depth=1000000000.* has at least [0-9,]+ " + HUGE),
    "wide": ((2**31, 1, 1, 1), r"dim=2147483648.* has at least [0-9,]+ " + HUGE),
    "heads": ((16, 1, 3, 32), r"width 16 does not divide into 3 heads"),
}
IMAGES = np.zeros((2, 8, 6, 3), np.float32)
# (kernel's shape, stride, padding, the ValueError it must raise; None: it runs)
CONV_CASES = {
    "valid-kernel-too-tall": ((9, 3, 3, 4), 1, "VALID", r"a 9x3 kernel does not fit in 8x6 images: VALID padding"),
    "valid-kernel-too-wide": ((3, 7, 3, 4), 1, "VALID", r"a 3x7 kernel does not fit in 8x6 images"),
    "same-kernel-larger": ((9, 9, 3, 4), 2, "SAME", None),
    "stride-2-63": ((3, 3, 3, 4), 2**63, "SAME", r"stride 9223372036854775808 is beyond the images' larger side, 8"),
    "stride-side": ((3, 3, 3, 4), 8, "SAME", None),
    "stride-numpy": ((3, 3, 3, 4), np.int64(2), "SAME", None),
}


def test_the_vit_sizes_have_one_rule_bounded_by_memory(monkeypatch):
    arch = check_vit(np.int64(16), 1, 2, 32)
    assert (arch.dim, arch.depth, arch.heads, arch.mlp) == (16, 1, 2, 32) and type(arch.dim) is int
    for sizes, said in VIT_CASES.values():
        if said is not None:
            with pytest.raises(ValueError, match=said):
                check_vit(*sizes)
    monkeypatch.setattr(inputs, "physical_memory", lambda: GIB)  # 2**26 parameters at 16 bytes
    one = check_vit(64, 1, 4, 256).params()
    deepest = 2**26 // one  # about: each block adds a little less than the first
    check_vit(64, deepest, 4, 256)
    said = r"heads=4, mlp=256 has [0-9,]+ parameters, more than this machine's 1.0 GiB holds trained \(67,108,864 "
    with pytest.raises(ValueError, match=said + r"parameters at 16 bytes each\)"):  # exactly counted
        check_vit(64, 2 * deepest, 4, 256)
    with pytest.raises(ValueError, match=r"has at least 4,096,000,000 parameters"):  # too many to count exactly
        check_vit(64, 200000, 4, 256)


def test_a_conv_the_frameworks_would_treat_differently_is_refused():
    for kernel, stride, padding, said in CONV_CASES.values():
        if said is None:
            got = check_conv(IMAGES, np.zeros(kernel), stride, padding)
            assert got == stride and type(got) is int
        else:
            with pytest.raises(ValueError, match=said):
                check_conv(IMAGES, np.zeros(kernel), stride, padding)


def _outcome(call) -> list:
    try:
        call()
    except Exception as e:  # the finding: which error
        return [type(e).__name__, str(e)]
    return ["ok", ""]


def _calls(module, devices) -> dict:
    """Every case's call on one implementation: its ViT's build, its conv's prepare."""
    out = {f"vit/{n}": (lambda s=s: module.adapter("vit").build(*s, 0)) for n, (s, _) in VIT_CASES.items()}
    for n, (kernel, stride, padding, _) in CONV_CASES.items():
        out[f"conv/{n}"] = lambda k=kernel, s=stride, p=padding: module.adapter("conv").prepare(
            module.variants("conv", 1)[0].name, IMAGES, np.zeros(k, np.float32), devices[:1], stride=s, padding=p
        )
    return out


def _expected() -> dict:
    return {**{f"vit/{n}": said for n, (_, said) in VIT_CASES.items()},
            **{f"conv/{n}": c[-1] for n, c in CONV_CASES.items()}}  # fmt: skip


def _judge(found: dict) -> None:
    import re

    for name, said in _expected().items():
        kind, message = found[name]
        if said is None:
            assert kind == "ok", f"{name}: {kind}: {message}"
        else:
            assert kind == "ValueError" and re.search(said, message), f"{name}: {kind}: {message}"


@pytest.mark.parametrize("fw", [JAX, TF, TORCH])
def test_every_implementation_takes_or_refuses_them_alike(fw):
    from frameworks_setup import IMPLS

    module, devices = IMPLS[fw]
    _judge({name: _outcome(call) for name, call in _calls(module, devices).items()})


KERAS_JAX_PROBE = """
import json, sys
sys.modules["tensorflow"] = None
sys.path.insert(0, "tests")
import keras_jax_impl as kj
from test_input_bounds import _calls, _outcome
devices = kj.setup_devices("cpu", 1)
print(json.dumps({name: _outcome(call) for name, call in _calls(kj, devices).items()}))
"""


@pytest.mark.slow
def test_keras_on_jax_takes_or_refuses_them_alike():
    p = subprocess.run([sys.executable, "-c", KERAS_JAX_PROBE], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    _judge(json.loads(p.stdout.strip().splitlines()[-1]))
