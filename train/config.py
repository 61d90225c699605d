"""The configuration of a training run: every setting, its default, where it may come from and its checks.

A setting comes from, in rising priority: the defaults of :class:`TrainConfig`, a ``--config`` YAML file (any
field; unknown keys are refused by name) and the command-line flags of :func:`make_parser`. ``--resume``
takes the run's saved ``config.yaml`` instead (:func:`resume_config`). :func:`load_config` checks every
value and raises :class:`clustergym.config.ConfigError` naming the setting.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from clustergym.agents.decode import DECODINGS
from clustergym.agents.search import FORESIGHTS, PROPOSALS, TERMINALS
from clustergym.config import ConfigError
from clustergym.reward import objective_names, single_objective_weights


@dataclass
class TrainConfig:
    scenario: str = "clustergym/GPUCluster-v1"
    env: dict = field(default_factory=dict)  # EnvConfig overrides of training and evaluation envs (e.g. window_jobs)
    # one weight per objective (OBJECTIVE_NAMES); default: mean JCT only, what the agent is judged on (the
    # bandwidth term is about half the return under the env's weights: docs/training.md); None = the env's
    reward_weights: list[float] | None = field(default_factory=lambda: jct_only_weights())
    timesteps: int = 30_000  # PPO environment steps (after the warm start)
    n_envs: int = 64  # training envs; their observations go through the network in batches
    vec_env: str = "auto"  # dummy: every env in this process (batched forward); subproc: one process per env;
    # grouped: the envs in env_workers processes, each stepping its group (train/vec_env.py); pipelined: the envs
    # in one worker process, two halves a step apart, one scored while the other steps (train/pipelined.py);
    # auto: pipelined where it applies, else dummy (auto_vec_env), resolved when the config is made
    env_workers: int = 2  # worker processes of vec_env: grouped
    seed: int = 0
    device: str = "cpu"
    torch_threads: int = 1  # torch intra-op threads (1 is fastest for these small nets on 2 cores); 0 = torch's
    policy: str = "pairwise"  # mlp | pairwise
    algo: str = "maskable"  # maskable (MaskablePPO) | ppo (plain PPO, no masks from the env)
    d: int = 64  # pairwise embedding width
    share_encoder: bool = True  # False: the critic gets its own encoder (value gradients leave the actor's alone)
    net_arch: list[int] = field(default_factory=lambda: [256, 256])  # mlp policy hidden layers (pi and vf)
    train_max_steps: int | None = 5000  # agent steps per training episode (truncation keeps episodes bounded)
    # behaviour cloning (warm start)
    # the teacher: a heuristic that acts through the env's actions alone, or "best": the best of
    # expert_candidates on expert_episodes training windows by select_metric (train/teacher.py)
    expert: str = "best"
    expert_candidates: list[str] = field(default_factory=lambda: ["mlf-h", "mlfs-h+c-act", "mlf-h-req", "tiresias",
                                                                   "sjf"])
    expert_episodes: int = 5
    # a heuristic: train on the env's reward minus its reward on the same window (agents/relative_reward.py, an
    # input-dependent baseline; train/long.yaml uses it); None = the env's own reward
    reward_baseline: str | None = None
    # a saved agent (a .zip, or a run folder: its best_model.zip, else final_model.zip, else the last
    # checkpoint) whose policy weights start PPO instead of a warm start (e.g. a clone from an earlier run)
    init_from: str | None = None
    bc_steps: int = 800  # gradient steps on the expert's own rollouts; 0 = no warm start
    bc_episodes: int = 40  # expert episodes on training windows
    bc_holdout_episodes: int = 5  # further expert episodes to measure agreement on unseen states
    bc_dagger_rounds: int = 2  # DAgger: roll out the cloned policy, label its states with the expert, retrain
    bc_dagger_episodes: int = 10  # learner episodes per DAgger round (other training windows)
    bc_dagger_steps: int = 300  # gradient steps after each DAgger round (on all states so far)
    bc_dagger_max_steps: int | None = 2000  # agent-step cap per DAgger episode
    bc_batch_size: int = 128
    bc_lr: float = 1.0e-3
    bc_value_coef: float = 0.5
    # weight of the auxiliary end-the-round-or-act cross-entropy (agents.bc.end_decision_loss); 0 = joint CE only
    bc_end_coef: float = 0.0
    # a heuristic: the warm start's labels are decision-time search's (agents/search.py): the teacher, checked by
    # lookahead in copies of the env where this heuristic disagrees with it; None = the teacher's own actions
    search_proposer: str | None = None
    search_horizon_s: float = 3600.0  # simulated seconds of each lookahead
    search_proposal: str = "agent"  # agent: the proposer's action; random: a random other valid action there
    search_terminal: str = "none"  # remaining: a candidate's score adds the run time its jobs need after the horizon
    search_foresight: str = "oracle"  # none: the copies drop later arrivals and redraw the noise; arrivals: only redraw
    # PPO
    # 3e-4 with a KL target of 0.05 moved the clone's validation JCT most in the short runs of docs/training.md
    # ("Moving the policy"); 3e-5 / 0.02 kept the KL per update near 0.0005
    learning_rate: float = 3.0e-4
    n_steps: int = 16  # per env: a rollout is n_envs x n_steps = 1,024 steps
    batch_size: int = 256
    n_epochs: int = 1  # one pass over each rollout, not four: five seeds do not separate them (docs/training.md)
    gamma: float = 1.0  # per agent step (zero-time steps within a round are not discounted by it)
    gamma_hour: float | None = 0.9  # discount per simulated hour (agents/semi_mdp.py); None = per step only
    gae_lambda: float = 0.95
    # where GAE's lambda applies (agents/semi_mdp.py): every step, or only across steps that advance the clock
    lambda_per: str = "step"
    clip_range: float = 0.1
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.05
    # weight of the teacher term after PPO's updates (agents/teacher_term.py: cross-entropy of the warm start's
    # teacher's actions on the rollout's states, i.e. KL to a deterministic teacher), falling linearly to 0 at
    # `timesteps`; 0 = off
    teacher_coef: float = 0.0
    teacher_coef_end: float = 0.0  # the weight reached at `timesteps` (= teacher_coef: a constant weight)
    value_warmup_steps: int = 0  # first PPO env steps with only the critic learning (train/callbacks.py ValueWarmup)
    # each training episode starts after the teacher has played U{0..train_start_steps-1} steps of its window
    # (train/start_states.py); 0 = every episode starts at the window's first decision
    train_start_steps: int = 0
    # TensorBoard diagnostics of PPO (train/probes.py): `probe_states` of the teacher's states (0 = off) on the
    # first `probe_episodes` training windows the warm start holds out, measured every `probe_every` rollouts
    probe_states: int = 512
    probe_episodes: int = 2
    probe_every: int = 4
    # evaluation on held-out windows (split="test"): periodic evaluation (which picks the best checkpoint) and the
    # final table use different windows, so the table is not measured on the windows the checkpoint was chosen on
    eval_freq: int = 10_000  # env steps between periodic evaluations (0 = only before and after training)
    eval_episodes: int = 20  # held-out windows per periodic evaluation (docs/training.md, "Choosing the checkpoint")
    val_seed: int = 20_000  # the periodic evaluation's windows are seeds from here on (val_seeds)
    eval_max_steps: int | None = 10_000  # agent-step cap per periodic evaluation episode (MLF-H needs < 1,000)
    keep_checkpoints: bool = False  # also keep the model of every periodic evaluation, checkpoints/step-<n>.zip
    # a JSON file of the eval_baselines' validation means, shared by runs on the same windows and code
    # (train/baseline_cache.py; train/seeds.py passes one per --out); None = each run computes its own
    baseline_cache: str | None = None
    decode: str = "joint"  # how evaluations read the agent's deterministic action (clustergym.agents.decode)
    select_metric: str = "mean_jct_censored"  # best checkpoint: fewest unfinished jobs, then the best mean of this
    eval_baselines: list[str] = field(default_factory=lambda: ["mlf-h", "mlfs-h+c", "mlf-h-req", "fifo"])
    eval_seed: int = 10_000  # final-table windows use reset(seed=eval_seed + i)
    final_eval_episodes: int = 20  # held-out windows in the final results table
    final_eval_max_steps: int | None = 10_000  # agent-step cap per final evaluation episode (None = env's)
    final_baselines: list[str] = field(default_factory=lambda: ["random", "fifo", "tiresias", "mlf-h", "mlfs-h+c",
                                                                 "mlfs-h+c-act", "mlf-h-req"])
    log_every: int = 2  # one-line summary every this many PPO rollouts
    progress_bar: bool = True
    out: str | None = None  # run folder; None = runs/<scenario>-<timestamp>

    def __post_init__(self) -> None:
        if self.vec_env == "auto":
            self.vec_env = auto_vec_env(self.n_envs, self.algo, self.teacher_coef)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def env_config(self, split: str) -> dict:
        """EnvConfig overrides of the ``split`` windows ("train" or "test") with the run's reward weights."""
        e = dict(self.env)
        if self.reward_weights is not None:
            e["reward_weights"] = list(self.reward_weights)
        e["split"] = split
        return e

    def train_env_config(self) -> dict:
        """The training windows with the ``train_max_steps`` cap. PPO's envs and the warm start both use it, so
        the relative-reward twin (built from the same config) replays the heuristic under the same step cap
        for the critic's targets as for PPO's rewards."""
        e = self.env_config("train")
        if self.train_max_steps:
            e.setdefault("max_steps", int(self.train_max_steps))
        return e

    def val_seeds(self) -> list[int]:
        """Windows of the periodic evaluation (checkpoint selection): the first ``eval_episodes`` seeds from
        ``val_seed`` whose windows share no job with the final table's (train/windows.py)."""
        from clustergym.train.windows import disjoint_seeds

        return disjoint_seeds(self.scenario, self.env_config("test"), self.val_seed, self.eval_episodes,
                              self.final_seeds())

    def final_seeds(self) -> list[int]:
        """Windows of the final table: not the ones the best checkpoint was selected on."""
        return [self.eval_seed + i for i in range(self.final_eval_episodes)]

    def default_out(self) -> str:
        return str(Path("runs") / f"{self.scenario.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}")


FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))
# settings that may differ on --resume without refusing (they do not change what is trained)
RESUME_FREE = frozenset({"out", "progress_bar", "log_every", "device", "torch_threads", "env_workers",
                         "keep_checkpoints", "probe_states", "probe_episodes", "probe_every"})

# integer settings and their least allowed value (0 = "none": no warm start, no periodic evaluation between the
# ones before and after training, no final table); those in _MAY_BE_NONE also take None (no step cap)
_COUNTS = {"timesteps": 0, "n_envs": 1, "env_workers": 1, "torch_threads": 0, "d": 1, "n_steps": 1, "batch_size": 1,
           "n_epochs": 1, "train_max_steps": 1, "bc_steps": 0, "bc_episodes": 0, "bc_holdout_episodes": 0,
           "bc_dagger_rounds": 0,
           "bc_dagger_episodes": 0, "bc_dagger_steps": 0, "bc_dagger_max_steps": 1, "bc_batch_size": 1,
           "eval_freq": 0, "eval_episodes": 1, "eval_max_steps": 1, "final_eval_episodes": 0,
           "final_eval_max_steps": 1, "log_every": 1, "expert_episodes": 1,
           "value_warmup_steps": 0, "probe_states": 0, "probe_episodes": 1, "probe_every": 1,
           "train_start_steps": 0}
