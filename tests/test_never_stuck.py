"""The core never holds resources forever: partial placements left by requeues are released by the gang
timeout, DAG children pause with a requeued parent, a job no policy could ever run is refused when the
simulator is built, and a run whose jobs wait while nothing changes ends (stall detection) instead of
spinning forever. Small hand-built clusters (tests/helpers.py), hand-computable times."""
import math
from types import SimpleNamespace

import pytest

from clustergym.baselines.base import run
from clustergym.baselines.simple import FIFO
from clustergym.core.engine import SimConfig, SimConfigError, Simulator, StallWarning, UnplaceableJob
from clustergym.core.job import TaskState
from clustergym.core.progress import iters_at
from clustergym.core.feasibility import idle_packing, never_runs
from helpers import MODELS, cluster, job, models, toy_model

pytestmark = pytest.mark.reliability  # part of the reliability suite (make test-slow)
STILL = dict(usage_change_mean_s=0.0)  # constant resource use: no usage events, hand-computable timings


def sim_of(specs, n_servers=2, gpus=4, **cfg):
    return Simulator(cluster(n_servers, gpus), specs, SimConfig(**{**STILL, **cfg}), seed=0, models=models)


def place_all(sim, server_of=lambda t: 0):
    """Place every ready task (repeating while DAG children become ready) on ``server_of(task)``."""
    while sim.ready_tasks():
        for t in sim.ready_tasks():
            sim.place(t.tid, server_of(t))


def advance_to(sim, t):
    """Let decision points pass without acting until the clock reaches ``t`` (or the run ends)."""
    while sim.now < t and sim.next_decision():
        pass


# ------------------------------------------------------------------------------------- gang timeout

