"""The implementations' surface: both packages expose parity.api.FrameworkImpl, with the same arguments."""

import inspect
import typing

import pytest

import jax_impl
import tf_impl
from parity import api


def _params(f) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]


@pytest.mark.parametrize("impl", [jax_impl, tf_impl], ids=["jax", "tf"])
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


def test_the_two_implementations_mirror_each_other():
    for name in api.SURFACE:
        a, b = getattr(jax_impl, name), getattr(tf_impl, name)
        if callable(a):
            assert [p for p, _ in _params(a)] == [p for p, _ in _params(b)], name