_MAY_BE_NONE = {"train_max_steps", "bc_dagger_max_steps", "eval_max_steps", "final_eval_max_steps"}
_SEEDS = ("seed", "val_seed", "eval_seed")
# real settings and their allowed interval (lo, hi, whether lo itself is allowed)
_REALS = {"learning_rate": (0.0, math.inf, False), "bc_lr": (0.0, math.inf, False), "gamma": (0.0, 1.0, False),
          "gamma_hour": (0.0, 1.0, False),
          "gae_lambda": (0.0, 1.0, True), "clip_range": (0.0, math.inf, False), "ent_coef": (0.0, math.inf, True),
          "teacher_coef": (0.0, math.inf, True), "teacher_coef_end": (0.0, math.inf, True),
          "vf_coef": (0.0, math.inf, True), "max_grad_norm": (0.0, math.inf, False),
          "target_kl": (0.0, math.inf, False), "bc_value_coef": (0.0, math.inf, True),
          "bc_end_coef": (0.0, math.inf, True), "search_horizon_s": (0.0, math.inf, True)}
_CHOICES = {"policy": ("mlp", "pairwise"), "algo": ("maskable", "ppo"),
            "vec_env": ("auto", "dummy", "subproc", "grouped", "pipelined"), "decode": DECODINGS,
            "lambda_per": ("step", "time"), "search_proposal": PROPOSALS,
            "search_terminal": TERMINALS, "search_foresight": FORESIGHTS}


