"""The environment never silently changes what a row measures: what a framework reads that changes it is recorded
(parity.engine.environment) or refused before work in one line (parity.cli.argtypes.check_environment); the
harness's internal variables are never read from the user's environment (parity.engine.workerproc)."""

import os
import stat

import pytest
from parity_cli import run_parity

from parity.api.cluster import ClusterError
from parity.cli.argtypes import check_environment
from parity.cli.flags import parser
from parity.common.frameworks import JAX, KEYS, TF, TORCH
from parity.common.messages import HarnessError
from parity.engine import workerproc
from parity.engine.environment import FRAMEWORK_FLAGS, env_flags
from parity.run import config

CORES = len(os.sched_getaffinity(0))


def _config(*argv: str):
    return config(parser().parse_args(list(argv)), list(argv))


# B1: OMP_NUM_THREADS is PyTorch's thread count


@pytest.mark.parametrize("given", [str(CORES + 1), "100000", "0", "abc", "4,2", ""])
def test_pytorch_threads_beyond_the_cores_are_refused(given):
    with pytest.raises(HarnessError, match=rf"OMP_NUM_THREADS='{given}' .*PyTorch runs that many compute threads"):
        check_environment("cpu", (TORCH,), (1,), {"OMP_NUM_THREADS": given})
    check_environment("cpu", (JAX, TF), (1,), {"OMP_NUM_THREADS": given})  # not their thread count


def test_pytorch_threads_within_the_cores_pass():
    for n in range(1, CORES + 1):
        check_environment("cpu", (TORCH,), (1,), {"OMP_NUM_THREADS": str(n)})
    check_environment("cpu", (TORCH,), (1,), {})


# B2: internal variables are the harness's alone


def test_a_users_device_lock_never_reaches_a_worker(monkeypatch, tmp_path):
    monkeypatch.setenv("PARITY_DEVICE_LOCK", str(tmp_path / "victim"))
    assert "PARITY_DEVICE_LOCK" not in workerproc._environment({}, None, None, None)
    own = tmp_path / "cpu.lock"
    assert workerproc._environment({}, None, own, None)["PARITY_DEVICE_LOCK"] == str(own)  # the harness's own


# B3: recorded, or refused where a label would be false


def test_every_framework_lists_what_it_reads():
    assert set(FRAMEWORK_FLAGS) == set(KEYS)
    env = {"THP_MEM_ALLOC_ENABLE": "1", "TORCHINDUCTOR_FREEZING": "1", "XLA_FLAGS": "--x", "OMP_NUM_THREADS": "1"}
    assert env_flags([TORCH], env) == {
        "THP_MEM_ALLOC_ENABLE": "1",
        "TORCHINDUCTOR_FREEZING": "1",
        "OMP_NUM_THREADS": "1",
    }
    assert env_flags([JAX], env) == {"XLA_FLAGS": "--x", "OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize(
    "fw, var", [(TORCH, "TORCH_COMPILE_DISABLE"), (JAX, "JAX_DISABLE_JIT"), ("keras-jax", "JAX_DISABLE_JIT")]
)
def test_a_variable_that_would_make_a_label_false_is_refused(fw, var):
    with pytest.raises(HarnessError, match=rf"{var}=1 in the environment: .*still labelled compiled; unset it"):
        check_environment("cpu", (fw,), (1,), {var: "1"})
    check_environment("cpu", (fw,), (1,), {var: "0"})
    check_environment("cpu", (TF,), (1,), {var: "1"})  # TensorFlow reads neither


# B4: a compilation cache no framework could write in


