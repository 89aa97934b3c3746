"""Per-layer attribution from profiled op names (parity.judging.layers): both frameworks' naming, without them."""

import numpy as np
import pytest

from parity.judging import layers
from parity.judging.layers import attribute, classify, wall_split
from parity.workloads.cnn import CNN_LAYERS


@pytest.mark.parametrize(
    "scope, expected",
    [
        # JAX: HLO op_name metadata under the named scopes of jax_impl.cnn
        ("jit(_train_step)/jvp(bn1)/reduce_sum", ("bn1", "forward")),
        ("jit(_train_step)/transpose(jvp(conv2))/conv_general_dilated", ("conv2", "backward")),
        ("jit(_train_step)/jvp(pool3)/reduce_window_max", ("pool3", "forward")),
        ("jit(_train_step)/transpose(jvp(pool3))/select_and_scatter_add", ("pool3", "backward")),
        ("jit(_train_step)/jvp(loss)/log_softmax", ("loss", "forward")),
        ("jit(_train_step)/optimizer/mul", ("optimizer", "optimizer")),
        ("jit(_train_step)/broadcast_in_dim", ("other", "other")),
        # TensorFlow / Keras: op names under the layers' name scopes
        ("fashion_mnist_cnn_1/conv1_1/convolution", ("conv1", "forward")),
        ("gradient_tape/fashion_mnist_cnn_1/conv3_1/convolution/Conv2DBackpropFilter", ("conv3", "backward")),
        ("fashion_mnist_cnn_1/bn2_1/batchnorm/mul", ("bn2", "forward")),
        ("compile_loss/sparse_categorical_crossentropy/Mean", ("loss", "forward")),
        ("adam/AssignSubVariableOp_3", ("optimizer", "optimizer")),
        ("fashion_mnist_cnn_1/dense1_1/MatMul", ("dense1", "forward")),
        # PyTorch: aten ops under record_function scopes of the layers' names; an op's own name that starts like a
        # layer's ('aten::conv2d') names none
        ("conv3/aten::conv2d", ("conv3", "forward")),
        ("conv1/aten::conv2d", ("conv1", "forward")),
        ("conv3/gradient/ConvolutionBackward0", ("conv3", "backward")),
        ("pool2/aten::max_pool2d", ("pool2", "forward")),
    ],
)
def test_each_frameworks_op_names_map_onto_the_same_layers(scope, expected):
    assert classify(scope, CNN_LAYERS) == expected


def test_a_layer_made_ten_times_heavier_comes_out_on_top_with_coverage():
    ops = [("a/conv1/convolution", 0.01), ("a/conv2/convolution", 0.10), ("gradient_tape/a/conv2/x", 0.02)]
    ops += [("a/bn1/mul", 0.01), ("adam/update", 0.005), ("something_else", 0.005)]
    rows, coverage = attribute(ops, per=2, median_s=0.20, layers=CNN_LAYERS)
    top = max(rows, key=lambda r: r["seconds"])
    assert (top["layer"], top["pass"]) == ("conv2", "forward") and top["seconds"] == pytest.approx(0.05)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert coverage == pytest.approx(0.15 / 0.20)
    assert [r["layer"] for r in rows][:3] == ["bn1", "conv1", "conv2"]  # the model's order


HLO = """HloModule jit__train_step

%fused_computation.3 (param_0.3: f32[4], param_1.3: f32[4]) -> f32[4] {
  %param_0.3 = f32[4]{0} parameter(0)
  ROOT %multiply.7 = f32[4]{0} multiply(%param_0.3), metadata={op_name="jit(f)/transpose(jvp(conv2))/mul"}
}

%wrapped_iota_computation () -> s32[4] {
  ROOT %iota.46 = s32[4]{0} iota(), iota_dimension=0
}

ENTRY %main.9 (Arg_0.1: f32[4]) -> f32[4] {
  %Arg_0.1 = f32[4]{0} parameter(0), metadata={op_name="state"}
  %fusion.3 = f32[4]{0} fusion(%Arg_0.1, %Arg_0.1), kind=kLoop, calls=%fused_computation.3
  %wrapped_iota = s32[4]{0} fusion(), kind=kLoop, calls=%wrapped_iota_computation
  ROOT %add.2 = f32[4]{0} add(%fusion.3, %fusion.3), metadata={op_name="jit(_train_step)/jvp(bn1)/add"}
}
"""


