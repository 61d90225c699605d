"""Engine behaviour on hand-built states: progress, contention, overload, migration, preemption,
stopping rules, load control, invalid commands, conservation and determinism."""
import math

import numpy as np
import pytest

from clustergym.core.engine import InvalidCommand, SimConfig, Simulator
from clustergym.core.job import TaskState
from clustergym.core.loadcontrol import LoadControl
from helpers import cluster, job, models, random_core_command

STILL = dict(usage_change_mean_s=0.0)  # constant resource use: hand-computable timings


def sim_of(specs, n_servers=2, **cfg):
    return Simulator(cluster(n_servers), specs, SimConfig(**{**STILL, **cfg}), seed=0, models=models)


def first_fit(sim):
    """Place ready tasks on the first server with room, repeating until nothing more fits."""
    placed = True
    while placed:
        placed = False
        for t in sim.ready_tasks():
            ok = np.flatnonzero(sim.feasible_servers(t))
            if len(ok):
                sim.place(t.tid, int(ok[0]))
                placed = True


def test_single_job_runs_at_its_iteration_rate():
    sim = sim_of([job(iters=100)])
    s = sim.run(first_fit)
    rec = sim.job_records()[0]
    assert rec["jct"] == pytest.approx(100.0)  # 1 s/iteration on a V100, placed at t=0
    assert rec["waiting_time"] == pytest.approx(0.0)
    assert s["finished"] == 1 and s["deadline_ratio"] == 1.0


def test_arrival_waits_for_the_next_tick():
    sim = sim_of([job(submit=10.0, iters=100)])
    sim.run(first_fit)
    rec = sim.job_records()[0]
    assert rec["first_start"] == 60.0
    assert rec["jct"] == pytest.approx(150.0)
    assert rec["waiting_time"] == pytest.approx(50.0)


@pytest.mark.parametrize("interference, jct", [("off", 100.0), ("gavel", 150.0)])
def test_gpu_sharing_slows_both_jobs_in_proportion(interference, jct):
    # toy util 0.5 each: load 1.0, no over-commitment. Without interference no slowdown; with it, the toy pair
    # (not in Gavel's table) runs at SJF-BSBF's injected ratio 1.5: 100 iterations of 1 s take 150 s
    sim = sim_of([job(0, iters=100), job(1, iters=100)], interference=interference)
    sim.controllers = []
    assert sim.next_decision()
    t0, t1 = sim.ready_tasks()
    g = sim.place(t0.tid, 0, gpu=0)
    sim.place(t1.tid, 0, gpu=g)
    while sim.next_decision():
        pass
    assert [r["jct"] for r in sim.job_records()] == [pytest.approx(jct)] * 2


def test_overcommitted_gpu_runs_at_one_over_load():
    # the utilisation rule of SimConfig(interference="off")
    from helpers import MODELS, toy_model
    MODELS["hot"] = toy_model("hot", gpu_util=0.75)
    sim = sim_of([job(0, model="hot", iters=100), job(1, model="hot", iters=100)], interference="off")
    sim.next_decision()
    a, b = sim.ready_tasks()
    sim.place(a.tid, 0, gpu=0)
    sim.place(b.tid, 0, gpu=0)
    assert sim.cluster.overloaded[0]  # 1.5 > h_r
    assert sim.metrics.overload_occurrences == 1
    while sim.next_decision():
        pass
    assert [r["jct"] for r in sim.job_records()] == [pytest.approx(150.0)] * 2


def test_dependency_gpu_memory_and_unknown_ids_are_refused_with_reasons():
    sim = sim_of([job(P=2, iters=10)])
    sim.next_decision()
    parent, child = sorted(sim.waiting_tasks(), key=lambda t: t.tid)
    with pytest.raises(InvalidCommand, match="depends on tasks"):
        sim.place(child.tid, 0)
    with pytest.raises(InvalidCommand, match="unknown task id"):
        sim.place(999, 0)
    with pytest.raises(InvalidCommand, match="unknown server"):
        sim.place(parent.tid, 7)
    sim.place(parent.tid, 0, gpu=0)
    sim.cluster.gpu_mem_used[1] = 15.0  # leave 1 GB on GPU 1
    with pytest.raises(InvalidCommand, match="GB free"):
        sim.place(child.tid, 0, gpu=1)
    with pytest.raises(InvalidCommand, match="not on server"):
        sim.place(child.tid, 0, gpu=5)


