"""Multi-process runs on localhost: 2 processes against 1, through the engines, and their failures.

JAX: 2 processes x 4 simulated CPU devices (jax.distributed, gloo collectives) against this session's
1 process x 8. TensorFlow: MultiWorkerMirroredStrategy gives a CPU worker one replica whatever its
logical devices, so 2 worker processes are checked against MirroredStrategy over 2 logical devices.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from frameworks_setup import JAX_DEVICES, TF_DEVICES
from multiproc_case import case, first_step_bounds, first_step_excess, process_file
from parity_cli import with_out

import jax_impl
import tf_impl
from parity.api import cluster as api_cluster
from parity.common import float64 as oracle
from parity.common.tolerances import rounding_bound
from parity.engine import cluster as cl
from parity.workloads import WORKLOADS

pytestmark = pytest.mark.multiprocess  # every test here starts processes (-m "not multiprocess" deselects them)

TESTS = str(Path(__file__).parent)
# Conv outputs: each element is a 75-term dot product, within LAMBDA u sqrt(75) of its terms' magnitudes
# sum |x| |k| in any correct run (parity/common/tolerances.py's model), so two runs within twice that, elementwise.
# CNN steps: first_step_bounds (multiproc_case), derived element by element from the float64 oracle.
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("PARITY_", "JAX_NUM_CPU"))}
ENV["PYTHONPATH"] = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)


def launch(
    processes: int,
    devices: int,
    args: list[str],
    module: str = "multiproc_case",
    timeout: float = 600,
    extra: tuple = (),
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "parity.launch",
        "--processes",
        str(processes),
        "--devices-per-process",
        str(devices),
        "--module",
        module,
        *extra,
        "--",
        *(with_out(args) if module == "parity.run" else args),
    ]
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)


def run(args: list[str], timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "parity.run", *with_out(args)], env=ENV, capture_output=True, text=True, timeout=timeout
    )
    return p, time.monotonic() - t0


def launched_case(tmp_path, framework: str, workload: str, variants: str, processes: int, devices: int) -> dict:
    out = tmp_path / f"{framework}-{workload}.npz"
    p = launch(
        processes,
        devices,
        ["--framework", framework, "--workload", workload, "--variants", variants, "--out", str(out)],
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return dict(np.load(out))


def assert_conv_close(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    spec = WORKLOADS["conv"].quick
    images, kernels = spec.inputs()
    terms = oracle.conv2d(np.abs(images), np.abs(kernels), spec.stride, spec.padding)
    bound = 2 * rounding_bound([spec.kh * spec.kw * spec.cin]) * terms
    excess = float(np.max(np.abs(np.asarray(got, np.float64) - ref) / bound))
    assert excess <= 1.0, f"{what}: {excess:.3g}x the bound"


# ---- 2 processes give what 1 process gives --------------------------------------------------------
# These verdicts are numbers, so .ci/run runs them again capped at AVX2 (`-m "numerics or not multiprocess"`); the
# run end to end and the failures below are plumbing, the same on any kernels.
NUMERICS = pytest.mark.numerics


@NUMERICS
def test_jax_conv_2x4_equals_1x8(tmp_path):
    got = launched_case(tmp_path, "jax", "conv", "pmap,shard_map", 2, 4)
    assert (int(got["replicas"]), int(got["processes"])) == (8, 2)
    for v in ("pmap", "shard_map"):
        ref = case(jax_impl, JAX_DEVICES, "conv", v)
        assert tuple(got[f"{v}/shape"]) == tuple(ref[f"{v}/shape"])
        assert_conv_close(got[f"{v}/out"], ref[f"{v}/out"], f"jax {v} conv, 2x4 vs 1x8")


@NUMERICS
def test_tf_conv_2_workers_equal_mirrored(tmp_path):
    got = launched_case(tmp_path, "tf", "conv", "strategy", 2, 1)
    assert (int(got["replicas"]), int(got["processes"])) == (2, 2)
    ref = case(tf_impl, TF_DEVICES[:2], "conv", "strategy")
    assert tuple(got["strategy/shape"]) == tuple(ref["strategy/shape"])
    assert_conv_close(got["strategy/out"], ref["strategy/out"], "tf strategy conv, 2 workers vs 1 process")


def launched_cnn(tmp_path, framework: str, variants: str, processes: int, devices: int) -> list[dict]:
    """Every process's arrays of the 'cnn' case."""
    got = [launched_case(tmp_path, framework, "cnn", variants, processes, devices)]
    out = tmp_path / f"{framework}-cnn.npz"
    return got + [dict(np.load(process_file(str(out), p))) for p in range(1, processes)]


