"""A run directory written by an older version (commit 7a30947, before RunSpec) still loads
for `actorq eval`, `quantize`, `export` and `train --resume` (issue 38).

The fixture `tests/fixtures/run_7a30947_dqn` was made at 7a30947 with
    actorq train --steps 400 --eval-every 200 --eval-episodes 2 --seed 0 --no-progress \
      --set hidden_sizes=[16] --set min_replay_size=100 --set batch_size=16 \
      --set max_replay_size=1000 --logdir tests/fixtures/run_7a30947_dqn
and every expected figure below is what 7a30947 printed for it on an x86-64 CPU. Those
figures come from forward passes of the saved parameters (greedy evaluation, int8
quantization, export) and hold on other x86-64 CPUs; what a resumed run learns does not
(XLA compiles for the host's instruction set), so the resume test compares two resumes
made in the test (docs/guides/reproducibility.md, "Writing a seeded test").
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from actorq.cli import main as cli

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "run_7a30947_dqn")
CHECKPOINT = os.path.join(FIXTURE, "checkpoints", "ckpt-000000000400.pkl")


def test_fixture_stays_small():
  total = sum(os.path.getsize(os.path.join(d, f))
              for d, _, files in os.walk(FIXTURE) for f in files)
  assert total < 300_000


def test_eval_loads_the_old_run(capsys):
  assert cli.main(["eval", "--checkpoint", FIXTURE, "--episodes", "2", "--seed", "7"]) == 0
  out = capsys.readouterr().out
  assert f"checkpoint {CHECKPOINT} (actor step 400, learner step 598)" in out
  assert "episode return: mean 10.00, std 1.00, min 9.00, max 11.00" in out
  assert "returns: 9.0, 11.0" in out


def test_quantize_loads_the_old_run(capsys):
  assert cli.main(["quantize", "--checkpoint", FIXTURE, "--episodes", "2"]) == 0
  out = capsys.readouterr().out
  rows = {m.group(1): m.groups()[1:] for m in re.finditer(
      r"^(fp32|int8)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)$", out, re.M)}
  assert rows == {"fp32": ("9.0", "0.0", "1.000", "524"),
                  "int8": ("9.0", "0.0", "0.944", "264")}, out


@pytest.mark.slow
def test_export_loads_the_old_run(tmp_path):
  # In a fresh process, as a user runs it: the int8 model's bytes depend on which
  # float/int8 patterns of the same spec this process converted before
  # (litert_runtime's template cache), so a suite worker can print other byte counts.
  out_file = str(tmp_path / "m.tflite")
  proc = subprocess.run([sys.executable, "-m", "actorq.cli", "export", "--checkpoint", FIXTURE,
                         "--episodes", "2", "--out", out_file],
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  assert f"model: {out_file} (1,744 bytes, int8)" in out
  assert ("parity over 2 episodes: return fp32 9.0 +- 0.0, exported 9.0 +- 0.0; "
          "greedy-action agreement 0.944") in out
  assert os.path.getsize(out_file) == 1744


@pytest.mark.slow
def test_resume_continues_the_old_run(tmp_path, capsys):
  # Two resumes of the same old run in this test: what they compute (returns, episodes,
  # the learner's checksum) depends on the CPU's instruction set (XLA compiles for the
  # host), so it is compared between the two, never with a value recorded elsewhere
  # (issue 56, B21); the step counts do not depend on it.
  outs = []
  for name in ("a", "b"):
    run = str(tmp_path / name)
    shutil.copytree(FIXTURE, run)
    with open(os.path.join(run, "run.json")) as f:
      before = json.load(f)
    assert cli.main(["train", "--resume", run, "--steps", "600", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"resumed from {run}/checkpoints/ckpt-000000000400.pkl (actor step 400)" in out
    assert re.search(r"\b600 actor steps, 998 learner steps, \d+ episodes", out), out
    assert "actorq: --resume: run.json now records steps 400 -> 600\n" in out
    with open(os.path.join(run, "run.json")) as f:
      after = json.load(f)  # the extended --steps is recorded (case B13), the rest kept
    assert after["train"] == dict(before["train"], steps=600)
    assert {k: after[k] for k in ("agent", "env", "seed")} == \
        {k: before[k] for k in ("agent", "env", "seed")}
    assert {k: after["config"][k] for k in before["config"]} == before["config"]
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == [
        "ckpt-000000000400.pkl", "ckpt-000000000600.pkl"]
    with open(os.path.join(run, "eval.csv")) as f:
      lines = f.read().splitlines()
    assert [line.split(",")[1] for line in lines[1:]] == ["200", "400", "600"]
    outs.append(out)
  final = [re.search(r"^final evaluation return: .* learner parameters [0-9a-f]{16}$", out,
                     re.M) for out in outs]
  assert all(final), outs
  assert final[0].group(0) == final[1].group(0)
  assert [re.search(r"\d+ episodes", out).group(0) for out in outs] == \
      [re.search(r"\d+ episodes", outs[0]).group(0)] * 2