def test_a_requeue_that_leaves_a_job_partly_placed_starts_its_gang_timeout():
    # 8 replicas over 2 servers, all placed at t=0; one requeued at t=0 and never placed back: the other 7 hold
    # their slots at rate 0 until the gang timeout (600 s after the requeue) releases them all
    sim = sim_of([job(R=8, iters=100_000)], gang_timeout_s=600.0)
    sim.next_decision()
    place_all(sim, lambda t: t.t.replica // 4)
    j = sim.jobs[0]
    assert j.fully_placed and j.rate > 0
    sim.requeue(j.tasks[0].tid)
    advance_to(sim, 540.0)  # ticks every 60 s: the requeued task fits, so each tick is a decision point
    assert sim.now == 540.0 and j.n_placed == 7 and j.rate == 0.0 and j.record.gang_releases == 0
    advance_to(sim, 600.0)
    assert j.n_placed == 0 and j.record.gang_releases == 1 and sim.summary()["gang_releases"] == 1
    assert all(t.state == TaskState.WAITING for t in j.tasks)


def test_placing_the_requeued_task_back_cancels_the_gang_timeout():
    sim = sim_of([job(R=8, iters=2000)], gang_timeout_s=600.0)
    sim.next_decision()
    place_all(sim, lambda t: t.t.replica // 4)
    j = sim.jobs[0]
    sim.requeue(j.tasks[0].tid)
    sim.next_decision()  # t=60
    sim.place(j.tasks[0].tid, 0)
    sim.run(lambda sim: None)  # no further decision point: the job runs to its end
    assert j.record.gang_releases == 0 and j.record.end_time > 600.0 and sim.summary()["finished"] == 1


def test_a_stale_gang_timeout_never_releases_a_later_partial_placement():
    # partly placed at t=0 (timeout due at 600), fully placed at 60, preempted at 120, partly placed again at 180:
    # the timeout of t=0 is stale; the new one is due at 180 + 600 = 780
    sim = sim_of([job(R=2, iters=100_000)], gang_timeout_s=600.0, decide_on="always")
    j = sim.jobs[0]
    sim.next_decision()
    sim.place(j.tasks[0].tid, 0)
    sim.next_decision()
    sim.place(j.tasks[1].tid, 0)
    sim.next_decision()
    sim.preempt(j.jid)
    sim.next_decision()
    assert sim.now == 180.0
    sim.place(j.tasks[0].tid, 0)
    advance_to(sim, 720.0)
    assert j.n_placed == 1 and j.record.gang_releases == 0
    advance_to(sim, 780.0)
    assert j.n_placed == 0 and j.record.gang_releases == 1


def test_dag_children_pause_with_their_requeued_parent():
    # layer-parallel job with a PS: PS -> partition 0 -> partition 1. Requeuing partition 0 pauses the job (rate 0,
    # no progress) while its child keeps its slot; placed back, the job resumes; left alone, the gang timeout
    # releases the child with the rest
    def build():
        sim = sim_of([job(model="toy-layer", P=2, sync="ps", iters=100_000)], gang_timeout_s=600.0,
                     decide_on="always")  # a decision point at every tick: time advances by 60 s per call
        sim.next_decision()
        place_all(sim)
        return sim, sim.jobs[0]

    sim, j = build()
    ps, parent, child = j.tasks
    assert child.t.parents == (parent.t.index,) and parent.t.parents == (ps.t.index,)
    advance_to(sim, 60.0)
    sim.requeue(parent.tid)
    before = iters_at(j, sim.now)
    advance_to(sim, 300.0)
    assert child.state == TaskState.RUNNING and parent.state == TaskState.WAITING and parent.is_ready()
    assert j.rate == 0.0 and iters_at(j, sim.now) == before  # paused: the child holds its slot, nothing progresses
    sim.place(parent.tid, 0)
    advance_to(sim, 700.0)
    assert j.fully_placed and j.rate > 0 and iters_at(j, sim.now) > before and j.record.gang_releases == 0

    sim, j = build()
    sim.requeue(j.tasks[1].tid)
    advance_to(sim, 600.0)
    assert all(t.state == TaskState.WAITING for t in j.tasks) and j.record.gang_releases == 1


# ------------------------------------------------------------------------ jobs no policy could ever run

def test_idle_packing_finds_packings_that_need_backtracking_and_proves_impossible_ones():
    def tasks(*cpus):
        return [SimpleNamespace(kind="worker", gpu_memory_gb=1.0, cpu_cores=c, memory_gb=1.0) for c in cpus]

    two = cluster(2, gpus=4, cpu=10, mem=100)
    # 20 cores on 2 x 10: best fit decreasing puts 5+4 and 3+3+3 and cannot place the 2; {5,3,2} {4,3,3} fits
    assert idle_packing(tasks(5, 4, 3, 3, 3, 2), two) is True
    assert idle_packing(tasks(5, 4, 3, 3, 3, 2), two, budget=0) is None  # the first path fails: undecided
    assert idle_packing(tasks(6, 6, 6), two) is False  # each fits a server, two never share one
    assert idle_packing(tasks(6, 6, 6), cluster(3, gpus=1, cpu=10, mem=100)) is True
    # GPU memory per GPU: 3 tasks of 9 GB on one server with 2 x 16 GB GPUs never fit, on 2 servers they do
    big = [SimpleNamespace(kind="worker", gpu_memory_gb=9.0, cpu_cores=1.0, memory_gb=1.0)] * 3
    assert idle_packing(big, cluster(1, gpus=2)) is False and idle_packing(big, cluster(2, gpus=2)) is True
    ps = SimpleNamespace(kind="ps", gpu_memory_gb=0.0, cpu_cores=9.0, memory_gb=1.0)  # a PS takes no GPU
    assert idle_packing([ps] + tasks(1), cluster(1, gpus=1, cpu=10, mem=100)) is True


def test_a_job_whose_tasks_can_never_hold_slots_together_is_refused():
    # 3 tasks of 20 cores: 60 cores fit the cluster's 64 and each task fits a 32-core server, but no two share one
    MODELS["cpu20"] = toy_model("cpu20", cpu=20.0)
    try:
        with pytest.raises(UnplaceableJob, match=r"job 7 \(cpu20\): its 3 tasks can never hold slots at once") as e:
            sim_of([job(7, model="cpu20", R=3)])
        assert e.value.job_id == 7
        sim_of([job(7, model="cpu20", R=2)])  # one per server: accepted
    finally:
        del MODELS["cpu20"]


def test_never_runs_is_the_env_rule_too():
    from clustergym.core.dag import build_tasks

    MODELS["cpu20"] = toy_model("cpu20", cpu=20.0)
    try:
        tasks = build_tasks(job(model="cpu20", R=3), models("cpu20"))
        assert "can never hold slots at once" in never_runs(tasks, cluster(2))
        assert never_runs(tasks, cluster(3)) is None
        assert "need 60.0 CPU cores at once" in never_runs(tasks, cluster(1))
    finally:
        del MODELS["cpu20"]


# --------------------------------------------------------------------------------- stall detection

def test_a_job_fifo_can_never_place_ends_the_run_as_a_stall():
    # 8 tasks on 4 GPUs: the engine could share GPUs, FIFO allocates one task per GPU and never starts the job.
    # Checks at the first event after every 86400/8 = 10800 s: at t=0 no job is active yet, at 10800 the key
    # changed (the job arrived), at 97200 = 10800 + 86400 nothing changed for the timeout: the run ends there.
    sim = Simulator(cluster(1, 4), [job(R=8)], SimConfig(), models=models)
    assert sim.config.horizon_s == math.inf
    with pytest.warns(StallWarning, match=r"no job progressed, arrived or ended between t=10800 s and t=97200 s"):
        s = run(sim, FIFO())
    assert sim.now == 97200.0 and s["unfinished"] == 1 and s["finished"] == 0
    assert "0 (0/8 tasks placed)" in sim.stalled and sim.is_done() and not sim.next_decision()


def test_a_deadlock_without_decision_points_ends_as_a_stall():
    # two 2-task jobs each holding one of the two GPUs (no gang timeout): neither can complete its placement, no
    # tick is a decision point, only usage changes remain as events; the stall check ends the run
    MODELS["wide"] = toy_model("wide", gpu_memory_gb=10.0)
    try:
        sim = Simulator(cluster(2, 1), [job(0, model="wide", R=2), job(1, model="wide", R=2)],
                        SimConfig(gang_timeout_s=math.inf, stall_timeout_s=3600.0), models=models)
        sim.next_decision()
        a, b = sim.jobs
        sim.place(a.tasks[0].tid, 0)
        sim.place(b.tasks[0].tid, 1)
        with pytest.warns(StallWarning):
            assert not sim.next_decision()
        # checks run at the first event after each 450 s: the stall is seen at least 3600 s after the last change
        assert sim.now >= 3600.0 and "no job progressed" in sim.stalled and a.n_placed == b.n_placed == 1
    finally:
        del MODELS["wide"]


def test_a_progressing_run_is_never_a_stall():
    # one job running 10,000 s with a 600 s stall timeout: it progresses, so it finishes normally
    sim = sim_of([job(iters=10_000)], stall_timeout_s=600.0)
    s = sim.run(lambda sim: place_all(sim))
    assert s["finished"] == 1 and sim.stalled is None and sim.now == pytest.approx(10_000.0)


def test_an_infinite_horizon_needs_a_finite_stall_timeout():
    with pytest.raises(SimConfigError, match="stall_timeout_s must be finite when horizon_s is infinite") as e:
        SimConfig(stall_timeout_s=math.inf)
    assert e.value.field == "stall_timeout_s"
    SimConfig(stall_timeout_s=math.inf, horizon_s=1e6)
    with pytest.raises(SimConfigError, match="stall_timeout_s"):
        SimConfig(stall_timeout_s=float("nan"))
