"""`actorq bench` settings: presets resolve to the documented configurations, and bad
input is a one-line usage error; `--num-envs` measures each B and precision side by side."""
import json

import pytest

from actorq.cli import bench as bench_cmd
from actorq.cli import main as cli


def _resolve(argv):
  return bench_cmd.resolve(cli.build_parser().parse_args(["bench"] + argv))


def test_actorq_preset_is_d4pg_with_a_3x2048_policy_and_acme_replay_settings():
  s = _resolve(["--preset", "actorq"])
  assert (s["agent"], s["env"], s["precisions"], s["seeds"]) == (
      "d4pg", "dmc:cartpole-balance", ("fp32", "int8"), (0, 1, 2))
  assert s["overrides"]["policy_hidden_sizes"] == [2048, 2048, 2048]
  assert s["overrides"]["critic_hidden_sizes"] == [512, 512, 256]
  # Acme 0.4.0 D4PG: samples_per_insert 32, actors pull every 1,000 steps.
  assert s["overrides"]["samples_per_insert"] == 32.0
  assert s["overrides"]["variable_update_period"] == 1000
  assert s["overrides"]["dqda_clipping"] == 1.0
  assert s["overrides"]["policy_learning_rate"] == 3e-5  # wider policies saturate at 3e-4
  # Acme's D4PG networks: LayerNorm critic torso, near-zero policy head.
  assert s["overrides"]["critic_layer_norm"] is True
  assert s["overrides"]["policy_output_init_scale"] == 1e-4
  assert (s["steps"], s["eval_every"], s["target"]) == (100_000, 5_000, 900.0)
  walker = _resolve(["--preset", "actorq", "--env", "dmc:walker-stand", "--steps", "3000",
                     "--precisions", "int8,fp16", "--set", "batch_size=64"])
  assert walker["env"] == "dmc:walker-stand" and walker["target"] == 900.0
  assert walker["precisions"] == ("int8", "fp16") and walker["eval_every"] == 3000
  assert walker["overrides"]["batch_size"] == 64


def test_small_preset_is_dqn_on_cartpole():
  s = _resolve([])
  assert (s["agent"], s["env"], s["precisions"]) == ("dqn", "gym:CartPole-v1",
                                                     ("fp32", "fp16", "int8"))
  assert s["target"] == 200.0


@pytest.mark.parametrize("argv,fragment", [
    (["--precisions", "fp32,int3"], "allowed precisions are fp32, fp16, bf16, int8"),
    (["--precisions", "int8,int8"], "repeats a precision"),
    (["--env", "dmc:cartpole-balance", "--target", "900"], "cannot run on dmc:cartpole-balance"),
    (["--preset", "actorq", "--env", "dmc:cheetah-run"], "no target return known for dmc:cheetah-run"),
    (["--set", "no_such_field=1"], "--set: "),
])
def test_bad_settings_are_usage_errors(argv, fragment):
  with pytest.raises(cli.UsageError) as e:
    _resolve(argv)
  assert fragment in str(e.value)


def test_render_of_a_directory_without_bench_json_is_a_usage_error(tmp_path):
  with pytest.raises(cli.UsageError, match="no bench.json there"):
    bench_cmd.run(cli.build_parser().parse_args(["bench", "--render", str(tmp_path)]))
  with pytest.raises(cli.UsageError, match="either --render or --merge, not both"):
    bench_cmd.run(cli.build_parser().parse_args(
        ["bench", "--render", str(tmp_path), "--merge", str(tmp_path), str(tmp_path)]))


