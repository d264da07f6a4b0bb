#!/usr/bin/env bash
# The GPU check (one script, one JSON report): the kernel tests natively, the allocator and radix machines on
# CUDA for a few hundred steps, and the kernel benchmark; under 9 minutes on one GPU.
#   bash scripts/gpu-check.sh [--out DIR]        on a CUDA host (report: DIR/gpu-check.json, default gpu-check-out)
#   bash scripts/gpu-check.sh --dry-run [--out DIR]   every section on the CPU with small sizes
# Downloads nothing: it uses the python (PYTHON, default python3, or .venv's for a dry run) that already holds
# torch and Triton, and installs kvexact from this tree with pip --no-deps --no-index only when that python
# cannot import it yet.
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=""
for arg in "$@"; do [ "$arg" = "--dry-run" ] && DRY=1; done
PY="${PYTHON:-python3}"
if [ -z "${PYTHON:-}" ] && [ -n "$DRY" ] && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
if ! "$PY" -c "import kvexact.kernels.device" >/dev/null 2>&1; then
  echo "gpu-check: installing kvexact from this tree into $("$PY" -c 'import sys; print(sys.prefix)') (no downloads)"
  if ! "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e .; then
    echo "gpu-check: could not install kvexact with pip (needs setuptools); set PYTHON to a python that has it" >&2
    exit 2
  fi
fi
exec "$PY" scripts/gpu_check.py "$@"
