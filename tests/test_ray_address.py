"""A Ray address that cannot be reached gets a named error before any work (eval/ray_backend.py); no Ray needed:
the address is probed before Ray is imported."""
from __future__ import annotations

import socket

import pytest

from clustergym.eval.compare import main as compare
from clustergym.eval.ray_backend import RayAddressError, probe


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is


@pytest.mark.parametrize("address", ["10.0.0.5", "host:port", ":6379", "ray://nohost"])
def test_a_malformed_address_is_named(address):
    with pytest.raises(RayAddressError, match=f"Ray address '{address}' is not 'auto' or host:port"):
        probe(address)


def test_an_open_port_passes_the_probe():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        probe(f"127.0.0.1:{s.getsockname()[1]}")
        probe(f"ray://127.0.0.1:{s.getsockname()[1]}")


def test_address_needs_the_ray_backend(tmp_path, capsys):
    assert compare(["--policies", "fifo", "--seeds", "0", "--address", "auto", "--out", str(tmp_path / "o"),
                    "--no-progress"]) == 2
    assert "--address auto is a Ray cluster's: add --backend ray" in capsys.readouterr().err


def test_an_unreachable_address_stops_a_ray_sweep_before_any_run(tmp_path, capsys):
    from clustergym.eval.compare import main as compare

    address = f"127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    assert compare(["--policies", "fifo", "--seeds", "0", "--backend", "ray", "--address", address,
                    "--out", str(out), "--no-progress"]) == 2
    assert f"cannot reach the Ray cluster at '{address}'" in capsys.readouterr().err
    assert not (out / "runs").exists()
