"""Trace loaders: bundled data, error reporting, generic CSV mapping, windows and splits."""
from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from clustergym.core import traces as T
from clustergym.core.traces import ColumnMapping, TraceError

# several loaders here are fed rows out of submit order on purpose (to test the stable sort); the TraceWarning
# that reports them is tested in tests/test_traces_checked.py
pytestmark = pytest.mark.filterwarnings("ignore::clustergym.core.trace_schema.TraceWarning")


@pytest.fixture(scope="module")
def philly() -> pd.DataFrame:
    return T.load_philly()


def write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


# ----------------------------------------------------------------------------------------- Philly

def test_philly_bundled_row_count_and_schema(philly):
    assert len(philly) == 82247
    assert list(philly.columns[:4]) == ["job_id", "submit_time", "n_gpus", "duration"]
    assert philly["job_id"].tolist() == list(range(len(philly)))
    assert philly["submit_time"].is_monotonic_increasing
    assert philly["submit_time"].iloc[0] == 0.0
    assert philly.attrs["t0"] == "2017-09-04 10:30:41"
    assert philly.attrs["filters"] == {}
    assert philly["n_gpus"].min() >= 1 and philly["duration"].min() >= 0
    assert philly["cluster"].nunique() == 15
    # last submit 2017-12-22 08:02:11, 108.9 days after the first
    assert philly["submit_time"].iloc[-1] == pytest.approx(
        (pd.Timestamp("2017-12-22 08:02:11") - pd.Timestamp("2017-09-04 10:30:41")).total_seconds())


def test_philly_first_rows(philly):
    # file lines 31568, 54651, 1986 of the source CSV are the three earliest submissions
    first = philly.head(3)
    assert first["submit_time"].tolist() == [0.0, 235696.0, 257229.0]
    assert first["n_gpus"].tolist() == [8, 1, 1]
    assert first["duration"].tolist() == [2240194.0, 3256045.0, 2643038.0]
    assert first["cluster"].tolist() == ["7f04ca", "6214e9", "6214e9"]


def test_philly_limit_and_explicit_filter(philly):
    head = T.load_philly(limit=100)
    assert len(head) == 100
    pd.testing.assert_frame_equal(head.reset_index(drop=True), philly.head(100).reset_index(drop=True))
    f = T.load_philly(min_duration=60)
    removed = int((philly["duration"] < 60).sum())
    assert removed > 0 and len(f) == len(philly) - removed
    assert f.attrs["filters"] == {"duration<60s": removed}


def test_philly_stable_sort_ties(tmp_path):
    p = write(tmp_path / "p.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
              "2017-01-01 00:00:10,5,1,5,a\n2017-01-01 00:00:00,7,2,14,b\n2017-01-01 00:00:10,9,4,36,c\n")
    df = T.load_philly(p)
    assert df["cluster"].tolist() == ["b", "a", "c"]
    assert df["submit_time"].tolist() == [0.0, 10.0, 10.0]


def test_env_var_overrides_trace_dir(tmp_path, monkeypatch):
    with gzip.open(tmp_path / "philly.csv.gz", "wt") as fh:
        fh.write("timestamp,duration,num_gpus,gpu_time,cluster\n2017-01-01 00:00:00,5,1,5,a\n")
    monkeypatch.setenv("CLUSTERGYM_TRACES", str(tmp_path))
    assert len(T.load_philly()) == 1


HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
GOOD = "2017-01-01 00:00:00,5,1,5,a\n"


@pytest.mark.parametrize("bad_line, column, reason", [
    ("2017-01-01 00:00:00,abc,1,5,a\n", "duration", "not a number"),
    ("2017-01-01 00:00:00,-5,1,5,a\n", "duration", "must be >= 0"),
    ("2017-01-01 00:00:00,5,0,5,a\n", "num_gpus", "must be >= 1"),
    ("2017-01-01 00:00:00,5,1.5,5,a\n", "num_gpus", "not an integer"),
    ("2017-13-45 00:00:00,5,1,5,a\n", "timestamp", "unparseable date"),
    (",5,1,5,a\n", "timestamp", "missing value"),
    ("2017-01-01 00:00:00,,1,5,a\n", "duration", "missing value"),
])
def test_philly_bad_row_names_file_row_column(tmp_path, bad_line, column, reason):
    p = write(tmp_path / "bad.csv", HEADER + GOOD + GOOD + bad_line + GOOD)
    with pytest.raises(TraceError) as e:
        T.load_philly(p)
    msg = str(e.value)
    assert str(p) in msg and "data row 3 (line 4)" in msg and repr(column) in msg and reason in msg
    assert (e.value.row, e.value.line, e.value.column) == (3, 4, column)