def test_jax_ops_take_their_scopes_from_the_compiled_program():
    from jax_impl.profile import hlo_scopes

    scopes = hlo_scopes(HLO)
    assert scopes["add.2"] == "jit(_train_step)/jvp(bn1)/add"
    assert scopes["fusion.3"] == "jit(f)/transpose(jvp(conv2))/mul"  # a fusion: its computation's root
    assert "wrapped_iota" not in scopes  # XLA made it without metadata: 'other', never guessed
    assert classify(scopes["fusion.3"], CNN_LAYERS) == ("conv2", "backward")


def test_a_gpu_kernel_takes_its_op_from_the_launch_annotation():
    from jax_impl.profile import _hlo_op

    assert _hlo_op({"hlo_op": "fusion.12"}) == "fusion.12"  # XLA:CPU's events
    annotation = "fusion.3:#hlo_op=fusion.3,hlo_module=jit__train_step,program_id=7#"  # CUPTI's kernel events
    assert _hlo_op({"annotation": annotation, "correlation_id": 5}) == "fusion.3"
    assert _hlo_op({"kernel_details": "regs:32"}) is None  # a memcpy, say: no op, never guessed


def test_a_library_calls_event_takes_its_instructions_scope():
    from jax_impl.profile import _scope

    scopes = {"custom-call.10.clone": "jit(_train_step)/transpose(jvp(conv2))/jit(elu)/add_any"}
    # XLA:CPU's event for a oneDNN convolution: the instruction, then the call's target
    assert classify(_scope("custom-call.10.clone__onednn$convolution", scopes), CNN_LAYERS) == ("conv2", "backward")
    assert _scope("custom-call.10.clone", scopes) == scopes["custom-call.10.clone"]
    assert _scope("custom-call.3__onednn$matmul", scopes) == "custom-call.3__onednn$matmul"  # unknown: as named


DATAFLOW_HLO = """HloModule jit__train_step

ENTRY %main (x: f32[4], g: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), metadata={op_name="state"}
  %zero = f32[] constant(0)
  %elu = f32[4]{0} add(%x, %x), metadata={op_name="jit(_train_step)/jvp(conv1)/jit(elu)/select_n"}
  %wrapped_iota = s32[4]{0} fusion(), kind=kLoop, calls=%iota_computation
  %wrapped_reduce-window = (f32[2]{0}, s32[2]{0}) fusion(%elu, %wrapped_iota, %zero), kind=kLoop, calls=%rw
  %gte = s32[2]{0} get-tuple-element(%wrapped_reduce-window), index=1
  %scatter = f32[4]{0} scatter(%gte, %x), metadata={op_name="jit(_train_step)/transpose(jvp(pool1))/select_and_scatter"}
  %dy = f32[4]{0} multiply(%scatter, %x), metadata={op_name="jit(_train_step)/transpose(jvp(conv1))/jit(elu)/mul"}
  %transpose_copy = f32[4]{0} copy(%dy)
  %ynn_fusion = f32[4]{0} fusion(%transpose_copy, %elu, %zero), kind=kCustom, calls=%ynn
  %adam = f32[4]{0} subtract(%x, %ynn_fusion), metadata={op_name="jit(_train_step)/optimizer/sub"}
  %mixed = f32[4]{0} add(%dy, %scatter)
  ROOT %out = f32[4]{0} add(%adam, %mixed), metadata={op_name="jit(_train_step)/optimizer/add"}
}
"""


def test_ops_that_xla_left_without_metadata_take_the_one_backward_pass_their_dataflow_meets():
    from jax_impl.profile import hlo_scopes

    layer = {name: classify(scope, CNN_LAYERS) for name, scope in hlo_scopes(DATAFLOW_HLO).items()}
    # a weight gradient reads its layer's output gradient (its other operand is forward, its user the optimizer)
    assert layer["ynn_fusion"] == layer["transpose_copy"] == ("conv1", "backward")
    # the pooling gradient's indices and their iota feed the pool's scatter
    assert layer["wrapped_reduce-window"] == layer["wrapped_iota"] == layer["gte"] == ("pool1", "backward")
    assert "mixed" not in layer  # two layers' backward passes meet: not guessed, 'other'
    assert "zero" not in layer  # a constant shared by both groups neither joins nor bridges them


# ---- wall time: each instant split among the ops running at it --------------------------------------------------


def test_an_op_run_piecewise_on_two_threads_takes_its_wall_time_once():
    ops = [("a/conv1/x", 1.0, 0.0, "t1"), ("a/conv1/x", 1.0, 0.0, "t2")]  # the same op, its halves on two threads
    assert wall_split(ops) == [0.5, 0.5]
    (row,), cpu = attribute(ops, per=1, median_s=1.0, layers=CNN_LAYERS)
    assert (row["wall_s"], row["seconds"], cpu) == (1.0, 2.0, 2.0)  # CPU time counts each thread's half


