"""The GPU-slot and sub-batch columns of the env's action (``EnvConfig.gpu_actions``, ``sub_batch_actions``):
the mask is the simulator's rule, actions and commands translate both ways, a job that fits only with a
sub-batch is offered one, and SJF-BSBF and SJF-FFS played through the env are their core runs exactly."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.config import ConfigError, EnvConfig
from clustergym.core.commands import Command, command_error
from clustergym.core.config import SimConfig
from clustergym.core.engine import Simulator
from clustergym.eval import experiments_sjfbsbf as sjfbsbf
from clustergym.eval.rollout import predictor, rollout
from clustergym.gym_env import ClusterEnv
from clustergym.observation import FIXED_TASK_COLUMNS
from clustergym.window import InvalidAction

from helpers import cluster, job, toy_model

STILL = dict(usage_change_mean_s=0.0, decide_on="queue")  # the sjf-bsbf experiments' simulator settings
OPTIONS = dict(gpu_actions=True, sub_batch_actions=9)  # GPU slots; 1 ... 256 sub-batches


def _sjf_env(specs, window_size: int = 256, **cfg) -> ClusterEnv:
    """The sjf-bsbf experiments' cluster and simulator on ``specs``; a window that holds the whole queue."""
    return ClusterEnv(cluster_spec=sjfbsbf.CLUSTER, job_specs=specs, sim=STILL, window_size=window_size,
                      invalid_action="raise", max_steps=None, **cfg)


def _records_through_env(policy: str, specs, **cfg) -> tuple[pd.DataFrame, int]:
    env = _sjf_env(specs, **cfg)
    rollout(env, predictor(policy, env), 0)
    return pd.DataFrame(env.sim.job_records()), env.episode["sim_seed"]


# 40 jobs of seed 0: SJF-BSBF gives one job 2 sub-batches (sub-batches are rare at the experiments' load)
@pytest.mark.parametrize("policy,n_jobs", [("sjf-bsbf", 40), ("sjf-ffs", 24)])
def test_sharing_policies_through_the_env_are_their_core_runs(policy, n_jobs):
    specs = sjfbsbf.workload(n_jobs, 0)
    through_env, sim_seed = _records_through_env(policy, specs, **OPTIONS)
    sim = Simulator(sjfbsbf.CLUSTER, specs, SimConfig(**STILL), seed=sim_seed)
    run(sim, baselines.make(policy))
    core = pd.DataFrame(sim.job_records())
    pd.testing.assert_frame_equal(through_env, core)
    if policy == "sjf-bsbf":  # the run takes a sub-batch, so the sub-batch columns are exercised
        assert any(j.accum_steps > 1 for j in sim.jobs)
    # without the columns the env cannot express the policy's GPU (and sub-batch) choice: another schedule
    without, _ = _records_through_env(policy, specs)
    assert not np.allclose(without["jct"], core["jct"])


def test_mask_is_the_simulators_rule_and_actions_round_trip():
    env = _sjf_env(sjfbsbf.workload(30, 1), gpu_actions=True, sub_batch_actions=4)
    obs, _ = env.reset(seed=1)
    w, rng = env.window, np.random.default_rng(0)
    assert w.C == w.K * w.G + 1 + 3 + 4 and w.G == 4
    checked = {"slot": 0, "sub": 0}
    for _ in range(150):
        if env._round_actions == 0:  # a fresh round: no per-round rule hides a command the simulator allows
            _check_place_rows(env, checked)
        valid = np.flatnonzero(w.mask)
        for a in valid[:-1]:  # a job-level command (stop option, sub-batch) maps to its job's first row
            cmd = w.command(int(a))
            assert w.command(w.action(cmd)) == cmd and (cmd.kind not in ("place", "migrate") or w.action(cmd) == a)
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(valid)))
        if terminated or truncated:
            break
    assert checked["slot"] > 100 and checked["sub"] > 10