def test_philly_missing_column_and_blank_line(tmp_path):
    p = write(tmp_path / "m.csv", "timestamp,num_gpus\n2017-01-01 00:00:00,1\n")
    with pytest.raises(TraceError, match="'duration': missing column"):
        T.load_philly(p)
    p = write(tmp_path / "b.csv", HEADER + GOOD + "\n" + GOOD)
    with pytest.raises(TraceError, match="data row 2 \\(line 3\\): empty line"):
        T.load_philly(p)
    # trailing blank lines are not rows (the bundled file ends with one)
    assert len(T.load_philly(write(tmp_path / "t.csv", HEADER + GOOD + "\n\n"))) == 1
    with pytest.raises(TraceError, match="file not found"):
        T.load_philly(tmp_path / "nope.csv")


# ---------------------------------------------------------------------------------------- Pollux

def test_pollux_workloads_bundled():
    for i in range(1, 9):
        w = T.load_pollux_workload(f"workload-{i}")
        assert len(w) == T.POLLUX_WORKLOAD_JOBS == 160
        assert w["duration"].isna().all()
        assert set(w["model"]) <= {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
        assert w["submit_time"].is_monotonic_increasing and w["submit_time"].max() <= 8 * 3600
    w = T.load_pollux_workload(1)
    assert w.iloc[0][["submit_time", "n_gpus", "model", "name", "batch_size"]].tolist() == [107.0, 6, "cifar10", "cifar10-0", 2048]


def test_pollux_split_halves_the_workloads_disjointly():
    assert T.pollux_split("train") == tuple(f"workload-{i}" for i in range(1, 5))
    assert T.pollux_split("test") == tuple(f"workload-{i}" for i in range(5, 9))
    assert T.pollux_split("train", 0.25) + T.pollux_split("test", 0.25) == T.POLLUX_WORKLOADS
    for f in (0.05, 0.95):  # 0 or 8 of the 8 workloads in the train split
        with pytest.raises(ValueError, match="train_fraction"):
            T.pollux_split("test", f)


def test_pollux_bad_row(tmp_path):
    p = write(tmp_path / "w.csv", "name,time,application,num_replicas,batch_size\n"
              "a-0,1,cifar10,2,128\na-1,x,cifar10,2,128\n")
    with pytest.raises(TraceError, match=r"w\.csv: data row 2 \(line 3\): column 'time': not a number"):
        T.load_pollux_workload(p)


def test_fill_pollux_durations_respects_buckets(philly):
    w = T.load_pollux_workload("workload-2")
    a = T.fill_pollux_durations(w, seed=3, philly=philly)
    b = T.fill_pollux_durations(w, seed=3, philly=philly)
    assert a["duration"].tolist() == b["duration"].tolist()
    assert a["duration"].notna().all() and w["duration"].isna().all()
    gh = a["duration"] * a["n_gpus"] / 3600.0
    for app, (lo, hi) in T.POLLUX_GPU_HOUR_BUCKETS.items():
        sel = a["model"] == app
        assert ((gh[sel] >= lo - 1e-9) & (gh[sel] < hi + 1e-9)).all(), app


# ------------------------------------------------------------------------------------------- PAI

JOBS = """j1,i1,u1,Terminated,1000,2000
j2,i2,u2,Failed,1010,1500
j3,i3,u1,Running,1020,
j4,i4,u3,Terminated,990,1200
j5,i5,u3,Terminated,1030,1100
"""
TASKS = """j1,worker,2,Terminated,1100,1900,600,29,50,V100
j1,ps,1,Terminated,1100,1950,600,29,,
j2,worker,1,Failed,1020,1400,600,29,100,T4
j3,worker,1,Running,1030,,600,29,100,T4
j4,worker,4,Terminated,1000,1150,600,29,100,P100
j5,tensorflow,1,Terminated,1040,1090,600,29,,
"""


def test_pai_loader_rules(tmp_path):
    jt, tt = write(tmp_path / "pai_job_table.csv", JOBS), write(tmp_path / "pai_task_table.csv", TASKS)
    df = T.load_pai_jobs(jt, tt)
    # j3 Running -> filtered by status; j5 has no GPU -> CPU-only, filtered; both counted
    assert df["job_name"].tolist() == ["j4", "j1", "j2"]
    assert df["submit_time"].tolist() == [0.0, 10.0, 20.0]
    assert df["n_gpus"].tolist() == [4, 1, 1]          # j1: 2 x 50 % = 1 GPU
    assert df["duration"].tolist() == [150.0, 850.0, 380.0]   # max task end - min task start
    assert df["user"].tolist() == ["u3", "u1", "u2"]
    assert df.attrs["filters"]["status not in ['Terminated', 'Failed']"] == 1
    assert df.attrs["filters"]["CPU-only (no plan_gpu)"] == 1
    assert df["job_id"].tolist() == [0, 1, 2]
    with pytest.raises(TraceError, match=r"pai_job_table\.csv: data row 5 \(line 5\): column 'job_name': job requests no GPU"):
        T.load_pai_jobs(jt, tt, drop_cpu_only=False)
    only_term = T.load_pai_jobs(jt, tt, statuses=["Terminated"])
    assert only_term["job_name"].tolist() == ["j4", "j1"]


def test_pai_loader_with_header_row(tmp_path):
    jt = write(tmp_path / "j.csv", ",".join(T.PAI_JOB_COLUMNS) + "\n" + JOBS)
    tt = write(tmp_path / "t.csv", ",".join(T.PAI_TASK_COLUMNS) + "\n" + TASKS)
    assert len(T.load_pai_jobs(jt, tt)) == 3


@pytest.mark.parametrize("line, column, reason", [
    ("j2,worker,1,Failed,1020,1000,600,29,100,T4", "end_time", "negative duration"),
    ("j2,worker,1,Failed,soon,1400,600,29,100,T4", "start_time", "not a number"),
    ("j2,worker,0,Failed,1020,1400,600,29,100,T4", "inst_num", "must be >= 1"),
    ("j2,worker,1,Failed,1020,1400,600,29,-100,T4", "plan_gpu", "must be >= 0"),
])
def test_pai_bad_task_row(tmp_path, line, column, reason):
    tasks = TASKS.splitlines()
    tasks[2] = line
    jt, tt = write(tmp_path / "j.csv", JOBS), write(tmp_path / "t.csv", "\n".join(tasks) + "\n")
    with pytest.raises(TraceError) as e:
        T.load_pai_jobs(jt, tt)
    msg = str(e.value)
    assert "t.csv: data row 3 (line 3)" in msg and repr(column) in msg and reason in msg


def test_pai_bad_job_row(tmp_path):
    jobs = JOBS.replace("j4,i4,u3,Terminated,990", "j4,i4,u3,Terminated,yesterday")
    jt, tt = write(tmp_path / "j.csv", jobs), write(tmp_path / "t.csv", TASKS)
    with pytest.raises(TraceError, match=r"j\.csv: data row 4 \(line 4\): column 'start_time': not a number"):
        T.load_pai_jobs(jt, tt)
    with pytest.raises(TraceError, match="expected 10 columns"):
        T.load_pai_jobs(jt, write(tmp_path / "t2.csv", "a,b,c\n"))


# ----------------------------------------------------------------------------------- generic CSV

def test_load_csv_minutes(tmp_path):
    p = write(tmp_path / "jobs.csv", "id,arrive_min,gpus,run_h,arch\n7,10,2,1.5,resnet\n8,0,1,0.5,bert\n9,10,4,2,svm\n")
    m = ColumnMapping(columns={"job_id": "id", "submit_time": "arrive_min", "n_gpus": "gpus",
                               "duration": "run_h", "model": "arch"}, time_unit="min", duration_unit="h")
    df = T.load_csv(p, m)
    assert df["submit_time"].tolist() == [0.0, 600.0, 600.0]
    assert df["duration"].tolist() == [1800.0, 5400.0, 7200.0]
    assert df["n_gpus"].tolist() == [1, 2, 4]
    assert df["model"].tolist() == ["bert", "resnet", "svm"]
    assert df["source_job_id"].tolist() == ["8", "7", "9"]
    assert df["job_id"].tolist() == [0, 1, 2]


def test_load_csv_datetime_end_time_defaults_yaml(tmp_path):
    p = write(tmp_path / "jobs.tsv", "submitted\tfinished\tqueue\n"
              "03/01/2020 10:00\t03/01/2020 11:30\tvc1\n03/01/2020 09:00\t03/01/2020 09:01\t\n")
    y = write(tmp_path / "map.yaml", """
columns: {submit_time: submitted, end_time: finished, cluster: queue}
datetime_format: "%d/%m/%Y %H:%M"
delimiter: "\\t"
defaults: {n_gpus: 2, cluster: default, urgency: 5}
""")
    df = T.load_csv(p, y)
    assert df["submit_time"].tolist() == [0.0, 3600.0]
    assert df["duration"].tolist() == [60.0, 5400.0]
    assert df["n_gpus"].tolist() == [2, 2]
    assert df["cluster"].tolist() == ["default", "vc1"]
    assert df["urgency"].tolist() == [5, 5]
    assert df.attrs["t0"] == "2020-01-03 09:00:00"


def test_load_csv_errors(tmp_path):
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}, "time_unit": "ms"}
    p = write(tmp_path / "x.csv", "t,g,d\n0,1,10\n5,0,10\n")
    with pytest.raises(TraceError, match=r"x\.csv: data row 2 \(line 3\): column 'g': zero GPUs"):
        T.load_csv(p, m)
    p = write(tmp_path / "x.csv", "t,g,d\n0,1,10\n5,1,-1\n")
    with pytest.raises(TraceError, match=r"data row 2 \(line 3\): column 'd': duration must be >= 0"):
        T.load_csv(p, m)
    p = write(tmp_path / "x.csv", "t,g\n0,1\n")
    with pytest.raises(TraceError, match=r"column 'd': missing column"):
        T.load_csv(p, m)
    p = write(tmp_path / "x.csv", "t,e,g\n2020-01-01,2019-12-31,1\n")
    with pytest.raises(TraceError, match=r"data row 1 \(line 2\): column 'e': negative duration"):
        T.load_csv(p, {"columns": {"submit_time": "t", "end_time": "e", "n_gpus": "g"}, "datetime_format": "%Y-%m-%d"})
    p = write(tmp_path / "x.csv", "t,g,d\n2020-01-01,1,5\n2020-02-30,1,5\n")
    with pytest.raises(TraceError, match=r"data row 2 \(line 3\): column 't': unparseable date"):
        T.load_csv(p, {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}, "datetime_format": "%Y-%m-%d"})
    with pytest.raises(ValueError, match="unknown keys"):
        ColumnMapping.from_dict({"columns": {"submit_time": "t", "duration": "d", "n_gpus": "g"}, "tz": 1})
    with pytest.raises(ValueError, match="unknown time unit"):
        ColumnMapping(columns={"submit_time": "t", "duration": "d", "n_gpus": "g"}, time_unit="days")


