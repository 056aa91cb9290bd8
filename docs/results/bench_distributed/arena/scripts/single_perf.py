"""Single-process learner step under perf record (the process records itself)."""
import json, os, signal, subprocess, sys, time
from actorq.benchmarks import learner_step
job = json.load(open(sys.argv[1]))
out = sys.argv[2]; steps = int(sys.argv[3])
learner, env = learner_step.filled_learner(job["agent"], job["env"], job["overrides"], job["seed"], warmup=3)
perf = subprocess.Popen(["perf", "record", "-F", "999", "-p", str(os.getpid()), "-o", out + ".data"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(2.0)
c0, t0 = time.process_time(), time.perf_counter()
wall, cpu = learner_step.timed_steps(learner, steps)
c1, t1 = time.process_time(), time.perf_counter()
perf.send_signal(signal.SIGINT); perf.wait()
json.dump({"steps": steps, "cpu_ms": 1e3 * (c1 - c0) / steps, "wall_ms": 1e3 * (t1 - t0) / steps,
           "loadavg": os.getloadavg()}, open(out + ".json", "w"))
env.close()
