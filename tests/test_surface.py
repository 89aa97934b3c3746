"""The implementations' surface: each in-process package exposes parity.api.FrameworkImpl, with the same arguments
(Keras on JAX's: tests/test_keras_jax.py)."""

import importlib
import inspect
import typing

import pytest

from parity import api
from parity.common.frameworks import TABLE

# every implementation that runs in the test process (parity.common.frameworks: the one list), by its package
IMPLS = {f.module: importlib.import_module(f.module) for f in TABLE.values() if f.shares_process}


def _params(f) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]


@pytest.mark.parametrize("impl", IMPLS.values(), ids=IMPLS.keys())
def test_each_implementation_has_the_declared_surface(impl):
    assert sorted(impl.__all__) == sorted(api.SURFACE)
    for name in api.SURFACE:
        assert hasattr(impl, name), f"{impl.__name__} lacks {name}"
        declared = getattr(api.FrameworkImpl, name, None)
        if declared is None:  # a constant: its declared type
            kind = typing.get_origin(typing.get_type_hints(api.FrameworkImpl)[name])
            assert isinstance(getattr(impl, name), kind), name
            continue
        assert _params(getattr(impl, name)) == _params(declared)[1:], f"{impl.__name__}.{name}"  # less self


def test_the_implementations_mirror_each_other():
    first, *others = IMPLS.values()
    for name in api.SURFACE:
        for other in others:
            a, b = getattr(first, name), getattr(other, name)
            if callable(a):
                assert [p for p, _ in _params(a)] == [p for p, _ in _params(b)], f"{other.__name__}.{name}"


@pytest.mark.parametrize(
    "mode, offered",
    [("always [madvise] never", True), ("[always] madvise never", False), ("always madvise [never]", False)],
)
def test_huge_pages_are_a_configuration_only_where_asking_for_them_changes_something(tmp_path, mode, offered):
    """'+thp' asks for huge pages through glibc's tunable: a kernel in 'always' mode gives them out of the box,
    one in 'never' mode refuses them; only 'madvise' makes the configuration differ from the default."""
    from jax_impl import catalog

    (tmp_path / "enabled").write_text(mode + "\n")
    libc = catalog.os.confstr("CS_GNU_LIBC_VERSION") or ""
    new_glibc = libc.startswith("glibc ") and catalog.release(libc.split()[1]) >= (2, 35)
    assert catalog.huge_pages_on_request(tmp_path / "enabled") == (offered and new_glibc)
    assert not catalog.huge_pages_on_request(tmp_path / "absent")


def test_settings_with_huge_pages_keep_each_lever_named(monkeypatch):
    from jax_impl import catalog

    def offered(**kw) -> dict:
        return {s.name: s for s in catalog.settings("cpu", **kw)}

    monkeypatch.setattr(catalog, "huge_pages_on_request", lambda: True)
    configs = offered(native_bf16=True)
    assert set(configs) == {"thp", "ynn+thp", "onednn+thp", "ynn+onednn+thp", "ynn+onednn+thp+heap"}
    assert configs["ynn+thp"].env == {**catalog.YNN, **catalog.THP}
    assert configs["onednn+thp"].env == {**catalog.ONEDNN, **catalog.THP}
    flags = configs["ynn+onednn+thp"].env["XLA_FLAGS"].split()  # both settings' flags, the list without modifiers
    assert flags == [catalog.YNN["XLA_FLAGS"], catalog.ONEDNN["XLA_FLAGS"]]
    # YNNPACK's list leaves elementwise ops out: with them it takes each convolution and its bias add from oneDNN
    assert "eltwise" not in catalog.YNN["XLA_FLAGS"]
    heap = configs["ynn+onednn+thp+heap"].env
    assert heap["XLA_FLAGS"] == configs["ynn+onednn+thp"].env["XLA_FLAGS"]
    tunables = heap["GLIBC_TUNABLES"].split(":")  # huge pages, and the freed memory kept in the heap
    assert tunables[0] == catalog.THP["GLIBC_TUNABLES"] and "glibc.malloc.mmap_max=0" in tunables
    assert configs["thp"].formats == () and configs["ynn+onednn+thp+heap"].rank is None  # `all`, `levers` only
    monkeypatch.setattr(catalog, "huge_pages_on_request", lambda: False)
    assert set(offered(native_bf16=True)) == {"ynn", "onednn", "ynn+onednn"}
    assert set(offered(native_bf16=False)) == {"ynn"}
    monkeypatch.setattr(catalog, "huge_pages_on_request", lambda: True)  # the heap only beside both libraries
    assert set(offered(native_bf16=False)) == {"thp", "ynn+thp"}
    assert catalog.settings("gpu") == ()


