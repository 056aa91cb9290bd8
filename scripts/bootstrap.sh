#!/usr/bin/env bash
# Creates .venv (Python 3.10, the pinned stack, actorq editable) when missing or stale.
# Idempotent: when the stamp matches the requirement files it returns in well under a second.
# On a machine with an NVIDIA GPU (`nvidia-smi -L` works, or ACTORQ_GPU=1) it also installs jax's
# CUDA 12 plugin and NVIDIA libraries, requirements/gpu-py310.txt (~3 GB); ACTORQ_GPU=0: never.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
stamp="$venv/.actorq-stamp"
case "${ACTORQ_GPU:-}" in
  1) gpu=1 ;;
  0) gpu=0 ;;
  "") gpu=0
      if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi ;;
  *) echo "actorq: ACTORQ_GPU must be 0 or 1 (or unset: nvidia-smi decides), got '$ACTORQ_GPU'" >&2
     exit 2 ;;
esac
reqs=(requirements/base.txt)
[ "$gpu" = 1 ] && reqs+=(requirements/gpu-py310.txt)
want="$( (cat "${reqs[@]}" requirements/constraints-py310.txt setup.py; echo "gpu=$gpu") \
        | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/actorq" ]; then
  exit 0
fi
py=""
for cand in "${ACTORQ_PYTHON:-}" "$(command -v pyenv >/dev/null 2>&1 && PYENV_VERSION=3.10.13 pyenv which python 2>/dev/null || true)" \
            "$HOME/.pyenv/versions/3.10.13/bin/python" python3.10; do
  if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 && \
     "$cand" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 10) else 1)' 2>/dev/null; then
    py="$cand"; break
  fi
done
if [ -z "$py" ]; then
  echo "actorq: Python 3.10 not found (Launchpad ships wheels only up to 3.10)." >&2
  echo "        Install it (e.g. 'pyenv install 3.10.13') or set ACTORQ_PYTHON=/path/to/python3.10." >&2
  exit 1
fi
echo "actorq: creating or refreshing $venv with $py (about a minute with a warm pip cache)" >&2
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
log="$venv/pip-install.log"
pip() {
  if ! "$venv/bin/python" -m pip --disable-pip-version-check -q "$@" >>"$log" 2>&1; then
    grep -v "is ignored: it is neither" "$log" | tail -40 >&2
    echo "actorq: 'pip install $*' failed (full log: $log)" >&2
    exit 1
  fi
}
pip install "setuptools>=70" wheel
if [ "$gpu" = 1 ]; then
  echo "actorq: NVIDIA GPU (nvidia-smi or ACTORQ_GPU=1): also requirements/gpu-py310.txt" >&2
  pip install -c requirements/constraints-py310.txt -r requirements/base.txt \
    -r requirements/gpu-py310.txt
else
  pip install -c requirements/constraints-py310.txt -r requirements/base.txt
  # A .venv switched back to CPU (ACTORQ_GPU=0) loses the CUDA plugin (NVIDIA wheels stay, unused).
  if "$venv/bin/python" -m pip show -q jax-cuda12-plugin >/dev/null 2>&1; then
    pip uninstall -y jax-cuda12-plugin jax-cuda12-pjrt
  fi
fi
pip install --no-deps --no-build-isolation -e .
"$venv/bin/python" -c "import actorq, reverb, launchpad, acme, jax, haiku" \
  || { echo "actorq: the environment did not import; see the pip output above" >&2; exit 1; }
if [ "$gpu" = 1 ]; then  # say what jax sees; a CUDA plugin without a GPU is not an error here
  "$venv/bin/python" - >&2 <<'EOF' || true
import jax
try:
  print("actorq: jax", jax.__version__, "sees", jax.devices())
except RuntimeError as e:
  print("actorq: jax's CUDA plugin finds no GPU here; actorq commands then use the CPU, other jax"
        " code needs JAX_PLATFORMS=cpu (" + str(e).splitlines()[0][:120] + ")")
EOF
fi
echo "$want" > "$stamp"
