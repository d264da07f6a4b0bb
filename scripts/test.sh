#!/usr/bin/env bash
# Set up, then lint, type-check and run the whole test suite (slowest tests reported, per-test timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${KVEXACT_VENV:-.venv}"
export KVEXACT_PROFILE="${KVEXACT_PROFILE:-ci}"
# TLC: the tests that need it use TLA2TOOLS_JAR, else the CI copy beside the clone; in CI (CI=true) they
# fail without it, so say here, once and plainly, what is missing.
CI_JAR="$(cd .. && pwd)/shared/tlc/tla2tools.jar"
if [ -z "${TLA2TOOLS_JAR:-}" ] && [ -f "$CI_JAR" ]; then
    export TLA2TOOLS_JAR="$CI_JAR"
fi
if [ -n "${TLA2TOOLS_JAR:-}" ]; then
    if ! command -v java >/dev/null 2>&1 && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; then
        echo "test: error: TLA2TOOLS_JAR is $TLA2TOOLS_JAR but Java is not installed (TLC needs Java 11+; install a JRE, e.g. apt-get install default-jre-headless)" >&2
        [ "${CI:-}" = "true" ] && exit 3
    fi
    echo "test: TLC jar $TLA2TOOLS_JAR"
elif [ "${CI:-}" = "true" ]; then
    echo "test: warning: no TLC jar (TLA2TOOLS_JAR unset, none at $CI_JAR): the TLC tests will fail in CI" >&2
fi
echo "test: ruff"
"$VENV/bin/ruff" check .
echo "test: mypy"
"$VENV/bin/mypy" kvexact spec reference kernels conformance
echo "test: runtime environment (scripts/runtime-env.sh; built once, then cached)"
bash scripts/runtime-env.sh >/dev/null
echo "test: pytest (profile $KVEXACT_PROFILE)"
exec "$VENV/bin/pytest" -n "${KVEXACT_TEST_WORKERS:-2}" --dist loadgroup --durations=25 --timeout=900 "$@"
