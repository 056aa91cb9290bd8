"""`--launch anakin` against the Python loop, side by side in one invocation (issue 54).

    actorq bench --launch anakin [--num-envs 1,32,256,1024] [--steps 100000]
        [--acting-steps 2000] [--repeats 3] [--logdir DIR]       # the rows below, `run`
    python -m actorq.benchmarks.anakin_bench [--ppo-steps 500000] [--local-steps 20000]
        [--batches 1,32,256,1024] [--out results.json]
    python -m actorq.benchmarks.anakin_bench --dqn 30,4000,3   # DQN seeds vs local runs

Rows (steps/s = environment steps per second of wall-clock, medians of --repeats):
  * env: the bare environment: gymnax CartPole-v1 stepped B at a time in a jitted scan
    (random actions), and Gymnasium's CartPole-v1 stepped from Python (B = 1);
  * acting: PPO's policy network (fp32 and emulated int8) choosing the actions of B gymnax
    environments in a jitted scan, and the same fp32 policy (jitted) acting on Gymnasium's
    CartPole-v1 from a Python loop (B = 1);
  * training: PPO on gymnax:CartPole-v1 with --launch anakin (B = batch_size environments,
    the config's other values) for --ppo-steps, its wall-clock (compilation included and
    apart) and final greedy return, and PPO with --launch local on gym:CartPole-v1 for
    --local-steps; the ratio of their steps/s. `run` (`actorq bench --launch anakin`)
    trains the anakin PPO at each B (batch_size = B environments) and the local PPO once
    (its actor steps B = `--num-envs` = 1 environment; batch_size rollouts per learner
    step).
CPU time (`process_time`) is printed beside wall-clock: on a shared machine the wall
includes other processes' load, the CPU time does not.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from actorq.agents.anakin_common import systems
from actorq.components.anakin import acting
from actorq.components.envs import gymnax_env
from actorq.launch import anakin
from actorq.launch import local
from actorq.launch import spec as spec_lib
from actorq.quantization import forward


def _timed(fn, repeats):
  walls, cpus = [], []
  for _ in range(repeats):
    w, c = time.time(), time.process_time()
    fn()
    walls.append(time.time() - w)
    cpus.append(time.process_time() - c)
  return statistics.median(walls), statistics.median(cpus)


def gymnax_env_rate(batch, steps, repeats):
  env = gymnax_env.functional("CartPole-v1")

  @jax.jit
  def run(key):
    state, _ = jax.vmap(env.reset)(jax.random.split(key, batch))

    def body(state, k):
      k_a, k_s, k_r = jax.random.split(k, 3)
      action = jax.random.randint(k_a, (batch,), 0, 2)
      s2, _, _, _, last = jax.vmap(env.step)(jax.random.split(k_s, batch), state, action)
      s0, _ = jax.vmap(env.reset)(jax.random.split(k_r, batch))
      return acting.tree_where(last, s0, s2), None

    state, _ = jax.lax.scan(body, state, jax.random.split(key, steps))
    return state

  jax.block_until_ready(run(jax.random.PRNGKey(0)))
  wall, cpu = _timed(lambda: jax.block_until_ready(run(jax.random.PRNGKey(1))), repeats)
  return batch * steps / wall, batch * steps / cpu


def gym_env_rate(steps, repeats):
  import gymnasium
  env = gymnasium.make("CartPole-v1")
  rng = np.random.default_rng(0)

  def run():
    env.reset(seed=0)
    for _ in range(steps):
      _, _, term, trunc, _ = env.step(int(rng.integers(2)))
      if term or trunc:
        env.reset()

  wall, cpu = _timed(run, repeats)
  return steps / wall, steps / cpu


def _ppo_parts(precision):
  builder = spec_lib.make_builder("ppo", {"actor_precision": precision})
  env = gymnax_env.functional("CartPole-v1")
  networks = builder.make_networks(systems.environment_spec(env))
  params = networks.init(jax.random.PRNGKey(0), np.zeros((4,), np.float32))["policy"]
  policy = acting.PolicyNetwork(networks.spec, precision)
  prepared = policy.prepare(params, acting.calibrate(jnp.zeros((64, 4)), (4,)))
  return env, networks, params, policy, prepared


def compiled_acting_rate(batch, steps, precision, repeats):
  env, _, _, policy, prepared = _ppo_parts(precision)

  @jax.jit
  def run(key):
    state, obs = jax.vmap(env.reset)(jax.random.split(key, batch))

    def body(carry, k):
      state, obs = carry
      k_a, k_s, k_r = jax.random.split(k, 3)
      logits = policy.apply(prepared, obs)
      action = jax.random.categorical(k_a, logits).astype(jnp.int32)
      s2, o2, _, _, last = jax.vmap(env.step)(jax.random.split(k_s, batch), state, action)
      s0, o0 = jax.vmap(env.reset)(jax.random.split(k_r, batch))
      return (acting.tree_where(last, s0, s2), jnp.where(last[:, None], o0, o2)), None

    return jax.lax.scan(body, (state, obs), jax.random.split(key, steps))[0]

  jax.block_until_ready(run(jax.random.PRNGKey(0)))
  wall, cpu = _timed(lambda: jax.block_until_ready(run(jax.random.PRNGKey(1))), repeats)
  return batch * steps / wall, batch * steps / cpu


def python_acting_rate(steps, repeats):
  """The fp32 policy, jitted, acting on Gymnasium's CartPole-v1 from a Python loop."""
  import gymnasium
  _, networks, params, _, _ = _ppo_parts("fp32")
  apply = jax.jit(lambda p, o: forward.forward(p, networks.spec, o))
  env = gymnasium.make("CartPole-v1")
  rng = np.random.default_rng(0)

  def run():
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
      logits = np.asarray(apply(params, obs[None].astype(np.float32)))[0]
      p = np.exp(logits - logits.max())
      action = int(rng.choice(2, p=p / p.sum()))
      obs, _, term, trunc, _ = env.step(action)
      if term or trunc:
        obs, _ = env.reset()

  run()
  wall, cpu = _timed(run, repeats)
  return steps / wall, steps / cpu


