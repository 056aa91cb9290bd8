"""Per-process counters from /proc: minor faults, user/system CPU, context switches (all threads)."""
import glob, os, sys, time, json

TICK = os.sysconf("SC_CLK_TCK")

def stat(pid):
  with open(f"/proc/{pid}/stat") as f:
    s = f.read()
  fields = s[s.rfind(")") + 2:].split()
  # fields[0] is state (field 3); minflt field 10 -> idx 7; majflt 12 -> 9; utime 14 -> 11; stime 15 -> 12
  out = {"minflt": int(fields[7]), "majflt": int(fields[9]),
         "utime": int(fields[11]) / TICK, "stime": int(fields[12]) / TICK}
  vol = nonvol = 0
  for st in glob.glob(f"/proc/{pid}/task/*/status"):
    try:
      for line in open(st):
        if line.startswith("voluntary_ctxt_switches"):
          vol += int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches"):
          nonvol += int(line.split()[1])
    except OSError:
      pass
  out["vcs"], out["nvcs"] = vol, nonvol
  out["threads"] = len(glob.glob(f"/proc/{pid}/task/*"))
  out["t"] = time.time()
  return out

def diff(a, b):
  return {k: b[k] - a[k] for k in a if k != "threads"} | {"threads": b["threads"]}

if __name__ == "__main__":
  pid, secs = int(sys.argv[1]), float(sys.argv[2])
  a = stat(pid); time.sleep(secs); b = stat(pid)
  print(json.dumps(diff(a, b)))