def test_two_ops_at_once_share_the_instants_they_overlap_in():
    # conv1 on one thread over [0, 4]; bn1 on the other over [1, 3]: [1, 3] is split half and half
    ops = [("a/conv1/x", 4.0, 0.0, "t1"), ("a/bn1/mul", 2.0, 1.0, "t2")]
    assert wall_split(ops) == [pytest.approx(3.0), pytest.approx(1.0)]
    rows, cpu = attribute(ops, per=2, median_s=4.0, layers=CNN_LAYERS)  # two steps in the profiled call of 4 s
    wall = {r["layer"]: r["wall_s"] for r in rows}
    assert wall == {"bn1": pytest.approx(0.5), "conv1": pytest.approx(1.5)}  # per step
    assert layers.coverage({"layers": rows, "profile_coverage": cpu}) == (pytest.approx(1.0), pytest.approx(1.5))


def test_a_nested_event_pre_empts_its_parent_on_its_thread():
    ops = [("parent", 10.0, 0.0, "t"), ("child", 3.0, 2.0, "t"), ("sibling", 2.0, 6.0, "t")]
    assert wall_split(ops) == [pytest.approx(5.0), pytest.approx(3.0), pytest.approx(2.0)]
    # overlapping without nesting: the later start takes over, nothing is counted twice
    assert wall_split([("a", 5.0, 0.0, "t"), ("b", 5.0, 3.0, "t")]) == [pytest.approx(3.0), pytest.approx(5.0)]


def test_an_instant_when_no_op_runs_is_no_ops_but_the_calls_idle_line():
    ops = [("a/conv1/x", 1.0, 0.0, "t1"), ("a/conv2/x", 1.0, 3.0, "t1")]  # idle over [1, 3]
    assert sum(wall_split(ops)) == pytest.approx(2.0)
    rows, cpu = attribute(ops, per=1, median_s=5.0, layers=CNN_LAYERS)
    idle = next(r for r in rows if (r["layer"], r["pass"]) == ("other", "idle"))
    assert (idle["wall_s"], idle["seconds"]) == (pytest.approx(2.0), 0.0)  # host time: nobody's CPU time here
    assert layers.coverage({"layers": rows, "profile_coverage": cpu}) == (pytest.approx(0.8), pytest.approx(0.4))


def test_the_profilers_overhead_is_taken_out_and_coverage_is_of_the_profiled_call():
    # a step of 2 s unprofiled took 2.5 s under the profiler: its ops span 2.4 s of it (0.1 s before the first op
    # and after the last), conv1 1.6 s of them, conv2 0.8 s
    ops = [("a/conv1/x", 1.6, 0.05, "t1"), ("a/conv2/x", 0.8, 1.65, "t1")]
    rows, cpu = attribute(ops, per=1, median_s=2.0, layers=CNN_LAYERS, call_s=2.5)
    assert {r["layer"]: r["wall_s"] for r in rows} == {"conv1": pytest.approx(1.28), "conv2": pytest.approx(0.64)}
    assert {r["layer"]: r["seconds"] for r in rows} == {"conv1": pytest.approx(1.28), "conv2": pytest.approx(0.64)}
    row = {"layers": rows, "profile_coverage": cpu, "profile_call_s": 2.5, "median_s": 2.0}
    assert layers.coverage(row) == (pytest.approx(0.96), pytest.approx(0.96))  # 2.4 s of the profiled 2.5 s
    assert layers.overhead(row) == pytest.approx(1.25)
    # an older file's row (no profiled call's time): the figures are the profiled call's, over the median
    rows, cpu = attribute(ops, per=1, median_s=2.0, layers=CNN_LAYERS)
    assert (rows[0]["wall_s"], cpu) == (pytest.approx(1.6), pytest.approx(1.2))
    assert layers.overhead({"median_s": 2.0}) is None
    (conv,), cpu = layers.one_op("conv", [("conv", 1.0, 0.0, "t1")], 0.5, call_s=1.0)
    assert (conv["seconds"], conv["wall_s"], cpu) == (0.5, 0.5, 1.0)