def auto_vec_env(n_envs: Any, algo: Any, teacher_coef: Any) -> str:
    """``vec_env: auto``: "pipelined" where the overlapped rollout applies (at least two envs, MaskablePPO, no
    teacher term: train/pipelined.py), else "dummy" (settings of the wrong type give "dummy"; their own checks
    name them)."""
    return "pipelined" if _is_int(n_envs) and n_envs >= 2 and algo == "maskable" and teacher_coef == 0 else "dummy"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _real(key: str, v: Any) -> float:
    if isinstance(v, str):
        raise ConfigError(f"{key} must be a number, got the text {v!r} (YAML reads 3e-5 as text: write 3.0e-5)")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{key} must be a finite number, got {v!r}")
    return float(v)


def jct_only_weights() -> list[float]:
    """Training's default reward weights: the JCT objective alone (``clustergym.reward.single_objective_weights``)."""
    return list(single_objective_weights("jct"))


def parse_weights(s: str | Sequence[float] | None) -> list[float] | None:
    """Reward weights from a comma-separated string (the flag) or a list (YAML); one per objective."""
    if s is None:
        return None
    names = objective_names()  # the registry now: an objective registered after import counts
    n = len(names)
    parts = s.split(",") if isinstance(s, str) else list(s)
    try:
        w = [float(x) for x in parts]
    except (TypeError, ValueError):
        raise ConfigError(f"reward_weights must be {n} comma-separated numbers, got {s!r}") from None
    if len(w) != n or not all(math.isfinite(x) for x in w):
        raise ConfigError(f"reward_weights needs {n} values ({', '.join(names)}), all finite, got {s!r}")
    return w


def _check_numbers(c: TrainConfig) -> None:
    for key, least in _COUNTS.items():
        v = getattr(c, key)
        if v is None and key in _MAY_BE_NONE:
            continue
        if not _is_int(v) or v < least:
            raise ConfigError(f"{key} must be an integer >= {least}, got {v!r}")
    for key in _SEEDS:
        if not _is_int(getattr(c, key)) or getattr(c, key) < 0:
            raise ConfigError(f"{key} must be an integer >= 0, got {getattr(c, key)!r}")
    for key, (lo, hi, lo_ok) in _REALS.items():
        v = getattr(c, key)
        if v is None and key in ("target_kl", "gamma_hour"):  # no KL limit; a discount per step only
            continue
        x = _real(key, v)
        if not ((lo <= x if lo_ok else lo < x) and x <= hi):
            raise ConfigError(f"{key} must be in {'[' if lo_ok else '('}{lo:g}, {hi:g}], got {v!r}")
    if c.lambda_per == "time" and c.gamma_hour is None:
        raise ConfigError("lambda_per: time needs gamma_hour (the semi-MDP buffer, which knows each step's "
                          "simulated seconds); with gamma_hour none every step is discounted alike")
    if c.init_from is not None and not Path(c.init_from).exists():
        raise ConfigError(f"init_from: {c.init_from} not found (a saved agent .zip or a run folder)")
    if c.bc_steps > 0 and c.bc_episodes < 1:
        raise ConfigError("bc_episodes must be >= 1 when bc_steps > 0 (the warm start clones expert episodes)")
    if not isinstance(c.net_arch, list) or not c.net_arch or not all(_is_int(n) and n >= 1 for n in c.net_arch):
        raise ConfigError(f"net_arch must be a list of layer widths >= 1, got {c.net_arch!r}")


