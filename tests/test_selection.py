"""`--configs default / best / levers / all` as pure functions over declared tables (parity.engine.selection), and
records on the wire. No framework is imported (the implementations' own tables: tests/test_surface.py)."""

import pytest

from parity.api.variants import (
    MANY,
    ONE,
    Setting,
    Variant,
    lookup,
    offered,
    out_of_the_box,
    setting_from_wire,
    table,
)
from parity.engine import selection

# A table in the shape of JAX's CNN: out of the box, a dispatch-only lever, a kernel lever (best-known), bfloat16.
PLAIN = Variant("jit", "cnn_train", ONE, rank=1)
SCAN = Variant("jit+scan", "cnn_train", ONE, tuned=True, dispatch=True)
POOL = Variant("jit+pool", "cnn_train", ONE, tuned=True, rank=0)
BF16 = Variant("jit+bf16", "cnn_train", ONE, "bfloat16", tuned=True, rank=1)
BF16_POOL = Variant("jit+bf16+pool", "cnn_train", ONE, "bfloat16", tuned=True, rank=0)
SHARDED = Variant("shard_map", "cnn_train", MANY, rank=0)
TABLE = (PLAIN, SCAN, POOL, BF16, BF16_POOL, SHARDED)
ONE_DEVICE = offered(TABLE, "cnn_train", 1)

YNN = Setting("ynn", {"XLA_FLAGS": "--y"}, ("float32",), rank=1)
ONEDNN = Setting("onednn", {"XLA_FLAGS": "--o"}, ("bfloat16",), rank=2)
BOTH = Setting("both", {"XLA_FLAGS": "--y --o"}, ("float32", "bfloat16"), rank=0)
ALONE = Setting("thp", {"GLIBC_TUNABLES": "h=1"}, ())  # acts on no format alone
HEAP = Setting("heap", {"GLIBC_TUNABLES": "m=0"}, ("float32",))  # unranked: levers only
MINE = Setting("mine", {"XLA_FLAGS": "--mine"}, None)  # from the command line: declares no formats


def names(variants) -> list[str]:
    return [v.name for v in variants]


@pytest.mark.parametrize(
    "configs, offered_, expected",
    [
        ("default", (YNN, ONEDNN, BOTH), []),
        ("best", (YNN, ONEDNN, BOTH), ["both"]),  # the first by rank for each format: one setting for both
        ("best", (YNN, ONEDNN), ["ynn", "onednn"]),
        ("best", (YNN, HEAP), ["ynn"]),  # the unranked one is passed over where a ranked one acts on its format
        ("best", (HEAP,), ["heap"]),  # ... and kept where none does
        ("best", (HEAP, Setting("heap2", {}, ("float32",))), ["heap", "heap2"]),  # every one of them
        ("best", (ALONE, YNN), ["ynn"]),  # one that acts on no format alone: `all` only
        ("levers", (ALONE, YNN, HEAP), ["ynn", "heap"]),
        ("all", (ALONE, YNN, HEAP), ["thp", "ynn", "heap"]),
    ],
)
def test_which_settings_start_a_worker_of_their_own(configs, offered_, expected):
    assert [s.name for s in selection.settings_to_run(configs, offered_)] == expected


def test_a_setting_from_the_command_line_runs_under_every_configs_but_default():
    for configs in ("best", "levers", "all"):
        assert selection.settings_to_run(configs, (YNN,), (MINE,))[-1] is MINE
    assert selection.settings_to_run("default", (YNN,), (MINE,)) == []


def test_best_known_is_the_lowest_rank_of_each_number_format():
    assert selection.best_known(ONE_DEVICE) == {"float32": POOL, "bfloat16": BF16_POOL}
    assert selection.best_known((PLAIN, SCAN, BF16)) == {"float32": PLAIN, "bfloat16": BF16}
    assert selection.best_known((SCAN,)) == {}  # an unranked variant is never the best-known


@pytest.mark.parametrize(
    "configs, setting, running, expected",
    [
        ("default", None, (), ["jit"]),
        ("default", YNN, (YNN,), []),
        ("all", YNN, (YNN,), names(ONE_DEVICE)),
        ("levers", None, (YNN,), names(ONE_DEVICE)),  # each lever on its own, out of the box
        ("levers", YNN, (YNN,), ["jit", "jit+pool"]),  # its format, without the dispatch-only lever
        ("levers", BOTH, (BOTH,), ["jit", "jit+pool", "jit+bf16", "jit+bf16+pool"]),
        ("best", None, (), ["jit", "jit+pool", "jit+bf16+pool"]),  # no setting: the best-known in the default worker
        ("best", None, (YNN,), ["jit", "jit+bf16+pool"]),  # float32's best-known runs under its setting instead
        ("best", YNN, (YNN,), ["jit+pool"]),
        ("best", BOTH, (BOTH,), ["jit+pool", "jit+bf16+pool"]),
        ("best", MINE, (MINE,), names(ONE_DEVICE)),  # the command line's: every variant
        ("best", None, (MINE,), ["jit", "jit+pool", "jit+bf16+pool"]),  # ... and it covers no format
    ],
)
def test_which_variants_a_worker_times(configs, setting, running, expected):
    chosen, _ = selection.to_time(configs, ONE_DEVICE, setting, running)
    assert names(chosen) == expected


