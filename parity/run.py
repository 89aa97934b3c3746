"""`python -m parity.run`: measure the workloads in every framework of parity.common.frameworks' table, check them,
print the table."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from parity.cli import bounds
from parity.cli.argtypes import check_data_dir, check_environment, check_interpreter
from parity.cli.flags import parser  # noqa: F401  (parser: this command's flags)
from parity.common import frameworks, signals
from parity.common.messages import HarnessError, WorkerBug
from parity.common.safe import text
from parity.common.signals import Terminated
from parity.engine import devicelock, environment
from parity.engine.cluster import check_tf_config, from_flags_or_env
from parity.engine.config import PRESETS, Config, Preset
from parity.engine.schedule import run_suite
from parity.engine.workerproc import Worker
from parity.judging import summary
from parity.output import files, screen, tables
from parity.record import parts
from parity.record.schema import PROFILES
from parity.workloads import WORKLOADS
from parity.workloads.trained import child


def _cluster(args):
    """This process's part of a multi-process run (None: the only process), refusing the flags for one process."""
    cluster = from_flags_or_env(
        args.coordinator, args.num_processes, args.process_id, args.local_devices, args.join_timeout
    )
    if cluster is not None and args.replicas:
        raise HarnessError(
            "--replicas is for one process; a multi-process run uses every process's devices "
            "(--local-devices per process on a CPU)"
        )
    if cluster is not None and args.list_devices:
        raise HarnessError("--list-devices looks at this machine only: run it without --coordinator")
    return cluster


def config(args, argv: list[str] = ()) -> Config:
    cluster = _cluster(args)
    chosen = _frameworks(args, cluster)
    check_data_dir(args.data, args.data_dir)  # a named directory that is not there is an error, not a fallback
    given = _schedule_flags(args)  # refused where they contradict each other or the workloads would ignore them
    preset = _preset(args)
    if cluster is not None and cluster.process_id:  # process 0 speaks for the run
        args.quiet = True
    configs = args.configs or preset.configs
    cfg = Config(
        device=args.device,
        frameworks=chosen,
        workloads=_workloads(args),
        replicas=tuple(dict.fromkeys(args.replicas or ())),  # '--replicas 1 1' measures each count once
        precision=args.precision,
        preset=preset.name,
        quick=preset.specs == "quick",
        reps=args.reps,
        budget_s=args.budget if args.budget is not None else preset.budget_s,
        max_reps=max(args.max_reps if args.max_reps is not None else preset.max_reps, args.reps),
        warmup=args.warmup,
        tuned=configs != "default",
        configs=configs,
        timeout_s=args.timeout,
        progress=not args.quiet,
        verbose=args.verbose,
        data=args.data,
        data_dir=args.data_dir,
        overrides=given,
        notebook=preset.specs == "notebook",
        validate=args.validate,
        profile=args.profile,
        seeds=args.seeds,
        parity_steps=args.parity_steps if args.parity_steps is not None else preset.parity_steps,
        parity_variants=preset.parity,
        cluster=cluster,
        command=("python", "-m", "parity.run", *argv),
        exclusive=args.device == "tpu" if args.exclusive is None else args.exclusive,
        ahead=args.device != "cpu" if args.compile_ahead is None else args.compile_ahead,
    )
    check_environment(cfg.device, chosen, cfg.replica_counts() if cluster is None else (cluster.local_devices,))
    bounds.check_replicas(cfg.replica_counts(), chosen)  # what the flags ask for at once, against the machine
    bounds.check_epochs(cfg)
    if cluster is not None and frameworks.TF in chosen:
        check_tf_config(cluster)
    if cfg.exclusive and cluster is None:
        devicelock.device_lock_path(cfg.device)  # the lock every owner will take: usable, before any work
    cfg.pythons = _pythons(args)  # after the environment's checks: each probe starts an interpreter
    return cfg


