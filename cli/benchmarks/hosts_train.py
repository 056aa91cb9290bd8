"""`python -m actorq.benchmarks.hosts_train`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import os
import sys

from actorq.components import atomic
from actorq.benchmarks import actorq_bench as ab
from actorq.benchmarks import hosts_train as benchmark
from actorq.benchmarks.hosts_train import PRESETS, fmt, busy_load, format_table, run_one, summarize
from actorq.cli import main as cli
from actorq.cli.benchmarks import link_rate
from actorq.components import provenance
from actorq.studies import sweep
from actorq.testing import netns


def _precisions(text: str):
  """`--precisions` as every actorq command reads them (`cli.precision_list`)."""
  try:
    return list(cli.precision_list("--precisions", text, ab.PRECISIONS))
  except cli.UsageError as e:
    raise argparse.ArgumentTypeError(str(e)) from None



def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.split("\n\n")[0])
  parser.add_argument("--preset", choices=sorted(PRESETS), default="dqn")
  parser.add_argument("--seeds", type=cli.seed_list("--seeds"), default=[0, 1, 2])
  parser.add_argument("--precisions", type=_precisions, default=["fp32", "int8"])
  parser.add_argument("--steps", type=int, default=None, help="actor steps (default: preset's)")
  parser.add_argument("--rate", type=link_rate, default=None,
                      help="tc rate of the link, e.g. 100mbit or 1gbit (default: none)")
  parser.add_argument("--busy", type=cli.nonnegative_int("--busy"), default=0, metavar="N",
                      help="CPU-bound background processes beside every run (default: 0)")
  parser.add_argument("--run-timeout", type=float, default=3600.0, help="seconds per run")
  parser.add_argument("--logdir", default=None, help="run directories (default: a temp dir)")
  parser.add_argument("--json", default=None, help="write runs, summary and settings here")
  args = parser.parse_args(argv)
  reason = netns.unavailable()
  if reason is not None:
    print(f"hosts_train: {reason}", file=sys.stderr)
    return 2
  settings = dict(PRESETS[args.preset])
  if args.steps is not None:
    settings["steps"] = args.steps
    settings["eval_every"] = min(settings["eval_every"], args.steps)
  logdir = args.logdir or os.path.join("/tmp", f"hosts_train-{os.getpid()}")
  os.makedirs(logdir, exist_ok=True)
  settings["busy_processes"] = args.busy
  load = os.getloadavg()
  runs = []
  with netns.HostPair() as pair, busy_load(args.busy):
    pair.set_rate(args.rate)
    for precision, seed in sweep.plan(args.precisions, args.seeds):  # order rotated per seed
      run_dir = os.path.join(logdir, sweep.run_name(precision, seed))
      print(f"hosts_train: {precision} seed {seed} -> {run_dir}", flush=True)
      runs.append(run_one(pair, settings, precision, seed, run_dir, args.run_timeout))
      print(f"hosts_train:   exit {runs[-1]['exit']}, actor steps/s "
            f"{fmt(runs[-1]['actor_sps'], 1)}, final {fmt(runs[-1]['final'], 1)}",
            flush=True)
  summary = summarize(runs, args.precisions, settings["target"])
  print(format_table(runs, summary, settings, args.rate))
  print(f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}"
        + (f"; {args.busy} busy background process(es) throughout" if args.busy else ""))
  if args.json:
    atomic.write_json(args.json, {"settings": settings, "rate": args.rate, "runs": runs,
                               "summary": summary, "load_start": load,
                               "load_end": os.getloadavg(), "machine": provenance.machine_info()})
  return 0


if __name__ == "__main__":
  sys.exit(main())