def assert_within(got: dict, ref: dict, vg: str, vr: str, bounds: dict, what: str) -> None:
    excess = first_step_excess(got, ref, vg, vr, bounds)
    worst = max(excess, key=excess.get)
    assert excess[worst] <= 1.0, f"{what}: {worst} is {excess[worst]:.3g}x its bound"


@pytest.fixture(scope="module")
def jax_cnn_ref():
    ref = {}
    for v in ("pmap", "shard_map"):
        ref.update(case(jax_impl, JAX_DEVICES, "cnn", v))
    w0 = [
        ref[f"pmap/w0_{i:03d}"]
        for i in range(len(jax_impl.adapter("cnn").get_weights(jax_impl.adapter("cnn").build(3))))
    ]
    return ref, first_step_bounds(w0, len(JAX_DEVICES))


@NUMERICS
def test_jax_cnn_2x4_follows_1x8(tmp_path, jax_cnn_ref):
    ref, bounds = jax_cnn_ref
    procs = launched_cnn(tmp_path, "jax", "pmap,shard_map", 2, 4)
    for p, got in enumerate(procs):
        for v in ("pmap", "shard_map"):
            assert_within(got, ref, v, v, bounds, f"jax {v}, process {p} of 2x4 vs 1x8")


@NUMERICS
@pytest.mark.parametrize("fault", ["missed all-reduce", "gradient scaled by 1/processes", "step skipped"])
def test_a_faulty_step_breaks_the_bound(jax_cnn_ref, fault):
    """What each fault would leave in a process, built from real runs, is far outside the bound: a process
    that averaged only its own 4 replicas (half the batch); a gradient halved (at epsilon 1 the step is linear
    in g to 4%, so half the learning rate gives the same update); a process that skipped the update."""
    ref, bounds = jax_cnn_ref
    if fault == "missed all-reduce":
        bad = case(jax_impl, JAX_DEVICES[:4], "cnn", "shard_map", rows=slice(0, 8))
    elif fault == "gradient scaled by 1/processes":
        bad = case(jax_impl, JAX_DEVICES, "cnn", "shard_map", learning_rate=0.5)
    else:
        bad = {**ref, **{k.replace("/w0_", "/w"): a for k, a in ref.items() if k.startswith("shard_map/w0_")}}
    excess = first_step_excess(bad, ref, "shard_map", "shard_map", bounds)
    assert max(excess.values()) > 10, excess


@NUMERICS
def test_tf_cnn_2_workers_follow_one_process(tmp_path):
    procs = launched_cnn(tmp_path, "tf", "loop", 2, 1)
    # the same custom loop under MirroredStrategy, and Keras's fit (what one process times), which reduces
    # in another order: both within the bound of what the summation order may change
    for v in ("loop", "strategy"):
        ref = case(tf_impl, TF_DEVICES[:2], "cnn", v)
        bounds = first_step_bounds([ref[f"{v}/w0_{i:03d}"] for i in range(22)], 2)
        for p, got in enumerate(procs):
            assert_within(got, ref, "loop", v, bounds, f"tf loop (2 workers, process {p}) vs {v}")


# two timed calls a row (no calibration): the tests read what the rows hold, not their speed
QUICK = ["--device", "cpu", "--quick", "--reps", "2", "--budget", "0"]


