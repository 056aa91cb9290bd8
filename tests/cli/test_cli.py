"""`actorq` CLI: bad input gives one line, exit status 2, and nothing written."""
import os

import pytest

from actorq.cli import main as cli
from actorq.components import config_io
from actorq.agents import registry
from actorq.testing.cli import run_cli


def _run(argv, capsys):
  code, _, err = run_cli(argv, capsys)
  return code, err


@pytest.mark.parametrize("argv,fragment", [
    (["train", "--agent", "nope"], "unknown agent 'nope'; allowed: "),
    (["train", "--env", "CartPole-v1"], "unknown environment id 'CartPole-v1': use 'gym:"),
    (["train", "--env", "gym:NoSuchEnv-v9"], "unknown Gymnasium environment 'NoSuchEnv-v9'"),
    (["train", "--steps", "-5"], "--steps must be a positive integer, got '-5'"),
    (["train", "--steps", "ten"], "--steps must be a positive integer, got 'ten'"),
    (["train", "--env", "dmc:cartpole-balance"], "DQN needs discrete actions"),
    (["train", "--actor-precision", "int3"], "--actor-precision 'int3' not allowed; allowed: "
                                              "fp32, fp16, bf16, int8, litert-fp32, a per-layer precision "
                                              "policy file"),
    (["train", "--actor-precision", "mixed:fp16,int8"],
     "--actor-precision mixed:fp16,int8: precision 'mixed:fp16,int8' gives 2 layer choice(s); "
     "the policy network has 3 parameter layers (dense_0, dense_1, dense_2)"),
    (["train", "--actor-precision", "mixed:fp16,int1,int8"],
     "--actor-precision: precision choice 'int1' not understood"),
    (["train", "--actor-precision", "no/such/policy.json"],
     "--actor-precision no/such/policy.json: cannot read precision policy no/such/policy.json"),
    (["train", "--agent", "r2d2", "--env", "gym:CartPole-v1-po", "--actor-precision",
      "mixed:int8,fp32"], "--actor-precision mixed:int8,fp32: precision 'mixed:int8,fp32' gives "
                          "2 layer choice(s); the policy network has 3 parameter layers "
                          "(torso_0, lstm/linear, head)"),
    (["train", "--num-envs", "0"], "--num-envs must be a positive integer, got '0'"),
    (["train", "--env", "atari:Pong", "--num-envs", "4"],
     "atari:Pong has no vector backend"),
    (["bench", "--num-envs", "1,0"], "--num-envs '1,0': give distinct integers >= 1"),
    (["bench", "--num-envs", "1,8", "--agent", "dqn", "--env", "atari:Pong", "--target", "1"],
     "atari:Pong has no vector backend"),
    (["train", "--learner-device", "tpu"], "invalid choice: 'tpu'"),
    # No GPU for jax in the tests (JAX_PLATFORMS=cpu, conftest), whatever the machine has;
    # local_mp asks a child process with the launcher's environment.
    (["train", "--learner-device", "gpu"], "--learner-device gpu: jax sees no GPU here ("),
    (["train", "--learner-device", "gpu", "--launch", "local_mp"],
     "--learner-device gpu: jax sees no GPU here ("),
])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, fragment, capsys, tmp_path):
  logdir = tmp_path / "run"
  code, err = _run(argv + ["--logdir", str(logdir)], capsys)
  assert code == 2
  assert fragment in err
  assert err.strip().count("\n") == 0 and "Traceback" not in err
  assert not logdir.exists()


