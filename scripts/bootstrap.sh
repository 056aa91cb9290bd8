#!/usr/bin/env bash
# Creates .venv (Python 3.10, the pinned stack, actorq editable) when missing or stale.
# Idempotent: when the stamp matches the requirement files it returns in well under a second.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
stamp="$venv/.actorq-stamp"
want="$(cat requirements/base.txt requirements/constraints-py310.txt setup.py | sha256sum | cut -d' ' -f1)"
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
pip install -c requirements/constraints-py310.txt -r requirements/base.txt
pip install --no-deps --no-build-isolation -e .
"$venv/bin/python" -c "import actorq, reverb, launchpad, acme, jax, haiku" \
  || { echo "actorq: the environment did not import; see the pip output above" >&2; exit 1; }
echo "$want" > "$stamp"