def anakin_ppo(steps, batch=None):
  # A learner step takes batch_size rollouts of the queue (PPOConfig's rule): B > the
  # default queue needs a queue of B.
  config = {} if batch is None else {"batch_size": batch, "max_queue_size": max(batch, 64)}
  spec = spec_lib.RunSpec(agent="ppo", env="gymnax:CartPole-v1", seed=0, config=config,
                          steps=steps, eval_every=max(steps // 10, 1), eval_episodes=10,
                          launch="anakin", checkpoint_every=None)
  w, c = time.time(), time.process_time()
  result, = anakin.run([spec])
  wall, cpu = time.time() - w, time.process_time() - c
  first_500 = next((e["actor_steps"] for e in result.evaluations
                    if e["episode_return"] >= 500), None)
  return {"steps": result.actor_steps, "wall_s": wall, "cpu_s": cpu,
          "first_period_s": result.compile_seconds, "final_return": result.final_eval_return,
          "best_return": result.best_eval_return, "first_step_at_500": first_500,
          "steps_per_s": result.actor_steps / wall,
          "steps_per_s_after_compile": (result.actor_steps - steps // 10) / max(
              wall - result.compile_seconds, 1e-9)}


def local_ppo(steps):
  spec = spec_lib.RunSpec(agent="ppo", env="gym:CartPole-v1", seed=0, steps=steps,
                          eval_every=steps, eval_episodes=1, checkpoint_every=None)
  config = spec.build()
  w, c = time.time(), time.process_time()
  result = local.run(config)
  wall, cpu = time.time() - w, time.process_time() - c
  return {"steps": result.actor_steps, "wall_s": wall, "cpu_s": cpu,
          "steps_per_s": result.actor_steps / wall, "final_return": result.final_eval_return,
          "num_envs": int(spec.num_envs)}


ENV_ID, GYM_ID = "gymnax:CartPole-v1", "gym:CartPole-v1"


def rate_rows(batches: Sequence[int], scan_steps: int, repeats: int,
              log: Callable[[str], None] = lambda m: None) -> List[Dict[str, Any]]:
  """The env and acting rows of the module docstring (see `run` for the arguments):
  [{what, B, steps_per_s_wall, steps_per_s_cpu}, ...]."""
  rows: List[Dict[str, Any]] = []

  def row(what, b, rate):
    rows.append({"what": what, "B": b, "steps_per_s_wall": rate[0],
                 "steps_per_s_cpu": rate[1]})
    log(f"{what:<44} B={b:<5} {rate[0]:>12,.0f} steps/s wall  {rate[1]:>12,.0f} per CPU-s")

  row(f"env: {GYM_ID} (Python loop)", 1, gym_env_rate(scan_steps * 5, repeats))
  row(f"acting: PPO fp32, {GYM_ID} (Python loop)", 1, python_acting_rate(scan_steps, repeats))
  for b in batches:
    steps = max(scan_steps * 32 // max(b, 32), 50)
    row(f"env: {ENV_ID} (compiled)", b, gymnax_env_rate(b, steps, repeats))
    row("acting: PPO fp32 (compiled)", b, compiled_acting_rate(b, steps, "fp32", repeats))
    row("acting: PPO int8 emulated (compiled)", b,
        compiled_acting_rate(b, steps, "int8", repeats))
  return rows


def run(batches: Sequence[int], scan_steps: int, repeats: int, training_steps: int,
        local_steps: int, log: Callable[[str], None] = lambda m: None) -> Dict[str, Any]:
  """Every row of the module docstring, side by side in this process.

  Args:
    batches: the B of the compiled rows and of the anakin PPO training rows.
    scan_steps: steps per environment of the compiled rows at B <= 32 (fewer at larger B,
      the same B * steps as B = 32); the Python rows take 5x (env) and 1x (acting).
    repeats: timed rounds of each rate row (medians).
    training_steps, local_steps: actor steps of each anakin PPO run and of the local one.

  Returns:
    {"rows": [{what, B, steps_per_s_wall, steps_per_s_cpu}, ...], "training": [{launch,
    env, B, steps, wall_s, cpu_s, steps_per_s, first_period_s, final_return}, ...],
    "devices": [...]}; steps/s are environment steps per second.
  """
  out: Dict[str, Any] = {"devices": [str(d) for d in jax.devices()],
                         "rows": rate_rows(batches, scan_steps, repeats, log), "training": []}

  def training(launch, env_id, b, r):
    out["training"].append({"launch": launch, "env": env_id, "B": b, **r})
    log(f"training: PPO --launch {launch}, {env_id}, B={b}: {r['steps']} steps in "
        f"{r['wall_s']:.1f} s ({r['steps_per_s']:,.0f} steps/s wall, "
        f"{r['steps'] / r['cpu_s']:,.0f} per CPU-s)")

  local_run = local_ppo(local_steps)
  training("local", GYM_ID, local_run["num_envs"], local_run)
  for b in batches:
    training("anakin", ENV_ID, b, anakin_ppo(training_steps, batch=b))
  return out


def format_table(result: Dict[str, Any]) -> str:
  """`run`'s result as a markdown table: steps/s (wall and per CPU-s) of each row, and
  each training row's ratio to the local PPO's steps/s."""
  lines = ["| what | B | steps/s (wall) | steps/s per CPU-s |", "|---|---:|---:|---:|"]
  for r in result["rows"]:
    lines.append(f"| {r['what']} | {r['B']} | {r['steps_per_s_wall']:,.0f} | "
                 f"{r['steps_per_s_cpu']:,.0f} |")
  local_rate = next((t["steps_per_s"] for t in result["training"] if t["launch"] == "local"),
                    None)
  lines += ["", "| training: PPO | B | steps | wall s (first period, compilation included) "
                "| steps/s (wall) | x local | final greedy return |",
            "|---|---:|---:|---:|---:|---:|---:|"]
  for t in result["training"]:
    ratio = f"{t['steps_per_s'] / local_rate:.1f}" if local_rate else "-"
    first = (f" ({t['first_period_s']:.1f})" if t.get("first_period_s") is not None
             else "")
    lines.append(f"| --launch {t['launch']} {t['env']} | {t['B']} | {t['steps']} | "
                 f"{t['wall_s']:.1f}{first} | {t['steps_per_s']:,.0f} | {ratio} | "
                 f"{t['final_return']:.1f} |")
  return "\n".join(lines)


def _projected(result, wall_s, steps, full_steps):
  """`wall_s` of a run of `steps` extended to `full_steps` at its steady rate: actor steps
  per second of wall between its first and last evaluation (compilation, start-up and
  replay filling happen before the first; evaluations between them are counted)."""
  first, last = result.evaluations[0], result.evaluations[-1]
  rate = (last["actor_steps"] - first["actor_steps"]) / max(
      last["wall_seconds"] - first["wall_seconds"], 1e-9)
  return {"steady_steps_per_s": rate, "projected_wall_s": wall_s + (full_steps - steps) / rate}


def dqn_seeds_vs_local(seeds, steps, local_runs, full_steps=100_000, periods=4):
  """DQN (defaults) on CartPole: `seeds` seeds x `steps` in one anakin program against
  `local_runs` sequential --launch local runs of `steps` each, extrapolated to `seeds`
  runs, and both projected to `full_steps` per seed at their steady rates (`_projected`;
  `periods` evaluations per run measure them)."""
  every = max(steps // periods, 1)
  specs = [spec_lib.RunSpec(agent="dqn", env="gymnax:CartPole-v1", seed=s, steps=steps,
                            eval_every=every, eval_episodes=10, launch="anakin",
                            checkpoint_every=None) for s in range(seeds)]
  w, c = time.time(), time.process_time()
  results = anakin.run(specs)
  ak = {"seeds": seeds, "steps": steps, "wall_s": time.time() - w,
        "cpu_s": time.process_time() - c, "first_period_s": results[0].compile_seconds,
        "final_returns": [r.final_eval_return for r in results]}
  ak.update(_projected(results[0], ak["wall_s"], steps, full_steps))
  runs = []
  for s in range(local_runs):
    config = spec_lib.RunSpec(agent="dqn", env="gym:CartPole-v1", seed=s, steps=steps,
                              eval_every=every, eval_episodes=10).build()
    w, c = time.time(), time.process_time()
    r = local.run(config)
    wall = time.time() - w
    runs.append({"wall_s": wall, "cpu_s": time.process_time() - c,
                 "final_return": r.final_eval_return, **_projected(r, wall, steps, full_steps)})
  loc = {"runs": runs, "wall_s_per_run": statistics.median(r["wall_s"] for r in runs),
         "cpu_s_per_run": statistics.median(r["cpu_s"] for r in runs),
         "projected_wall_s_per_run": statistics.median(r["projected_wall_s"] for r in runs)}
  loc["extrapolated_wall_s"] = loc["wall_s_per_run"] * seeds
  loc["extrapolated_cpu_s"] = loc["cpu_s_per_run"] * seeds
  loc["projected_wall_s"] = loc["projected_wall_s_per_run"] * seeds
  return ak, loc


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.benchmarks import anakin_bench as command_line
  sys.exit(command_line.main())