def test_unwritable_logdir(capsys, tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  code, err = _run(["train", "--logdir", str(blocker / "sub")], capsys)
  assert code == 2 and "is not a writable directory" in err
  code, err = _run(["train", "--logdir", str(blocker)], capsys)
  assert code == 2 and "exists and is not a directory" in err


def test_help_lists_commands(capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(["--help"])
  assert e.value.code == 0
  out = capsys.readouterr().out
  for command in ("train", "quantize"):
    assert command in out


@pytest.mark.slow
def test_train_and_quantize_end_to_end(capsys, tmp_path):
  """A short run writes the documented files; quantize reads them back."""
  logdir = tmp_path / "run"
  code = cli.main(["train", "--steps", "1500", "--eval-every", "1500", "--eval-episodes", "2",
                   "--logdir", str(logdir), "--no-progress", "--actor-precision", "int8"])
  out = capsys.readouterr().out
  assert code == 0 and "final evaluation return:" in out
  for name in ("run.json", "train.csv", "learner.csv", "eval.csv"):
    assert (logdir / name).exists(), name
  header, row = (logdir / "eval.csv").read_text().splitlines()[:2]
  values = dict(zip(header.split(","), row.split(",")))
  assert values["actor_precision"] == "int8" and int(values["actor_steps"]) == 1500
  assert 0 < int(values["payload_bytes"]) < 0.27 * 4 * (4 * 256 + 256 * 256 + 256 * 2 + 514)
  code = cli.main(["quantize", "--checkpoint", str(logdir), "--episodes", "2"])
  out = capsys.readouterr().out
  assert code == 0 and "int8/fp32: return ratio" in out and "model bytes ratio 0.26" in out


@pytest.mark.slow
def test_python_dash_m_usage_error_is_one_line_exit_2(tmp_path):
  """`python -m actorq.cli.main` runs the module as __main__; a command's UsageError
  (raised with the imported module's class) must still be caught: exit 2, one line."""
  import subprocess
  import sys
  logdir = tmp_path / "run"
  proc = subprocess.run([sys.executable, "-m", "actorq.cli.main", "train", "--agent", "nope",
                         "--logdir", str(logdir)], capture_output=True, text=True, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu"))
  assert proc.returncode == 2, proc.stderr
  assert "unknown agent 'nope'; allowed: " in proc.stderr and "Traceback" not in proc.stderr
  assert not logdir.exists()


@pytest.mark.slow
def test_learner_device_gpu_without_a_gpu_is_one_line_exit_2(tmp_path):
  """The real detection (no JAX_PLATFORMS in the environment): on a machine where jax sees
  no GPU, `actorq train --learner-device gpu` exits 2 with one line and writes nothing."""
  import subprocess
  import sys
  from actorq.components import placement
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  if placement.probe_gpu(env=env) is not None:
    pytest.skip("jax sees a GPU on this machine")
  logdir = tmp_path / "run"
  proc = subprocess.run([sys.executable, "-m", "actorq.cli.main", "train", "--learner-device",
                         "gpu", "--logdir", str(logdir)], capture_output=True, text=True,
                        check=False, env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("actorq: error: --learner-device gpu: jax sees "
                                                 "no GPU here ("), proc.stderr
  assert "Traceback" not in proc.stderr and not logdir.exists()


def _help(argv, capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(argv)
  captured = capsys.readouterr()
  return e.value.code, " ".join(captured.out.split()), captured.err


def test_train_agent_help_lists_every_config_field_with_type_default_and_meaning(capsys):
  code, out, _ = _help(["train", "--agent", "sac", "--help"], capsys)
  assert code == 0
  assert "--launch" in out  # the usual flags come first
  help_ = {h.name: h for h in config_io.field_help(registry.get("sac")[0])}
  assert "config fields of sac (SACConfig" in out
  for name in help_:
    assert f" {name}: " in out, name
  spi, precision = help_["samples_per_insert"], help_["actor_precision"]
  assert f"samples_per_insert: float, default 256.0 {' '.join(spi.meaning.split())}" in out
  assert "sampled transitions per inserted transition" in out
  assert f"actor_precision: str, default fp32 {' '.join(precision.meaning.split())}" in out
  assert "precision the actors act with: fp32, fp16, bf16, int8" in out
  assert "policy_hidden_sizes: list of int, default [256, 256]" in out
  assert "evaluation_precision: str or null, default null" in out


def test_train_help_without_agent_names_the_agents(capsys):
  code, out, _ = _help(["train", "--help"], capsys)
  assert code == 0
  assert f"agents: {', '.join(registry.names())}; add --agent NAME before --help" in out
  assert "config fields of" not in out and "samples_per_insert" not in out
  code, out, err = _help(["train", "--agent", "nosuch", "--help"], capsys)
  assert code == 2 and out == ""
  with pytest.raises(registry.UnknownAgentError) as unknown:
    registry.get("nosuch")
  assert str(unknown.value).startswith("unknown agent 'nosuch'; allowed: " + ", ".join(registry.names()))
  assert err == f"actorq: error: {unknown.value}\n"


NO_LEARNING = ("actorq: warning: --steps {steps} ends before the learner's first step: it "
               "starts once replay holds min_replay_size={needed} items, one per actor step "
               "at most (summed over actors and environments), so this run will not learn; "
               "give --steps above {needed} or --set min_replay_size=N with N below {steps}\n")


@pytest.mark.parametrize("argv,steps,needed", [
    ([], 999, 1000),  # DQN's default min_replay_size
    (["--set", "min_replay_size=5000"], 3000, 5000),  # the MinAtar DQN config's value
    (["--num-envs", "4"], 200, 1000),  # --steps already counts every environment's steps
])
def test_train_too_short_to_learn_warns_once_and_goes_on(argv, steps, needed, capsys):
  code, out, err = run_cli(["train", "--dry-run", "--steps", str(steps)] + argv, capsys)
  assert code == 0 and out.startswith("launch local: one process")
  assert err == NO_LEARNING.format(steps=steps, needed=needed)


@pytest.mark.parametrize("argv", [
    ["--steps", "1000"],  # reaches min_replay_size 1000
    ["--steps", "200", "--set", "min_replay_size=200"],
    ["--steps", "10", "--agent", "a2c"],  # on-policy: learns from its first rollouts
])
def test_train_long_enough_to_learn_does_not_warn(argv, capsys):
  code, _, err = run_cli(["train", "--dry-run"] + argv, capsys)
  assert code == 0 and err == ""


def test_no_learning_warning_names_both_numbers():
  from actorq.cli import train
  assert train.no_learning_warning(3000, 5000) == NO_LEARNING.format(
      steps=3000, needed=5000).rstrip("\n")
  assert train.no_learning_warning(3000, 5000, resume=True) == (
      "actorq: warning: --steps 3000 ends before the learner's first step: it starts once "
      "replay holds min_replay_size=5000 items, one per actor step at most (summed over "
      "actors and environments), so this run will not learn; give --steps above 5000")
  assert train.no_learning_warning(5000, 5000) is None
  assert train.no_learning_warning(1, 0) is None


def test_train_too_short_to_learn_runs_acting_only_as_warned(capsys, tmp_path):
  """The warning is true: the run goes on, acts every step and takes no learner step."""
  code, out, err = run_cli(["train", "--steps", "300", "--eval-every", "300",
                            "--eval-episodes", "1", "--no-progress", "--logdir",
                            str(tmp_path / "run")], capsys)
  assert code == 0 and err == NO_LEARNING.format(steps=300, needed=1000)
  assert ": 300 actor steps, 0 learner steps, " in out
  code, out, err = run_cli(["train", "--resume", str(tmp_path / "run"), "--steps", "600",
                            "--no-progress"], capsys)  # --set is refused with --resume
  assert code == 0 and err == NO_LEARNING.format(steps=600, needed=1000).split(
      " or --set")[0] + "\n"
  assert ": 600 actor steps, 0 learner steps, " in out


@pytest.mark.parametrize("command", [
    ["train", "--steps", "50"],
    ["pbt", "--population", "2", "--steps", "50", "--ready-every", "50"],
    ["sweep", "--steps", "50"],
])
@pytest.mark.parametrize("seed", [2**32, 2**64])
def test_b15_a_seed_above_2_31_is_refused_in_one_line_nothing_written(command, seed, capsys,
                                                                      tmp_path):
  """Case B15: seeds were cut to 32 bits (0 and 2**32 gave bit-identical networks) and
  2**64 crashed part-way (OverflowError) after run.json was written. Seeds go up to 2**31 - 1,
  which jax, numpy and EnvPool take unchanged; a larger one is refused."""
  logdir = tmp_path / "run"
  flag = "--seeds" if command[0] == "sweep" else "--seed"
  code, _, err = run_cli(command + [flag, str(seed), "--logdir", str(logdir)], capsys)
  assert code == 2 and err.count("\n") == 1, err
  assert "2147483647" in err and str(seed) in err, err
  assert not logdir.exists()


def test_b15_seeds_are_taken_whole():
  """Every accepted seed is its own run: the largest one reaches jax's key unchanged (no
  32-bit truncation, and distinct from seed 0's), and the run's config takes it."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from actorq import core  # pylint: disable=import-outside-toplevel
  from actorq.agents.dqn.builder import DQNBuilder  # pylint: disable=import-outside-toplevel
  from actorq.agents.dqn.config import DQNConfig  # pylint: disable=import-outside-toplevel
  from actorq.launch import experiment  # pylint: disable=import-outside-toplevel
  keys = {s: np.asarray(jax.random.PRNGKey(s)).tolist() for s in (0, 1, core.MAX_SEED)}
  assert keys == {0: [0, 0], 1: [0, 1], core.MAX_SEED: [0, core.MAX_SEED]}
  experiment.ExperimentConfig(DQNBuilder(DQNConfig()), "gym:CartPole-v1", 10,
                              seed=core.MAX_SEED)
  for bad in (core.MAX_SEED + 1, 2**32, -1, True):
    with pytest.raises(ValueError, match="seed must be an integer from 0 to 2147483647"):
      experiment.ExperimentConfig(DQNBuilder(DQNConfig()), "gym:CartPole-v1", 10, seed=bad)


@pytest.mark.parametrize("tokens,seeds", [
    (["0-9"], tuple(range(10))),
    (["0,1,2"], (0, 1, 2)),
    (["0", "1", "2"], (0, 1, 2)),
    (["0 1 2"], (0, 1, 2)),
    (["3-5,9", "12"], (3, 4, 5, 9, 12)),
    (["7"], (7,)),
])
def test_parse_seeds(tokens, seeds):
  assert cli.parse_seeds(tokens) == seeds


@pytest.mark.parametrize("tokens,fragment", [
    (["5-2"], "goes down"), (["a"], "is not a seed"), (["-1"], "is not a seed"),
    (["0-2", "2"], "seed 2 is given twice"), ([","], "no seeds"), (["1.5"], "is not a seed"),
])
def test_bad_seeds(tokens, fragment):
  with pytest.raises(ValueError, match=fragment):
    cli.parse_seeds(tokens)
