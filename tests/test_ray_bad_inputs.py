"""Bad input of the Ray paths, without Ray installed: a Ray address that cannot be reached gets a named error before
any work (eval/ray_backend.py probes it before importing Ray), and train/rllib_ppo.py refuses by name the settings
it does not honour."""
from __future__ import annotations

import re
import socket

import pytest

from clustergym.config import ConfigError
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
    address = f"127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    assert compare(["--policies", "fifo", "--seeds", "0", "--backend", "ray", "--address", address,
                    "--out", str(out), "--no-progress"]) == 2
    assert f"cannot reach the Ray cluster at '{address}'" in capsys.readouterr().err
    assert not (out / "runs").exists()


@pytest.mark.parametrize("override, named", [
    ({"n_envs": 2}, "n_envs 2 (RLlib samples with --num-env-runners)"),
    ({"algo": "ppo"}, "algo 'ppo'"),
    ({"share_encoder": False}, "share_encoder false"),
    ({"reward_baseline": "mlf-h"}, "reward_baseline 'mlf-h'"),
    ({"device": "cuda"}, "device 'cuda'"),
    ({"policy": "mlp"}, "bc_steps > 0 with policy mlp"),
    ({"gamma_hour": 0.9}, "gamma_hour 0.9"),
    ({"value_warmup_steps": 64}, "value_warmup_steps 64"),
    ({"train_start_steps": 100}, "train_start_steps 100"),
])
def test_the_rllib_path_refuses_settings_it_does_not_honour(override, named):
    from clustergym.train.config import load_config
    from clustergym.train.rllib_ppo import RLLIB_DEFAULTS, check_rllib

    check_rllib(load_config(defaults=RLLIB_DEFAULTS))  # this path's defaults are supported
    with pytest.raises(ConfigError, match="train/rllib_ppo.py does not support: .*" + re.escape(named)):
        check_rllib(load_config(overrides=override, defaults=RLLIB_DEFAULTS))
