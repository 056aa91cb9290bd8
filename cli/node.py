"""`actorq node`: run nodes of a program written by `actorq train --launch hosts`.

    actorq node --program FILE --host I    # every node placed on host I (a host runner)
    actorq node --program FILE --task N    # node N alone, in this process
    actorq node --program FILE             # under srun: --host $SLURM_PROCID

`--program -` reads the program from standard input (how the launcher sends it through
ssh or srun, so the hosts need no shared file system). The program file holds pickled
code: run only files you wrote. Exit status: 0 when the node(s) ended cleanly, 1 when
one failed, 128 + signal for a signalled host runner, 2 for bad input (one line).
"""
from __future__ import annotations

import os
import sys

from actorq.cli import main as cli
from actorq.launch import hosts


def add_parser(subparsers):
  node = subparsers.add_parser(
      "node", help="run one host's nodes (or one node) of a program written by "
                   "'actorq train --launch hosts'")
  node.add_argument("--program", required=True, metavar="FILE",
                    help="the program file (<logdir>/program.actorq); '-': standard input")
  which = node.add_mutually_exclusive_group()
  which.add_argument("--host", type=cli.nonnegative_int("--host"), default=None, metavar="I",
                     help="run every node placed on host I (0 = the first of --hosts); "
                          "default under srun: $SLURM_PROCID")
  which.add_argument("--task", type=cli.nonnegative_int("--task"), default=None, metavar="N",
                     help="run node N of the program in this process")
  node.add_argument("--no-echo", action="store_true",
                    help="(--host) do not echo the nodes' output, only write their logs")
  return node


def _read(path: str) -> bytes:
  if path == "-":
    return sys.stdin.buffer.read()
  try:
    with open(path, "rb") as f:
      return f.read()
  except OSError as e:
    raise cli.UsageError(f"--program {path}: {e.strerror}") from None


def run(args) -> int:
  host, task = args.host, args.task
  if host is None and task is None:
    procid = os.environ.get("SLURM_PROCID")
    if procid is None or not procid.isdigit():
      raise cli.UsageError("give --host I or --task N (or run under srun, which sets "
                           "SLURM_PROCID)")
    host = int(procid)
  data = _read(args.program)
  try:
    header = hosts.decode_header(data)
  except hosts.ProgramFileError as e:
    raise cli.UsageError(f"--program {args.program}: {e}") from None
  if task is not None:
    if task >= len(header["tasks"]):
      raise cli.UsageError(f"--task {task}: the program has tasks 0..{len(header['tasks']) - 1}")
    code = hosts.run_task(data, task)
    # The node has ended and its exit status is decided: leave without the interpreter's
    # teardown, which may abort (exit -6/-11 instead of `code`) while daemon threads still
    # sit in Reverb or gRPC calls (a learner's sample waiting for its timeout, Courier
    # server threads), and which takes seconds with TF and JAX loaded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # pylint: disable=protected-access
  if host >= len(header["hosts"]):
    raise cli.UsageError(f"--host {host}: the program has hosts 0..{len(header['hosts']) - 1} "
                         f"({', '.join(header['hosts'])})")
  if not hosts.host_tasks(header, host):
    print(f"actorq: no node is placed on host {host} ({header['hosts'][host]})", flush=True)
    return 0
  return hosts.run_host(data, host, echo=not args.no_echo)
