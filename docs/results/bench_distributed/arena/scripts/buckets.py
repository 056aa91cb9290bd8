"""Buckets of a perf.data (cpu-clock samples) by DSO/symbol, as shares."""
import collections, subprocess, sys
data = sys.argv[1]
rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "comm,dso,sym", "--no-children",
                      "-F", "overhead,comm,dso,sym"], capture_output=True, text=True).stdout
b = collections.Counter()
def bucket(comm, dso, sym):
  if "[kernel" in dso or dso.startswith("[k"): return "kernel"
  if "JIT" in dso or "perf-" in dso or dso == "[unknown]": return "jit/unknown"
  if "xla_extension" in dso or "jaxlib" in dso:
    if "gemm" in sym or "gebp" in sym or "Contraction" in sym or "pack" in sym: return "eigen-matmul"
    if "Eigen" in sym and ("WorkerLoop" in sym or "RunQueue" in sym or "Spin" in sym or "EventCount" in sym or "Steal" in sym): return "eigen-pool"
    return "xla-other"
  if "libc" in dso or "libm" in dso or "ld-linux" in dso or "libstdc" in dso: return "libc/libm/stdc++"
  if "python" in dso: return "python"
  if "tensorflow" in dso or "reverb" in dso or "grpc" in dso or "protobuf" in dso or "_pywrap" in dso: return "tf/reverb/grpc"
  if "tflite" in dso or "lite" in dso: return "litert"
  return "other:" + dso
for line in rep.splitlines():
  if not line.strip() or line.lstrip().startswith("#"): continue
  parts = line.split(None, 3)
  if len(parts) < 4 or not parts[0].endswith("%"): continue
  pct = float(parts[0][:-1]); comm, dso, sym = parts[1], parts[2], parts[3]
  b[bucket(comm, dso, sym)] += pct
for k, v in b.most_common(): print(f"{v:6.2f}% {k}")
if len(sys.argv) > 2:
  kern = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "sym", "--no-children", "--dsos", "[kernel.kallsyms]"], capture_output=True, text=True).stdout
  print("kernel symbols:"); print("\n".join([l for l in kern.splitlines() if l.strip() and not l.startswith("#")][:15]))