def test_cpu_capacity_is_enforced():
    sim = Simulator(cluster(1, cpu=3.0), [job(0), job(1)], SimConfig(**STILL), models=models)
    sim.next_decision()
    a, b = sim.ready_tasks()
    sim.place(a.tid, 0)
    with pytest.raises(InvalidCommand, match="free CPU cores"):
        sim.place(b.tid, 0)


def test_migration_pauses_for_checkpoint_and_counts_state_bytes():
    sim = sim_of([job(iters=100)])
    sim.next_decision()
    (t,) = sim.ready_tasks()
    sim.place(t.tid, 0)
    # advance: let 60 s pass at the next tick by asking for decisions every tick
    sim.config.decide_on = "always"
    assert sim.next_decision() and sim.now == 60.0
    sim.migrate(t.tid, 1)
    state_mb = 3 * 25.0 * 4  # weights + 2 optimiser copies, fp32, 25 M params
    pause = 5.0 + state_mb / 1250.0
    while sim.next_decision():
        pass
    rec = sim.job_records()[0]
    assert rec["migrations"] == 1
    assert rec["jct"] == pytest.approx(100.0 + pause)
    assert sim.metrics.cross_mb == pytest.approx(state_mb)


def test_preemption_charges_suspend_and_resume():
    sim = sim_of([job(iters=100)], decide_on="always")
    sim.next_decision()
    (t,) = sim.ready_tasks()
    sim.place(t.tid, 0)
    sim.next_decision()  # t = 60, 60 iterations done
    sim.preempt(t.job.jid)
    assert t.state == TaskState.WAITING and t.job.iters == pytest.approx(60.0)
    sim.place(t.tid, 1)
    while sim.next_decision():
        pass
    rec = sim.job_records()[0]
    assert rec["preemptions"] == 1
    assert rec["jct"] == pytest.approx(100.0 + 4.0 + 10.0 + 1.0)


def test_stop_rules_set_the_iteration_target():
    # linear curve: accuracy = progress, so the requirement 0.3 is met at 30 % of 200 iterations
    sim = sim_of([job(iters=200, acc_req=0.3, stop="requirement")])
    sim.run(first_fit)
    rec = sim.job_records()[0]
    assert rec["iterations"] == pytest.approx(60.0)
    assert rec["final_accuracy"] == pytest.approx(0.3)
    assert rec["accuracy_met"]


def test_stop_command_ends_job_with_reached_accuracy():
    sim = sim_of([job(iters=200)], decide_on="always")
    sim.next_decision()
    (t,) = sim.ready_tasks()
    sim.place(t.tid, 0)
    sim.next_decision()
    sim.stop(t.job.jid)
    rec = sim.job_records()[0]
    assert rec["state"] == "STOPPED" and rec["final_accuracy"] == pytest.approx(0.3)
    assert not sim.next_decision()


def test_load_control_switches_changeable_jobs_only_under_overload():
    # one GPU server with CPU for two tasks: the third job queues -> the cluster is overloaded
    specs = [job(0, iters=200, acc_req=0.25), job(1, iters=200, acc_req=0.25, stop_changeable=False),
             job(2, iters=200, acc_req=0.25)]
    lc = LoadControl()
    sim = Simulator(cluster(1, gpus=1, cpu=4.1), specs, SimConfig(**STILL), models=models, controllers=[lc])
    sim.run(first_fit)
    recs = {r["job_id"]: r for r in sim.job_records()}
    # after the round at t=0 job 2 is still queued: overload -> jobs 0 (running) and 2 (queued) switch
    assert recs[0]["iterations"] == pytest.approx(50.0)
    assert recs[1]["iterations"] == pytest.approx(200.0)  # not changeable
    # at t=60 job 2 is placed, the queue empties and the load is moderate: it gets its own option back
    assert recs[2]["iterations"] == pytest.approx(200.0) and recs[2]["final_stop_option"] == "run-all"
    assert lc.switched == 2
    # no queue, low load: the user's option stands
    lc = LoadControl()
    sim = Simulator(cluster(2), [job(0, iters=200, acc_req=0.25)], SimConfig(**STILL), models=models, controllers=[lc])
    sim.run(first_fit)
    assert sim.job_records()[0]["iterations"] == pytest.approx(200.0) and lc.switched == 0