def test_levers_says_why_a_variant_was_left_out():
    _, why = selection.to_time("levers", ONE_DEVICE, YNN, (YNN,))
    assert why == {selection.BY_FORMAT, selection.BY_DISPATCH}
    said = " ".join(selection.notes("levers", (YNN,), why))
    assert "+ynn float32" in said and "several-steps-per-dispatch" in said
    assert selection.notes("levers", (YNN,), set()) == []


def test_out_of_the_box_falls_back_on_the_first_where_every_variant_is_tuned():
    assert out_of_the_box(ONE_DEVICE) == [PLAIN]
    assert out_of_the_box((SCAN, POOL)) == [SCAN]


def test_a_record_is_found_by_name_or_the_error_names_what_there_is():
    assert lookup(TABLE, "cnn_train", "shard_map", 8, "JAX") is SHARDED
    with pytest.raises(
        ValueError, match="unknown JAX cnn_train variant 'pmap' for 8 replicas; have \\('shard_map',\\)"
    ):
        lookup(TABLE, "cnn_train", "pmap", 8, "JAX")
    with pytest.raises(ValueError, match="declared twice"):
        table((PLAIN, PLAIN))


def test_records_cross_the_wire_without_the_implementations_options():
    from parity.api.variants import from_wire, setting_from_wire

    v = Variant("jit", "conv", ONE, options=object())
    assert from_wire(v.wire()) == Variant("jit", "conv", ONE)
    for s in (YNN, ALONE, MINE):
        assert setting_from_wire(s.wire()) == s


def test_levers_times_every_row_best_times():
    """`levers` is `best` and each lever on its own: a best-known several-steps-per-dispatch variant runs under the
    setting `best` gives it (Keras-JAX's CNN: 'fit+spe+ynn+thp'), and no other."""
    spe = Variant("fit+spe", "cnn_train", ONE, tuned=True, dispatch=True, rank=0)
    fit = Variant("fit", "cnn_train", ONE, rank=1)
    running = (YNN, BOTH, HEAP)  # BOTH leads float32 by rank; YNN and HEAP do not
    for s in running:
        chosen, why = selection.to_time("levers", (fit, spe), s, running)
        assert names(chosen) == (["fit", "fit+spe"] if s is BOTH else ["fit"]), s.name
        assert why == (set() if s is BOTH else {selection.BY_DISPATCH})
    for s in (BOTH,):
        assert set(names(selection.to_time("best", (fit, spe), s, running)[0])) <= set(
            names(selection.to_time("levers", (fit, spe), s, running)[0])
        )


def test_best_runs_a_row_kind_a_setting_slows_without_it():
    """A setting that declares it slows a row kind (JAX's YNNPACK list and the row LSTM's inference): `best` runs that
    kind's best-known variant in the default worker, none in the setting's; other kinds keep the setting; `levers`
    still times the kind under it (to check the claim elsewhere)."""
    plain = Variant("predict", "lstm_infer", ONE, rank=1)
    unrolled = Variant("predict+unroll", "lstm_infer", ONE, tuned=True, rank=0)
    ynn = Setting("ynn", {"XLA_FLAGS": "--y"}, ("float32",), rank=0, slows=("lstm_infer",))
    assert names(selection.to_time("best", (plain, unrolled), ynn, (ynn,))[0]) == []
    assert names(selection.to_time("best", (plain, unrolled), None, (ynn,))[0]) == ["predict", "predict+unroll"]
    assert names(selection.to_time("best", ONE_DEVICE, ynn, (ynn,))[0]) == ["jit+pool"]  # the CNN keeps it
    assert names(selection.to_time("levers", (plain, unrolled), ynn, (ynn,))[0]) == ["predict", "predict+unroll"]
    assert setting_from_wire(ynn.wire()) == ynn
    older = {k: v for k, v in ynn.wire().items() if k != "slows"}  # a worker from before the field
    assert setting_from_wire(older).slows == ()
