"""Hand-built models and clusters for unit tests whose numbers must be computable by hand."""
from __future__ import annotations

from dataclasses import dataclass

from clustergym.baselines.simple import FIFO
from clustergym.core.catalogue import ModelProfile
from clustergym.core.commands import Command
from clustergym.core.curves import LearningCurve
from clustergym.core.hardware import ClusterSpec, ServerSpec
from clustergym.core.workload import JobSpec

LINEAR = LearningCurve(x=(0.0, 1.0), accuracy=(0.0, 1.0), loss=(1.0, 0.0), source="test")


def toy_model(name: str = "toy", parallelism: str = "chain", v100: float = 1.0, k80: float = 4.0,
              gpu_util: float = 0.5, gpu_memory_gb: float = 4.0, cpu: float = 2.0, mem: float = 8.0,
              params_m: float = 25.0) -> ModelProfile:
    return ModelProfile(name=name, family="test", parallelism=parallelism, params_m=params_m, batch_size=32,
                        iteration_time={"V100": v100, "K80": k80, "P100": 2.0, "T4": 2.0, "A100": 0.5,
                                        "H100": 0.3, "M60": 3.0},
                        gpu_memory_gb=gpu_memory_gb, gpu_util=gpu_util, cpu_cores=cpu, host_memory_gb=mem,
                        activation_mb=10.0, curve=LINEAR, max_partitions=1 if parallelism == "none" else 32)


MODELS = {m.name: m for m in (toy_model(), toy_model("toy-layer", "layer"), toy_model("toy-none", "none"))}


def models(name: str) -> ModelProfile:
    return MODELS[name]


def cluster(n_servers: int = 2, gpus: int = 4, gpu_type: str = "V100", cpu: float = 32, mem: float = 244,
            nic: float = 10.0, intra: float = 100.0) -> ClusterSpec:
    return ClusterSpec("test", tuple(ServerSpec(f"s{i}", gpu_type, gpus, cpu, mem, nic, intra) for i in range(n_servers)))


def job(jid: int = 0, submit: float = 0.0, model: str = "toy", P: int = 1, R: int = 1, iters: int = 100,
        sync: str = "allreduce", deadline: float = 1e6, acc_req: float = 0.5, stop: str = "run-all", **kw) -> JobSpec:
    return JobSpec(job_id=jid, submit_time=submit, model=model, n_partitions=P, n_replicas=R, max_iterations=iters,
                   accuracy_requirement=acc_req, deadline=deadline, sync=sync, stop_option=stop,
                   comm_ps_mb=kw.pop("comm_ps_mb", 50.0), comm_worker_mb=kw.pop("comm_worker_mb", 50.0), **kw)


def markdown_rows(md: str) -> list[list[str]]:
    """The cells of every row of the Markdown tables in ``md`` (stripped; separator rows left out)."""
    rows = []
    for line in md.splitlines():
        line = line.strip()
        if line.startswith("|") and not set(line) <= set("|:- "):
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def decide_past_stop_options(policy, sim, cands=None):
    """``policy``'s next command once it has moved the jobs it sees to its system stopping option (MLF-H puts
    run-all jobs on OptStop before anything else in a round): those commands are checked and executed."""
    from clustergym.core.commands import execute
    from clustergym.core.view import ClusterView

    view = ClusterView(sim)
    while True:
        cmd = policy.decide(view, cands)
        if cmd is None or cmd.kind != "stop-option":
            return cmd
        assert cmd.option == policy.system_stop_option
        execute(sim, cmd)


@dataclass
class StopThenFIFO(FIFO):
    """FIFO that first moves every changeable job to stop at its accuracy requirement (a policy issuing
    stop-option commands, for the env's stop-option actions and behaviour cloning of them)."""

    def preferences(self, view, cands):
        for j in view.active_jobs():
            if j.spec.stop_changeable and j.stop_option != "requirement":
                yield Command("stop-option", jid=j.jid, option="requirement")
        yield from super().preferences(view, cands)


def random_core_command(sim, rng, cuts: tuple[float, float, float, float]) -> None:
    """One random valid core command. With r ~ U[0, 1): place a random ready task when r < cuts[0], else
    migrate a random running task when r < cuts[1], requeue one when r < cuts[2], preempt a job when r < cuts[3]
    (each only if such a task exists; a draw that finds no valid server does nothing)."""
    import numpy as np

    ready, running = sim.ready_tasks(), sim.running_tasks()
    r = rng.random()
    if ready and r < cuts[0]:
        t = ready[rng.integers(len(ready))]
        ok = np.flatnonzero(sim.feasible_servers(t))
        if len(ok):
            sim.place(t.tid, int(rng.choice(ok)))
    elif running and r < cuts[1]:
        t = running[rng.integers(len(running))]
        ok = [s for s in np.flatnonzero(sim.feasible_servers(t, moving=True)) if s != t.server]
        if ok:
            sim.migrate(t.tid, int(rng.choice(ok)))
    elif running and r < cuts[2]:
        sim.requeue(running[rng.integers(len(running))].tid)
    elif running and r < cuts[3]:
        sim.preempt(running[rng.integers(len(running))].job.jid)