def test_gang_timeout_releases_a_partial_placement():
    sim = sim_of([job(P=2, iters=10)], gang_timeout_s=300.0)
    sim.next_decision()
    parent = sim.ready_tasks()[0]
    sim.place(parent.tid, 0)
    sim.config.decide_on = "always"
    while sim.now < 300.0:
        sim.next_decision()
    assert parent.state == TaskState.WAITING and parent.job.record.gang_releases == 1


def random_driver(seed):
    rng = np.random.default_rng(seed)

    def policy(sim):
        for _ in range(50):
            if not sim.ready_tasks() and not sim.running_tasks():
                return
            random_core_command(sim, rng, (0.7, 0.8, 0.85, 0.9))
            check_invariants(sim)
    return policy


def check_invariants(sim):
    c = sim.cluster
    assert (c.gpu_mem_used <= c.gpu_mem_cap + 1e-9).all(), "GPU memory over-committed"
    assert (c.cpu_alloc <= c.cpu_cap + 1e-9).all() and (c.mem_alloc <= c.mem_cap + 1e-9).all()
    for t in sim.tasks:
        if t.state == TaskState.RUNNING:
            assert t.t.kind == "ps" or t.gpu >= 0
    used = np.zeros(c.n_gpus)
    cpu, mem = np.zeros(c.n_servers), np.zeros(c.n_servers)
    for t in sim.running_tasks():
        if t.gpu >= 0:
            used[t.gpu] += t.t.gpu_memory_gb
        cpu[t.server] += t.t.cpu_cores
        mem[t.server] += t.t.memory_gb
    assert np.allclose(used, c.gpu_mem_used)
    # resources conserved: the nominal allocation is what the running tasks hold
    assert np.allclose(cpu, c.cpu_alloc) and np.allclose(mem, c.mem_alloc)
    # every running task is on its own GPU's list and on no other (a PS on none); waiting tasks hold nothing
    on_gpu = [t for ts in c.gpu_tasks for t in ts]
    assert len(on_gpu) == len(set(map(id, on_gpu)))
    assert all(t.gpu == g for g, ts in enumerate(c.gpu_tasks) for t in ts)
    running = [t for t in sim.tasks if t.state == TaskState.RUNNING]
    assert sorted(t.tid for t in on_gpu) == sorted(t.tid for t in running if not t.is_ps)
    assert all(t.server < 0 and t.gpu < 0 for t in sim.tasks if t.state != TaskState.RUNNING)
    # the ready queue kept by state changes (core/ready.py) is the readiness test of every waiting task
    assert sim.ready_tasks() == [t for t in sim.queue.values() if t.is_ready()]


