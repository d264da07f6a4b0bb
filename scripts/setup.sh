#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install kvexact with every extra.
# Idempotent: reinstalls only when pyproject.toml or this script changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh  # valkey/redis and chromium for the campaign tests (apt only when missing)
VENV="${KVEXACT_VENV:-.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.kvexact-installed"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: CUDA device found; torch comes from the kernels extra"
  else
    echo "setup: no GPU; installing the CPU build of torch (torch==2.13.0)"
    "$VENV/bin/pip" install --quiet "torch==2.13.0"
  fi
  "$VENV/bin/pip" install --quiet -e ".[kernels,campaign,dev]"
  echo "$want" > "$stamp"
else
  echo "setup: $VENV is up to date"
fi
