"""Where the CNN's data comes from: --data auto|real|download|synthetic resolved to a Dataset, Fashion-MNIST
read from TFDS in a child process (TensorFlow stays out of the caller), or fetched by TFDS into a staging
folder and moved into place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from parity.workloads.trained.data import HOW_TO, IDX_FILES, DataAbsent, DataError, Dataset, load_idx, stack, synthetic


def load_tfds(data_dir: str | None, download: bool = False) -> Dataset:
    """TFDS's fashion_mnist from `data_dir`; with `download`, fetched first where absent (TFDS checks the
    files against its registered checksums). Raises DataError when absent or when the fetch fails."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tensorflow_datasets as tfds

    tf.config.set_visible_devices([], "GPU")  # the data loader must not take an accelerator
    try:
        splits = tfds.load(
            "fashion_mnist", split=["train", "test"], data_dir=data_dir, download=download, as_supervised=True
        )
        (xtr, ytr), (xte, yte) = (stack(tfds.as_numpy(s.batch(10000))) for s in splits)
    except Exception as e:  # tfds raises assorted types for absent or broken data
        where = data_dir or "the default data dir"
        if download:
            raise DataError(
                f"TFDS fashion_mnist could not be downloaded to {where} ({type(e).__name__}: {_first_line(e)})"
            ) from None
        # the caller has seen a fashion_mnist folder there: what TFDS cannot read in it is corrupt, not absent
        raise DataError(
            f"TFDS fashion_mnist in {where} is corrupt or unreadable ({type(e).__name__}: {_first_line(e)}); "
            "remove the folder and fetch it again (--data download)"
        ) from None
    return Dataset(xtr.astype(np.uint8), ytr.astype(np.int32), xte.astype(np.uint8), yte.astype(np.int32), "tfds")


def _first_line(e: BaseException, limit: int = 300) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[:limit] + "..."


REACH_TIMEOUT_S = 15.0  # for the name lookup and the connection each: a machine with no network fails in seconds


def reachable(url: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Raise DataError, in one line, when `url`'s host (or the proxy the environment names for it) cannot be
    reached: a name lookup and a TCP connection, each bounded, before TFDS's own retries (minutes) begin."""
    import socket
    import threading
    import urllib.parse
    import urllib.request

    u = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(u.scheme)
    target = urllib.parse.urlsplit(proxy if "//" in (proxy or "//") else f"http://{proxy}") if proxy else u
    host, port = target.hostname, target.port or (443 if target.scheme == "https" else 80)
    failure: list[str] = []

    def connect():  # getaddrinfo has no timeout of its own: bounded by the join below
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
        except OSError as e:
            failure.append(e.strerror or str(e) or type(e).__name__)

    t = threading.Thread(target=connect, daemon=True)
    t.start()
    t.join(2 * timeout_s)
    why = failure[0] if failure else (f"no answer within {2 * timeout_s:g} s" if t.is_alive() else None)
    if why:
        via = f" (the proxy for {u.hostname})" if proxy else ""
        raise DataError(
            f"cannot download Fashion-MNIST: {host}:{port}{via} is unreachable ({why}): no network "
            f"to it from here. Without one, put the four IDX files ({', '.join(IDX_FILES.values())}) "
            f"in a directory and pass --data-dir DIR"
        )


def load(
    data: str,
    data_dir: str | None,
    train_size: int = 60000,
    test_size: int = 10000,
    timeout_s: float = 1800.0,
    progress: bool = True,
) -> tuple[Dataset, str]:
    """Resolve --data auto|real|download|synthetic; returns (dataset, a note for the table).

    auto: IDX files in data_dir, else TFDS in data_dir (or its default), else synthetic (said so).
    real: the same but absent data is a DataError that says how to provide it.
    download: what is on disk, else TFDS fetches it (within timeout_s; progress on stderr).
    TFDS runs in a child process, so the caller never loads TensorFlow.
    """
    if data == "synthetic":
        return synthetic(train_size, test_size), "synthetic data (asked for)"
    # a symbolic link counts as present, even a broken one: read_idx says what is wrong with it
    present = [
        f
        for f in IDX_FILES.values()
        if data_dir and ((Path(data_dir) / f).exists() or (Path(data_dir) / f).is_symlink())
    ]
    if present and len(present) < len(IDX_FILES):  # a partial set is a mistake to report, never a reason to fall back
        missing = [f for f in IDX_FILES.values() if f not in present]
        raise DataError(
            f"{data_dir}: has {len(present)} of the 4 Fashion-MNIST IDX files; missing {', '.join(missing)}"
        )
    if present:
        return load_idx(Path(data_dir)), f"Fashion-MNIST from IDX files in {data_dir}"
    root = tfds_root(data_dir)
    if data == "download" and not (root / "fashion_mnist").is_dir():
        return download(data_dir, timeout_s, progress), f"Fashion-MNIST downloaded through TFDS to {root}"
    try:
        return _tfds_in_child(data_dir), f"Fashion-MNIST from TFDS ({data_dir or 'default data dir'})"
    except DataAbsent as e:  # absent only: data that is there but corrupt is an error whatever --data says
        if data != "auto":
            raise DataError(f"{e}; to provide it: {HOW_TO}") from None
    return synthetic(train_size, test_size), "SYNTHETIC data: Fashion-MNIST not found on disk (--data download gets it)"


def tfds_root(data_dir: str | None) -> Path:
    """The TFDS data dir that `data_dir` (or, when None, TFDS's own default) names."""
    return Path(data_dir or os.environ.get("TFDS_DATA_DIR") or "~/tensorflow_datasets").expanduser()


def _tfds_in_child(data_dir: str | None) -> Dataset:
    root = tfds_root(data_dir)
    if not (root / "fashion_mnist").is_dir():  # no need to start TensorFlow (seconds) to learn that
        raise DataAbsent(f"Fashion-MNIST not found: no fashion_mnist folder in the TFDS data dir {root}")
    return _child(["--tfds", data_dir or ""], timeout_s=600.0, progress=False)


def download(data_dir: str | None, timeout_s: float, progress: bool) -> Dataset:
    """Fashion-MNIST fetched by TFDS in a child process into a staging folder inside the TFDS data dir, then
    moved into place: a failed, timed-out or interrupted fetch leaves nothing half-written behind."""
    import shutil
    import tempfile

    root = tfds_root(data_dir)
    made = [p for p in (root, *root.parents) if not p.exists()]  # removed again if the fetch fails
    try:
        root.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".parity-download-", dir=root))
    except OSError as e:
        raise DataError(f"cannot download Fashion-MNIST into {root}: {e.strerror or e}") from None
    done = False
    try:
        if progress:
            print(
                f"downloading Fashion-MNIST through TFDS into {root} (about 30 MB, checksums checked by TFDS; "
                f"--timeout {timeout_s:g} s bounds it)",
                file=sys.stderr,
                flush=True,
            )
        ds = _child(["--download", str(stage)], timeout_s, progress)
        if not (root / "fashion_mnist").exists():  # another run may have put it there meanwhile: keep theirs
            os.replace(stage / "fashion_mnist", root / "fashion_mnist")
        done = True
        return ds
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        for p in made if not done else ():  # folders this call made, innermost first, if still empty
            try:
                p.rmdir()
            except OSError:
                break