def test_run_two_processes_end_to_end(tmp_path):
    """parity.run under the launcher, both frameworks, one device per process (so TF and JAX both have 2
    replicas and the TF-vs-JAX trajectory check runs): every row verified, process 0 writes once. The CNN, for the
    trajectories across processes, and the matmul, whose implementations have code of their own for several
    processes (the conv's is test_jax_conv_2x4_equals_1x8's and test_tf_conv_2_workers_equal_mirrored's; the LSTM
    and the ViT train through the CNN's Trainer, jax_impl.train, and over 8 devices in test_lstm_jax.py and
    test_vit_jax.py)."""
    out = tmp_path / "mp"
    args = [*QUICK, "--workload", "cnn", "matmul", "--compile-ahead", "--out", str(out)]  # ahead: as a GPU cluster runs
    p = launch(2, 1, args, module="parity.run", timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("wrote ") == 1
    doc = json.loads((out / "results.json").read_text())
    rows = doc["rows"]
    assert {(r["framework"], r["variant"]) for r in rows} == {
        ("tf", "strategy"),
        ("jax", "pmap"),
        ("jax", "shard_map"),
        ("tf", "loop"),
    }
    assert all(r["verified"] and r["processes"] == 2 and r["replicas"] == 2 for r in rows)
    assert {r["kind"] for r in rows} == {"cnn_train", "matmul"}  # inference: one device (ONE), no row at 2 replicas
    assert all(r["xfw_max_rel_err"] is not None for r in rows if r["kind"] == "matmul")  # TF against JAX
    traj = [c for c in doc["checks"] if c["check"].startswith("trajectory")]
    assert traj and all(c["passed"] for c in traj)
    assert doc["env"]["cluster"]["num_processes"] == 2
    assert any("multi-process run" in n for n in doc["env"]["notes"])
    assert any(n.startswith("JAX on cpu x") and "compiled side by side" in n for n in doc["env"]["notes"])


# ---- failures end the run with one clear line, in bounded time -------------------------------------


@pytest.mark.parametrize("framework", ["jax", "tf"])
def test_unreachable_coordinator(framework):
    port = api_cluster.free_port(span=8)
    p, took = run(_one_process(port, 2, 1, framework, "--join-timeout", "1"))
    assert p.returncode == 2
    assert "error: process 1:" in p.stderr and "could not reach" in p.stderr, p.stderr[-2000:]
    assert took < 120


def _one_process(port: int, processes: int, process_id: int, framework: str, *more: str) -> list[str]:
    """parity.run's arguments for one process of a cluster of `processes` whose coordinator is 127.0.0.1:`port`: the
    conv, --quick, on `framework`, with `more` after the process's id."""
    cluster = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(processes), "--process-id", str(process_id)]
    return [*cluster, *more, "--framework", framework, "--workload", "conv", "--quick"]


