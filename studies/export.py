"""Export of a trained run's policy: a standalone `.tflite` model plus its JSON (what
`actorq export` writes; the command line is `actorq.cli.export`).

The `.tflite` is the model the actors run (`litert_runtime.standalone_model`): int8 =
dynamic-range int8 weights with per-channel scales (what ActorQ's int8 actors execute), fp32
= the same graph with float32 weights, a per-layer precision policy = the model its actors
run: integer layers (2..8 bits) as int8 tensors with their scales, float layers as float32
tensors holding fp16/bf16/fp32-rounded values. Input float32 `[B, *observation shape]` of RAW
observations (the spec's input_scale is folded into the first layer; the batch is dynamic),
output float32 `[B, outputs]`; `action_rule` in the JSON turns outputs into the greedy action,
from what the builder declares its outputs to be (`core.PolicyOutputs`), never from the
agent's name.

The JSON holds the model file and its bytes and SHA-256, the observation and action specs,
the normalisation, the weight scales of every integer layer, a per-layer policy and its
stored bytes, the source run, and the parity report (`model_parity`). The model and its
JSON are replaced together (`atomic.write_together`).

A multi-agent run (`export_multi_agent`) takes the same path
(`quantization.export.policy_model`, `_report`) once per parameter group: a model and JSON per group (`group_file_name`), whose JSON adds
the agents the group serves and its input layout (`parameter_group`) and whose parity
report is `multi_agent_parity`'s, and an index JSON listing the groups; every file of the
export is replaced together.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from acme import specs

from actorq import core
from actorq.agents.dqn import networks as dqn_networks
from actorq.components import atomic, fault_points
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.envs import environments
from actorq.components.envs import multi_agent
from actorq.studies import checks
from actorq.agents import registry
from actorq.launch import spec as spec_lib
from actorq.quantization import export as qe
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.studies import multi_agent_eval
from actorq.studies import reward_parity as evaluation

EXPORT_PRECISIONS = ("int8", "fp32")  # and per-layer policies (files or mixed: names)
FORMAT_VERSION = 1
PRECISION_HELP = ("int8, fp32, a per-layer precision policy file (precision_policy.json of "
                  "'actorq quantize --search') or its labels as mixed:<choice>,... (one per "
                  "layer, e.g. mixed:fp16,int8,int8)")


def _spec_json(spec) -> Dict[str, Any]:
  out = {"shape": [int(d) for d in spec.shape], "dtype": np.dtype(spec.dtype).name}
  if isinstance(spec, specs.DiscreteArray):
    out.update(kind="discrete", num_values=int(spec.num_values))
  elif isinstance(spec, specs.BoundedArray):
    out.update(kind="continuous", minimum=np.broadcast_to(spec.minimum, spec.shape).tolist(),
               maximum=np.broadcast_to(spec.maximum, spec.shape).tolist())
  return out


def _selector_rule(agent: str, outputs: core.PolicyOutputs, env_spec) -> Dict[str, Any]:
  del env_spec
  rule = f"the {agent} agent's evaluation selector over y"
  return {"kind": "agent", "rule": f"{rule}: {outputs.description}" if outputs.description
          else rule}


def _argmax_rule(agent: str, outputs: core.PolicyOutputs, env_spec) -> Dict[str, Any]:
  if outputs.to_values is None:
    return {"kind": "argmax", "dueling": False, "rule": "argmax(y)"}
  if outputs.to_values is dqn_networks.dueling_q:
    return {"kind": "argmax", "dueling": True,
            "rule": "argmax(y[1:]) (y = [V, A_1..A_n]; argmax Q = argmax A)"}
  return _selector_rule(agent, outputs, env_spec)  # e.g. QR-DQN's mean over quantiles


def _bounded_rule(agent: str, outputs: core.PolicyOutputs, env_spec) -> Dict[str, Any]:
  actions = env_spec.actions
  if not isinstance(actions, specs.BoundedArray):
    return _selector_rule(agent, outputs, env_spec)
  return {"kind": "bounded", "minimum": np.broadcast_to(actions.minimum, actions.shape).tolist(),
          "maximum": np.broadcast_to(actions.maximum, actions.shape).tolist(),
          "rule": "clip(minimum + (y + 1) / 2 * (maximum - minimum), minimum, maximum)"}


# The builder's declared output kind (`core.PolicyOutputs.kind`) -> the JSON's action rule.
ACTION_RULES = {"q_values": _argmax_rule, "logits": _selector_rule,
                "tanh_deterministic": _bounded_rule, "tanh_gaussian": _selector_rule}


def _mapped_spaces(env) -> List[str]:
  """The spaces a Gymnasium adapter inside `env` (under wrappers such as `ActionRepeat`)
  maps (`GymnasiumToDmEnv.mapped_spaces`); [] for other environments (dm_control, MinAtar,
  Atari's Box frames and Discrete actions), whose model input and output are theirs."""
  while env is not None:
    if hasattr(env, "mapped_spaces"):
      return env.mapped_spaces()
    env = getattr(env, "_env", None)
  return []


def action_rule(info: Dict[str, Any], outputs: core.PolicyOutputs, env_spec) -> Dict[str, Any]:
  """How the greedy action follows from the model's outputs `y` (one row), from what the
  builder declares its outputs mean (`outputs`, `ACTION_RULES` by kind):
  ``{"kind": "argmax", "dueling": bool, "rule"}`` for plain or dueling Q-values,
  ``{"kind": "bounded", "minimum", "maximum", "rule"}`` for a tanh-deterministic action
  rescaled to the bounds, else ``{"kind": "agent", "rule"}``: the agent's evaluation
  selector, described by the declaration's `description`."""
  return ACTION_RULES[outputs.kind](info["agent"], outputs, env_spec)


def _agreement_measure(reference_actions) -> str:
  """What `reward_parity.action_agreement` measures for these fp32 actions' kind."""
  if np.issubdtype(np.stack(reference_actions).dtype, np.integer):
    return "fraction of the fp32 episodes' observations with the same greedy action"
  return "1 - mean |a - a_fp32| / action range, on the fp32 episodes' observations"


def model_parity(model: bytes, params, spec, selector, env_fn, episodes: int,
                 action_range: float = 1.0) -> Dict[str, Any]:
  """The exported model against the fp32 policy (JAX) on identically seeded environments:
  `episodes` greedy episodes each (return mean and std), and the greedy-action agreement
  of the model on every observation of the fp32 episodes (discrete: the fraction with the
  same action; continuous: 1 - mean |a - a_fp32| / action_range)."""
  reference = evaluation.Recorder(evaluation.fixed_policy_actor(params, spec, "fp32", selector))
  ref = loop_lib.evaluate(env_fn(), reference, episodes)
  exported = actors.FeedForwardActor(qe.ModelRuntime(model), selector)
  got = loop_lib.evaluate(env_fn(), exported, episodes)
  agreement = evaluation.action_agreement(exported, reference.observations, reference.actions,
                                         action_range)
  measure = _agreement_measure(reference.actions)
  return {"fp32_return_mean": ref["episode_return"], "fp32_return_std": ref["episode_return_std"],
          "export_return_mean": got["episode_return"],
          "export_return_std": got["episode_return_std"],
          "greedy_action_agreement": agreement, "agreement_measure": measure,
          "observations_compared": len(reference.observations)}


def default_file_name(precision: str) -> str:
  """The model's file name in `<run>/export/` when --out is not given:
  ``policy-<precision>.tflite``, a per-layer policy named by `runtimes.precision_slug`."""
  return f"policy-{runtimes.precision_slug(precision)}.tflite"


def report_path(model_path: str) -> str:
  """The JSON written beside a model: ``<name>.tflite`` -> ``<name>.json``."""
  return model_path[:-len(".tflite")] + ".json"


def export_precision(text: str, flag: str = "--precision"):
  """`--precision` (or `flag`) as `(precision, policy_file)`: "int8", "fp32" or a per-layer
  policy's ``"mixed:..."`` name (from the name itself, or read from a policy file, whose
  path is returned for the shape check against the network).

  Raises:
    core.UsageError: another precision (fp16, bf16: no standalone model), an unreadable or
      invalid policy file, bad labels; one line naming the value and what is allowed.
  """
  if text in EXPORT_PRECISIONS:
    return text, None
  if text in core.ACTOR_PRECISIONS:
    raise core.UsageError(f"{flag} {text!r} not allowed; allowed: {PRECISION_HELP}")
  try:
    return runtimes.parse_precision(text, flag)
  except ValueError as e:
    raise core.UsageError(str(e)) from None


def _check_fits(precision: str, policy_file, spec) -> None:
  """`--precision` fits the policy network `spec` (`runtimes.check_fits`).

  Raises:
    core.UsageError: a per-layer policy whose layer count or shapes do not fit.
  """
  try:
    runtimes.check_fits(precision, spec, policy_file, "--precision")
  except ValueError as e:
    raise core.UsageError(str(e)) from None


def _action_range(env_spec) -> float:
  if isinstance(env_spec.actions, specs.BoundedArray) and not isinstance(
      env_spec.actions, specs.DiscreteArray):
    return float(np.mean(np.asarray(env_spec.actions.maximum)
                         - np.asarray(env_spec.actions.minimum)))
  return 1.0


def _report(out: str, exported: qe.PolicyModel, params, spec, precision: str, env_spec,
            rule, source, parity, episodes: int, seed: int) -> Dict[str, Any]:
  """The JSON written beside the model `out` (the module docstring says what it holds)."""
  model = exported.model
  return {
      "format_version": FORMAT_VERSION,
      "model": {"file": os.path.basename(out), "bytes": len(model),
                "sha256": hashlib.sha256(model).hexdigest(), "precision": precision,
                "runtime": exported.runtime_note},
      "input": {"shape": [-1] + [int(d) for d in spec.input_shape], "dtype": "float32",
                "what": "raw observations (batch dynamic: resize_tensor_input)"},
      "output": {"shape": [-1, int(spec.output_size)], "dtype": "float32"},
      "normalisation": {"input_scale": float(spec.input_scale),
                        "folded_into_model": True,
                        "note": "the first layer's weights (or scales) are multiplied by "
                                "input_scale: feed raw observations"},
      "observation_spec": _spec_json(env_spec.observations),
      "action_spec": _spec_json(env_spec.actions),
      "action_rule": rule,
      "scales": exported.scales,
      **exported.policy_block,
      **exported.bias_block,
      "source": source,
      "parity": dict(parity, episodes=episodes, env_seed=seed,
                     fp32_payload_bytes=int(pl.make_payload(params, spec, "fp32", 0).nbytes),
                     export_payload_bytes=int(exported.payload.nbytes),
                     tflite_bytes=len(model)),
  }


def _write(files: Dict[str, Any], what: str) -> None:
  fault_points.point("export_write")  # tests: a stop right before the files are replaced
  try:  # the files are replaced together or not at all (case B10)
    atomic.write_together(files)
  except OSError as e:
    raise core.RunDirectoryError.writing(
        what, e, "the files there before are kept as they were") from e


def _source(run_path, ckpt_path, info, state) -> Dict[str, Any]:
  return {"run": run_path, "checkpoint": ckpt_path, "agent": info["agent"],
          "env": info["env"], "seed": info.get("seed"),
          "actor_steps": int(state.get("actor_steps", -1)),
          "learner_steps": int(state["learner_steps"])}


def export(checkpoint: str, precision: str, policy_file: Optional[str] = None,
           out: Optional[str] = None, episodes: int = 10, seed: int = 12345,
           log=lambda message: None,
           group: Optional[str] = None) -> Tuple[str, str, Dict[str, Any]]:
  """Exports the newest readable checkpoint of the run `checkpoint` at `precision` ("int8",
  "fp32" or a ``"mixed:..."`` name; `policy_file` the policy file it was read from, checked
  against the network's layer shapes) into `out` (a ``.tflite`` path; None:
  `<run>/export/<default_file_name>`) and its JSON beside it, after `episodes` greedy parity
  episodes on environments seeded `seed`. `log(message)` hears what is being exported.
  A multi-agent run (``pz:`` id) writes one model and JSON per parameter group and an
  index JSON (`export_multi_agent`; `group`: that parameter group's only).

  Returns:
    `(model_path, json_path, report)`; `report` is the JSON's content (a multi-agent run:
    `(index_path, index_path, index)`).
  Raises:
    core.UsageError: not a run directory, a recurrent policy, a policy that does not fit,
      an output folder that cannot be written, a `group` of a single-agent run.
    core.RunDirectoryError: the files cannot be written (a full disk); the files there
      before are kept as they were.
  """
  run, state, ckpt_path = spec_lib.load_run(checkpoint)
  run_path, info = run.logdir, run.to_json()
  if multi_agent.is_multi_agent(info["env"]):
    return export_multi_agent(run, state, ckpt_path, precision, policy_file, out, episodes,
                              seed, log, group)
  if group is not None:
    raise core.UsageError(f"--group {group}: {info['env']} is a single-agent run; --group "
                          "names a parameter group of a multi-agent (pz:) run")
  out = out or os.path.join(run_path, "export", default_file_name(precision))
  builder = run.make_builder()
  env = environments.make_environment(info["env"], seed=seed)
  env_spec = environments.environment_spec(env)
  mapped = _mapped_spaces(env)
  env.close()
  if mapped:  # a standalone model would take and give the adapter's values (case B17)
    raise core.UsageError(
        f"actorq export: {info['env']} has {' and '.join(mapped)}: a standalone model would "
        "need the adapter's observation flattening and action decoding, which the JSON does "
        "not describe; export supports Box observations with Discrete (from 0) or float Box "
        f"actions; evaluate this run with: actorq eval --checkpoint {run_path}")
  networks = builder.make_networks(env_spec)
  checks.check_feed_forward(networks, run.agent, "export")
  _check_fits(precision, policy_file, networks.spec)
  agent_policy = builder.make_policy(networks, env_spec, evaluation=True)
  try:
    outputs = registry.policy_outputs(builder, networks, env_spec)
  except ValueError as e:
    raise core.UsageError(f"actorq export: {e}") from None
  spec, params = networks.spec, state["policy_params"]
  directory = atomic.ensure_writable_dir(os.path.dirname(os.path.abspath(out)), "--out")
  out = os.path.join(directory, os.path.basename(out))
  log(f"actorq export: {info['agent']} on {info['env']}, checkpoint {ckpt_path}; "
      f"{precision} model, parity on {episodes} episodes")
  # Integer layers: the biases corrected as the run's int8 actors had them (issue 39), on
  # an fp32 calibration episode (seed `reward_parity.CALIBRATION_SEED`, apart from `seed`).
  calibration = evaluation.calibration_for(
      params, spec, agent_policy.selector,
      lambda s: environments.make_environment(info["env"], seed=s), precision)
  exported = qe.policy_model(params, spec, precision, calibration,
                             evaluation.CALIBRATION_SEED)
  parity = model_parity(exported.model, params, spec, agent_policy.selector,
                        lambda: environments.make_environment(info["env"], seed=seed),
                        episodes, _action_range(env_spec))
  report = _report(out, exported, params, spec, precision, env_spec,
                   action_rule(info, outputs, env_spec),
                   _source(run_path, ckpt_path, info, state), parity, episodes, seed)
  json_path = report_path(out)
  _write({out: exported.model, json_path: json.dumps(report, indent=1)},
         f"{out} and {json_path}")
  return out, json_path, report


def group_file_name(out: str, group: str) -> str:
  """The model of parameter group `group` of a multi-agent export to `out`
  (``<name>.tflite``): ``<name>-<group>.tflite`` (characters other than letters, digits,
  ``_``, ``.`` and ``-`` in the group's name become ``_``)."""
  return f"{out[:-len('.tflite')]}-{re.sub(r'[^A-Za-z0-9_.-]', '_', group)}.tflite"


def _group_block(group: ma_loop.ParameterGroup, env_agents) -> Dict[str, Any]:
  """What the group's model serves and how its input is laid out."""
  local = int(np.prod(group.agent_observations.shape))
  block = {"name": group.name, "agents": list(group.agents), "shared": bool(group.id_size)}
  if group.id_size:
    block["input_layout"] = {
        "observation": {"offset": 0, "size": local,
                        "what": "the agent's own observation, raw"},
        "agent_id": {"offset": local, "size": int(group.id_size),
                     "one_hot_index": {a: int(i) for a, i in zip(group.agents,
                                                                 group.agent_ids)},
                     "what": "one-hot agent id: 1.0 at offset + one_hot_index[agent], "
                             "0.0 elsewhere (the environment's agent order: "
                             f"{', '.join(env_agents)})"}}
  else:
    block["input_layout"] = {"observation": {"offset": 0, "size": local,
                                             "what": "the agent's own observation, raw"}}
  if group.critic_size:
    block["critic_input"] = (f"{group.critic_input} ({group.critic_size} values): the "
                             "training critic's only, not an input of this model")
  return block


def _policy_spec(group: ma_loop.ParameterGroup):
  """The group's environment spec as its policy sees it: a centralized critic's input
  (stored after the policy's) is not part of the policy's observation."""
  spec = group.environment_spec
  if not group.critic_size:
    return spec
  return spec._replace(observations=specs.Array((group.policy_input_size,), np.float32,
                                                "observation"))


def multi_agent_parity(env_id: str, groups, parts, params, models, episodes: int, seed: int,
                       max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS):
  """Per parameter group, `model_parity`'s report for a multi-agent run: `episodes` greedy
  episodes of every group's fp32 policy (JAX) and of every group's exported model
  (`models[g]`, run by ai_edge_litert) on identically seeded environments; the group's
  return (the sum of its agents' returns: mean, std) and the team return of each, and the
  model's greedy-action agreement on every observation the group's agents saw in the fp32
  episodes."""
  references = [multi_agent_eval.Recording(a) for a in multi_agent_eval.group_actors(
      parts, params, "fp32", seed)]
  ref = multi_agent_eval.play(env_id, groups, references, episodes, seed, max_episode_steps)
  exported = [actors.FeedForwardActor(qe.ModelRuntime(m), policy.selector)
              for m, (_, _, policy) in zip(models, parts)]
  got = multi_agent_eval.play(
      env_id, groups, [actors.batched(a, None, g.environment_spec.actions.generate_value())
                       for a, g in zip(exported, groups)], episodes, seed, max_episode_steps)
  team = lambda played: np.asarray([e.episode_return for e in played])
  out = []
  for g, group in enumerate(groups):
    mine = lambda played: np.asarray([sum(e.agent_returns[a] for a in group.agents)
                                      for e in played])
    observations = np.concatenate(references[g].rows)
    theirs = np.concatenate(references[g].actions)
    agreement = evaluation.action_agreement(exported[g], observations, theirs,
                                            _action_range(group.environment_spec))
    measure = _agreement_measure(theirs)
    out.append({
        "fp32_return_mean": float(mine(ref).mean()), "fp32_return_std": float(mine(ref).std()),
        "export_return_mean": float(mine(got).mean()),
        "export_return_std": float(mine(got).std()),
        "return": f"the group's return: the sum of its agents' ({', '.join(group.agents)}) "
                  "returns",
        "team_fp32_return_mean": float(team(ref).mean()),
        "team_export_return_mean": float(team(got).mean()),
        "played": "every group's policy at once: fp32 (JAX) in the fp32 episodes, every "
                  "group's exported model in the exported episodes",
        "greedy_action_agreement": agreement, "agreement_measure": measure,
        "observations_compared": int(len(observations))})
  return out


def export_multi_agent(run, state, ckpt_path: str, precision: str,
                       policy_file: Optional[str] = None, out: Optional[str] = None,
                       episodes: int = 10, seed: int = 12345,
                       log=lambda message: None,
                       group: Optional[str] = None) -> Tuple[str, str, Dict[str, Any]]:
  """`export` of a multi-agent run (``pz:`` id; single-process or Launchpad checkpoints,
  both hold ``policy_params[<group>]``): per parameter group (shared parameters: one for
  every agent; without sharing: one per agent) the model of its policy at `precision`
  and its JSON, as a single-agent export writes them (`quantization.export.policy_model`,
  `_report`), at `group_file_name(out, group)`, its JSON adding ``parameter_group`` (the agents it serves,
  its input layout: the one-hot agent id of a shared group); its parity report is
  `multi_agent_parity`'s (every group plays, so a group's parity is the same whether
  exported alone or with the others). The index JSON (`report_path(out)`) lists the groups
  exported and their files: every group, or `group` alone. Every file is replaced together.

  Returns:
    `(index_path, index_path, index)`.
  Raises:
    core.UsageError: as `export`; a checkpoint without multi-agent policies, or whose
      groups differ from the run's config; a `group` the run does not have.
    core.RunDirectoryError: the files cannot be written.
  """
  chosen = group  # the loops below name each parameter group `group`
  run_path, info = run.logdir, run.to_json()
  env_id = info["env"]
  out = out or os.path.join(run_path, "export", default_file_name(precision))
  params = state.get("policy_params")
  if not state.get("multi_agent") or not isinstance(params, dict):
    raise core.UsageError(f"the checkpoint of this {env_id} run holds no multi-agent "
                          "policies (written before multi-agent checkpoints existed?)")
  builder = run.make_builder()
  env = multi_agent.make_multi_agent_environment(env_id, seed=seed)
  try:
    groups, parts = multi_agent_eval.group_parts(builder, env)
    env_agents = env.agents
  finally:
    env.close()
  if sorted(params) != sorted(g.name for g in groups):
    raise core.UsageError(f"the checkpoint holds the parameter groups {', '.join(sorted(params))}"
                          f", the run's config makes {', '.join(g.name for g in groups)}")
  if chosen is not None and chosen not in params:
    raise core.UsageError(f"--group {chosen!r} is not a parameter group of this run; allowed: "
                          f"{', '.join(g.name for g in groups)}")
  rules = []
  for group, networks, _ in parts:
    checks.check_feed_forward(networks, run.agent, "export")
    _check_fits(precision, policy_file, networks.spec)
    env_spec = _policy_spec(group)
    try:
      outputs = registry.policy_outputs(builder.group_builder(group), networks, env_spec)
    except ValueError as e:
      raise core.UsageError(f"actorq export: {e}") from None
    rules.append(action_rule(info, outputs, env_spec))
  directory = atomic.ensure_writable_dir(os.path.dirname(os.path.abspath(out)), "--out")
  out = os.path.join(directory, os.path.basename(out))
  log(f"actorq export: {info['agent']} on {env_id}, checkpoint {ckpt_path}; {precision} "
      f"models of the parameter groups {', '.join(g.name for g in groups)}, parity on "
      f"{episodes} episodes")
  # Integer layers: biases corrected on each group's fp32 observations of a greedy episode
  # on `reward_parity.CALIBRATION_SEED`, as `actorq eval` of a multi-agent run does.
  calibrations = multi_agent_eval.calibrations_for(
      env_id, groups, parts, params, precision, seed, loop_lib.DEFAULT_MAX_EPISODE_STEPS)
  exported = [qe.policy_model(params[group.name], networks.spec, precision,
                              None if calibrations is None else calibrations[g],
                              evaluation.CALIBRATION_SEED)
              for g, (group, networks, _) in enumerate(parts)]
  parities = multi_agent_parity(env_id, groups, parts, params, [e.model for e in exported],
                                episodes, seed)
  files, listed = {}, []
  source = _source(run_path, ckpt_path, info, state)
  for g, (group, networks, _) in enumerate(parts):
    if chosen is not None and group.name != chosen:
      continue
    path = group_file_name(out, group.name)
    report = _report(path, exported[g], params[group.name], networks.spec, precision,
                     _policy_spec(group), rules[g], source, parities[g], episodes, seed)
    report["parameter_group"] = _group_block(group, env_agents)
    files[path], files[report_path(path)] = exported[g].model, json.dumps(report, indent=1)
    listed.append({"group": group.name, "agents": list(group.agents),
                   "model": os.path.basename(path), "json": os.path.basename(report_path(path)),
                   "bytes": len(exported[g].model),
                   "greedy_action_agreement": parities[g]["greedy_action_agreement"]})
  index = {"format_version": FORMAT_VERSION, "multi_agent": True, "precision": precision,
           "agents": list(env_agents), "groups": listed, "source": source,
           "note": "one standalone model and JSON per parameter group; an agent acts with "
                   "its group's model (a shared group's input ends with the agent's one-hot "
                   "id: see its JSON's parameter_group.input_layout)"}
  index_path = report_path(out)
  files[index_path] = json.dumps(index, indent=1)
  _write(files, f"the models of {env_id}'s parameter groups and {index_path}")
  return index_path, index_path, index