def _check_names(c: TrainConfig) -> None:
    import gymnasium as gym

    from clustergym import baselines
    from clustergym.eval.stats import direction
    from clustergym.scenarios import check_config, register_all

    for key, allowed in _CHOICES.items():
        if getattr(c, key) not in allowed:
            raise ConfigError(f"{key} must be one of {list(allowed)}, got {getattr(c, key)!r}")
    for key in ("share_encoder", "progress_bar", "keep_checkpoints"):
        if not isinstance(getattr(c, key), bool):
            raise ConfigError(f"{key} must be true or false, got {getattr(c, key)!r}")
    if c.vec_env == "pipelined" and (c.algo != "maskable" or c.teacher_coef > 0):
        raise ConfigError("vec_env pipelined needs algo maskable and teacher_coef 0 (the teacher term reads every "
                          f"env's label at each step, which the overlapped halves would race with); got algo "
                          f"{c.algo!r}, teacher_coef {c.teacher_coef!r}")
    if c.train_start_steps and (c.reward_baseline or c.teacher_coef > 0):
        raise ConfigError("train_start_steps needs reward_baseline none and teacher_coef 0 (the baseline's twin "
                          "and the teacher's labels would start at the window's first decision, not where the "
                          f"teacher's prefix left it); got reward_baseline {c.reward_baseline!r}, teacher_coef "
                          f"{c.teacher_coef!r}")
    if not isinstance(c.env, dict):
        raise ConfigError(f"env must be a mapping of EnvConfig fields, got {c.env!r}")
    register_all()
    if c.scenario not in gym.registry:
        raise ConfigError(f"scenario {c.scenario!r} is not a registered env id (clustergym.scenarios.SCENARIOS)")
    try:  # the env's fields and its trace file (trace_path, trace_mapping), before any work
        check_config(c.scenario, c.env)
    except ValueError as e:
        raise ConfigError(f"env: {e}") from None
    known = baselines.available()
    for key in ("eval_baselines", "final_baselines"):
        if not isinstance(getattr(c, key), list):
            raise ConfigError(f"{key} must be a list of heuristic names, got {getattr(c, key)!r}")
    heuristics = [("reward_baseline", c.reward_baseline)]
    heuristics += [(key, n) for key in ("eval_baselines", "final_baselines") for n in getattr(c, key)]
    if not isinstance(c.expert_candidates, list):
        raise ConfigError(f"expert_candidates must be a list of heuristic names, got {c.expert_candidates!r}")
    _check_teacher(c)
    for key, name in heuristics:
        if name is not None and name not in known:
            raise ConfigError(f"{key}: {name!r} is not a heuristic; one of {known}")
    try:
        direction(c.select_metric)
    except ValueError as e:
        raise ConfigError(f"select_metric: {e}") from None


NO_TEACHER = ("teacher_coef > 0 needs a teacher: with expert 'best' the warm start chooses it, and this run has "
              "none (bc_steps 0 or init_from); set expert to a heuristic")


def _check_teacher(c: TrainConfig) -> None:
    """The warm start's teacher (``expert``, or each of ``expert_candidates`` for "best") must be a heuristic
    an agent can imitate (``clustergym.agents.bc.imitation_error``)."""
    from clustergym.agents.bc import imitation_error

    if c.expert == "best" and not c.expert_candidates:
        raise ConfigError("expert_candidates must name at least one heuristic when expert is 'best'")
    names = [("expert", c.expert)] if c.expert != "best" else []
    proposer = [("search_proposer", c.search_proposer)] if c.search_proposer is not None else []
    for key, name in names + [("expert_candidates", n) for n in c.expert_candidates] + proposer:
        why = imitation_error(name)
        if why:
            raise ConfigError(f"{key}: {why}")
    if c.teacher_coef > 0 and c.expert == "best" and (c.bc_steps == 0 or c.init_from is not None):
        raise ConfigError(NO_TEACHER)


