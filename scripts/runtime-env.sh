#!/usr/bin/env bash
# Build, once, the virtual environment in which the live adapters drive the real runtimes' allocators:
# the pinned vLLM and SGLang wheels installed --no-deps, CPU torch, the light packages their allocator
# modules import, and kvexact itself (editable, with the kernels extra). No GPU package is installed.
# Prints the environment's python path on its last line. Rebuilds only when the pins or lists change.
#   KVEXACT_RUNTIMES  cache folder (default ~/.cache/kvexact/runtimes)
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.33.0
SGLANG_VERSION=0.5.23
TORCH_VERSION=2.13.0
# What vLLM's KVCacheManager / Request / SamplingParams and SGLang's RadixCache and allocators import.
LIGHT="packaging psutil pyzmq urllib3 regex numpy msgspec pydantic cbor2 transformers>=5.16.1,<5.21 aiohttp
  requests openai-harmony openai pillow pybase64 cachetools cloudpickle uvloop py-cpuinfo fastapi orjson dill
  sentencepiece prometheus_client partial_json_parser ipython"
# Imported at module level only (grammar backends); their own dependencies would pull GPU packages.
NODEPS="xgrammar llguidance apache-tvm-ffi==0.1.11"
ROOT="${KVEXACT_RUNTIMES:-$HOME/.cache/kvexact/runtimes}"
ENV="$ROOT/vllm-$VLLM_VERSION-sglang-$SGLANG_VERSION"
stamp="$ENV/.kvexact-runtime-env"
want="$(echo "$VLLM_VERSION $SGLANG_VERSION $TORCH_VERSION $LIGHT $NODEPS" | sha256sum | cut -d' ' -f1)"
here="$(pwd) $(sha256sum pyproject.toml | cut -d' ' -f1)"  # which clone kvexact is installed from
mkdir -p "$ROOT"
exec 9>"$ROOT/.build.lock"
flock 9  # one build at a time (parallel test workers share the cache)
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
  if [ "$(cat "$stamp.kvexact" 2>/dev/null || true)" != "$here" ]; then
    # Same runtimes, another clone (or a changed pyproject): reinstall only kvexact, editable, from here.
    "$ENV/bin/pip" install --quiet --disable-pip-version-check --no-warn-conflicts -c "$ENV/constraints.txt" -e ".[kernels]" >&2
    echo "$here" > "$stamp.kvexact"
  fi
  echo "runtime-env: $ENV is up to date" >&2
  echo "$ENV/bin/python"
  exit 0
fi
start=$(date +%s)
rm -rf "$ENV"
"${PYTHON:-python3}" -m venv "$ENV"
PIP=("$ENV/bin/pip" install --quiet --disable-pip-version-check --no-warn-conflicts)
# Nothing may replace the CPU torch: every install below runs under this constraint.
echo "torch==$TORCH_VERSION" > "$ENV/constraints.txt"
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" --no-deps "vllm==$VLLM_VERSION" "sglang==$SGLANG_VERSION"
# shellcheck disable=SC2086
"${PIP[@]}" -c "$ENV/constraints.txt" $LIGHT
# shellcheck disable=SC2086
"${PIP[@]}" --no-deps $NODEPS
"${PIP[@]}" -c "$ENV/constraints.txt" -e ".[kernels]"
echo "$want" > "$stamp"
echo "$here" > "$stamp.kvexact"
echo "runtime-env: built $ENV in $(( $(date +%s) - start ))s, $(du -sh "$ENV" | cut -f1)" >&2
echo "$ENV/bin/python"
