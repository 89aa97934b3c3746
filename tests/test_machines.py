"""Telling machines apart, without any framework: the host record read from a CPU's /proc/cpuinfo, its
microarchitecture's name, the one line compare and report print, and compare's gate, which judges no slowdown
across machines; on hand-made records and files, and on the shipped Zen 4 and Zen 5 files."""

import json
from pathlib import Path

import numpy as np
import pytest
from results_doc import timed_row

from parity import compare, report
from parity.common.cpuinfo import processors
from parity.common.host import FLAGS, Host, host_from
from parity.output import machines
from parity.output.files import load_results
from parity.record import schema

ROOT = Path(__file__).resolve().parent.parent
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512_bf16 avx512_vnni
"""
SPR = ZEN4.replace("AuthenticAMD", "GenuineIntel").replace(": 25", ": 6").replace(": 17", ": 143")
SPR = SPR.replace("AMD EPYC", "Intel(R) Xeon(R) Platinum 8488C").replace("avx512_vnni", "avx512_fp16 amx_tile amx_bf16")
ARM = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd sve bf16\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"


def _host(text: str, arch: str = "x86_64", cores: int = 2) -> Host:
    return host_from(processors(text), arch, cores, cores)


def test_the_host_record_reads_vendor_family_model_stepping_and_the_flags_that_matter():
    h = _host(ZEN4 + "\n" + ZEN4.replace(": 0\n", ": 1\n", 1))
    assert (h["vendor"], h["family"], h["model"], h["stepping"], h["model_name"]) == (
        "AuthenticAMD",
        25,
        17,
        1,
        "AMD EPYC",
    )
    assert h["flags"] == dict.fromkeys(FLAGS["x86_64"], True) | {
        "avx512_fp16": False,
        "amx_tile": False,
        "amx_bf16": False,
    }
    spr = _host(SPR)
    assert spr["flags"]["amx_bf16"] and spr["flags"]["avx512_fp16"] and spr["model"] == 143
    arm = _host(ARM, "aarch64", 4)
    assert arm["vendor"] == "0x41" and arm["model"] == 0xD40 and arm["flags"]["sve"] and not arm["flags"]["sve2"]
    assert _host("", cores=1) == Host(
        arch="x86_64",
        vendor=None,
        model_name=None,
        family=None,
        model=None,
        stepping=None,
        flags={},
        cores=1,
        logical_cpus=1,
    )


@pytest.mark.parametrize(
    ("vendor", "family", "model", "stepping", "name"),
    [
        ("AuthenticAMD", 25, 17, 1, "Zen 4"),
        ("AuthenticAMD", 25, 1, 1, "Zen 3"),
        ("AuthenticAMD", 26, 2, 0, "Zen 5"),
        ("AuthenticAMD", 23, 49, 0, "Zen 2"),
        ("GenuineIntel", 6, 143, 8, "Sapphire Rapids"),
        ("GenuineIntel", 6, 207, 2, "Emerald Rapids"),
        ("GenuineIntel", 6, 85, 7, "Cascade Lake"),
        ("GenuineIntel", 6, 85, None, None),  # Skylake, Cascade Lake or Cooper Lake: the stepping decides
        ("GenuineIntel", 6, 1, 1, None),
        (None, None, None, None, None),
    ],
)
def test_the_microarchitecture_is_named_from_family_model_and_stepping(vendor, family, model, stepping, name):
    h = {**_host(ZEN4), "vendor": vendor, "family": family, "model": model, "stepping": stepping}
    assert machines.microarchitecture(h) == name


def _env(cpu="AMD EPYC", peak=166.2e9, host=None, jax="0.12.0.1", cores=2) -> dict:
    env = {
        "schema_version": schema.SCHEMA_VERSION,
        "device": "cpu",
        "host_cpu": cpu,
        "host_cores": cores,
        "precision": "default",
        "python": "3.12.1",
        "peak": {"computed_flops": peak},
        "frameworks": {"jax": {"device_kind": "cpu", "versions": {"jax": jax, "flax": "0.12.12"}}},
    }
    return env if host is None else {**env, "host": host}


def _line(a: dict, b: dict) -> str:
    return machines.pair_line(machines.machine_of(a), machines.machine_of(b), ("OLD", "NEW"))


def test_two_new_files_say_family_model_flags_and_versions():
    zen4 = _host(ZEN4)
    zen5 = {**zen4, "family": 26, "model": 2, "flags": {**zen4["flags"], "avx512_fp16": True}}
    line = _line(_env(host=zen4), _env(host=zen5, peak=332.3e9, jax="0.10.2"))
    assert line.startswith("machines differ: OLD is AMD EPYC (AMD family 25 model 17 stepping 1: Zen 4), NEW is ")
    assert "AMD family 26 model 2 stepping 1: Zen 5" in line and "flags: only NEW has avx512_fp16" in line
    assert "166.2 vs 332.3 GFLOP/s" in line and line.endswith("software: jax 0.12.0.1 vs 0.10.2")
    assert "\n" not in line


def test_older_files_say_what_they_can_and_unknown_otherwise():
    # the shipped Zen 4 and Zen 5 files: one CPU name ('AMD EPYC'), 2 cores each; their computed peaks differ
    line = _line(_env(peak=332.3e9), _env())
    assert line.startswith("machines differ: both AMD EPYC (family, model, stepping unknown)")
    assert "computed fp32 peak (cores x FMA x SIMD lanes x clock) 332.3 vs 166.2 GFLOP/s" in line
    same = _line(_env(), _env())
    assert same.startswith("no machine difference recorded: cpu, AMD EPYC, 2 cores")
    assert "OLD and NEW written before env.host: CPU family, model, stepping and flags unknown" in same
    mixed = _line(_env(host=_host(ZEN4)), _env(cpu="Intel(R) Xeon(R) Processor", peak=294.4e9, cores=4))
    assert "NEW is Intel(R) Xeon(R) Processor (family, model, stepping unknown)" in mixed and "cores 2 vs 4" in mixed


def test_one_machine_with_other_libraries_is_the_same_class():
    line = _line(_env(host=_host(ZEN4)), _env(host=_host(ZEN4), peak=167.0e9, jax="0.10.2"))
    assert line == "same machine class: cpu, AMD EPYC (Zen 4), 2 cores; software: jax 0.12.0.1 vs 0.10.2"


def _row(variant: str, scale: float, rng) -> dict:
    return timed_row("jax", variant, scale * np.exp(rng.normal(0, 0.02, 8)))


def _files(tmp_path, old_env: dict, new_env: dict, slow: float = 2.0) -> list[str]:
    rng = np.random.default_rng(0)
    old = {"env": old_env, "rows": [_row("jit", 1.0, rng), _row("pmap", 1.0, rng)], "checks": []}
    new = {"env": new_env, "rows": [_row("jit", slow, rng), _row("pmap", 1.0, rng)], "checks": []}
    paths = [tmp_path / "old" / "results.json", tmp_path / "new" / "results.json"]
    for p, doc in zip(paths, (old, new), strict=True):
        p.parent.mkdir()
        p.write_text(json.dumps(doc))
    return [str(p) for p in paths]


def test_the_gate_judges_no_slowdown_across_machines(tmp_path, capsys):
    files = _files(tmp_path, _env(host=_host(ZEN4)), _env(host=_host(SPR), cpu="Intel(R) Xeon(R) Platinum 8488C"))
    assert compare.main(files) == 2
    out = capsys.readouterr().out
    first, *_, last = out.splitlines()
    assert first.startswith("machines differ: OLD is AMD EPYC (AMD family 25 model 17 stepping 1: Zen 4), NEW is ")
    assert "REGRESSION" not in out and "% across machines, not judged (95% CI" in out
    assert last.startswith("ACROSS MACHINES: the files come from different machines") and "1 row(s)" in last
    assert compare.main([*files, "--across-machines"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 99.5% slower" in out and "1 regression(s) beyond 10% across different machines" in out


def test_the_gate_still_judges_one_machine_class(tmp_path, capsys):
    files = _files(tmp_path, _env(host=_host(ZEN4)), _env(host=_host(ZEN4), jax="0.10.2"))
    assert compare.main(files) == 1
    out = capsys.readouterr().out
    assert out.startswith("same machine class: cpu, AMD EPYC (Zen 4), 2 cores; software: jax 0.12.0.1 vs 0.10.2\n")
    assert "REGRESSION: 99.5% slower" in out and "ACROSS" not in out


def test_report_names_each_machine_and_says_how_they_differ(tmp_path, capsys):
    files = _files(tmp_path, _env(peak=332.3e9), _env(), slow=1.0)
    assert report.report_main([*files, "--no-article"]) == 0
    out = capsys.readouterr().out
    assert "cpu, AMD EPYC, 2 cores [old/results.json]" in out and "cpu, AMD EPYC, 2 cores [new/results.json]" in out
    assert "  * old/results.json and new/results.json: machines differ: both AMD EPYC" in out


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"family": "25"}, "host.family is '25', not int or NoneType"),
        ({"cores": 0}, "host.cores is 0: below one"),
        ({"flags": {"avx2": "yes"}}, "host.flags is not an object"),
        ({"stepping": True}, "host.stepping is True"),
    ],
)
def test_a_host_record_of_the_wrong_types_is_refused(tmp_path, capsys, change, said):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"env": _env(host={**_host(ZEN4), **change}), "rows": []}))
    assert compare.main([str(p), str(p)]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    p.write_text(json.dumps({"env": _env(host=_host(ZEN4)), "rows": []}))
    assert load_results(p)["env"]["host"]["model"] == 17


def test_the_shipped_zen5_and_zen4_files_are_said_to_come_from_different_machines(capsys):
    # the two classes' default runs of one shape (three frameworks, 1 and 8 replicas); their current ones are at 1
    names = ("zen5/cpu-default-three-frameworks.json", "zen4/cpu-default-x1-x8.json")
    zen5, zen4 = (str(ROOT / f"docs/results/{c}") for c in names)
    assert compare.main([zen5, zen4]) == 2  # their figures are not judged: no regression across machines
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "machines differ: OLD is AMD EPYC (AMD family 26 model 2 stepping 1: Zen 5), NEW is AMD EPYC (AMD family 25 "
        "model 17 stepping 1: Zen 4); computed fp32 peak (cores x FMA x SIMD lanes x clock) 332.3 vs 166.2 GFLOP/s"
    )
    assert "REGRESSION" not in out and "ACROSS MACHINES" in out