def load_config(config_file: str | Path | None = None, overrides: dict | None = None,
                defaults: dict | None = None) -> TrainConfig:
    """TrainConfig's defaults, then a trainer's own ``defaults``, then the YAML file, then ``overrides`` (flag
    values); checked."""
    values: dict[str, Any] = dict(defaults or {})
    if config_file:
        values.update(_mapping(read_yaml(config_file), str(config_file)))
    values.update(_mapping(overrides or {}, "overrides"))
    if str(values.get("reward_baseline")).lower() == "none":  # the flag's and YAML's spelling of None
        values["reward_baseline"] = None
    if "reward_weights" in values:
        values["reward_weights"] = parse_weights(values["reward_weights"])
    cfg = TrainConfig(**values)
    _check_numbers(cfg)
    _check_names(cfg)
    return cfg


def read_yaml(path: str | Path) -> Any:
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path} not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None


def _mapping(d: Any, where: str) -> dict:
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must hold a mapping of settings, got {type(d).__name__}")
    unknown = sorted(set(d) - set(FIELDS))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where}; known: {sorted(FIELDS)}")
    return d


# ---------------------------------------------------------------------------------------------- command line
def make_parser() -> argparse.ArgumentParser:
    """The documented flags, then ``--<field>`` for every other field of :class:`TrainConfig`. Flags left out
    take the ``--config`` value, else the default."""
    p = argparse.ArgumentParser(
        prog="train/ppo.py",
        description="Train a PPO agent (MaskablePPO by default) on a clustergym scenario: behaviour-clone MLF-H, "
                    "fine-tune with PPO, log to TensorBoard, evaluate against the heuristics on held-out windows. "
                    "Flags left out take the --config YAML value, else the default (shown).")
    p.add_argument("--config", default=None, help="YAML file overriding any default (unknown keys are rejected)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its last checkpoint (same config; flags given must match, "
                        "except a larger --timesteps, which extends a run, finished or not)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    documented = _documented_flags()
    other = p.add_argument_group("every other setting (train/config.py; lists and mappings as YAML, 'none' = "
                                 "no value where one is optional)")
    for f in dataclasses.fields(TrainConfig):
        if f.name == "progress_bar":  # --no-progress
            continue
        kw = documented.get(f.name) or {"type": _flag_parser(f.name), "metavar": "VALUE",
                                         "help": f"default {_default(f)!r}"}
        (p if f.name in documented else other).add_argument(
            "--" + f.name.replace("_", "-"), dest=f.name, default=argparse.SUPPRESS, **kw)
    return p


def _documented_flags() -> dict[str, dict]:
    from clustergym.config import EnvConfig

    D = TrainConfig()
    names = objective_names()
    n, weights = len(names), ",".join(f"{w:g}" for w in EnvConfig().reward_weights)
    jct = ",".join(f"{w:g}" for w in jct_only_weights())
    return {
        "scenario": {"help": f"registered env id (default {D.scenario})"},
        "timesteps": {"type": int, "help": f"PPO env steps (default {D.timesteps})"},
        "n_envs": {"type": int, "help": f"training envs, batched through the network (default {D.n_envs})"},
        "vec_env": {"choices": _CHOICES["vec_env"], "help": "dummy: all envs in this process; subproc: one "
                                                            "worker process per env; grouped: env_workers processes "
                                                            "stepping a group of envs each; pipelined: one worker, "
                                                            "half the envs scored while the other half steps; "
                                                            "auto: pipelined with 2+ envs, MaskablePPO and no "
                                                            "teacher term, else dummy (default auto)"},
        "seed": {"type": int, "help": f"seed (default {D.seed})"},
        "bc_steps": {"type": int, "help": f"BC gradient steps, 0 = no warm start (default {D.bc_steps})"},
        "reward_weights": {"help": f"the {n} objective weights ({', '.join(names)}; beta of MLFS Eq. 7) "
                                   f"as comma-separated numbers, 'none' = the env's {weights} (default {jct}: "
                                   "mean JCT only)"},
        "reward_baseline": {"metavar": "HEURISTIC", "help": "train on the reward minus this heuristic's on the same "
                            f"window, 'none' = the env's own reward (default {D.reward_baseline})"},
        "out": {"help": "run folder (default runs/<scenario>-<timestamp>)"},
        "device": {"help": f"torch device (default {D.device})"},
        "policy": {"choices": _CHOICES["policy"], "help": f"network (default {D.policy})"},
        "algo": {"choices": _CHOICES["algo"], "help": f"MaskablePPO or plain PPO (default {D.algo})"},
        "decode": {"choices": _CHOICES["decode"], "help": "how the periodic evaluations and the final table read the "
                                                         "agent's deterministic action (and DAgger rollouts play it so): joint = its most probable "
                                                         "action, row-kind = its most probable row and command, then "
                                                         "column, act-first = end the round only if that has half "
                                                         "the probability, else row-kind (docs/training.md; default "
                                                         f"{D.decode})"},
        "eval_episodes": {"type": int, "help": f"held-out windows per periodic evaluation (default {D.eval_episodes})"},
        "eval_freq": {"type": int, "help": f"env steps between periodic evaluations, 0 = none (default {D.eval_freq})"},
        "keep_checkpoints": {"type": _flag_parser("keep_checkpoints"), "metavar": "true|false",
                             "help": "true: also keep the model of every periodic evaluation as "
                                     "checkpoints/step-<n>.zip (about 3.5 MB each); may be turned on at --resume "
                                     f"(default {str(D.keep_checkpoints).lower()})"},
        "final_eval_episodes": {"type": int, "help": "held-out windows in the final table, 0 = none "
                                                     f"(default {D.final_eval_episodes})"},
    }


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _flag_parser(name: str):
    """``--name VALUE`` read as the field's type: a number as int or float, true/false, a list or mapping as
    YAML, 'none' as None where the field allows it."""
    hint = typing.get_type_hints(TrainConfig)[name]
    kinds = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
    nullable = type(None) in kinds
    kinds.discard(type(None))
    (kind,) = kinds

    def parse(text: str) -> Any:
        if nullable and text.lower() in ("none", "null"):
            return None
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if kind in (int, float, str):
            return kind(text)
        return yaml.safe_load(text)  # list[...] or dict

    parse.__name__ = getattr(kind, "__name__", str(kind))  # argparse names the type in its error message
    return parse


def config_from_args(args: argparse.Namespace, defaults: dict | None = None) -> tuple[TrainConfig, bool]:
    """(the run's configuration, whether it resumes a run) from parsed flags, over a trainer's own
    ``defaults`` (:func:`load_config`)."""
    flags = {k: v for k, v in vars(args).items() if k in FIELDS}
    if args.no_progress:
        flags["progress_bar"] = False
    if args.resume:
        return resume_config(Path(args.resume), flags, args.config), True
    return load_config(args.config, flags, defaults), False


def resume_config(run_dir: Path, flags: dict, config_file: str | None = None) -> TrainConfig:
    """The saved configuration of the run in ``run_dir``. Flags (and a ``--config`` file) given must describe
    the same run, except the settings of ``RESUME_FREE`` and a larger ``timesteps``, which extends the run."""
    saved_file = run_dir / "config.yaml"
    if not saved_file.exists():
        raise ConfigError(f"--resume: {saved_file} not found")
    saved = load_config(overrides=_mapping(read_yaml(saved_file), str(saved_file))).to_dict()
    if config_file:  # the whole file (with the flags) must describe the saved run
        given = load_config(config_file, flags).to_dict()
    else:  # only the flags given, read as they would be on a fresh run
        given = {k: v for k, v in load_config(overrides={**saved, **flags}).to_dict().items() if k in flags}
    extend = int(given.pop("timesteps", saved["timesteps"]))
    if extend < saved["timesteps"]:
        raise ConfigError(f"--resume refuses: --timesteps {extend} is below the saved {saved['timesteps']}")
    diff = {k: (saved[k], v) for k, v in given.items() if k not in RESUME_FREE and saved[k] != v}
    if diff:
        raise ConfigError("--resume refuses: flags differ from the saved config: "
                          + ", ".join(f"{k}: saved {a!r}, given {b!r}" for k, (a, b) in diff.items()))
    saved.update({k: v for k, v in flags.items() if k in RESUME_FREE})
    if extend > saved["timesteps"]:
        print(f"Extending {run_dir} from {saved['timesteps']:,} to {extend:,} PPO steps", flush=True)
        saved["timesteps"] = extend
    saved["out"] = str(run_dir)
    return load_config(overrides=saved)
