"""A run directory belongs to one run (issue 42, case B8): `actorq train --logdir D` into a
D that already holds a run is refused in one line naming what D holds and the ways on
(`--resume D`, another `--logdir`, `--overwrite`), exit 2, nothing written; `--overwrite`
removes the earlier run's files and starts over."""
import csv
import json
import os

import pytest

from actorq.components import checkpointing
from actorq.launch import pbt
from actorq.components import run_dir
from actorq.testing.cli import run_cli, snapshot

SMALL = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=64", "--set", "batch_size=16",
         "--eval-episodes", "1", "--no-progress"]


@pytest.fixture(name="finished_run")
def _finished_run(tmp_path, capsys):
  """D: a finished 300-step run with hidden_sizes=[32] (another configuration than SMALL's)."""
  logdir = tmp_path / "D"
  code, _, err = run_cli(["train", "--steps", "300", "--eval-every", "300", "--logdir",
                          str(logdir)] + SMALL + ["--set", "hidden_sizes=[32]"], capsys)
  assert code == 0, err
  return logdir


@pytest.mark.slow
def test_b8_a_second_run_into_a_run_directory_is_refused_in_one_line(finished_run, capsys):
  logdir = finished_run
  before = snapshot(logdir)
  code, out, err = run_cli(["train", "--steps", "200", "--eval-every", "200", "--logdir",
                            str(logdir)] + SMALL, capsys)
  lines = err.strip().splitlines()
  assert code == 2 and len(lines) == 1, err
  line = lines[0]
  assert line.startswith(f"actorq: error: --logdir {logdir} already holds a run of dqn on "
                         "gym:CartPole-v1, seed 0; 1 checkpoint, the newest at actor step 300")
  assert f"actorq train --resume {logdir}" in line and "another --logdir" in line
  assert "--overwrite" in line and out == ""
  assert snapshot(logdir) == before  # nothing written
  # The run still evaluates from its own (only) checkpoint.
  code, _, err = run_cli(["eval", "--checkpoint", str(logdir), "--episodes", "1"], capsys)
  assert code == 0, err


@pytest.mark.slow
def test_overwrite_starts_over_and_cannot_be_combined_with_resume(finished_run, capsys):
  logdir = finished_run
  (logdir / "notes.txt").write_text("mine")  # not the run's: left alone
  code, _, err = run_cli(["train", "--steps", "200", "--eval-every", "200", "--logdir",
                          str(logdir), "--overwrite"] + SMALL, capsys)
  assert code == 0, err
  info = json.loads((logdir / "run.json").read_text())
  assert info["config"]["hidden_sizes"] == [16] and info["train"]["steps"] == 200
  assert [os.path.basename(p) for p in checkpointing.list_checkpoints(
      str(logdir / "checkpoints"))] == ["ckpt-000000000200.pkl"]
  with open(logdir / "eval.csv", newline="", encoding="utf-8") as f:
    steps = [row["actor_steps"] for row in csv.DictReader(f)]
  assert steps == ["200"]  # the earlier run's row (300) went with it
  assert (logdir / "notes.txt").read_text() == "mine"
  code, _, err = run_cli(["train", "--resume", str(logdir), "--overwrite"], capsys)
  assert code == 2 and "--overwrite starts a new run; --resume continues one" in err


