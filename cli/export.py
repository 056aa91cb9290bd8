"""`actorq export`: a trained run's policy as a standalone `.tflite` file plus a JSON.

    actorq export --checkpoint RUN_DIR [--precision int8|fp32|POLICY.json|mixed:...]
                  [--out policy.tflite] [--episodes 10] [--seed 12345] [--group NAME]

The `.tflite` is the model the actors run (`litert_runtime.standalone_model`): int8 =
dynamic-range int8 weights with per-channel scales (what ActorQ's int8 actors execute), fp32
= the same graph with float32 weights, a per-layer precision policy (the
precision_policy.json of `actorq quantize --search`, or its `mixed:<choice>,...` name) = the
model its actors run: integer layers (2..8 bits) as int8 tensors with their scales, float
layers as float32 tensors holding fp16/bf16/fp32-rounded values. Load it with
`ai_edge_litert` alone (no JAX, no actorq): input float32 `[B, *observation shape]` of RAW
observations (the spec's input_scale is folded into the first layer; the batch is dynamic),
output float32 `[B, outputs]`; `action_rule` in the JSON turns outputs into the greedy
action.

The JSON (`<out>.json`, beside the model) holds: the model file and its bytes, the
observation and action specs, the normalisation, the weight scales of every integer layer,
for a per-layer policy the policy itself (`precision_policy`: a policy file's JSON object,
readable by `mixed.from_json_dict`) and its stored bytes (`mixed.storage_report`), the
source run (run directory, checkpoint, agent, environment, seed, steps) and the parity
report: `--episodes` greedy episodes of the fp32 policy (JAX) and of the exported model
itself (run by ai_edge_litert) on identically seeded environments (return mean/std each),
the model's greedy-action agreement on every observation of the fp32 episodes, and the
bytes (fp32 and exported payloads, the .tflite file).

Default `--out`: `<run>/export/policy-<precision>.tflite` (a per-layer policy:
`policy-mixed-<8 hex digits>.tflite`, `runtimes.precision_slug`).

A multi-agent run (``pz:`` id) writes one model and JSON per parameter group
(`studies.export.export_multi_agent`): `<name>-<group>.tflite` and `<name>-<group>.json`
for `--out <name>.tflite` (group ``shared`` with parameter sharing, its JSON naming the
agents it serves and the one-hot agent-id layout of its input; else one per agent, named
after it), each with the parity report of its group in greedy episodes of the multi-agent
environment, and the index `<name>.json` listing the groups (`--group NAME`: that group's
files alone; a name the run does not have, or --group on a single-agent run, is one line,
exit 2). Bad input (not a run
directory, another precision, a policy that does not fit the run's policy network, an
--out not ending in .tflite or not writable) is one line, exit 2, nothing written. The
model and its JSON (which holds the model's SHA-256) are replaced together
(`atomic.write_together`): a failed write (a full disk) is one line, exit 1, and leaves
the previous pair as it was.
"""
from __future__ import annotations

import json
import os

from actorq.cli import main as cli
from actorq.studies import export as export_lib
from actorq.studies.export import export_precision


def add_parser(subparsers):
  p = subparsers.add_parser("export", help="write a run's policy as a standalone .tflite "
                            "(int8 or fp32) with a JSON of specs, scales and a parity report")
  p.add_argument("--checkpoint", required=True,
                 help="run directory of 'actorq train' (or its checkpoints/ folder)")
  p.add_argument("--precision", default="int8",
                 help="int8 (default): the int8 actors' model; fp32: float32 weights; a "
                      "precision_policy.json or mixed:<choice>,...: that per-layer policy's "
                      "model")
  p.add_argument("--out", default=None, metavar="FILE.tflite",
                 help="where to write the model (default: <run>/export/policy-<precision>"
                      ".tflite); the JSON goes beside it as FILE.json (a multi-agent run: "
                      "FILE-<group>.tflite and .json per parameter group, FILE.json the "
                      "index of the groups)")
  add_parity_flags(p, episodes=10)
  p.add_argument("--group", default=None, metavar="NAME",
                 help="a multi-agent run: export only this parameter group's model (shared, "
                      "or an agent's name without parameter sharing; default: every group)")
  return p


def add_parity_flags(p, episodes: int) -> None:
  """`--episodes` and `--seed` of an export's parity report (`studies.export.export`), as
  `actorq export` and the export-parity benchmark read them."""
  p.add_argument("--episodes", type=cli.positive_int("--episodes"), default=episodes,
                 help=f"greedy episodes per precision of the parity report (default: {episodes})")
  p.add_argument("--seed", type=cli.seed("--seed"), default=12345,
                 help="seed of the parity episodes' environments")


def run(args) -> int:
  precision, policy_file = export_precision(args.precision)
  if args.out and not args.out.endswith(".tflite"):
    raise cli.UsageError(f"--out {args.out} must end in .tflite")
  out, json_path, report = export_lib.export(
      args.checkpoint, precision, policy_file, out=args.out, episodes=args.episodes,
      seed=args.seed, log=lambda message: print(message, flush=True), group=args.group)
  if report.get("multi_agent"):
    print(f"models of {len(report['groups'])} parameter group(s) ({precision}); index: {out}")
    directory = os.path.dirname(out)
    for group in report["groups"]:
      with open(os.path.join(directory, group["json"]), encoding="utf-8") as f:
        p = json.load(f)["parity"]
      print(f"group {group['group']} (agents {', '.join(group['agents'])}): "
            f"{os.path.join(directory, group['model'])} ({group['bytes']:,} bytes); parity "
            f"over {args.episodes} episodes: group return fp32 {p['fp32_return_mean']:.1f} "
            f"+- {p['fp32_return_std']:.1f}, exported {p['export_return_mean']:.1f} +- "
            f"{p['export_return_std']:.1f}; greedy-action agreement "
            f"{p['greedy_action_agreement']:.3f}")
    return 0
  p, model_bytes = report["parity"], report["model"]["bytes"]
  print(f"model: {out} ({model_bytes:,} bytes, {precision}); specs and parity: {json_path}")
  print(f"parity over {args.episodes} episodes: return fp32 {p['fp32_return_mean']:.1f} "
        f"+- {p['fp32_return_std']:.1f}, exported {p['export_return_mean']:.1f} +- "
        f"{p['export_return_std']:.1f}; greedy-action agreement "
        f"{p['greedy_action_agreement']:.3f}")
  return 0
