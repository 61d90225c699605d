"""The episode timeline: recorded from the simulator's events only when asked (and then changing nothing), its spans
and samples computable by hand on a toy cluster, and the PNG read back: size, colours of known bars and panels."""
import math

import numpy as np
import pytest
from helpers import cluster, job, models

from clustergym.baselines.base import run
from clustergym.baselines.simple import FIFO
from clustergym.core.config import SimConfig, SimConfigError
from clustergym.core.engine import Simulator
from clustergym.core.timeline import OFF, SAMPLE_FIELDS, Span, Timeline
from clustergym.render import job_colours
from clustergym.scenarios import make_env
from clustergym.timeline_figure import OVERLOAD_COLOUR, save_timeline, timeline_figure

# one server of 4 V100s; toy model: 1 s per iteration on a V100, one task per job (P = R = 1)
JOBS = [job(0, submit=0.0, iters=600), job(1, submit=0.0, iters=1200), job(2, submit=120.0, iters=300)]


def simulate(record: bool) -> Simulator:
    sim = Simulator(cluster(1, 4), JOBS, SimConfig(record_timeline=record, usage_change_mean_s=0.0), models=models)
    run(sim, FIFO())
    return sim


def test_off_by_default_and_recording_changes_nothing():
    assert SimConfig().record_timeline is False
    off, on = simulate(False), simulate(True)
    assert off.timeline is OFF and not off.timeline.recording
    # repr: NaN summary entries (no best-effort jobs: mean_be_jct) compare equal only as text
    assert repr(off.summary()) == repr(on.summary()) and off.job_records() == on.job_records()
    with pytest.raises(SimConfigError, match="record_timeline must be True or False"):
        SimConfig(record_timeline=1)


def test_spans_and_samples_follow_the_jobs_placements():
    sim = simulate(True)
    tl = sim.timeline
    # FIFO places at the first tick (t = 0 for jobs 0 and 1, the tick at 120 s for job 2); each runs alone on a GPU
    recs = {r["job_id"]: r for r in sim.job_records()}
    assert sorted((s.job, s.start, s.end) for s in tl.spans) == sorted(
        (j, recs[j]["first_start"], recs[j]["end"]) for j in (0, 1, 2))
    assert {s.server for s in tl.spans} == {0} and len({s.gpu for s in tl.spans}) == 3
    a = tl.sample_array()
    assert a.shape[1] == len(SAMPLE_FIELDS) and np.all(np.diff(a[:, 0]) > 0)
    col = {k: i for i, k in enumerate(SAMPLE_FIELDS)}
    at = {t: row for t, row in zip(a[:, 0], a)}
    busy = at[float(recs[2]["first_start"])]  # three of four GPUs hold a task, nothing waits, no overload
    assert busy[col["gpu_alloc"]] == 0.75 and busy[col["queue_tasks"]] == 0 and busy[col["jobs_in_system"]] == 3
    assert a[:, col["overloaded_servers"]].max() == 0 and tl.overloads == []


def hand_timeline() -> Timeline:
    """Two jobs on a 2-server x 2-GPU cluster over 2 h; server 1 overloaded from 0.5 h to 1 h."""
    tl = Timeline()
    tl.spans += [Span(7, 0, 0, 0, 0.0, 3600.0), Span(9, 1, 1, 3, 1800.0, math.nan)]
    tl.samples += [(0.0, 2, 2, 0.25, 0.2, 0), (1800.0, 0, 2, 0.5, 0.4, 1), (3600.0, 0, 1, 0.25, 0.2, 0)]
    tl.overloads += [(1800.0, (1,)), (3600.0, ())]
    return tl


def pixel(img: np.ndarray, fig, ax, x_h: float, y: float) -> np.ndarray:
    """The RGB of the PNG at data point (x hours, y) of ``ax`` (display y counts from the bottom)."""
    px, py = ax.transData.transform((x_h, y))
    return img[int(round(fig.bbox.height - py)), int(round(px)), :3]


def test_the_png_shows_each_bar_in_its_jobs_colour_idle_gpus_white_and_overloads_red(tmp_path):
    import matplotlib.image as mpimg
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from clustergym.core.state import ClusterState

    state = ClusterState(cluster(2, 2))
    tl = hand_timeline()
    path = save_timeline(tl, state, 7200.0, tmp_path / "sub" / "t.png", title="hand")
    img = mpimg.imread(path)
    assert img.shape == (800, 1200, 4) and img[..., :3].std() > 0.05  # 12 x 8 in at 100 dpi, not blank
    fig, ax = timeline_figure(tl, state, 7200.0, title="hand")  # the same layout, for the data -> pixel transform
    FigureCanvasAgg(fig).draw()
    colour = {j: job_colours(np.array([j]))[0] / 255.0 for j in (7, 9)}
    assert np.allclose(pixel(img, fig, ax["gantt"], 0.5, 0), colour[7], atol=1 / 255)  # job 7 on GPU 0, 0-1 h
    assert np.allclose(pixel(img, fig, ax["gantt"], 1.9, 3), colour[9], atol=1 / 255)  # job 9 still running at 2 h
    for x, gpu in ((1.5, 0), (0.25, 3), (1.0, 1), (1.0, 2)):  # idle: white
        assert np.allclose(pixel(img, fig, ax["gantt"], x, gpu), 1.0), (x, gpu)
    o = ax["overload"]
    assert np.allclose(pixel(img, fig, o, 0.75, 0.5), OVERLOAD_COLOUR, atol=1 / 255)  # one server overloaded
    assert np.allclose(pixel(img, fig, o, 1.5, 0.5), 1.0)  # none after 1 h


def test_env_save_timeline_needs_recording_and_writes_the_episode(tmp_path):
    import matplotlib.image as mpimg

    env = make_env("clustergym/GPUClusterLight-v1", window_jobs=5)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"sim=\{'record_timeline': True\}"):
        env.unwrapped.save_timeline(tmp_path / "x.png")
    from clustergym.baselines import make
    from clustergym.eval.rollout import predictor, rollout

    env = make_env("clustergym/GPUClusterLight-v1", window_jobs=5, sim={"record_timeline": True})
    rollout(env, predictor(make("fifo", env), env, "fifo"), 0)
    sim = env.unwrapped.sim
    assert {s.job for s in sim.timeline.spans} == {j.jid for j in sim.jobs}
    img = mpimg.imread(env.unwrapped.save_timeline(tmp_path / "ep.png"))
    assert img.shape == (800, 1200, 4) and img[..., :3].std() > 0.05


def test_compare_timeline_flag_draws_each_executed_run(tmp_path, capsys):
    from clustergym.eval import compare

    out = tmp_path / "sweep"
    code = compare.main(["--policies", "fifo", "--scenarios", "clustergym/GPUClusterLight-v1", "--seeds", "0",
                         "--workers", "0", "--no-progress", "--no-figures", "--bootstrap", "0", "--timeline",
                         "--set", "window_jobs=4", "--out", str(out)])
    assert code == 0
    pngs = list((out / "timelines").glob("*.png"))
    assert len(pngs) == 1 and pngs[0].stem == next((out / "runs").glob("*.json")).stem
    assert "timelines/" in capsys.readouterr().err
