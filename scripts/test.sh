#!/usr/bin/env bash
# Set up, then lint, type-check and run the whole test suite (slowest tests reported, per-test timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${KVEXACT_VENV:-.venv}"
export KVEXACT_PROFILE="${KVEXACT_PROFILE:-ci}"
echo "test: ruff"
"$VENV/bin/ruff" check .
echo "test: mypy"
"$VENV/bin/mypy" kvexact spec reference kernels conformance
echo "test: runtime environment (scripts/runtime-env.sh; built once, then cached)"
bash scripts/runtime-env.sh >/dev/null
echo "test: pytest (profile $KVEXACT_PROFILE)"
exec "$VENV/bin/pytest" -n "${KVEXACT_TEST_WORKERS:-2}" --dist loadgroup --durations=25 --timeout=900 "$@"