@pytest.mark.parametrize("seed", range(5))
def test_the_wall_shares_add_up_to_the_time_any_op_ran(seed):
    rng = np.random.default_rng(seed)
    ops = [(f"op{i}", float(rng.uniform(0, 2)), float(rng.uniform(0, 10)), f"t{rng.integers(3)}") for i in range(60)]
    shares = wall_split(ops)
    busy = np.zeros(12_000, bool)  # the union of the ops' intervals on a 1 ms grid
    for _, d, s, _ in ops:
        busy[round(s * 1000) : round((s + d) * 1000)] = True
    assert sum(shares) == pytest.approx(busy.sum() / 1000, abs=0.061)  # 60 ends, each within half a grid step
    assert all(0 <= w <= op[1] + 1e-12 for w, op in zip(shares, ops, strict=True))


def test_ops_without_their_times_have_no_wall_figure():
    rows, cpu = attribute([("a/conv1/x", 0.2), ("a/conv1/y", 0.2)], per=1, median_s=0.2, layers=CNN_LAYERS)
    assert "wall_s" not in rows[0] and cpu == pytest.approx(2.0)
    assert layers.coverage({"layers": rows, "profile_coverage": cpu}) == (None, pytest.approx(2.0))
    (conv,), _ = layers.one_op("conv", [("conv", 1.0, 0.0, "t1"), ("conv", 1.0, 0.5, "t2")], 1.5)
    assert (conv["seconds"], conv["wall_s"]) == (2.0, pytest.approx(1.5))


def _group(seconds: dict[str, dict[tuple[str, str], tuple[float, float | None]]]):
    """The per-layer table of rows profiled per framework as {(layer, pass): (CPU s, wall s or None)}."""
    rows = []
    for fw, lines in seconds.items():
        ly = [
            {"layer": k[0], "pass": k[1], "seconds": c, "share": 0.0} | ({"wall_s": w} if w else {})
            for k, (c, w) in lines.items()
        ]
        # the profiled call as long as its lines' wall time (every instant traced: wall coverage 100%), else 0.1 s
        cpu = sum(c for c, _ in lines.values()) / (sum(w or 0 for _, w in lines.values()) or 0.1)
        rows.append(
            {
                "framework": fw,
                "kind": "cnn_train",
                "variant": "fit",
                "replicas": 1,
                "dtype": "float32",
                "median_s": 0.1,
                "verified": True,
                "layers": ly,
                "profile_coverage": cpu,
            }
        )
    return rows


def test_the_table_shows_wall_then_cpu_time_and_loses_most_reads_the_wall_figure():
    from parity.output import tables

    rows = _group(
        {
            "tf": {("conv1", "forward"): (0.010, 0.008), ("conv1", "backward"): (0.030, 0.020)},
            # JAX's conv1 forward costs the most CPU time beyond TF's, its backward the most wall time
            "jax": {("conv1", "forward"): (0.060, 0.010), ("conv1", "backward"): (0.040, 0.035)},
        }
    )
    (g,) = tables.layer_groups({"rows": rows})
    assert g.columns == ("layer", "pass", "TF wall ms", "JAX wall ms", "TF CPU ms", "JAX CPU ms", "JAX/TF")
    assert g.body[0] == ("conv1", "forward", "8.00", "10.00", "10.00", "60.00", "1.25")
    assert g.said.startswith("jax loses most in conv1 backward (+15.00 ms)")
    assert "tf fit 100% wall, 143% CPU" in g.title and "jax fit 100% wall, 222% CPU" in g.title
    assert "the call" not in g.title and "scaled" not in g.title  # no profiled call's time: nothing said of it
    rows[1]["profile_call_s"] = 0.125  # JAX's profiled call took 1.25x its median: said, and the scaling with it
    (g,) = tables.layer_groups({"rows": rows})
    assert "jax fit 100% wall, 222% CPU, the call 1.25x the median" in g.title
    assert "scaled from the profiled call to the row's median (the profiler's overhead out, in proportion)" in g.title


def test_a_profile_that_misses_time_divides_nothing_and_loses_nowhere():
    """A framework whose trace holds almost none of its call (XLA:CPU's convolution under YNNPACK's flag is not
    traced): no ratio over it or of it, and neither it nor another is said to lose against its tiny lines."""
    from parity.output import tables

    rows = _group(
        {
            "tf": {("conv1", "forward"): (0.080, 0.080)},
            "jax": {("conv1", "forward"): (0.0001, 0.0001)},
            "keras-jax": {("conv1", "forward"): (0.090, 0.090)},
        }
    )
    for r in rows:
        r["profile_call_s"] = 0.1  # a newer file's: coverage against the profiled call itself
    rows[1]["profile_coverage"] = 0.001  # JAX's ops: 0.1% of its profiled call
    (g,) = tables.layer_groups({"rows": rows})
    assert g.body[0][-2:] == ("-", "1.12")  # JAX/TF none; Keras-JAX/TF as measured
    assert g.said.startswith("keras-jax loses most in conv1 forward (+10.00 ms)")  # against TF, not JAX's 0.1 ms
    assert "jax loses" not in g.said.replace("keras-jax", "")
    assert g.said.endswith("coverage below 80% for jax: its profile misses time (below 50%: no ratio)")
    rows[0]["profile_coverage"] = 0.001  # the reference's profile misses time too: no ratio at all
    (g,) = tables.layer_groups({"rows": rows})
    assert g.body[0][-2:] == ("-", "-")
    for r in rows:
        del r["profile_call_s"]  # an older file's coverage (against the median, the overhead in it): as written
    (g,) = tables.layer_groups({"rows": rows})
    assert g.body[0][-2:] == ("0.00", "1.12") and "no ratio" not in g.said