def mixed_specs(n=30, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        P = int(rng.choice([1, 2, 4]))
        R = int(rng.choice([1, 2]))
        out.append(job(i, submit=float(rng.uniform(0, 3000)), model=str(rng.choice(["toy", "toy-layer"])), P=P, R=R,
                       iters=int(rng.integers(50, 400)), sync=str(rng.choice(["ps", "allreduce"])),
                       deadline=5000.0 + i, acc_req=0.5, stop=str(rng.choice(["run-all", "requirement", "opt-stop"]))))
    return out


def test_conservation_under_random_commands():
    sim = Simulator(cluster(3), mixed_specs(), SimConfig(), seed=3, models=models)
    s = sim.run(random_driver(0))
    assert s["jobs"] == s["finished"] + s["stopped"] + s["unfinished"] + s["not_submitted"] == 30
    assert s["finished"] == 30
    # every task ran on a GPU after its parents: a job only progresses fully placed, and ends DONE
    assert all(t.state == TaskState.DONE for t in sim.tasks)
    assert all(j.record.end_time >= j.spec.submit_time for j in sim.jobs)
    # rewards' integral equals the sum of JCTs
    assert sim.metrics.jobs_in_system_integral == pytest.approx(sum(j.record.end_time - j.spec.submit_time for j in sim.jobs))


def test_same_seed_gives_identical_records_and_different_seeds_differ():
    def run(seed):
        sim = Simulator(cluster(3), mixed_specs(), SimConfig(usage_change_mean_s=120.0), seed=seed, models=models)
        sim.run(random_driver(5))
        return sim.job_records(), sim.summary()
    a, b, c = run(7), run(7), run(8)
    assert repr(a) == repr(b)  # (repr: the summary's undefined means, e.g. mean_be_jct without best-effort jobs, are NaN)
    assert a[0] != c[0]


def test_job_that_fits_nowhere_is_rejected_at_load():
    from helpers import MODELS, toy_model
    MODELS["huge"] = toy_model("huge", gpu_memory_gb=40.0)
    with pytest.raises(ValueError, match="can ever host it"):
        sim_of([job(model="huge")])


def test_horizon_reports_unfinished_jobs():
    sim = sim_of([job(iters=1000)], horizon_s=100.0)
    s = sim.run(first_fit)
    assert s["unfinished"] == 1 and s["finished"] == 0
    assert math.isclose(sim.jobs[0].iters, 100.0)


def test_job_whose_tasks_together_exceed_the_cluster_is_rejected():
    # 2 servers x 32 cores; toy tasks take 2 cores each, so 40 replicas (80 cores) fit no placement, while
    # each task alone fits any server
    with pytest.raises(ValueError, match=r"job 0 \(toy\): its 40 tasks need 80.0 CPU cores at once; cluster 'test' has 64.0"):
        sim_of([job(R=40)])
    sim_of([job(R=16)])  # 32 cores: fits


def test_env_leaves_out_jobs_that_can_never_start_and_says_so():
    import gymnasium as gym

    import clustergym  # noqa: F401

    # Hetero-v1 seed 0 (generator, 40 jobs) maps one job to 16 CPU-heavy replicas: 130 cores on a 128-core cluster
    env = gym.make("clustergym/Hetero-v1", window_jobs=40)
    _, info = env.reset(seed=0)
    dropped = info["episode"]["dropped_jobs"]
    assert dropped and not set(dropped) & {j.jid for j in env.unwrapped.sim.jobs}
    assert info["episode"]["n_jobs"] == len(env.unwrapped.sim.jobs)


def test_nic_overload_ends_with_the_traffic_that_caused_it():
    # two replicas on two servers with slow NICs: the all-reduce traffic overloads both NICs while the job runs;
    # once it finishes the servers hold nothing and must not stay overloaded (a flag set by NIC traffic alone
    # used to be cleared only by a later change on that server)
    sim = Simulator(cluster(2, nic=0.01), [job(R=2, iters=20)], SimConfig(**STILL, decide_on="always"), seed=0,
                    models=models)
    sim.next_decision()
    a, b = sim.ready_tasks()
    sim.place(a.tid, 0)
    sim.place(b.tid, 1)
    c = sim.cluster
    assert c.net_mbps[0] > sim.config.overload_threshold * c.nic_gbps[0] * 125.0
    assert c.overloaded.all() and sim.n_overloaded == 2
    while sim.next_decision():
        pass
    assert sim.job_records()[0]["state"] == "FINISHED"
    assert not c.overloaded.any() and sim.n_overloaded == 0 and (c.net_mbps == 0).all()


def test_ready_queue_follows_placements_requeues_and_stops():
    # core/ready.py keeps the ready tasks as states change; each step equals the readiness test of the queue
    sim = sim_of([job(0, P=4, R=2, sync="ps"), job(1, P=2)], n_servers=4)
    assert sim.next_decision()

    def scan():
        return [t for t in sim.queue.values() if t.is_ready()]

    ready = sim.ready_tasks()
    assert ready == scan() and 0 < len(ready) < len(sim.queue)  # some tasks wait for their DAG parents
    root = next(t for t in ready if t.job.jid == 0 and t.t.children)
    sim.place(root.tid, int(np.flatnonzero(sim.feasible_servers(root))[0]))
    after = sim.ready_tasks()
    assert after == scan() and root not in after
    assert {root.job.tasks[c] for c in root.t.children} & set(after)  # a child joined, at its queue place
    sim.requeue(root.tid)  # back at the end of the queue; its children wait for it again
    assert sim.ready_tasks() == scan() and sim.ready_tasks()[-1] is root
    sim.stop(0)  # a stopped job's waiting tasks leave
    assert sim.ready_tasks() == scan() and {t.job.jid for t in sim.ready_tasks()} == {1}
