"""Which machine a results file came from, and how two files' machines differ, in one line: the CPU (vendor,
family, model, stepping and its microarchitecture's name, from `env.host`; a file written before that field gives
its CPU's model name only, and the rest is said unknown), the flags that decide the kernels, the cores, the
computed float32 peak, the accelerator, and the library versions. `parity.compare` and `parity.report` print it;
compare's regression gate judges no slowdown across machines (docs/results-format.md)."""

from __future__ import annotations

from dataclasses import dataclass

from parity.common.host import Host

# (vendor, family, first model, last model, first stepping, last stepping, name): Linux's
# arch/x86/kernel/cpu/amd.c (bsp_init_amd: the Zen generations) and arch/x86/include/asm/intel-family.h
MICROARCHITECTURES = (
    ("AuthenticAMD", 23, 0x00, 0x2F, 0, 255, "Zen/Zen+"),
    ("AuthenticAMD", 23, 0x30, 0xFF, 0, 255, "Zen 2"),
    ("AuthenticAMD", 25, 0x00, 0x0F, 0, 255, "Zen 3"),
    ("AuthenticAMD", 25, 0x10, 0x1F, 0, 255, "Zen 4"),
    ("AuthenticAMD", 25, 0x20, 0x5F, 0, 255, "Zen 3"),
    ("AuthenticAMD", 25, 0x60, 0xAF, 0, 255, "Zen 4"),
    ("AuthenticAMD", 26, 0x00, 0x2F, 0, 255, "Zen 5"),
    ("AuthenticAMD", 26, 0x40, 0x4F, 0, 255, "Zen 5"),
    ("AuthenticAMD", 26, 0x50, 0x5F, 0, 255, "Zen 6"),
    ("AuthenticAMD", 26, 0x60, 0x7F, 0, 255, "Zen 5"),
    ("AuthenticAMD", 26, 0x80, 0xAF, 0, 255, "Zen 6"),
    ("AuthenticAMD", 26, 0xC0, 0xCF, 0, 255, "Zen 6"),
    ("GenuineIntel", 6, 0x3F, 0x3F, 0, 255, "Haswell-X"),
    ("GenuineIntel", 6, 0x4F, 0x4F, 0, 255, "Broadwell-X"),
    ("GenuineIntel", 6, 0x55, 0x55, 0, 4, "Skylake-SP"),
    ("GenuineIntel", 6, 0x55, 0x55, 5, 7, "Cascade Lake"),
    ("GenuineIntel", 6, 0x55, 0x55, 10, 11, "Cooper Lake"),
    ("GenuineIntel", 6, 0x6A, 0x6A, 0, 255, "Ice Lake-SP"),
    ("GenuineIntel", 6, 0x6C, 0x6C, 0, 255, "Ice Lake-D"),
    ("GenuineIntel", 6, 0x8F, 0x8F, 0, 255, "Sapphire Rapids"),
    ("GenuineIntel", 6, 0xAD, 0xAE, 0, 255, "Granite Rapids"),
    ("GenuineIntel", 6, 0xAF, 0xAF, 0, 255, "Sierra Forest"),
    ("GenuineIntel", 6, 0xCF, 0xCF, 0, 255, "Emerald Rapids"),
)
VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}
SAME_PEAK = 0.01  # two computed peaks within 1% are one clock's rounding apart


@dataclass(frozen=True)
class Machine:
    """What a results file says of its machine; None where it does not say."""

    host: Host | None  # env.host; None in a file written before it
    cpu: str  # env.host_cpu, in every file: /proc/cpuinfo's model name ('AMD EPYC')
    cores: int | None  # env.host_cores: os.cpu_count()
    device: str  # 'cpu', 'gpu' or 'tpu'
    device_kinds: tuple[str, ...]  # the frameworks' device kinds that say more than the device: ('NVIDIA H200',)
    peak_flops: float | None  # a CPU run's computed float32 peak: cores x FMA units x lanes x 2 x clock
    versions: dict[str, str]  # each distribution the workers reported (the first report of it), and 'python'


def machine_of(env: dict) -> Machine:
    """The machine of a results file's `env` (as parity.output.loading admits it)."""
    peak = env.get("peak") if isinstance(env.get("peak"), dict) else {}
    computed = peak.get("computed_flops") if env["device"] == "cpu" else None
    fws = env.get("frameworks") or {}
    kinds = {str(f.get("device_kind")) for f in fws.values()} - {"None"}
    versions: dict[str, str] = {}
    for f in fws.values():
        for k, v in (f.get("versions") or {}).items():
            versions.setdefault(str(k), str(v))
    if isinstance(env.get("python"), str):
        versions["python"] = env["python"]
    return Machine(
        host=env.get("host") if isinstance(env.get("host"), dict) else None,
        cpu=str(env.get("host_cpu") or "unknown CPU"),
        cores=env.get("host_cores") if isinstance(env.get("host_cores"), int) else None,
        device=env["device"],
        device_kinds=tuple(sorted(k for k in kinds if k.lower() != env["device"])),
        peak_flops=computed if isinstance(computed, (int, float)) and computed > 0 else None,
        versions=versions,
    )


