"""train/seeds.py: which command each seed's run needs, the launcher, and the table across seeds."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from clustergym.train import seeds as S


def _run(out: Path, seed: int, agent: list[float], others: dict[str, list[float]], finished: bool = True,
         deadline: float = 0.9) -> None:
    folder = S.seed_folder(out, seed)
    folder.mkdir(parents=True)
    recs = [{"policy": "agent", "seed": 10_000 + i, S.JCT: v, S.DEADLINE: deadline} for i, v in enumerate(agent)]
    for p, vals in others.items():
        recs += [{"policy": p, "seed": 10_000 + i, S.JCT: v, S.DEADLINE: 0.8} for i, v in enumerate(vals)]
    pd.DataFrame(recs).to_csv(folder / "episodes.csv", index=False)
    (folder / "state.json").write_text(json.dumps({"finished": finished}, indent=1))


def test_rows_are_relative_mean_differences_per_seed(tmp_path):
    _run(tmp_path, 0, [80.0, 100.0], {"mlf-h": [100.0, 100.0], "fifo": [45.0, 45.0]})
    rows = {r["vs"]: r for r in S.seed_rows(S.seed_folder(tmp_path, 0), 0)}
    assert rows["mlf-h"]["rel_jct"] == pytest.approx(-0.10)
    assert rows["fifo"]["rel_jct"] == pytest.approx(1.0)
    assert rows["mlf-h"]["deadline_diff"] == pytest.approx(0.1)
    assert rows["mlf-h"]["windows"] == 2


def test_table_across_seeds_counts_the_target_and_names_missing_seeds(tmp_path):
    _run(tmp_path, 0, [80.0], {"mlf-h": [100.0]})  # -20 %
    _run(tmp_path, 1, [95.0], {"mlf-h": [100.0]})  # -5 %
    _run(tmp_path, 2, [70.0], {"mlf-h": [100.0]})  # -30 %
    md = S.table(tmp_path, [0, 1, 2, 3], 0.10)
    rows = pd.read_csv(tmp_path / "seeds.csv")
    summary = S.across_seeds(rows, 0.10).set_index("vs").loc["mlf-h"]
    assert summary["seeds"] == 3 and summary["seeds_at_target"] == 2
    assert summary["rel_jct_mean"] == pytest.approx(-0.55 / 3)
    assert summary["rel_jct_low"] < summary["rel_jct_mean"] < summary["rel_jct_high"]
    assert "Seeds without a final table (not in the table): [3]" in md
    row = next(line for line in md.splitlines() if line.startswith("| mlf-h"))
    assert "-18.3 %" in row and "| 2 " in row  # the mean over seeds and the seeds at the 10 % target
    assert (tmp_path / "seeds.md").read_text() == md


def test_table_without_any_finished_run_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no finished run"):
        S.table(tmp_path, [0], 0.1)


def test_run_command_skips_finished_resumes_checkpointed_and_restarts_empty(tmp_path):
    _run(tmp_path, 0, [1.0], {"mlf-h": [1.0]})
    assert S.run_command(tmp_path, 0, []) is None
    _run(tmp_path, 1, [1.0], {"mlf-h": [1.0]}, finished=False)
    assert S.run_command(tmp_path, 1, [])[2:4] == ["--resume", str(S.seed_folder(tmp_path, 1))]
    stale = S.seed_folder(tmp_path, 2)
    stale.mkdir()
    (stale / "config.yaml").write_text("seed: 2\n")
    cmd = S.run_command(tmp_path, 2, ["--timesteps", "10"])
    assert not stale.exists() and cmd[2:6] == ["--seed", "2", "--out", str(stale)] and cmd[-2:] == ["--timesteps", "10"]
    assert cmd[cmd.index("--baseline-cache") + 1] == str(tmp_path / S.BASELINE_CACHE)  # one cache per --out
    own = S.run_command(tmp_path, 3, ["--baseline-cache", "/elsewhere.json"])
    assert own.count("--baseline-cache") == 1 and own[-1] == "/elsewhere.json"


def test_launcher_runs_each_seed_and_reports_exit_codes(tmp_path, monkeypatch):
    fake = tmp_path / "fake_ppo.py"
    fake.write_text("import sys, pathlib\nargs = sys.argv[1:]\nseed = int(args[args.index('--seed') + 1])\n"
                    "pathlib.Path(args[args.index('--out') + 1]).mkdir(parents=True)\nsys.exit(seed)\n")
    monkeypatch.setattr(S, "PPO", fake)
    out = tmp_path / "runs"
    out.mkdir()
    codes = S.launch(out, [0, 3], jobs=2, extra=[])
    assert codes == {0: 0, 3: 3}
    assert (out / "seed-0.log").exists() and S.seed_folder(out, 3).is_dir()


def test_flags_the_launcher_sets_itself_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        S.main(["--out", str(tmp_path), "--", "--seed", "3"])
    assert "sets --seed" in capsys.readouterr().err