def _hold(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


@pytest.mark.parametrize("framework,offset", [("jax", 0), ("tf", api_cluster.TF_PORT_OFFSET)])
def test_port_taken(framework, offset):
    port = api_cluster.free_port(span=8)
    with _hold(port + offset):
        p, took = run(_one_process(port, 1, 0, framework))
    assert p.returncode == 2
    assert f"{port + offset}" in p.stderr and "already taken" in p.stderr, p.stderr[-2000:]


def test_launcher_port_taken():
    port = api_cluster.free_port()
    with _hold(port):
        p = launch(2, 1, ["--quick"], module="parity.run", extra=("--port", str(port)), timeout=60)
    assert p.returncode == 2 and "already taken" in p.stderr


def test_launcher_stops_a_hung_run():
    t0 = time.monotonic()
    p = launch(
        2,
        1,
        ["-n", "1", "-r", "1", "import time; time.sleep(120)"],
        module="timeit",
        extra=("--timeout", "3"),
        timeout=60,
    )
    assert p.returncode == 124 and "still running after 3 s" in p.stderr
    assert time.monotonic() - t0 < 30


def _processes() -> list[tuple[int, str, int, int]]:
    """(pid, state, parent pid, process group) of every process."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found.append((int(d.name), fields[0], int(fields[1]), int(fields[2])))
    return found


def _children(pid: int) -> list[int]:
    return [p for p, _s, parent, _g in _processes() if parent == pid]


def _running_in_group(group: int) -> list[int]:
    return [p for p, state, _p, g in _processes() if g == group and state != "Z"]


@pytest.mark.parametrize(("framework", "variant"), [("jax", "shard_map"), ("tf", "strategy")])
def test_a_slower_process_shows_in_every_time(tmp_path, framework, variant):
    # process 1 sleeps SLOW_S in each call: process 0, which reports, must record at least that
    from multiproc_case import SLOW_S

    got = launched_case(tmp_path, framework, "timing", variant, 2, 1)
    times = got[f"{variant}/times"]
    assert len(times) == 3 and times.min() >= SLOW_S, times


@pytest.mark.parametrize("how", ["kill process 1", "Ctrl-C"])
def test_interrupted_run_stops_everything(how):
    """SIGKILL to process 1 mid-run, or Ctrl-C (SIGINT) to the launcher: it stops process 0 and every
    framework worker, and says why."""
    # 1000 epochs: still busy whatever the machine's speed when the signal comes. Started with SIGINT ignored,
    # as a background job of a non-interactive shell (a CI runner) starts it: Ctrl-C must work all the same.
    cmd = [
        sys.executable,
        "-m",
        "parity.launch",
        "--processes",
        "2",
        "--devices-per-process",
        "2",
        "--",
        "--framework",
        "jax",
        "--workload",
        "cnn",
        "--quick",
        "--epochs",
        "1000",
    ]
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited across exec, as a shell's & does
    try:
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, ignored)
    seen, err = threading.Event(), []

    def read():
        for line in proc.stderr:
            err.append(line)
            if "first epoch" in line or "first call" in line:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert seen.wait(300), "".join(err)[-2000:]
        groups = _children(proc.pid)  # each process leads its own group, its workers inside
        assert len(groups) == 2
        if how == "Ctrl-C":
            proc.send_signal(signal.SIGINT)
        else:
            victim = next(g for g in groups if b"PARITY_PROCESS_ID=1\0" in Path(f"/proc/{g}/environ").read_bytes())
            os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        proc.wait(120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.5)
    text = "".join(err)
    if how == "Ctrl-C":
        assert proc.returncode == 130 and "interrupted: stopping every process" in text, text[-2000:]
    else:
        assert proc.returncode == 1, text[-2000:]
        assert "process 1 of 2 was killed by SIGKILL; stopped the others" in text
    assert took < 60
    for g in groups:  # no orphans: nothing of either group still runs (a zombie awaits only its reaper)
        assert not _running_in_group(g), f"process group {g} still has running processes"


# ---- settings ---------------------------------------------------------------------------------------


def test_cluster_settings(monkeypatch):
    for k in api_cluster.ENV.values():
        monkeypatch.delenv(k, raising=False)
    assert cl.from_flags_or_env(None, None, None, None) is None
    c = cl.from_flags_or_env("127.0.0.1:20000", 3, 2, 4)
    assert (c.num_processes, c.process_id, c.local_devices, c.jax_address()) == (3, 2, 4, "127.0.0.1:20000")
    assert c.for_config(1).jax_address() == "127.0.0.1:20001"
    monkeypatch.delenv("TF_CONFIG", raising=False)
    tf_config = c.tf_config()
    assert tf_config["cluster"]["worker"] == ["127.0.0.1:20004", "127.0.0.1:20005", "127.0.0.1:20006"]
    assert tf_config["task"] == {"type": "worker", "index": 2}
    monkeypatch.setenv("PARITY_COORDINATOR", "127.0.0.1:20000")
    monkeypatch.setenv("PARITY_NUM_PROCESSES", "2")
    monkeypatch.setenv("PARITY_PROCESS_ID", "1")
    assert cl.from_flags_or_env(None, None, None, None).process_id == 1


@pytest.mark.parametrize(
    "args,message",
    [
        (("127.0.0.1", 2, 0), "HOST:PORT"),
        (("127.0.0.1:20000", None, 0), "without the process count"),
        (("127.0.0.1:20000", 2, 2), "not in 0..1"),
        ((None, 2, 1), "without a coordinator"),
        (("10.0.0.7:20000", 2, 0), None),  # valid for JAX; TensorFlow then needs TF_CONFIG (below)
    ],
)
def test_cluster_settings_errors(monkeypatch, args, message):
    for k in (*api_cluster.ENV.values(), "TF_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    if message is None:
        with pytest.raises(cl.ClusterError, match="need TF_CONFIG"):
            cl.from_flags_or_env(*args, None).tf_config()
        return
    with pytest.raises(cl.ClusterError, match=message):
        cl.from_flags_or_env(*args, None)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--replicas", "2"], "--replicas is for one process"),
        (["--list-devices"], "--list-devices looks at this machine only"),
        (["--num-processes", "2"], "without the process count"),
    ],
)
def test_run_rejects_contradictory_flags(extra, message):
    args = ["--coordinator", "127.0.0.1:20000", "--process-id", "0", *extra]
    if "--num-processes" not in extra:
        args += ["--num-processes", "2"]
    else:
        args = ["--coordinator", "127.0.0.1:20000", "--num-processes", "2"]
    p, _ = run(args, timeout=60)
    assert p.returncode == 2 and message in p.stderr, p.stderr