def _workloads(args) -> tuple[str, ...]:
    """--workload's names in WORKLOADS' order, each once ('all': every one). Raises HarnessError where every one it
    named was left out (a plug-in that could not be loaded: said above, one line each)."""
    chosen = tuple(wl for wl in WORKLOADS if wl in args.workload or "all" in args.workload)
    if not chosen:
        raise HarnessError("--workload: no workload left to run (each one named was left out, said above)")
    return chosen


def _schedule_flags(args) -> dict:
    """The trained workloads' schedule flags given ({spec field: value}). Flags that contradict each other, or that
    the chosen workloads would ignore, are one clear error, never resolved silently (a run that records something
    else than was asked); --reps above a preset's cap (not a --max-reps given) raises the cap."""
    given = {k: v for k in ("global_batch", "epochs", "steps_per_epoch") if (v := getattr(args, k)) is not None}
    workloads = _workloads(args)
    if args.max_reps is not None and args.max_reps < args.reps:
        raise HarnessError(
            f"--max-reps {args.max_reps} is below --reps {args.reps} (the least calls a row gets): choose one"
        )
    flags = {"global_batch": "--batch", "epochs": "--epochs", "steps_per_epoch": "--steps-per-epoch"}
    ignored = [flags[k] for k in given if not any(k in WORKLOADS[wl].options for wl in workloads)]
    if ignored:
        takers = ", ".join(wl for wl in WORKLOADS if WORKLOADS[wl].options)
        raise HarnessError(
            f"{', '.join(ignored)} sets the trained workloads' schedule ({takers}): "
            f"--workload {' '.join(workloads)} has none"
        )
    _notebook_schedule(args, workloads)
    return given


def _notebook_schedule(args, workloads: tuple[str, ...]) -> None:
    """--schedule notebook, which is --preset notebook: refused where none of the workloads has a notebook schedule
    (it would only run them under that preset), and said in one line where some have none."""
    if args.schedule != "notebook":
        return
    without = [wl for wl in workloads if not WORKLOADS[wl].notebook]
    takers = ", ".join(wl for wl in WORKLOADS if WORKLOADS[wl].notebook)
    if len(without) == len(workloads):
        raise HarnessError(
            f"--schedule notebook sets the trained workloads' schedule ({takers}): --workload {' '.join(workloads)} "
            "has none (--preset notebook runs them under the notebook's preset)"
        )
    if without and not args.quiet:
        print(f"note: --schedule notebook is --preset notebook: {', '.join(without)} (no notebook schedule) run under "
              "it too", file=sys.stderr)  # fmt: skip


def _pythons(args) -> dict[str, str]:
    """--python's interpreters by framework, each checked to run."""
    pythons = dict(args.python)
    if len(pythons) < len(args.python):
        raise HarnessError("--python names a framework twice")
    for fw, path in pythons.items():
        check_interpreter(fw, path, args.timeout)
    return pythons


def _frameworks(args, cluster) -> tuple[str, ...]:
    """--framework's frameworks; 'all' in a multi-process run leaves out those that take no part, and says so."""
    try:
        chosen, left_out = frameworks.chosen(args.framework, cluster is not None)
    except ValueError as e:
        raise HarnessError(str(e)) from None
    if left_out and not args.quiet:  # said, never a silent change of what 'all' measures
        names = ", ".join(frameworks.label(k) for k in left_out)
        print(f"note: {names}: no part in a multi-process run, not run (docs/multihost.md)", file=sys.stderr)
    return chosen


def _preset(args) -> Preset:
    """The run's preset: --preset, --quick (the 'quick' one) or --schedule notebook (the 'notebook' one), which
    must not contradict each other; else the default."""
    named = {args.preset} - {None}
    named |= {"quick"} if args.quick else set()
    named |= {"notebook"} if args.schedule == "notebook" else set()
    if len(named) > 1:
        said = [f"--preset {args.preset}" if args.preset else None, "--quick" if args.quick else None]
        said.append("--schedule notebook" if args.schedule == "notebook" else None)
        raise HarnessError(f"{' and '.join(s for s in said if s)} contradict each other: choose one")
    return PRESETS[named.pop() if named else "default"]


