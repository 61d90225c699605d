"""Traces checked: unsorted rows, duplicated rows, reused job ids and unattainable deadlines are counted and
warned about or refused (as ``checks`` says), empty traces are refused, errors name the row of the file (also
after windowing), mapping aliases extend the default table, and load_csv has the zero-GPU and status filters.
Small CSVs written in tmp_path; data rows are 1-based, header excluded."""
import warnings

import pytest

from clustergym.core import mapping as M
from clustergym.core import traces as T
from clustergym.core.trace_schema import TraceError, TraceWarning

COLS = {"columns": {"job_id": "id", "submit_time": "t", "n_gpus": "g", "duration": "d"}}


def write(path, text):
    path.write_text(text)
    return path


def load(tmp_path, text, mapping=COLS, **kw):
    return T.load_csv(write(tmp_path / "jobs.csv", text), mapping, **kw)


def test_unsorted_rows_are_counted_warned_about_or_refused(tmp_path):
    text = "id,t,g,d\na,0,1,10\nb,50,1,10\nc,20,1,10\nd,60,1,10\ne,30,1,10\n"
    with pytest.warns(TraceWarning, match=r"jobs\.csv: 2 of 5 rows: unsorted rows; the first, data row 3"):
        df = load(tmp_path, text)
    assert df.attrs["report"]["unsorted_rows"] == 2  # rows c (20 < 50) and e (30 < 60)
    assert df["submit_time"].tolist() == [0, 20, 30, 50, 60] and df["source_row"].tolist() == [1, 3, 5, 2, 4]
    with pytest.raises(TraceError, match=r"data row 3 \(line 4\): submitted before an earlier row") as e:
        load(tmp_path, text, checks="error")
    assert e.value.row == 3 and e.value.line == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "report": counted, no warning
        assert load(tmp_path, text, checks="report").attrs["report"]["unsorted_rows"] == 2


def test_duplicated_rows_and_reused_ids_are_told_apart(tmp_path):
    text = "id,t,g,d\na,0,1,10\nb,5,2,10\na,0,1,10\nb,7,1,10\n"
    with pytest.warns(TraceWarning) as rec:
        df = load(tmp_path, text)
    assert df.attrs["report"] == {"unsorted_rows": 1, "duplicate_rows": 1, "duplicate_ids": 1,
                                  "unattainable_deadlines": 0}
    msgs = " | ".join(str(w.message) for w in rec)
    assert "duplicate rows; the first, data row 3: identical to data row 1" in msgs
    assert "duplicate ids; the first, data row 4: job id 'b' already used by data row 2" in msgs
    with pytest.raises(TraceError, match=r"data row 2 \(line 3\): identical to data row 1 \(duplicate_rows"):
        load(tmp_path, "id,t,g,d\na,0,1,10\na,0,1,10\nb,5,2,10\n", checks="error")
    with pytest.raises(TraceError, match=r"data row 3 \(line 4\): job id 'a' already used by data row 1"):
        load(tmp_path, "id,t,g,d\na,0,1,10\nb,5,2,10\na,9,1,10\n", checks="error")
    with pytest.raises(ValueError, match="checks must be one of"):
        load(tmp_path, text, checks="ignore")


def test_pollux_job_names_are_ids(tmp_path):
    p = write(tmp_path / "w.csv", "name,time,application,num_replicas,batch_size\nj1,0,bert,1,32\nj1,5,bert,2,32\n")
    with pytest.raises(TraceError, match=r"w\.csv: data row 2 \(line 3\): job id 'j1' already used by data row 1"):
        T.load_pollux_workload(p, checks="error")
    with pytest.warns(TraceWarning, match="duplicate ids"):
        assert T.load_pollux_workload(p).attrs["report"]["duplicate_ids"] == 1


def test_unattainable_deadlines_are_counted_and_warned_even_when_strict(tmp_path):
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d", "deadline": "dl"}}
    text = "t,g,d,dl\n0,1,100,50\n10,1,100,500\n20,1,300,120\n"  # rows 1 and 3: deadline - submit < run time
    for checks in ("warn", "error"):
        with pytest.warns(TraceWarning, match=r"2 of 3 rows: unattainable deadlines; the first, data row 1"):
            df = load(tmp_path, text, m, checks=checks)
        assert df.attrs["report"]["unattainable_deadlines"] == 2


def test_a_trace_with_no_job_left_is_refused(tmp_path):
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}, "min_duration": 100}
    with pytest.raises(TraceError, match=r"jobs\.csv: no job left \(filters applied: \{'duration<100s': 2\}\)"):
        load(tmp_path, "t,g,d\n0,1,10\n5,1,20\n", m)
    with pytest.raises(TraceError, match="no data rows"):
        load(tmp_path, "t,g,d\n", m)


def test_load_csv_filters_zero_gpu_rows_and_statuses_and_counts_them(tmp_path):
    text = "t,g,d,s\n0,1,10,done\n5,0,10,done\n9,2,10,killed\n12,0,10,killed\n20,4,10,failed\n"
    base = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d", "status": "s"}}
    with pytest.raises(TraceError, match=r"data row 2 \(line 3\): column 'g': zero GPUs"):
        load(tmp_path, text, base)
    df = load(tmp_path, text, {**base, "drop_zero_gpus": True, "statuses": ["done", "failed"]})
    assert df.attrs["filters"] == {"status not in ['done', 'failed']": 2, "zero GPUs": 1}
    assert df["n_gpus"].tolist() == [1, 4] and df["source_row"].tolist() == [1, 5]
    with pytest.raises(ValueError, match=r"statuses needs columns\['status'\]"):
        T.ColumnMapping(columns={"submit_time": "t", "n_gpus": "g", "duration": "d"}, statuses=["done"])


def test_errors_after_windowing_name_the_row_of_the_file(tmp_path):
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d", "model": "m"}}
    text = "t,g,d,m\n0,1,100,bert\n10,1,100,bert\n20,1,100,bert\n30,1,100,gpt-5\n"
    with pytest.warns(T.TraceWarning, match="'gpt-5' \\(1 rows\\)"):  # the file's own rule: sample, with a warning
        df = load(tmp_path, text, m)
    win = T.window(df, 15.0, n_jobs=2)  # the file's rows 3 and 4: rows 1 and 2 of the window
    with pytest.raises(ValueError, match=r"job 3 \(jobs\.csv data row 4\): trace model 'gpt-5'"):
        M.to_job_specs(win, 0, M.MappingConfig())  # the mapping's default: an unknown model is an error


def test_mapping_aliases_extend_the_default_table():
    cfg = M.MappingConfig(aliases={"gpt-2": "Transformer"})
    assert cfg.aliases["gpt-2"] == "Transformer" and cfg.aliases["cifar10"] == "ResNet-18"
    names = ["ResNet-18", "ResNet-50", "Transformer"]
    assert M.resolve_model("gpt-2", names, cfg.aliases) == "Transformer"
    assert M.resolve_model("cifar10", names, cfg.aliases) == "ResNet-18"
    assert M.MappingConfig(aliases={"cifar10": "ResNet-50"}).aliases["cifar10"] == "ResNet-50"  # a given one wins


def test_the_bundled_trace_reports_its_known_counts_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = T.load_philly()
    assert df.attrs["report"] == {"unsorted_rows": 82242, "duplicate_rows": 65, "duplicate_ids": 0,
                                  "unattainable_deadlines": 0}
    assert sorted(df["source_row"]) == list(range(1, len(df) + 1))