def test_load_csv_explicit_filter_reports(tmp_path):
    p = write(tmp_path / "x.csv", "t,g,d\n0,1,0\n1,1,10\n2,1,0\n")
    df = T.load_csv(p, {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}, "min_duration": 1})
    assert len(df) == 1 and df.attrs["filters"] == {"duration<1s": 2}
    assert len(T.load_csv(p, {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}})) == 3


# ---------------------------------------------------------------------------------- window/split

def test_window_by_jobs_and_duration(philly):
    start = 86400.0 * 10
    w = T.window(philly, start, n_jobs=500)
    assert len(w) == 500
    assert w["submit_time"].min() >= 0 and (w["submit_time"] + start).min() >= start
    before = philly[philly["submit_time"] < start]
    assert w["job_id"].iloc[0] == len(before)
    d = T.window(philly, start, duration=7 * 86400.0, rebase=False)
    sel = philly[(philly["submit_time"] >= start) & (philly["submit_time"] < start + 7 * 86400)]
    assert d["job_id"].tolist() == sel["job_id"].tolist()
    with pytest.raises(ValueError):
        T.window(philly, 0, n_jobs=5, duration=5)


@pytest.mark.parametrize("by", ["jobs", "time"])
@pytest.mark.parametrize("frac", [0.0, 0.3, 0.5, 1.0])
def test_split_disjoint_complete(philly, by, frac):
    train, test = T.split_trace(philly, frac, by=by)
    assert set(train["job_id"]).isdisjoint(test["job_id"])
    assert len(train) + len(test) == len(philly)
    assert sorted(list(train["job_id"]) + list(test["job_id"])) == list(range(len(philly)))
    if len(train) and len(test):
        assert train["submit_time"].max() < test["submit_time"].min()
    if by == "jobs":
        assert abs(len(train) - frac * len(philly)) <= 50  # ties at the cut go to held-out


