"""`python -m actorq.benchmarks.network_pull`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from actorq.components import atomic
from actorq.benchmarks import network_pull as benchmark
from actorq.benchmarks.network_pull import act, print_table, serve, summarize
from actorq.testing import netns
from actorq.cli.benchmarks import link_rate


class _Parser(argparse.ArgumentParser):
  """Bad input: one line, exit 2, before anything is made."""

  def error(self, message):
    self.exit(2, f"network_pull: error: {message}\n")



def main(argv=None) -> int:
  parser = _Parser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--rates", default="none,1gbit,100mbit",
                      help="comma-separated tc rates, 'none' for the bare veth "
                           "(default: none,1gbit,100mbit)")
  parser.add_argument("--pulls", type=int, default=5, help="pulls per cell (default: 5)")
  parser.add_argument("--json", metavar="FILE", help="also write the pulls and the table")
  parser.add_argument("--role", choices=("learner", "actor"), help=argparse.SUPPRESS)
  parser.add_argument("--address", help=argparse.SUPPRESS)
  parser.add_argument("--link", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  try:
    rates = ["none" if link_rate(r) is None else r for r in args.rates.split(",")]
  except argparse.ArgumentTypeError as e:
    parser.error(str(e))
  if args.pulls < 1:
    parser.error(f"--pulls must be >= 1, got {args.pulls}")
  if args.role == "learner":
    return serve()
  if args.role == "actor":
    return act(args.address, args.link, rates, args.pulls)

  reason = netns.unavailable()
  if reason is not None:
    print(f"network_pull: {reason}", file=sys.stderr)
    return 2
  me = [sys.executable, os.path.abspath(__file__)]
  results = []
  load = os.getloadavg()
  with netns.HostPair() as pair:
    learner = subprocess.Popen(pair.exec_argv(0) + me + ["--role", "learner"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    actor = None
    try:
      if learner.stdout.readline().strip() != "ready":
        raise RuntimeError("the learner host did not start")
      actor = subprocess.Popen(
          pair.exec_argv(1) + me + ["--role", "actor", "--address", pair.addresses[0],
                                    "--link", pair.links[1], "--rates", ",".join(rates),
                                    "--pulls", str(args.pulls)],
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
      for line in actor.stdout:
        if line.startswith("rate "):
          rate = line.split()[1]
          pair.set_rate(None if rate == "none" else rate)
          print(f"network_pull: link at {rate}", flush=True)
          actor.stdin.write("go\n")
          actor.stdin.flush()
        elif line.startswith("result "):
          results.append(json.loads(line[len("result "):]))
      if actor.wait() != 0 or len(results) != len(rates):
        raise RuntimeError(f"the actor host failed (exit {actor.returncode})")
    finally:
      for proc in (actor, learner):
        if proc is not None and proc.poll() is None:
          proc.kill()
          proc.wait()
  table = summarize(results)
  print_table(table, args.pulls, load)
  if args.json:
    atomic.write_json(args.json, {"rates": rates, "pulls": args.pulls, "load_average": load,
                               "table": table, "results": results}, indent=2)
  return 0


if __name__ == "__main__":
  sys.exit(main())