def _check_place_rows(env: ClusterEnv, checked: dict) -> None:
    w, sim = env.window, env.sim
    sub_cols = range(w.D + 1 + w.n_stop, w.C)
    for r, kind in enumerate(w.kinds):
        if kind != "place":
            continue
        for col in [*range(w.D), *sub_cols]:
            a = w.encode(r, col)
            try:
                cmd = w.command(a)
            except InvalidAction:  # a padding column or GPU slot, a parameter server's slot > 0
                assert not w.mask[a]
                continue
            assert w.mask[a] == (command_error(sim, cmd) is None), (a, cmd, command_error(sim, cmd))
            checked["sub" if cmd.kind == "sub-batch" else "slot"] += bool(w.mask[a])


def _one_gpu_env(**cfg) -> ClusterEnv:
    """One 16 GB GPU; job 0 (9.7 GB at its full batch) holds it; job 1 needs as much: it can share only with
    4 sub-batches (tests/test_sjfbsbf.py has the arithmetic)."""
    m = {n: replace(toy_model(n, gpu_memory_gb=9.7), batch_fixed_share=0.25) for n in ("a", "b")}
    specs = [job(0, model="a", iters=1000), job(1, submit=1.0, model="b", iters=10)]
    # no running-job rows (no preemption, no stop options), so placing job 0 ends the round
    return ClusterEnv(cluster_spec=cluster(1, gpus=1), job_specs=specs, models=m.__getitem__, model_names=["a", "b"],
                      sim=dict(STILL, interference="constant", interference_xi=1.2), invalid_action="raise",
                      preemption=False, stop_option_actions=False, **cfg)


def test_a_job_that_fits_only_with_a_sub_batch_is_offered_one():
    env = _one_gpu_env(gpu_actions=True, sub_batch_actions=3)
    env.reset(seed=0)
    w = env.window
    env.step(w.action(Command("place", env.sim.job(0).tasks[0].tid, 0)))  # job 0 on the GPU; the round ends
    assert [t.job.jid for t in w.tasks if t is not None] == [1] and env.sim.now >= 1.0
    row = w.mask[:-1].reshape(w.W, w.C)[0]
    assert not row[:w.D + 1].any()  # no GPU holds it at its full batch
    assert row[w.D + 1 + w.n_stop:].tolist() == [False, True, True]  # 2 or 4 sub-batches (1 is its own)
    gmem, left = FIXED_TASK_COLUMNS.index("gpu_mem_demand"), FIXED_TASK_COLUMNS.index("remaining_time")
    before = env._make_obs()["tasks"][0]
    obs, *_ = env.step(w.action(Command("sub-batch", jid=1, steps=4)))
    assert env.sim.job(1).accum_steps == 4
    # the observed GPU memory and remaining run time follow the sub-batch (4 x 0.25 + 0.75 = 1.75x the compute)
    assert 0 < obs["tasks"][0, gmem] < before[gmem] and obs["tasks"][0, left] > before[left]
    assert w.mask[w.action(Command("place", w.tasks[0].tid, 0, gpu=0))]
    assert not w.mask[w.encode(0, w.D + 1 + w.n_stop + 1)]  # changed once in this round
    assert "already changed in this round" in w.why_invalid(w.encode(0, w.D + 1 + w.n_stop + 1), env.sim)


def test_without_the_columns_the_job_waits_for_the_gpu():
    env = _one_gpu_env()
    env.reset(seed=0)
    env.step(env.window.action(Command("place", env.sim.job(0).tasks[0].tid, 0)))
    # job 1 is first offered once job 0 (1,000 iterations of 1 s) has ended and freed the GPU
    assert env.window.tasks[0].job.jid == 1 and env.sim.job(0).state.name == "FINISHED" and env.sim.now > 1000
    assert env.window.action(Command("sub-batch", jid=1, steps=4)) is None


