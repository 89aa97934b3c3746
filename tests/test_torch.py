"""PyTorch's own parts (torch_impl): its devices and their refusals, TF's SAME padding written out, the profiler's
scopes. What every implementation shares (the surface, the oracles, training) is tested through the `impl` fixture."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # noqa: F841  (the CPU extras install it: pyproject.toml)

from parity.api import Cluster, DeviceUnavailable  # noqa: E402
from torch_impl import conv, devices, ops, profile  # noqa: E402


@pytest.mark.parametrize(
    "size, kernel, stride, pads",
    [(256, 5, 2, (1, 2)), (28, 3, 2, (0, 1)), (9, 3, 2, (1, 1)), (8, 1, 1, (0, 0)), (7, 3, 1, (1, 1))],
)
def test_same_padding_is_tfs(size, kernel, stride, pads):
    """TF pads floor(total / 2) before and the rest after: (1, 2) at the article's 256, k 5, stride 2."""
    assert conv.same_padding(size, kernel, stride) == pads
    out = -(-size // stride)
    assert (size + sum(pads) - kernel) // stride + 1 == out


def test_the_conv_pads_after_where_tf_does():
    """An odd total pads its extra row and column after: the output's first pixel sees the image's top-left corner
    (no padding before), which a symmetric padding would shift."""
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 0, 0, 0] = 1.0
    w = np.zeros((2, 2, 1, 1), np.float32)
    w[0, 0, 0, 0] = 1.0  # picks each window's top-left pixel
    out = conv.conv_op(x, w, 2, "SAME").numpy()
    assert out.shape == (1, 2, 2, 1) and out[0, 0, 0, 0] == 1.0 and out.sum() == 1.0


@pytest.mark.parametrize(
    "device, cluster, says",
    [
        ("tpu", None, "torch_xla"),
        ("npu", None, "no device of that kind"),
        ("cpu", Cluster("127.0.0.1:1234", 2, 0), "multi-process"),
    ],
)
def test_devices_it_cannot_use_are_refused_in_one_line(device, cluster, says):
    with pytest.raises(DeviceUnavailable, match=says) as e:
        devices.setup_devices(device, 0 if cluster else 1, cluster)
    assert "\n" not in str(e.value)


class FakeXla:
    """torch_xla's surface this implementation calls (no machine here has the package or a TPU): its chips, and
    the launches it was asked for."""

    def __init__(self, chips):
        self.chips, self.syncs = chips, []

    def devices(self):
        return self.chips

    def sync(self, wait=False):
        self.syncs.append(wait)


def test_the_tpu_path_takes_torch_xlas_first_chip_and_cuts_each_step(monkeypatch):
    fake = FakeXla([torch.device("xla", 0), torch.device("xla", 1)])
    monkeypatch.setitem(__import__("sys").modules, "torch_xla", fake)
    assert devices.setup_devices("tpu", 1) == [torch.device("xla", 0)]
    assert devices.describe_devices() == "xla x2 (torch_xla)" and devices.list_devices()[-1] == "xla:1 tpu"
    devices.step_done(torch.device("cpu"))
    devices.step_done(torch.device("xla", 0))  # a training step's graph launched, not waited for
    assert fake.syncs == [False]
    with pytest.raises(DeviceUnavailable, match="torch.compile's variants run on a CPU or GPU"):
        ops.compiled(lambda a: a, True, torch.device("xla", 0))
    monkeypatch.setitem(__import__("sys").modules, "torch_xla", FakeXla([]))
    with pytest.raises(DeviceUnavailable, match="torch_xla found no TPU"):
        devices.setup_devices("tpu", 1)


def test_threads_are_the_other_frameworks_count(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert devices.threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert devices.threads() == len(__import__("os").sched_getaffinity(0))


def test_the_profile_names_each_op_by_its_layer_forward_and_backward(tmp_path):
    """A forward op takes its record_function scope; its backward node takes the forward op's, through the sequence
    number PyTorch records on both (aten::linear's inner addmm included)."""
    from parity.judging.layers import classify

    lin = torch.nn.Linear(8, 4)
    with profile.trace(str(tmp_path)):
        with torch.profiler.record_function("dense"):
            y = lin(torch.randn(16, 8))
        y.square().mean().backward()
    ops = profile.trace_ops(str(tmp_path))
    names = [name for name, *_ in ops]
    assert "dense/aten::linear" in names and "dense/gradient/AddmmBackward0" in names, names
    assert classify("dense/gradient/AddmmBackward0", ["dense"]) == ("dense", "backward")
    assert all(s >= 0 and start >= 0 for _, s, start, _ in ops)


def test_a_compiled_first_call_compiles_in_a_cache_of_its_own(monkeypatch, tmp_path):
    """Inductor keeps what it compiled under /tmp across processes: the worker's compiled variants use a fresh
    folder of their own, so that a first call on a machine that ran the row before is a compilation, not a load;
    a folder the caller set is kept (and the run says so: test_engine)."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    own = ops.private_compile_cache()
    assert os.path.isdir(own) and os.path.basename(own).startswith("parity-inductor-") and not os.listdir(own)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == own == ops.private_compile_cache()  # once a process
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert ops.private_compile_cache() == str(tmp_path)


def test_huge_pages_are_offered_where_the_kernel_grants_them_on_request(tmp_path, monkeypatch):
    """PyTorch's allocator asks for huge pages (THP_MEM_ALLOC_ENABLE) under the 'thp' setting: offered on a CPU whose
    kernel grants them to the mappings that ask ('madvise'), never elsewhere, and not run where it slowed a row kind."""
    from torch_impl import catalog

    mode = tmp_path / "enabled"
    for text, offered in (("always [madvise] never", True), ("[always] madvise never", False), ("x [never]", False)):
        mode.write_text(text)
        monkeypatch.setattr(catalog, "THP_MODE", mode)
        assert catalog.huge_pages_on_request(mode) is offered
        assert bool(catalog.settings("cpu")) is offered and catalog.settings("gpu") == ()
    (thp,) = catalog.SETTINGS
    assert thp.env == {"THP_MEM_ALLOC_ENABLE": "1"} and {"vit_train", "matmul"} <= set(thp.slows)
    assert not catalog.huge_pages_on_request(tmp_path / "absent")
