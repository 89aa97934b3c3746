"""Per-layer attribution from profiled op names (parity.judging.layers): both frameworks' naming, without them."""

import pytest

from parity.judging.layers import attribute, classify
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
    ],
)
def test_each_frameworks_op_names_map_onto_the_same_layers(scope, expected):
    assert classify(scope, CNN_LAYERS) == expected


def test_a_layer_made_ten_times_heavier_comes_out_on_top_with_coverage():
    ops = [("a/conv1/convolution", 0.01), ("a/conv2/convolution", 0.10), ("gradient_tape/a/conv2/x", 0.02)]
    ops += [("a/bn1/mul", 0.01), ("adam/update", 0.005), ("something_else", 0.005)]
    layers, coverage = attribute(ops, per=2, median_s=0.20, layers=CNN_LAYERS)
    top = max(layers, key=lambda r: r["seconds"])
    assert (top["layer"], top["pass"]) == ("conv2", "forward") and top["seconds"] == pytest.approx(0.05)
    assert sum(r["share"] for r in layers) == pytest.approx(1.0)
    assert coverage == pytest.approx(0.15 / 0.20)
    assert [r["layer"] for r in layers][:3] == ["bn1", "conv1", "conv2"]  # the model's order


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
