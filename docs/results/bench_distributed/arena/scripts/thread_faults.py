"""Page faults and CPU per learner step: steps in the main thread vs in another thread."""
import json, os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procstat
from actorq.benchmarks import learner_step
job = json.load(open(sys.argv[1])); steps = int(sys.argv[2])
learner, env = learner_step.filled_learner(job["agent"], job["env"], job["overrides"], job["seed"], warmup=3)
def block(where):
  res = {}
  def run():
    a = procstat.stat(os.getpid())
    w, c = learner_step.timed_steps(learner, steps)
    b = procstat.stat(os.getpid())
    d = procstat.diff(a, b)
    res.update(where=where, minflt=d["minflt"] / steps, stime_ms=1e3 * d["stime"] / steps,
               utime_ms=1e3 * d["utime"] / steps, wall_ms=1e3 * sum(w) / steps, cpu_ms=1e3 * sum(c) / steps)
  if where == "main":
    run()
  else:
    t = threading.Thread(target=run); t.start(); t.join()
  print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in res.items()}), flush=True)
for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 2):
  block("main"); block("thread")
env.close()