def test_gpu_slot_reasons_name_the_slot():
    env = ClusterEnv(cluster_spec=cluster(2, gpus=2), job_specs=[job(0, sync="ps", R=2)],
                     models={"toy": toy_model()}.__getitem__, model_names=["toy"], sim=STILL, gpu_actions=True,
                     max_gpus_per_server=3, invalid_action="raise")
    env.reset(seed=0)
    w = env.window
    assert w.G == 3
    r_ps = next(r for r, t in enumerate(w.tasks) if t is not None and t.is_ps)
    assert "has 2 GPUs" in w.why_invalid(w.encode(r_ps, 2), env.sim)  # slot 2 of a 2-GPU server
    assert "parameter server takes no GPU" in w.why_invalid(w.encode(r_ps, 1), env.sim)
    assert w.mask[w.encode(r_ps, 0)] and w.command(w.encode(r_ps, 0)).gpu is None
    with pytest.raises(InvalidAction, match="parameter server"):
        env.step(w.encode(r_ps, 1))


def test_the_pairwise_policy_scores_the_gpu_slot_and_sub_batch_columns():
    from sb3_contrib import MaskablePPO

    from clustergym.agents.policies import PairwiseExtractor, action_layout, overload_threshold, policy_spec

    env = _sjf_env(sjfbsbf.workload(6, 0), window_size=8, **OPTIONS)
    assert action_layout(env) == {"gpu_slots": 4, "sub_batches": 9}
    with pytest.raises(ValueError, match="action_layout"):  # built for the default layout
        PairwiseExtractor(env.observation_space)
    cls, kw = policy_spec("pairwise", "maskable", d=16, overload_threshold=overload_threshold(env),
                          **action_layout(env))
    model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=32, batch_size=16, device="cpu", seed=0)
    model.learn(32)
    obs, _ = env.reset(seed=0)
    mask = env.action_masks()
    logits = model.policy.features_extractor.encoder(model.policy.obs_to_tensor(obs)[0])[0][0]
    assert bool((logits[mask] > -1e7).all()) and bool((logits[~mask] <= -1e7).all())
    a, _ = model.predict(obs, action_masks=mask)
    assert mask[int(a)]
    assert model.policy._get_constructor_parameters()["gpu_slots"] == 4  # saved with the model


@pytest.mark.parametrize("field,value", [("sub_batch_actions", -1), ("sub_batch_actions", 13),
                                         ("sub_batch_actions", 1.5), ("gpu_actions", 1)])
def test_bad_column_settings_name_the_field(field, value):
    with pytest.raises(ConfigError) as e:
        EnvConfig(**{field: value})
    assert e.value.field == field


def test_sub_batch_columns_need_decisions_whenever_a_job_waits():
    with pytest.raises(ConfigError, match="decide_on") as e:
        EnvConfig(sub_batch_actions=2)  # the default decision rule stops only where a task fits
    assert e.value.field == "sub_batch_actions"
    assert EnvConfig(sub_batch_actions=2, sim={"decide_on": "queue"}).sub_batch_actions == 2


def test_too_many_gpu_slot_actions_is_a_config_error():
    with pytest.raises(ConfigError, match="GPU slots") as e:
        ClusterEnv(cluster_spec=sjfbsbf.CLUSTER, job_specs=sjfbsbf.workload(4, 0), window_size=16384,
                   gpu_actions=True)
    assert e.value.field == "gpu_actions"


def test_the_mlp_policy_trains_on_the_gpu_and_sub_batch_columns():
    from sb3_contrib import MaskablePPO

    from clustergym.agents.policies import policy_spec

    env = _sjf_env(sjfbsbf.workload(6, 0), window_size=8, **OPTIONS)
    cls, kw = policy_spec("mlp", "maskable")
    model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=32, batch_size=16, device="cpu", seed=0)
    model.learn(32)
    obs, _ = env.reset(seed=0)
    a, _ = model.predict(obs, action_masks=env.action_masks())
    assert env.action_masks()[int(a)]
    # the row-kind decoding sums a placement over all K x G destination columns of the row
    from clustergym.agents.decode import with_decode

    for given in (env, None):  # the env given, or the model's own (a vector env)
        decoded = with_decode(model, "row-kind", given)
        assert decoded.destinations == env.window.D == env.window.K * 4
        a, _ = decoded.predict(obs, action_masks=env.action_masks())
        assert env.action_masks()[int(a)]