def test_num_envs_measures_each_b_and_precision_side_by_side(tmp_path, capsys):
  out = tmp_path / "vec"
  assert cli.main(["bench", "--num-envs", "1,4", "--precisions", "fp32,int8", "--acting-steps",
                   "64", "--repeats", "1", "--set", "hidden_sizes=[16]",
                   "--logdir", str(out)]) == 0
  assert "| B | precision | actor steps/s |" in capsys.readouterr().out
  result = json.loads((out / "vector.json").read_text())
  rows = result["rows"]
  assert [(r["num_envs"], r["precision"]) for r in rows] == [
      (1, "fp32"), (1, "int8"), (4, "fp32"), (4, "int8")]
  for row in rows:
    # The breakdown accounts for the whole step: its parts sum to the measured step time.
    assert min(row["us"].values()) >= 0
    assert sum(row["us"].values()) * row["steps_per_s"] == pytest.approx(1e6, rel=1e-6)
    assert row["speedup"] == pytest.approx(
        row["steps_per_s"] / rows[0 if row["precision"] == "fp32" else 1]["steps_per_s"])
  assert [r["speedup"] for r in rows[:2]] == [1.0, 1.0]
  assert set(result["bare"]) == {"1", "4"} and min(result["bare"].values()) > 0
  assert (out / "table.md").read_text().startswith("| B | precision |")


@pytest.mark.parametrize("argv,earlier", [
    (["bench", "--num-envs", "1,4", "--acting-steps", "64", "--repeats", "1"], "vector.json"),
    (["bench", "--preset", "small"], "bench.json"),
])
def test_an_earlier_report_in_logdir_is_not_replaced_without_overwrite(argv, earlier, tmp_path,
                                                                       capsys):
  """Issue 56 (left from issue 42): `actorq bench --logdir D` replaced D's earlier report
  without asking. Refused in one line, exit 2, D unchanged; --overwrite writes over it."""
  from actorq.components import run_dir  # pylint: disable=import-outside-toplevel
  out = tmp_path / "bench"
  out.mkdir()
  (out / earlier).write_text("{}")
  (out / "table.md").write_text("# earlier\n")
  assert cli.main(argv + ["--logdir", str(out)]) == 2
  err = capsys.readouterr().err
  assert err == (f"actorq: error: --logdir {out} already holds a report of 'actorq bench' "
                 f"({earlier}, table.md); give another --logdir, or add --overwrite to "
                 "replace it\n"), err
  assert sorted(p.name for p in out.iterdir()) == sorted([earlier, "table.md"])
  assert (out / "table.md").read_text() == "# earlier\n"
  assert run_dir.report_dir(str(out), report_files=(earlier,), overwrite=True) == str(out)


@pytest.mark.slow
def test_launch_anakin_measures_each_b_beside_the_python_loop(tmp_path, capsys):
  """`actorq bench --launch anakin` (issue 54, item 6): the bare env, acting and PPO
  training rates at each B of --num-envs, beside the Python loop on gym:CartPole-v1."""
  out = tmp_path / "anakin"
  assert cli.main(["bench", "--launch", "anakin", "--num-envs", "1,4", "--acting-steps", "60",
                   "--repeats", "1", "--steps", "256", "--logdir", str(out)]) == 0
  assert "| training: PPO | B |" in capsys.readouterr().out
  result = json.loads((out / "anakin.json").read_text())
  assert [(r["what"].split(" (")[0], r["B"]) for r in result["rows"]] == [
      ("env: gym:CartPole-v1", 1), ("acting: PPO fp32, gym:CartPole-v1", 1),
      ("env: gymnax:CartPole-v1", 1), ("acting: PPO fp32", 1),
      ("acting: PPO int8 emulated", 1), ("env: gymnax:CartPole-v1", 4),
      ("acting: PPO fp32", 4), ("acting: PPO int8 emulated", 4)]
  assert min(r["steps_per_s_wall"] for r in result["rows"]) > 0
  training = result["training"]
  assert [(t["launch"], t["B"]) for t in training][1:] == [("anakin", 1), ("anakin", 4)]
  assert training[0]["launch"] == "local" and training[0]["env"] == "gym:CartPole-v1"
  assert all(t["steps"] >= 256 and t["steps_per_s"] > 0 for t in training)
  table = (out / "table.md").read_text()
  assert table.count("| --launch anakin gymnax:CartPole-v1 |") == 2


def test_launch_anakin_refuses_what_it_does_not_measure(capsys):
  assert cli.main(["bench", "--launch", "anakin", "--seeds", "1"]) == 2
  assert "--launch anakin measures PPO on gymnax:CartPole-v1" in capsys.readouterr().err
