"""Who holds a TPU: libtpu's lock file and the processes that have it (or a TPU device) open, read from /proc; and
the harness's own lock, which a worker takes as libtpu does (--exclusive)."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from parity.common.messages import HarnessError

LIBTPU_LOCKFILE = Path("/tmp/libtpu_lockfile")  # what libtpu leaves while (and, if killed, after) it owns the TPU


def holders(paths: list[Path]) -> dict[int, str]:
    """Live processes with one of `paths` open: pid -> command line (from /proc; those this user may read)."""
    want = {str(p) for p in paths}
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if any(os.readlink(fd) in want for fd in (proc / "fd").iterdir()):
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def lock_state(lock: Path, devices: list[Path]) -> tuple[str, str]:
    """('free' | 'held' | 'stale', and for 'held' the one line saying what to do). Never removes anything. A stale
    lockfile (no live process holds it) is said nothing of: libtpu leaves one after every clean exit."""
    if not lock.exists():
        return "free", ""
    live = holders([lock, *devices])
    if live:
        pid, cmd = next(iter(live.items()))
        return "held", (
            f"the TPU is in use by process {pid} ({cmd[:80]}): wait for it to end or stop it; "
            f"{lock} is its lock and must not be removed while it runs"
        )
    return "stale", ""


def check_libtpu_lock() -> None:
    """Before the first TPU owner starts: a live owner is an error. A left-over lockfile is not: the next process
    opened the TPU after each one (TPU v5e, JAX 0.10.2, docs/results/tpu-v5e/); docs/tpu.md says what to do if
    libtpu ever refuses."""
    state, say = lock_state(LIBTPU_LOCKFILE, sorted(Path("/dev").glob("accel*")) + sorted(Path("/dev").glob("vfio/*")))
    if state == "held":
        raise HarnessError(say)


# Where --exclusive's device locks live: a fixed path, never one an environment variable moves (TMPDIR differs
# between a user's shells and batch jobs, and two runs locking two places would both hold the device). /tmp, as
# libtpu's own lock. PARITY_LOCK_DIR, named for this purpose alone, gives a run another place on purpose (tests
# that must not wait for the user's own runs); a run records the path it locked (env.device_lock).
LOCK_ROOT = Path("/tmp")
LOCK_DIR_VAR = "PARITY_LOCK_DIR"
DEVICE_LOCK = "PARITY_DEVICE_LOCK"  # the lock the harness gives a worker to take (internal: parity.engine.workerproc)
DEVICE_LOCK_WAIT = "PARITY_DEVICE_LOCK_WAIT"  # "1": a next owner started early waits for it after its imports


def device_lock_path(device: str) -> Path:
    """The lock one owner of `device` at a time takes (--exclusive): one path for every run of this user on this
    machine (/tmp/parity-locks-<uid>/<device>.lock, or $PARITY_LOCK_DIR/<device>.lock), in a private directory
    (created 0700, refused if it is anyone else's or open to others: a lock file's holder writes its pid there).
    A run's own temporary folder would lock nothing but the run itself; the lock, where it exists, a plain file of
    this user's (not a folder, a FIFO or a link). Raises HarnessError."""
    import stat

    given = os.environ.get(LOCK_DIR_VAR)
    if given is not None and not os.path.isabs(given):
        raise HarnessError(f"{LOCK_DIR_VAR}={given!r}: not an absolute path (the device locks live there)")
    d = Path(given) if given is not None else LOCK_ROOT / f"parity-locks-{os.getuid()}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError as e:
        raise HarnessError(f"{d}: cannot make the device locks' directory ({e.strerror or e})") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise HarnessError(f"{d}: not a private directory of this user; remove it (the device locks live there)")
    lock = d / f"{device}.lock"
    try:  # a worker opens it to append and truncates it: a plain file of its own, or none yet
        st = os.lstat(lock)
    except FileNotFoundError:
        return lock
    except OSError as e:
        raise HarnessError(f"{lock}: cannot read the device lock ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        raise HarnessError(f"{lock}: not a plain file of this user (a device lock is one); remove it")
    return lock


_LOCKS = []  # held until the process ends


def own_device(path: str, wait: bool = False) -> str | None:
    """Take the device as libtpu does on a TPU host, one owning process: an exclusive lock on `path`, kept for
    the life of this process (the kernel releases it when the process ends, however it ends). Returns None when
    taken, else the holder's pid as it wrote it; with `wait`, waits for the holder to end instead.
    PARITY_DEVICE_LOCK turns this on (the harness, --exclusive)."""
    f = open(path, "a+")  # noqa: SIM115 - kept open: the lock lives as long as the file stays open
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # the parent checked it; replaced since by something else
        f.close()
        raise OSError(f"{path} is not a plain file")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        return holder
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    _LOCKS.append(f)
    return None