def _child(args: list[str], timeout_s: float, progress: bool) -> Dataset:
    """`python -m parity.workloads.trained.sources ARGS OUT` (TensorFlow stays out of the caller); its stderr shown when
    `progress`.
    Raises DataError with the child's own one-line reason, or when it takes longer than `timeout_s`."""
    import tempfile
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fm.npz"
        error = out.with_suffix(".error")  # the child's one-line reason, apart from what it shows
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
        p = subprocess.Popen(
            [sys.executable, "-m", "parity.workloads.trained.sources", *args, str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        said: list[bytes] = []

        def pump():  # TFDS's progress bars redraw with carriage returns: pass chunks on as they come
            while chunk := os.read(p.stderr.fileno(), 4096):
                said.append(chunk)
                if progress:
                    sys.stderr.buffer.write(chunk)
                    sys.stderr.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise DataError(f"TFDS did not finish within {timeout_s:g} s (--timeout): stopped, nothing kept") from None
        finally:  # a timeout or Ctrl-C: the child goes too
            if p.poll() is None:
                p.kill()
                p.wait()
            reader.join(5)
        if p.returncode != 0:
            if error.exists():
                raise DataError(error.read_text())
            text = b"".join(said).decode(errors="replace").strip()
            raise DataError(f"TFDS loading failed (exit {p.returncode}): {text[-300:] or 'no message'}")
        return Dataset.load(out)


def _child_main(argv: list[str]) -> int:
    """The child of _child: `--tfds DATA_DIR OUT` reads what is on disk; `--download STAGE OUT` fetches first."""
    if len(argv) != 3 or argv[0] not in ("--tfds", "--download"):
        print(
            "usage: python -m parity.workloads.trained.sources --tfds DATA_DIR OUT | --download STAGE_DIR OUT",
            file=sys.stderr,
        )
        return 2
    try:
        if argv[0] == "--download":
            import tensorflow_datasets as tfds

            reachable(getattr(tfds.builder_cls("fashion_mnist"), "URL", None) or FASHION_MNIST_URL)
        load_tfds(argv[1] or None, download=argv[0] == "--download").save(Path(argv[2]))
    except DataError as e:
        Path(argv[2]).with_suffix(".error").write_text(str(e))
        return 1
    return 0


# Where TFDS 4.9's fashion_mnist builder fetches from, should a later TFDS not say (its builder's URL);
# TFDS itself is what downloads, this is only what `reachable` probes first.
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