def _loop(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a"


def _file(tmp_path):
    (tmp_path / "f").write_text("x")
    return tmp_path / "f"


@pytest.mark.parametrize(
    "make, said",
    [
        (_file, "is not a directory"),
        (lambda t: _file(t) / "sub", "Not a directory"),
        (_loop, "Too many levels of symbolic links"),
        (lambda t: (os.symlink(t / "gone", t / "dangling"), t / "dangling")[1], "a symbolic link to nothing"),
        (lambda t: "", "an empty path"),
    ],
    ids=["file", "under-a-file", "loop", "dangling", "empty"],
)
@pytest.mark.parametrize("var, fw", [("TORCHINDUCTOR_CACHE_DIR", TORCH), ("JAX_COMPILATION_CACHE_DIR", JAX)])
def test_an_unusable_compilation_cache_is_refused_before_work(tmp_path, make, said, var, fw):
    path = str(make(tmp_path))
    with pytest.raises(HarnessError, match=rf"{var}=.* in the environment: .*{said}"):
        check_environment("cpu", (fw,), (1,), {var: path})
    check_environment("cpu", (TF,), (1,), {var: path})  # not read there
    check_environment("cpu", (fw,), (1,), {var: str(tmp_path / "new" / "cache")})  # made where absent


def test_a_compilation_cache_its_user_cannot_write_is_refused(tmp_path):
    """A read-only folder is refused to a user who cannot write there; root can, and there it is usable."""
    tmp_path.chmod(0o500)
    given = ("cpu", (TORCH,), (1,), {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")})
    try:
        if os.geteuid() == 0:
            check_environment(*given)
        else:
            with pytest.raises(HarnessError, match="is not writable"):
                check_environment(*given)
    finally:
        tmp_path.chmod(0o700)


def test_the_command_refuses_an_unusable_cache_in_one_line(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(_file(tmp_path)))
    p = run_parity("--quick", "--workload", "matmul", "--framework", "torch", "--out", str(out), env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "is not a directory" in p.stderr, p.stderr
    assert not out.exists()


# B5: refused before work, in one line


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    d = tmp_path / "locks"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("PARITY_LOCK_DIR", str(d))
    return d


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_device_lock_that_is_no_plain_file_is_refused_before_work(lock_dir, kind, tmp_path):
    lock = lock_dir / "cpu.lock"
    {"directory": lock.mkdir, "fifo": lambda: os.mkfifo(lock), "symlink": lambda: lock.symlink_to(tmp_path)}[kind]()
    with pytest.raises(HarnessError, match=r"cpu.lock: not a plain file of this user"):
        _config("--exclusive", "--workload", "matmul", "--framework", "jax")
    _config("--workload", "matmul", "--framework", "jax")  # no lock taken without --exclusive


def test_a_bad_lock_dir_is_refused_before_work(monkeypatch, tmp_path):
    monkeypatch.setenv("PARITY_LOCK_DIR", "relative/locks")
    with pytest.raises(HarnessError, match="PARITY_LOCK_DIR='relative/locks': not an absolute path"):
        _config("--exclusive", "--workload", "matmul", "--framework", "jax")
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    monkeypatch.setenv("PARITY_LOCK_DIR", str(tmp_path / "open"))
    with pytest.raises(HarnessError, match="not a private directory"):
        _config("--exclusive", "--workload", "matmul", "--framework", "jax")


def test_a_worker_refuses_a_lock_that_is_no_plain_file_in_one_line(tmp_path):
    from parity.engine.devicelock import own_device

    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "p")
    for bad in ("d", "p"):
        with pytest.raises(OSError):
            own_device(str(tmp_path / bad))
    assert stat.S_ISFIFO(os.stat(tmp_path / "p").st_mode)


@pytest.mark.parametrize(
    "tf_config, said",
    [
        ("[1]", "TF_CONFIG names no workers"),
        ("{", "TF_CONFIG is not JSON"),
        ('{"cluster": 1, "task": {"type": "worker", "index": 0}}', "TF_CONFIG names no workers"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}', "task index 3 is not among its 1"),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "chief", "index": 0}}', "'task' must be"),
        (None, "--coordinator auto needs TF_CONFIG"),
    ],
)
def test_a_tf_config_tensorflow_cannot_read_is_refused_before_work(monkeypatch, tf_config, said):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ClusterError, match=said):
        _config("--coordinator", "auto", "--framework", "tf", "--workload", "matmul")
    _config("--coordinator", "auto", "--framework", "jax", "--workload", "matmul")  # JAX reads no TF_CONFIG


def test_jax_platforms_naming_a_platform_jax_has_not_is_refused():
    with pytest.raises(HarnessError, match="JAX_PLATFORMS=cpu,bogus in the environment names bogus, no platform JAX"):
        check_environment("cpu", (JAX,), (1,), {"JAX_PLATFORMS": "cpu,bogus"})
    check_environment("cpu", (JAX,), (1,), {"JAX_PLATFORMS": "cpu"})
    check_environment("gpu", (JAX,), (1,), {"JAX_PLATFORMS": "cuda,cpu"})


def test_an_empty_coordinator_is_refused(monkeypatch):
    monkeypatch.delenv("PARITY_COORDINATOR", raising=False)
    with pytest.raises(ClusterError, match="--coordinator is empty: give HOST:PORT or auto"):
        _config("--coordinator", "", "--workload", "matmul")
    monkeypatch.setenv("PARITY_COORDINATOR", " ")
    with pytest.raises(ClusterError, match="PARITY_COORDINATOR is empty"):
        _config("--workload", "matmul")
