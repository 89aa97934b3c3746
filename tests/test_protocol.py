"""The worker protocol (parity.common.protocol): every request and answer a declared record, the same after the
wire both ways; a line that is no request is refused with the reason, never half-read. No framework is imported."""

import json

import pytest

from parity.common import protocol as p

REQUESTS = [
    p.AskVariants("conv"),
    p.Prepare("conv-jax-jit-r1", "conv", "jit", {"batch": 16}, "/tmp/x.npy", {"weights": "w.npz"}),
    p.Ahead([{"id": "k", "kind": "cnn_train", "variant": "jit", "spec": {"global_batch": 64}, "extra": {}}]),
    p.Ahead([], wait=False),
    p.AheadDone(),
    p.Warm("k"),
    p.Rep("k"),
    p.GetResult("k", keep=True),
    p.Profile("k", "/tmp/prof"),
    p.Call("cnn", "warm", {"seed": 3}),
    p.Quit(),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: f"{r.cmd}{'' if getattr(r, 'wait', True) else '-nowait'}")
def test_every_request_survives_the_wire(req):
    line = p.encode(req)
    assert json.loads(line)["cmd"] == req.cmd
    assert p.decode_request(line) == req


def test_every_command_has_one_request_and_names_its_answer():
    assert set(p.REQUESTS) == {r.cmd for r in REQUESTS}
    assert p.Rep.answer is p.Called and p.GetResult.answer is p.Result and p.Call.answer is None
    assert p.Ahead.answer is p.Compiled and p.AheadDone.answer is p.Compiled


def test_an_answer_comes_back_as_the_record_its_request_declares():
    res = p.Result(None, median_s=0.5, times_s=[0.5], peak_memory_at_least=True, extra={"images": 64})
    got = p.decode_answer(p.GetResult("k"), json.loads(p.encode(res)))
    assert got == res and got.peak_memory_at_least
    assert p.decode_answer(p.Call("cnn", "parity"), {"variants": ["jit"]}) == {"variants": ["jit"]}
    done = p.Compiled({"k": 21.5}, {"j": "XlaRuntimeError: refused"})
    assert p.decode_answer(p.Ahead([]), json.loads(p.encode(done))) == done


@pytest.mark.parametrize(
    "line, why",
    [
        ('{"cmd": "no_such_command"}', "unknown command"),
        ("{}", "unknown command"),
        ('{"cmd": "rep"}', "rep: "),  # its id missing
        ('{"cmd": "rep", "id": "k", "extra": 1}', "unknown fields"),
        ("[]", "not a request"),
    ],
)
def test_a_line_that_is_no_request_is_refused_with_the_reason(line, why):
    with pytest.raises(p.ProtocolError, match=why):
        p.decode_request(line)
