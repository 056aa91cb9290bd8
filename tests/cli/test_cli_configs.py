"""Config values through every entry point (issue 18): a bad or contradicting `--set`
value is one line, exit 2 and no run directory in `train`, `bench` and `sweep` (cases B2,
B5); a run.json from another version (an extra key) is a warning naming the key in
`eval`, `quantize` and `train --resume`, and the command runs (case B6)."""
import json

import pytest

from actorq.testing.cli import run_cli

ALLOWED = ("must be one of fp32, fp16, bf16, int8, litert-fp32 or mixed:<choice>,... (one per layer, e.g. "
           "mixed:fp16,int8,int8)")
B2 = ("DQNConfig: need min_replay_size <= max_replay_size (learning starts once the table "
      "holds min_replay_size transitions); got min_replay_size=1000, max_replay_size=500")


_run = run_cli


_BAD_SETS = [
    (["--set", "min_replay_size=1000", "--set", "max_replay_size=500"], B2),
    (["--set", "actor_precision=int4"], f"DQNConfig.actor_precision {ALLOWED}; got 'int4'"),
    (["--set", "evaluation_precision=fp8"],
     f"DQNConfig.evaluation_precision {ALLOWED} (or null); got 'fp8'"),
    # Checked as given even when a precision flag would replace it.
    (["--set", "actor_precision=int4", "--actor-precision", "int8"],
     f"DQNConfig.actor_precision {ALLOWED}; got 'int4'"),
    (["--set", "learning_rate=nan"], "DQNConfig.learning_rate must be a finite number > 0, "
                                     "got nan"),
]


@pytest.mark.parametrize("argv,message", _BAD_SETS)
def test_train_refuses_bad_set_values_before_writing_anything(argv, message, capsys, tmp_path):
  logdir = tmp_path / "run"
  code, _, err = _run(["train", "--logdir", str(logdir), "--steps", "10"] + argv, capsys)
  assert code == 2
  assert err == f"actorq: error: {message}\n"
  assert not logdir.exists()


@pytest.mark.parametrize("argv,message", [a for a in _BAD_SETS if "--actor-precision" not in a[0]])
def test_bench_refuses_bad_set_values_before_writing_anything(argv, message, capsys, tmp_path):
  logdir = tmp_path / "bench"
  code, _, err = _run(["bench", "--logdir", str(logdir), "--steps", "10"] + argv, capsys)
  assert code == 2
  assert err == f"actorq: error: --set: {message}\n"
  assert not logdir.exists()


@pytest.mark.parametrize("argv,message", [a for a in _BAD_SETS if "--actor-precision" not in a[0]])
def test_sweep_refuses_bad_set_values_before_writing_anything(argv, message, capsys, tmp_path):
  logdir = tmp_path / "sweep"
  code, _, err = _run(["sweep", "--logdir", str(logdir), "--steps", "10", "--seeds", "0"] + argv,
                      capsys)
  assert code == 2
  assert err == f"actorq: error: {message}\n"
  assert not logdir.exists()


@pytest.mark.parametrize("command", ["bench", "sweep"])
def test_a_valid_actor_precision_in_set_points_at_precisions(command, capsys, tmp_path):
  """bench and sweep set each run's precision from --precisions: a --set value would be
  silently replaced, so it is refused."""
  logdir = tmp_path / command
  code, _, err = _run([command, "--logdir", str(logdir), "--steps", "10",
                       "--set", "actor_precision=int8"], capsys)
  assert code == 2
  assert err == ("actorq: error: --set actor_precision=int8: each run's actor precision comes "
                 "from --precisions; use --precisions instead\n")
  assert not logdir.exists()


SMALL = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=100", "--set", "batch_size=16"]


@pytest.mark.slow
def test_run_json_with_a_key_from_another_version_warns_and_runs(capsys, tmp_path):
  """B6: `legacy_option: 1` in run.json's config: eval, quantize and train --resume each
  warn naming the key, then run (exit 0, their usual output, no traceback)."""
  logdir = tmp_path / "run"
  code, _, err = _run(["train", "--steps", "300", "--eval-every", "300", "--eval-episodes", "1",
                       "--logdir", str(logdir), "--no-progress"] + SMALL, capsys)
  assert code == 0, err
  info = json.loads((logdir / "run.json").read_text())
  info["config"]["legacy_option"] = 1
  (logdir / "run.json").write_text(json.dumps(info))
  expected = "run.json: ignoring DQNConfig key(s) this version does not know: legacy_option"

  with pytest.warns(UserWarning) as record:
    code, out, err = _run(["eval", "--checkpoint", str(logdir), "--episodes", "1"], capsys)
  assert code == 0 and "episode return: mean" in out and "Traceback" not in err
  assert [str(w.message) for w in record if "run.json" in str(w.message)] == [expected]

  with pytest.warns(UserWarning) as record:
    code, out, err = _run(["quantize", "--checkpoint", str(logdir), "--episodes", "1"], capsys)
  assert code == 0 and "int8/fp32: return ratio" in out and "Traceback" not in err
  assert [str(w.message) for w in record if "run.json" in str(w.message)] == [expected]

  with pytest.warns(UserWarning) as record:
    code, out, err = _run(["train", "--resume", str(logdir), "--steps", "400", "--no-progress"],
                          capsys)
  assert code == 0, err
  assert "resumed from" in out and "400 actor steps" in out
  assert [str(w.message) for w in record if "run.json" in str(w.message)] == [expected]
