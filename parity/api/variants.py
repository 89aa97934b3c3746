"""Variants and process-wide settings as declared records: each implementation's one table of each.

A variant's name is a label for people and files ('jit+pool'); what the code reads are its fields, and `options`,
the implementation's own record of how to build it (a trainer reads `options.pool`, never the name). Settings are
what a worker process starts with (XLA's flags, glibc's tunables): a worker of its own each, whose rows are labelled
'<variant>+<setting>'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

ONE, MANY = "one", "many"  # Variant.span: on one device; data-parallel over several (a replica count is a number)


@dataclass(frozen=True)
class Variant:
    """One way an implementation runs one row kind."""

    name: str  # the label: 'jit+pool', 'fit+spe', 'strategy'
    kind: str  # the row kind it runs (parity.workloads' RowKind.name): 'conv', 'cnn_train', ...
    span: str  # the devices it runs on: ONE, or MANY (data-parallel over any count but one)
    dtype: str = "float32"  # the number format it computes in: 'float32', or 'bfloat16' (inputs, or mixed precision)
    tuned: bool = False  # not the framework out of the box
    dispatch: bool = False  # tunes only how steps reach the device (several per dispatch), not the kernels
    rank: int | None = (
        None  # its place in the best-known configuration's order of preference (lower first); None: not in it
    )
    multiprocess: bool = True  # offered in a multi-process run
    float32: str | None = None  # a bfloat16 variant's float32 counterpart (the same program in float32), judged with
    options: Any = None  # the implementation's own record of how to build it (opaque to parity; not sent on the wire)
    # its place on a device other than a CPU, where measured there to differ from `rank` (the CPUs' order): (('tpu',
    # 0),) puts it first on a TPU, (('tpu', None),) out of the best-known configuration there (on)
    ranks: tuple[tuple[str, int | None], ...] = ()

    def on(self, device: str) -> Variant:
        """This variant as `device` ('cpu', 'gpu', 'tpu') orders it: its `rank` there."""
        for d, r in self.ranks:
            if d == device:
                return replace(self, rank=r)
        return self

    def fits(self, replicas: int) -> bool:
        """Whether it runs over `replicas` devices."""
        return (self.span == ONE) == (replicas == 1)

    def wire(self) -> dict:
        """What a worker tells the parent about it: every field but the implementation's options."""
        return asdict(replace(self, options=None))


@dataclass(frozen=True)
class Setting:
    """A process-wide setting worth a worker of its own."""

    name: str  # the label its rows carry after their variant's: 'ynn', 'ynn+onednn+thp'
    env: Mapping[str, str] = field(default_factory=dict)  # what the worker starts with (appended to the user's own)
    # the number formats it acts on: `--configs best` and `levers` run it with those variants only; () it acts on none
    # alone (huge pages alone: only `--configs all` runs it); None: not declared (a setting from the command line:
    # every variant runs under it)
    formats: tuple[str, ...] | None = ()
    rank: int | None = None  # its place in the best-known configuration's order of preference; None: `levers` only
    # what the machine must offer for it to make a difference, checked by the implementation ('cpu', 'bf16': bfloat16
    # hardware, 'thp': huge pages on request, 'no-thp': none, so that the setting stands without them)
    needs: tuple[str, ...] = ()
    # row kinds it slowed on every class measured: `--configs best` runs their best-known variant without it
    slows: tuple[str, ...] = ()

    def wire(self) -> dict:
        formats = None if self.formats is None else list(self.formats)
        return {
            **asdict(self), "env": dict(self.env), "formats": formats, "needs": list(self.needs),
            "slows": list(self.slows),
        }  # fmt: skip


def table(variants: Sequence[Variant]) -> dict[str, Variant]:
    """A table by name; a name declared twice for one row kind is a bug of the table."""
    out: dict[str, Variant] = {}
    for v in variants:
        if v.name in out and out[v.name].kind == v.kind:
            raise ValueError(f"variant {v.name!r} of {v.kind} declared twice")
        out.setdefault(v.name, v)
    return out


def offered(variants: Sequence[Variant], kind: str, replicas: int, multiprocess: bool = False) -> tuple[Variant, ...]:
    """The variants of `kind` over `replicas` devices, in the table's order (a multi-process run: those it offers)."""
    return tuple(v for v in variants if v.kind == kind and v.fits(replicas) and (v.multiprocess or not multiprocess))


def lookup(variants: Sequence[Variant], kind: str, name: str, replicas: int, framework: str) -> Variant:
    """The record named `name`. Raises ValueError naming what there is."""
    have = [v.name for v in variants if v.kind == kind and v.fits(replicas)]
    for v in variants:
        if v.kind == kind and v.name == name and v.fits(replicas):
            return v
    raise ValueError(f"unknown {framework} {kind} variant {name!r} for {replicas} replicas; have {tuple(have)}")


def out_of_the_box(variants: Sequence[Variant]) -> list[Variant]:
    """The framework out of the box among `variants`; where it offers no untuned way (TF's multi-worker CNN: only
    its custom loop), the first stands in."""
    return [v for v in variants if not v.tuned] or list(variants[:1])


def from_wire(d: Mapping) -> Variant:
    return Variant(**{**d, "options": None, "ranks": tuple((k, r) for k, r in d.get("ranks", ()))})


def setting_from_wire(d: Mapping) -> Setting:
    formats = None if d["formats"] is None else tuple(d["formats"])
    return Setting(
        d["name"], dict(d["env"]), formats, d.get("rank"), tuple(d.get("needs", ())), tuple(d.get("slows", ()))
    )