def list_devices(cfg: Config) -> None:
    for fw in cfg.frameworks:
        w = Worker(fw, "cpu", 1, cfg.precision, 300, python=cfg.pythons.get(fw))
        try:
            msg = w.recv(300)
        finally:
            w.close()
        name = frameworks.label(fw)
        if msg["status"] != "ready":
            print(f"{name}: {msg['error']}")
            continue
        print(f"{name} ({', '.join(f'{k} {v}' for k, v in msg['versions'].items())}):")
        for d in msg["devices"]:
            print(f"  {d}")


def main(argv: list[str] | None = None, extra_settings: dict | None = None) -> int:
    """The command line; `extra_settings` ({framework: {name: env}}) adds process-wide settings to try (benchmarks/)."""
    # SIGINT as Ctrl-C whatever was inherited: a run started with it ignored (a background job of a
    # non-interactive shell) would not stop when parity.launch or a user asks
    with signals.handled():
        return _main(argv, extra_settings)


def _main(argv: list[str] | None, extra_settings: dict | None) -> int:
    temporary: list[Path] = []  # the run's working folder: removed at the end, whatever happened
    with contextlib.ExitStack() as held:  # the lock on --out, released at the end, whatever happened
        try:
            return _run(argv, extra_settings, temporary, held)
        finally:
            for t in temporary:
                shutil.rmtree(t, ignore_errors=True)


