"""Sweeps and training on a Ray cluster: connecting (with a named error for an address that cannot be reached)
and the ``--backend ray`` executor of :func:`clustergym.eval.compare.sweep`.

Needs the ``rllib`` extra (Ray); Ray is imported only in the functions that use it.

**Connecting** (:func:`connect`): ``address=None`` starts a Ray instance inside this process with
``num_cpus`` CPUs; ``"auto"`` joins the cluster started on this machine by ``ray start``; ``host:port`` (or
``ray://host:port``) joins that cluster's head. Before Ray is asked, a ``host:port`` address is probed with a
TCP connection (``probe_timeout_s``), and a Ray error while joining is turned into :class:`RayAddressError`
naming the address, so a wrong address stops the command before any run or training step starts.

**Sweeps** (:func:`run_on_ray`): one Ray task (``num_cpus=1``) per run not yet done. A task plays the run
exactly as a local worker does (:func:`clustergym.eval.compare.run_with_warnings`) into a scratch folder on
whichever node it lands, and returns the bytes of the files it wrote; the driver writes them under ``<out>``
as each task completes, ``runs/<key>.json`` last (the file whose presence and identity mark a run done). So the
outputs, the resume rule (a re-run skips the runs whose file holds the same identity) and a Ctrl-C (the
finished runs stay, the rest are cancelled and re-run next time) are those of the local backend, and no
node needs the driver's file system. What a task does need on every node: the same clustergym and Ray
(install the package there, or give Ray a ``runtime_env``), and any model file a policy spec names, at the
same path.
"""
from __future__ import annotations

import contextlib
import socket
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

PROBE_TIMEOUT_S = 5.0


class RayAddressError(ConnectionError):
    """The Ray cluster address cannot be reached or joined; the message names the address and what to do."""


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``[ray://]host:port``; None for ``auto`` and ``local``; RayAddressError if malformed."""
    if address in ("auto", "local"):
        return None
    bare = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayAddressError(f"Ray address {address!r} is not 'auto' or host:port (e.g. 10.0.0.5:6379, the "
                              f"address `ray start --head` prints)")
    return host, int(port)


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`RayAddressError` if nothing accepts a TCP connection at ``address``'s host and port."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        with socket.create_connection(hp, timeout=timeout_s):
            pass
    except OSError as e:
        raise RayAddressError(f"cannot reach the Ray cluster at {address!r} ({type(e).__name__}: {e}): start "
                              f"its head with `ray start --head --port {hp[1]}` on {hp[0]}, or give the address "
                              f"it printed") from None


def connect(address: str | None, num_cpus: int | None = None, probe_timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """``ray.init`` for ``address`` (None = a Ray instance in this process with ``num_cpus`` CPUs), with
    :class:`RayAddressError` for an address that cannot be reached or joined. Does nothing if Ray is already
    initialised in this process; returns whether it connected."""
    if address is not None:
        probe(address, probe_timeout_s)  # first: a wrong address is named even where Ray is not installed
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray backend needs Ray: pip install 'clustergym[rllib]' (in a venv of its own)") from None
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        return True
    token_auth_as_ray_start()
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RayAddressError(f"cannot join the Ray cluster at {address!r}: {e}") from None
    return True


@contextlib.contextmanager
def connected(address: str | None, num_cpus: int | None = None) -> Iterator[None]:
    """:func:`connect` for the ``with`` block; on leaving it, disconnect if this call connected."""
    mine = connect(address, num_cpus)
    try:
        yield
    finally:
        if mine:
            import ray

            ray.shutdown()


def token_auth_as_ray_start() -> None:
    """Join with token authentication when ``ray start`` would start a node with it: ``RAY_AUTH_MODE`` unset and
    a token present (``~/.ray/auth_token``, ``RAY_AUTH_TOKEN``). ``ray start`` applies that rule but
    ``ray.init(address=...)`` does not, so without this a driver on the head's machine is refused by its own
    cluster ("InvalidAuthToken"). Uses Ray's own rule where this Ray version has it."""
    try:
        from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def nodes_alive() -> int:
    """The number of live nodes of the connected Ray cluster."""
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive"))


def _play_remote(play: Callable, run: dict) -> tuple[tuple[dict, list], dict[str, bytes]]:
    """Body of the Ray task: ``play(run, folder)`` into a scratch folder, then the bytes of every file it wrote
    (``runs/<key>.json``, ``runs/<key>.jobs.csv``, ``timelines/<key>.png`` with ``--timeline``) by relative path."""
    with tempfile.TemporaryDirectory(prefix="clustergym-run-") as tmp:
        result = play(run, tmp)
        files = {p.relative_to(tmp).as_posix(): p.read_bytes() for p in Path(tmp).rglob("*") if p.is_file()}
    return result, files


def write_run_files(out_dir: Path, key: str, files: dict[str, bytes]) -> None:
    """Write a remote run's files under ``out_dir`` (each atomically), ``runs/<key>.json`` last: it marks the
    run done."""
    from clustergym.eval.files import atomic_write

    marker = f"runs/{key}.json"
    for name in sorted(files, key=lambda n: n == marker):
        atomic_write(out_dir / name, lambda f, data=files[name]: f.write(data), binary=True)


def run_on_ray(todo: list[dict], out_dir: Path, play: Callable, done: Callable, res: dict) -> None:
    """Play ``todo`` as Ray tasks on the connected cluster (:func:`connect` first), each by ``play(run, folder)``
    (:func:`clustergym.eval.compare.run_with_warnings`, sent by reference); ``done(key, result=...)`` or
    ``done(key, error=...)`` books each as it completes, after its files are in ``out_dir``."""
    import ray

    task = ray.remote(num_cpus=1, max_retries=0)(_play_remote)
    pending = {task.remote(play, r): r["key"] for r in todo}
    try:
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            key = pending.pop(ref)
            try:
                result, files = ray.get(ref)
                write_run_files(out_dir, key, files)
            except Exception as e:  # noqa: BLE001  (report and go on, as the local backend does)
                done(key, error=_cause(e))
            else:
                done(key, result=result)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: cancel the rest; finished runs stay, the rest re-runs
        for ref in pending:
            ray.cancel(ref, force=True)
        print(f"interrupted: {len(res['executed'])} runs finished in this call; re-run the same command to resume",
              file=sys.stderr)
        raise


def _cause(e: BaseException) -> BaseException:
    """The run's own exception inside a Ray task error (its type and message), else ``e``."""
    cause = getattr(e, "cause", None)
    return cause if isinstance(cause, BaseException) else e
