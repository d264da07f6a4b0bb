#!/usr/bin/env bash
# Set up, then run the conformance gate over the shipped specs, reference and kernels.
# Extra arguments go to `kvexact gate` (e.g. --level full --json gate.json --junit gate.xml); relative
# report paths are relative to the folder this script is called from, not the repository.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
VENV="${KVEXACT_VENV:-.venv}"
case "$VENV" in /*) ;; *) VENV="$ROOT/$VENV" ;; esac  # setup.sh reads a relative KVEXACT_VENV from ROOT
exec "$VENV/bin/kvexact" gate "$@"
