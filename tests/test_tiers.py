"""The fast tier's collection (tests/conftest.py): under `-m "not slow"` a test file whose every test is slow is not
imported, and no other file is left out."""

from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest
from test_no_frameworks import ENGINE_TESTS

TESTS = Path(__file__).resolve().parent


def _config(markexpr: str, *args: str):
    return SimpleNamespace(args=list(args), getoption=lambda name: {"markexpr": markexpr}[name])


def test_the_files_the_fast_tier_leaves_unimported_hold_only_slow_tests():
    whole = {n for n in conftest.SLOW_FILES if conftest.all_slow(n)}
    assert whole and all((TESTS / n).is_file() for n in whole)
    # a slow file with a fast test of its own (test_cli.py's tiny run) is collected, as is every other file
    assert not conftest.all_slow("test_cli.py") and not conftest.all_slow("test_data.py")
    for name in sorted(p.name for p in TESTS.glob("test_*.py")):
        ignored = conftest.pytest_ignore_collect(TESTS / name, _config("not slow"))
        engine = name in {Path(f).name for f in ENGINE_TESTS}
        assert ignored is (True if name in whole or engine else None), name


@pytest.mark.parametrize("markexpr,args", [("", ()), ("slow", ()), ("not slow", ("tests/test_cnn.py",))])
def test_a_slow_file_is_collected_in_the_whole_suite_or_when_named(markexpr, args):
    path = (TESTS / "test_cnn.py").resolve()
    assert conftest.all_slow("test_cnn.py")
    assert conftest.pytest_ignore_collect(path, _config(markexpr, *(str(TESTS.parent / a) for a in args))) is None
