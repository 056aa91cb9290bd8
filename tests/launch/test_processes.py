"""`launch.processes.NodeProcesses` starts each node in its own process group but in the
launcher's session, hence in the launcher's scheduling autogroup (issue 40: a node per
autogroup made the local_mp learner step 1.8x the single-process one on 2 cores)."""
import json
import os
import sys

from actorq.launch import processes

_REPORT = ("import json, os; print(json.dumps({'pid': os.getpid(), 'sid': os.getsid(0), "
           "'pgid': os.getpgid(0), 'autogroup': open('/proc/self/autogroup').read().split()[0] "
           "if os.path.exists('/proc/self/autogroup') else None}))")


def test_a_node_shares_the_launchers_session_and_autogroup_in_its_own_group(tmp_path):
  procs = processes.NodeProcesses(
      [processes.Command("node/0", [sys.executable, "-c", _REPORT])], str(tmp_path), echo=False)
  assert procs.wait(60.0), "the child did not exit"
  assert procs.exit_codes() == {"node/0": 0}
  for t in procs._threads:  # pylint: disable=protected-access (the log is complete at EOF)
    t.join(timeout=5.0)
  child = json.loads((tmp_path / "node_0.log").read_text().strip().splitlines()[-1])
  assert child["sid"] == os.getsid(0), "a node in a session of its own: a scheduling autogroup too"
  assert child["pgid"] == child["pid"] != os.getpgid(0), "a terminal's Ctrl-C would reach the node"
  if os.path.exists("/proc/self/autogroup"):
    with open("/proc/self/autogroup", encoding="utf-8") as f:
      assert child["autogroup"] == f.read().split()[0]