def _run(argv: list[str] | None, extra_settings: dict | None, temporary: list[Path], held: contextlib.ExitStack) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    held.enter_context(_bounding_children(args.timeout))
    who = ""  # in a multi-process run, which process an error comes from
    try:
        cfg = config(args, argv)
        cfg.extra_settings = extra_settings or {}
        if not args.list_devices and not (cfg.cluster is not None and cfg.cluster.process_id):
            files.check_out_dir(args.out)  # before any work: hours of training must not end in a path error
            held.enter_context(files.out_lock(args.out))  # and no other run writing there meanwhile
        if cfg.cluster is not None and cfg.cluster.process_id is not None:
            who = f"process {cfg.cluster.process_id}: "
        if args.list_devices:
            list_devices(cfg)
            return 0
        tmp = Path(tempfile.mkdtemp(prefix="parity-"))  # removed by main, whatever happens
        temporary.append(tmp)
        res = run_suite(cfg, tmp)
    except WorkerBug as e:  # a bug inside a worker: its traceback, and exit 3 like one here
        print(e.traceback, file=sys.stderr)
        print(f"error: {who}{e} (internal error: the worker's traceback above); no results written", file=sys.stderr)
        return 3
    except (HarnessError, ValueError, OSError) as e:
        print(error_line(who, e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; no results written", file=sys.stderr)
        return 130
    except Terminated as e:
        print(f"terminated ({e.name}); workers stopped, no results written", file=sys.stderr)
        return 128 + signal.Signals[e.name]
    except Exception:  # a bug: exit 3, so that 1 always means a finished run whose checks failed
        traceback.print_exc()
        print(f"error: {who}internal error (the traceback above); no results written", file=sys.stderr)
        return 3
    res["checks"], res["rows"] = parts.judgeable(res["checks"], res["rows"])  # a plug-in's infinite bound: failed
    if not res["rows"]:
        print(text(f"error: nothing ran: {_why_nothing(cfg, res['skipped'])}"), file=sys.stderr)
        return 2
    ok = all(r["verified"] for r in res["rows"]) and all(c["passed"] is not False for c in res["checks"])
    if not any(h.get("process_id") for h in res["hello"].values()):  # process 0 prints and writes the results
        code = _write_phase(cfg, res, args.out, argv, tmp / PROFILES)
        if code:
            return code
    for r in res["rows"]:  # on stderr, --quiet or not: an exit of 1 never goes unexplained (a full TMPDIR, ...)
        if not r["verified"]:
            who = f"{r['kind']} {r['framework']} {r['variant']} x{r['replicas']}"
            print(text(f"invalid: {who}: {r['invalid_reason']}"), file=sys.stderr)
    return 0 if ok else 1


@contextlib.contextmanager
def _bounding_children(timeout_s: float):
    """The run's --timeout and process id in its environment while it runs (child.TIMEOUT, child.RUN), its workers'
    too: a float64 run (parity.workloads.trained.child), here or in a worker, is bounded by one, ends with the other."""
    before = {k: os.environ.get(k) for k in (child.TIMEOUT, child.RUN)}
    os.environ.update({child.TIMEOUT: repr(timeout_s), child.RUN: str(os.getpid())})
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _why_nothing(cfg: Config, skipped: list[dict]) -> str:
    """Why a run timed no row: each framework left out and why, else that none offered a variant; never empty."""
    why = "; ".join(s["reason"] for s in skipped if s.get("reason"))
    return why or f"no framework offered a variant of {', '.join(cfg.workloads)}"


def error_line(who: str, e: Exception) -> str:
    """An error as the user reads it: one escaped line (a path in it may hold a newline), then, as written, a
    dead worker's last words."""
    detail = getattr(e, "detail", "")
    return text(f"error: {who}{getattr(e, 'line', e)}") + (f":\n{detail}" if detail else "")


def _write_phase(cfg, res: dict, out: Path, argv: list[str], profiles: Path) -> int:
    """Print and write the results (_print_and_write); 0, or the exit status of what stopped it, said in one line:
    the files in `out` are either this run's whole set or the previous ones (files.write_staged)."""
    written: list[Path] = []
    where = f"the previous files in {out} are as they were"
    try:
        _print_and_write(cfg, res, out, argv, profiles, written)
        return 0
    except OSError as e:  # a full disk: the previous results stay, nothing half-written (files.write_staged)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted; {'the results were written' if written else where}", file=sys.stderr)
        return 130
    except Terminated as e:
        print(f"terminated ({e.name}); {'the results were written' if written else where}", file=sys.stderr)
        return 128 + signal.Signals[e.name]
    except Exception:  # a bug in the tables or the files
        traceback.print_exc()
        print(f"error: internal error while writing the results (the traceback above); {where}", file=sys.stderr)
        return 3


def _print_and_write(cfg, res: dict, out: Path, argv: list[str], profiles: Path, written: list[Path]) -> None:
    """The first screen on stdout (parity.output.screen), with --verbose the per-row table, every check and the
    notes too, and the result files under `out` (in `written` once they are there), which hold all of it."""
    env = environment.environment(cfg, res["hello"], res["skipped"], ["python", "-m", "parity.run", *argv])
    env["notes"] = res["notes"]
    env["peak"] = res["peak"]
    doc = {"env": env, "rows": res["rows"], "checks": res["checks"], "comparisons": summary.comparisons(res["rows"])}
    print(screen.first_screen(doc))
    if cfg.verbose:
        print()
        print(tables.summary_table(doc))
        print()
        print(tables.table(doc["rows"]))
        if doc["checks"]:
            print()
            print(tables.checks_table(doc["checks"]))
        if history := tables.history_table(doc["rows"]):
            print(f"\n{tables.HISTORY_CAPTION}\n{history}")
        if per_layer := tables.layer_tables(doc):
            print(f"\n{per_layer}")
        print(tables.footnotes(doc))
    written += files.write_all(doc, out, profiles if cfg.profile and profiles.is_dir() else None)
    print(f"wrote {out}: {', '.join(p.name for p in written)}")
    if not cfg.verbose:
        print("every row, every check and the notes: results.md there, results.html in a browser (or --verbose)")


if __name__ == "__main__":
    sys.exit(main())
