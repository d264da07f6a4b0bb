#!/usr/bin/env bash
# Set up, then run the conformance gate over the shipped specs, reference and kernels.
# Extra arguments go to `kvexact gate` (e.g. --json gate.json --junit gate.xml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${KVEXACT_VENV:-.venv}/bin/kvexact" gate "$@"