def microarchitecture(host: Host | None) -> str | None:
    """'Zen 4' for AMD family 25 model 17; None where the table does not know the CPU (or the file does not say)."""
    if not host or host.get("family") is None or host.get("model") is None:
        return None
    for vendor, family, m0, m1, s0, s1, name in MICROARCHITECTURES:
        if (host.get("vendor"), host["family"]) == (vendor, family) and m0 <= host["model"] <= m1:
            if host.get("stepping") is None and s1 - s0 < 255:
                continue
            if host.get("stepping") is None or s0 <= host["stepping"] <= s1:
                return name
    return None


def identity(m: Machine) -> str:
    """'AMD EPYC (AMD family 25 model 17 stepping 1: Zen 4)'; an older file's CPU with 'family, model and
    stepping unknown'."""
    h = m.host
    if not h or h.get("family") is None:
        return f"{m.cpu} (family, model, stepping unknown)"
    vendor = VENDORS.get(str(h.get("vendor")), h.get("vendor") or "")
    numbers = f"{vendor} family {h['family']} model {h['model']} stepping {h.get('stepping', '?')}".strip()
    name = microarchitecture(h)
    return f"{h.get('model_name') or m.cpu} ({numbers}{': ' + name if name else ''})"


def label(m: Machine) -> str:
    """A short label for tables and titles: 'cpu, AMD EPYC (Zen 4), 2 cores'."""
    what = m.device + (f" {'/'.join(m.device_kinds)}" if m.device_kinds else "")
    name = microarchitecture(m.host)
    cores = m.host["cores"] if m.host else m.cores
    return f"{what}, {m.cpu}" + (f" ({name})" if name else "") + (f", {cores} cores" if cores else "")


def _flags(a: Host, b: Host, names: tuple[str, str]) -> str | None:
    fa, fb = a.get("flags") or {}, b.get("flags") or {}
    only = [[f for f in x if x[f] and f in y and not y[f]] for x, y in ((fa, fb), (fb, fa))]
    said = [f"only {n} has {', '.join(o)}" for n, o in zip(names, only, strict=True) if o]
    return "flags: " + "; ".join(said) if said else None


def hardware_differences(a: Machine, b: Machine, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """What differs between two machines, each as 'what: a vs b' (the CPU's identity first); [] where nothing
    either file records differs."""
    out = []
    ha, hb = a.host, b.host
    keys = ("vendor", "family", "model", "stepping", "model_name")
    if (ha and hb and any(ha.get(k) != hb.get(k) for k in keys)) or a.cpu != b.cpu:
        out.append(f"{names[0]} is {identity(a)}, {names[1]} is {identity(b)}")
    if ha and hb and (flags := _flags(ha, hb, names)):
        out.append(flags)
    ca, cb = (ha["cores"] if ha else a.cores), (hb["cores"] if hb else b.cores)
    if ca and cb and ca != cb:
        out.append(f"cores {ca} vs {cb}")
    if a.device != b.device or a.device_kinds != b.device_kinds:
        out.append(f"device {label(a).split(',')[0]} vs {label(b).split(',')[0]}")
    pa, pb = a.peak_flops, b.peak_flops
    if pa and pb and abs(pa - pb) > SAME_PEAK * max(pa, pb):
        out.append(f"computed fp32 peak (cores x FMA x SIMD lanes x clock) {pa / 1e9:.1f} vs {pb / 1e9:.1f} GFLOP/s")
    return out


def software_differences(a: Machine, b: Machine) -> list[str]:
    """Each library both files name at different versions: 'jax 0.12.0.1 vs 0.10.2'."""
    return [
        f"{k} {a.versions[k]} vs {b.versions[k]}"
        for k in a.versions
        if a.versions[k] != b.versions.get(k, a.versions[k])
    ]


def pair_line(a: Machine, b: Machine, names: tuple[str, str] = ("A", "B")) -> str:
    """One line: whether the two machines differ and how, then the software that differs. Unescaped: the caller
    shows it through parity.common.safe.text."""
    hw, sw = hardware_differences(a, b, names), software_differences(a, b)
    soft = f"; software: {', '.join(sw)}" if sw else ""
    if hw:
        if not hw[0].startswith(f"{names[0]} is "):
            ia, ib = identity(a), identity(b)
            hw.insert(0, f"both {ia}" if ia == ib else f"{names[0]} is {ia}, {names[1]} is {ib}")
        return "machines differ: " + "; ".join(hw) + soft
    unknown = [n for n, m in zip(names, (a, b), strict=True) if not m.host]
    if unknown:  # what an older file cannot tell
        said = " and ".join(unknown)
        return (
            f"no machine difference recorded: {label(a)} ({said} written before env.host: CPU family, model, "
            f"stepping and flags unknown){soft}"
        )
    return f"same machine class: {label(a)}{soft}"