def test_every_allowed_slot_is_a_command_the_simulator_takes_on_mixed_servers():
    """pai-2020 mixes 2- and 8-GPU servers, so G = 8 and a 2-GPU server's slots 2-7 are padding: random play
    with invalid_action="raise"; at each fresh round every allowed action is a command the simulator accepts."""
    import gymnasium as gym

    env = gym.make("clustergym/GPUCluster-v1", cluster="pai-2020", window_jobs=40, gpu_actions=True,
                   sub_batch_actions=4, sim={"decide_on": "queue"}, invalid_action="raise", max_steps=300).unwrapped
    env.reset(seed=0)
    w, rng = env.window, np.random.default_rng(1)
    assert w.G == 8 and set(w._n_gpus.tolist()) == {2, 8}
    checked, done = 0, False
    while not done:
        valid = np.flatnonzero(w.mask)
        if env._round_actions == 0:
            for a in valid[:-1]:
                cmd = w.command(int(a))
                assert command_error(env.sim, cmd) is None, (a, cmd)
                assert cmd.gpu is None or 0 <= cmd.gpu - w._first_gpu[cmd.server] < w._n_gpus[cmd.server]
                checked += 1
        _, _, terminated, truncated, _ = env.step(int(rng.choice(valid)))
        done = terminated or truncated
    assert checked > 500


@pytest.mark.parametrize("policy", ["mlf-h", "tiresias"])
def test_a_heuristic_without_gpu_choices_plays_the_same_episode_with_the_columns(policy):
    from clustergym.eval.rollout import evaluate

    cfg = {"window_jobs": 30, "sim": {"decide_on": "queue"}}
    off, on = (evaluate(policy, "clustergym/GPUCluster-v1", {**cfg, **extra}, [20001])[0]
               for extra in ({}, OPTIONS))
    assert (on["mean_jct_censored"], on["agent_steps"]) == (off["mean_jct_censored"], off["agent_steps"])


def test_a_pairwise_agent_with_gpu_slots_loads_onto_other_gpu_counts_and_not_without_them(tmp_path):
    """Saved on 4-GPU servers, loaded onto pai-2020 (G = 8): its slot head serves any G; onto an env without
    the columns: refused by name (it has heads that env has no columns for)."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    from clustergym.agents.io import AgentLoadError, load_agent
    from clustergym.agents.policies import action_layout, overload_threshold, policy_spec

    env = _sjf_env(sjfbsbf.workload(6, 0), window_size=8, **OPTIONS)
    cls, kw = policy_spec("pairwise", "maskable", d=16, overload_threshold=overload_threshold(env),
                          **action_layout(env))
    MaskablePPO(cls, env, policy_kwargs=kw, n_steps=16, batch_size=16, device="cpu", seed=0).save(tmp_path / "a")
    other = gym.make("clustergym/GPUCluster-v1", cluster="pai-2020", window_jobs=20, sim=STILL, **OPTIONS)
    with pytest.warns(UserWarning):
        model = load_agent(tmp_path / "a.zip", env=other)
    obs, _ = other.reset(seed=0)
    mask = other.unwrapped.action_masks()
    assert mask[int(model.predict(obs, action_masks=mask)[0])] and model.policy._layout["gpu_slots"] == 8
    with pytest.warns(UserWarning), pytest.raises(AgentLoadError, match="gpu_actions columns"):
        load_agent(tmp_path / "a.zip", env=gym.make("clustergym/GPUCluster-v1", window_jobs=20))