def test_idle_time_is_never_where_a_framework_loses_and_a_mostly_idle_profile_is_said():
    from parity.output import tables

    rows = _group(
        {
            "tf": {
                ("conv2", "forward"): (0.050, 0.050),
                ("drop1", "forward"): (0.001, 0.001),
                ("other", "idle"): (0.0, 0.001),
            },
            # JAX's convolutions ran on threads the trace does not show: 5 ms of ops, 60 ms with none running
            "jax": {
                ("conv2", "forward"): (0.005, 0.005),
                ("drop1", "forward"): (0.010, 0.010),
                ("other", "idle"): (0.0, 0.060),
            },
        }
    )
    (g,) = tables.layer_groups({"rows": rows})
    # not in idle (+59 ms), which is not a layer
    assert g.said.startswith("jax loses most in drop1 forward (+9.00 ms); tf loses most in conv2 forward (+45.00 ms)")
    assert g.said.endswith(
        "; jax 80% of the step with no traced op running (work on threads the profiler does not see): no layer can be "
        "named for it"
    )  # TF's 2% is not said


def _traced(mod, p, folder) -> tuple[list, float]:
    """One call of `p` (after one untimed) under `mod`'s profiler, its trace in `folder`: its ops, and its wall time."""
    import time

    mod.block(p.run())
    with mod.trace(str(folder)):
        t0 = time.perf_counter()
        mod.block(p.run())
        wall = time.perf_counter() - t0
    return mod.trace_ops(str(folder), p.program()), wall


def test_each_frameworks_trace_gives_its_ops_with_start_and_thread(impl, tmp_path):
    """A real trace of one small conv: every op timed, its wall share within the traced call's wall time."""
    mod, devices = impl
    rng = np.random.default_rng(0)
    images, kernels = rng.normal(size=(8, 32, 32, 3)), rng.normal(size=(3, 3, 3, 16))
    variant = mod.variants("conv", 1)[0].name
    p = mod.adapter("conv").prepare(variant, images.astype(np.float32), kernels.astype(np.float32), devices[:1])
    ops, wall = _traced(mod, p, tmp_path)
    assert ops and all(len(op) == 4 and op[1] >= 0 and op[2] >= 0 and isinstance(op[3], str) for op in ops)
    (row,), _ = layers.one_op("conv", ops, wall)
    assert 0 < row["wall_s"] <= wall and row["wall_s"] <= row["seconds"] + 1e-12


def test_tfs_xla_compiled_ops_are_traced_under_kerass_layer_scopes(tmp_path):
    """TF's jit_compile rows ('predict+xla' here): the ops XLA compiled are in the trace, each named by its HLO
    instruction's op_name (Keras's layer scopes, from the module the trace holds), and the cluster's launch is not
    counted beside them: the ops' wall time stays within the call's."""
    from frameworks_setup import TF_DEVICES

    import tf_impl

    lstm = tf_impl.adapter("lstm")
    model, x = lstm.build(8, 0), np.random.default_rng(0).uniform(0, 255, (16, 28, 28, 1)).astype(np.float32)
    ops, wall = _traced(tf_impl, lstm.prepare_inference(model, x, TF_DEVICES[:1], "predict+xla"), tmp_path)
    scopes = {op[0] for op in ops}
    assert any("/lstm1" in s for s in scopes) and any("/lstm2" in s for s in scopes), scopes
    # what XLA added without metadata ('copy.18') keeps its instruction's name, as in JAX's traces: the rest is scoped
    scoped = sum(op[1] for op in ops if "/" in op[0])
    assert scoped > 0.5 * sum(op[1] for op in ops), sorted(scopes)
    assert 0 < sum(layers.wall_split(ops)) <= wall