def test_validate_canonical(philly):
    T.validate(philly)
    bad = philly.head(5).copy()
    bad.loc[3, "n_gpus"] = 0
    with pytest.raises(TraceError, match="data row 4 .*'n_gpus'"):
        T.validate(bad)


def test_documented_yaml_example_parses(tmp_path):
    doc = (Path(__file__).resolve().parents[1] / "docs" / "workloads.md").read_text()
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    m = ColumnMapping.from_yaml(write(tmp_path / "map.yaml", block))
    p = write(tmp_path / "jobs.csv", "JobId,Submitted,Finished,GPUs,Arch,Queue\n"
              "a,2020-01-01 00:00:00,2020-01-01 01:00:00,4,bert,\n")
    df = T.load_csv(p, m)
    assert df.iloc[0][["duration", "n_gpus", "model", "cluster", "urgency"]].tolist() == [3600.0, 4, "bert", "default", 5]


@pytest.mark.parametrize("loader, text", [
    (T.load_philly, HEADER),
    (T.load_pollux_workload, "name,time,application,num_replicas,batch_size\n"),
    (lambda p: T.load_csv(p, {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}}), "t,g,d\n"),
])
def test_header_only_trace_is_an_error_naming_the_file(tmp_path, loader, text):
    p = write(tmp_path / "header_only.csv", text)
    with pytest.raises(TraceError, match="no data rows") as e:
        loader(p)
    assert e.value.file == str(p)
