"""What tells this machine's CPU from another's, as a results file records it (`env.host`): the vendor, family,
model and stepping the CPU reports, the instruction-set flags the frameworks' kernels choose their code by, and
its cores. Reading two files' records and saying how they differ: parity.output.machines."""

from __future__ import annotations

import os
import platform
from typing import TypedDict

from parity.common.cpuinfo import cpu_info, processors

# The flags that decide which kernels oneDNN, XLA and Eigen run, per architecture: the SIMD width and FMA (float32),
# the bfloat16 and float16 dot products, and AMX's tiles. A flag absent from this table is not recorded.
FLAGS = {
    "x86_64": ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"),
    "aarch64": ("asimd", "sve", "sve2", "bf16", "i8mm"),
}


class Host(TypedDict):
    """One machine's CPU as a results file records it (`env.host`); None where /proc/cpuinfo does not say."""

    arch: str  # platform.machine(): 'x86_64', 'aarch64'
    vendor: str | None  # /proc/cpuinfo's vendor_id: 'AuthenticAMD', 'GenuineIntel' (an ARM core's 'CPU implementer')
    model_name: str | None  # 'AMD EPYC 9R14'; a VM may show a shortened one ('AMD EPYC')
    family: int | None  # 'cpu family': 25 for AMD's Zen 3 and Zen 4, 26 for Zen 5, 6 for Intel's Xeons
    model: int | None  # 'model': with the family, the microarchitecture (17: Zen 4's Genoa)
    stepping: int | None  # 'stepping': the revision (Intel's model 85 is Skylake, Cascade Lake or Cooper Lake by it)
    flags: dict[str, bool]  # each flag of FLAGS[arch]: whether the CPU reports it ({}: no /proc/cpuinfo)
    cores: int  # physical cores this process may use (parity.common.cpuinfo: the peak's cores)
    logical_cpus: int | None  # os.cpu_count()


# Each field's JSON types, for the reader's checks (parity.output.loading)
HOST_TYPES: dict[str, tuple[type, ...]] = {
    "arch": (str,),
    "vendor": (str, type(None)),
    "model_name": (str, type(None)),
    "family": (int, type(None)),
    "model": (int, type(None)),
    "stepping": (int, type(None)),
    "flags": (dict,),
    "cores": (int,),
    "logical_cpus": (int, type(None)),
}


def _number(v: str | None) -> int | None:
    """A cpuinfo number: decimal on x86 ('25'), hexadecimal on ARM ('0x41')."""
    try:
        return int(v, 0) if v else None
    except ValueError:
        return None


def host_from(blocks: list[dict[str, str]], arch: str, cores: int, logical: int | None) -> Host:
    """The record of a CPU from its /proc/cpuinfo blocks (parity.common.cpuinfo.processors); the first block
    speaks for all (one model per machine: a hybrid CPU's cores share family and model)."""
    cpu = blocks[0] if blocks else {}
    reported = set((cpu.get("flags") or cpu.get("Features") or "").split())
    return Host(
        arch=arch,
        vendor=cpu.get("vendor_id") or cpu.get("CPU implementer"),
        model_name=cpu.get("model name"),
        family=_number(cpu.get("cpu family") or cpu.get("CPU architecture")),
        model=_number(cpu.get("model") or cpu.get("CPU part")),
        stepping=_number(cpu.get("stepping") or cpu.get("CPU variant")),
        flags={f: f in reported for f in FLAGS.get(arch, ())} if cpu else {},
        cores=cores,
        logical_cpus=logical,
    )


def this_host() -> Host:
    """This machine's record, for a results file's `env.host`."""
    return host_from(processors(), platform.machine(), cpu_info()["cores"], os.cpu_count())
