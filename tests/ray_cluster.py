"""A local multi-node Ray cluster for the rllib tests: ``ray start --head`` and ``ray start --address`` on this
machine, each node a ``ray start --block`` process in a process group of its own, so the cluster is torn down by
those group ids alone (``ray stop`` would end every Ray process of the user, not only these).

    python tests/ray_cluster.py --nodes 2 --num-cpus 1 -- python -m pytest -q -m rllib

starts the cluster, runs the command with ``CLUSTERGYM_RAY_ADDRESS`` set to the head's address, and tears the
cluster down afterwards, also when the command fails or is interrupted (``make test-rllib`` runs it so). Tests
use :func:`cluster_address`: that variable's cluster, else one :func:`local_cluster` of their own.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

ADDRESS_VARIABLE = "CLUSTERGYM_RAY_ADDRESS"
OBJECT_STORE_BYTES = 150 * 1024 * 1024  # small: the machine is shared


def token_auth_as_ray_start() -> None:
    from clustergym.eval.ray_backend import token_auth_as_ray_start as decide

    decide()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    ray = str(Path(sys.executable).parent / "ray")
    with open(log, "wb") as f:
        return subprocess.Popen([ray, "start", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
                                 f"--object-store-memory={OBJECT_STORE_BYTES}", *args],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(procs: list[subprocess.Popen], timeout_s: float = 30.0) -> None:
    """SIGTERM each node's process group (workers first), then SIGKILL what is left after ``timeout_s``."""
    for p in reversed(procs):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in reversed(procs):
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):  # children of the group that outlived their parent
            os.killpg(p.pid, signal.SIGKILL)


def _wait_for_nodes(address: str, n: int, procs: list[subprocess.Popen], logs: list[Path],
                    timeout_s: float = 120.0) -> None:
    import ray

    from clustergym.eval.ray_backend import connect, nodes_alive

    deadline = time.monotonic() + timeout_s
    while True:
        dead = [log for p, log in zip(procs, logs) if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a Ray node exited while starting; its log: {dead[0]}:\n{dead[0].read_text()[-3000:]}")
        try:
            connect(address)
            try:
                alive = nodes_alive()
            finally:
                ray.shutdown()
            if alive >= n:
                return
        except ConnectionError:  # the head is not listening yet (RayAddressError is one)
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the local Ray cluster at {address} did not reach {n} nodes in {timeout_s:.0f} s")
        time.sleep(1.0)


@contextlib.contextmanager
def local_cluster(nodes: int = 2, num_cpus: int = 1) -> Iterator[str]:
    """A head and ``nodes - 1`` worker nodes on this machine, ``num_cpus`` CPUs each; yields the head's address
    and tears every node down on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="cgray"))  # short: Ray's socket paths must stay under 108 bytes
    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = [tmp / f"node{i}.log" for i in range(nodes)]
    # `ray start --head` turns token authentication on when a token exists, `ray start --address` does not:
    # decide once here (RAY_AUTH_MODE), so every node and this process's drivers agree
    token_auth_as_ray_start()
    try:
        procs.append(_start(["--head", f"--port={port}", f"--num-cpus={num_cpus}", "--include-dashboard=false",
                             f"--temp-dir={tmp / 'ray'}"], logs[0]))
        for i in range(1, nodes):
            procs.append(_start([f"--address={address}", f"--num-cpus={num_cpus}"], logs[i]))
        _wait_for_nodes(address, nodes, procs, logs)
        yield address
    finally:
        _stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def cluster_address(nodes: int = 2, num_cpus: int = 1) -> Iterator[str]:
    """The cluster of ``CLUSTERGYM_RAY_ADDRESS`` if set (``make test-rllib``), else a :func:`local_cluster`."""
    given = os.environ.get(ADDRESS_VARIABLE)
    if given:
        yield given
        return
    with local_cluster(nodes, num_cpus) as address:
        yield address


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--num-cpus", type=int, default=1, help="CPUs per node")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run against the cluster")
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("give the command to run after --")
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with local_cluster(a.nodes, a.num_cpus) as address:
            print(f"local Ray cluster: {a.nodes} nodes x {a.num_cpus} CPU at {address}", flush=True)
            return subprocess.call(command, env={**os.environ, ADDRESS_VARIABLE: address})
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