def test_a_configurations_list_settings_join_the_users_own(monkeypatch):
    from parity.engine.workerproc import _environment

    monkeypatch.setenv("XLA_FLAGS", "--mine")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    env = _environment({"XLA_FLAGS": "--theirs", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, None, None, None)
    assert env["XLA_FLAGS"] == "--mine --theirs"
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert _environment({"GLIBC_TUNABLES": "a=1"}, None, None, None)["GLIBC_TUNABLES"] == "a=1"


def test_the_result_file_records_the_kernels_huge_page_mode(tmp_path):
    from parity.engine.environment import transparent_hugepages

    (tmp_path / "enabled").write_text("always [madvise] never\n")
    assert transparent_hugepages(tmp_path / "enabled") == "madvise"
    assert transparent_hugepages(tmp_path / "absent") is None


def test_the_result_file_records_whether_freed_memory_goes_back_to_the_host(tmp_path):
    from parity.engine.environment import free_page_reporting

    (tmp_path / "reported_kib").write_text("945975948\n")
    assert free_page_reporting(tmp_path / "reported_kib") is True
    (tmp_path / "reported_kib").write_text("0\n")
    assert free_page_reporting(tmp_path / "reported_kib") is False
    assert free_page_reporting(tmp_path / "absent") is None


@pytest.mark.parametrize("module", IMPLS.keys())
def test_each_implementations_table_is_complete(module):
    """Every name once per row kind and replica count; every record of a row kind the workloads declare; each
    best-known rank unique within its row kind, replica count and number format; every setting's formats known."""
    from parity.api.variants import MANY, ONE
    from parity.workloads import WORKLOADS

    tables = importlib.import_module(module)  # its VARIANTS, gathered from its adapters, and its SETTINGS
    kinds = {k.name for w in WORKLOADS.values() for k in w.kinds}
    for v in tables.VARIANTS:
        assert v.kind in kinds and v.span in (ONE, MANY) and v.dtype in ("float32", "bfloat16"), v
        assert v.options is not None or v.kind == "cnn_infer", v
        assert v.tuned or not v.dispatch, f"{v.name}: a dispatch-only lever is a tuned variant"
    groups = {}
    for v in tables.VARIANTS:
        key = (v.kind, v.span)
        assert v.name not in groups.setdefault(key, set()), f"{v.name} declared twice for {key}"
        groups[key].add(v.name)
    for v in (v for v in tables.VARIANTS if v.dtype == "bfloat16" and v.kind == "cnn_train"):  # judged beside it
        assert v.float32 in groups[(v.kind, v.span)], f"{v.name}: no float32 counterpart declared"
    for device in {"cpu", *(d for v in tables.VARIANTS for d, _ in v.ranks)}:  # each device's own order too
        ranked = [v.on(device) for v in tables.VARIANTS]
        ranks = [(v.kind, v.span, v.dtype, v.rank) for v in ranked if v.rank is not None]
        assert len(ranks) == len(set(ranks)), f"two variants share a best-known rank on {device}"
    for s in tables.SETTINGS:
        assert set(s.formats) <= {"float32", "bfloat16"} and set(s.needs) <= {"bf16", "thp", "no-thp"}, s


@pytest.mark.parametrize("impl", IMPLS.values(), ids=IMPLS.keys())
def test_a_framework_declared_without_data_parallelism_offers_no_variant_over_several_devices(impl):
    """frameworks.Framework.data_parallel and the catalog say the same: the engine starts no worker of a framework
    without it over several devices, so a data-parallel variant of its would never run."""
    from parity.api.variants import MANY
    from parity.common import frameworks

    (record,) = [f for f in frameworks.TABLE.values() if f.module == impl.__name__]
    assert record.data_parallel == any(v.span == MANY for v in impl.VARIANTS)