def test_claim_logdir_names_what_a_directory_holds(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  run_dir.claim_logdir(str(empty))  # empty or missing: a new run's
  run_dir.claim_logdir(str(tmp_path / "missing"))
  assert not (tmp_path / "missing").exists()
  logs = tmp_path / "logs_only"
  logs.mkdir()
  (logs / "train.csv").write_text("episodes\n1\n")
  with pytest.raises(Exception, match=r"already holds files of a run \(train\.csv\)"):
    run_dir.claim_logdir(str(logs))
  (tmp_path / "other").mkdir()
  (tmp_path / "other" / "notes.txt").write_text("x")
  run_dir.claim_logdir(str(tmp_path / "other"))  # files no run writes: not a run
  assert run_dir.run_entries(str(logs)) == ["train.csv"]
  run_dir.claim_logdir(str(logs), overwrite=True)
  assert os.listdir(logs) == []


def test_bench_and_quantize_out_refuse_a_train_run_directory(tmp_path, capsys):
  logdir = tmp_path / "D"
  logdir.mkdir()
  (logdir / "run.json").write_text('{"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0, '
                                   '"config": {}}')
  before = sorted(os.listdir(logdir))
  code, _, err = run_cli(["bench", "--logdir", str(logdir), "--steps", "10"], capsys)
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert (f"--logdir {logdir} is the directory of an 'actorq train' run (it holds run.json); "
          "give another --logdir") in err
  assert sorted(os.listdir(logdir)) == before
  with pytest.raises(Exception, match=r"--out .*D is the directory of an 'actorq train' run"):
    run_dir.refuse_run_directory(str(logdir), "--out")
  run_dir.refuse_run_directory(str(logdir / "quantize-sweep"), "--out")  # a folder inside: fine


def _population_dir(path, written_by="settings"):
  """A population run's directory as `actorq pbt` leaves it (its files, small): its
  pbt.json as the settings' fields (before issue 52) or as the run's spec (since)."""
  path.mkdir()
  (path / "pbt.json").write_text(json.dumps({
      "agent": "dqn", "env_id": "gym:CartPole-v1", "population": 4, "steps": 300,
      "ready_every": 100, "mutate": [], "seed": 0, "num_envs": 1, "eval_episodes": 1,
      "quantile": 0.25, "resample_probability": 0.25, "config": {},
      "max_episode_steps": 27000} if written_by == "settings" else pbt.population_spec(
          "dqn", "gym:CartPole-v1", 4, 300, 100, eval_episodes=1).to_json()))
  for name in ("pbt.csv", "pbt_member0.csv"):
    (path / name).write_text("member,actor_steps\n0,100\n")
  for folder in ("population", "best", "tensorboard"):
    (path / folder).mkdir()
  (path / "best" / "run.json").write_text("{}")
  return path


@pytest.mark.parametrize("written_by", ["settings", "spec"])
def test_b19_train_refuses_a_population_run_naming_the_command_that_owns_it(tmp_path, capsys,
                                                                           written_by):
  """Case B19: a directory belongs to one kind of run. `actorq train --logdir P` on a
  population run P names `actorq pbt --resume P` (not `actorq train --resume P`, which
  cannot continue it), also with --overwrite, which must not leave a mixed directory."""
  pop = _population_dir(tmp_path / "P", written_by)
  before = snapshot(pop)
  for extra in ([], ["--overwrite"]):
    code, _, err = run_cli(["train", "--steps", "100", "--logdir", str(pop)] + SMALL + extra,
                           capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err == (f"actorq: error: --logdir {pop} holds a population run of 4 dqn members on "
                   f"gym:CartPole-v1, seed 0 (a directory of 'actorq pbt'); continue it with "
                   f"'actorq pbt --resume {pop}' or give another --logdir (--overwrite starts "
                   "over only a run of 'actorq train')\n")
    assert snapshot(pop) == before
  code, _, err = run_cli(["train", "--resume", str(pop)], capsys)
  assert code == 2 and f"continue it with 'actorq pbt --resume {pop}'" in err, err
  assert snapshot(pop) == before


def test_b19_pbt_refuses_a_train_run_naming_the_command_that_owns_it(tmp_path, capsys):
  run = tmp_path / "D"
  run.mkdir()
  (run / "run.json").write_text(json.dumps({"agent": "dqn", "env": "gym:CartPole-v1",
                                            "seed": 3, "config": {}}))
  (run / "eval.csv").write_text("x\n")
  before = snapshot(run)
  pbt_argv = ["pbt", "--population", "2", "--steps", "100", "--ready-every", "100",
              "--logdir", str(run)]
  for extra in ([], ["--overwrite"]):
    code, _, err = run_cli(pbt_argv + extra, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert (f"holds a run of dqn on gym:CartPole-v1, seed 3 (a directory of 'actorq train'); "
            f"continue it with 'actorq train --resume {run}'") in err, err
  code, _, err = run_cli(["pbt", "--resume", str(run)], capsys)
  assert code == 2 and f"continue it with 'actorq train --resume {run}'" in err, err
  assert snapshot(run) == before
