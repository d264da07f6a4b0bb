#!/usr/bin/env bash
# Build, once, the virtual environment in which the live adapters drive the real runtimes' allocators:
# the pinned vLLM and SGLang wheels installed --no-deps, CPU torch, the light packages their allocator
# modules import, and kvexact itself (editable). No GPU package is installed.
# Prints the environment's python path on its last line. Rebuilds only when this script changed.
#   KVEXACT_RUNTIMES  cache folder (default ~/.cache/kvexact/runtimes)
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.33.0
SGLANG_VERSION=0.5.23
TORCH_VERSION=2.13.0
ROOT="${KVEXACT_RUNTIMES:-$HOME/.cache/kvexact/runtimes}"
ENV="$ROOT/vllm-$VLLM_VERSION-sglang-$SGLANG_VERSION"
stamp="$ENV/.kvexact-runtime-env"
want="$(sha256sum scripts/runtime-env.sh | cut -d' ' -f1) $(pwd)"
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
  echo "runtime-env: $ENV is up to date" >&2
  echo "$ENV/bin/python"
  exit 0
fi
start=$(date +%s)
rm -rf "$ENV"
mkdir -p "$ROOT"
"${PYTHON:-python3}" -m venv "$ENV"
PIP=("$ENV/bin/pip" install --quiet --disable-pip-version-check --no-warn-conflicts)
# Nothing may replace the CPU torch: every install below runs under this constraint.
echo "torch==$TORCH_VERSION" > "$ENV/constraints.txt"
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" --no-deps "vllm==$VLLM_VERSION" "sglang==$SGLANG_VERSION"
# What vLLM's KVCacheManager / Request / SamplingParams and SGLang's RadixCache and allocators import.
"${PIP[@]}" -c "$ENV/constraints.txt" packaging psutil pyzmq urllib3 regex numpy msgspec pydantic cbor2 \
  "transformers>=5.16.1,<5.21" aiohttp requests openai-harmony openai pillow pybase64 cachetools \
  cloudpickle uvloop py-cpuinfo fastapi orjson dill sentencepiece prometheus_client partial_json_parser \
  ipython
# Imported at module level only (grammar backends); their own dependencies would pull GPU packages.
"${PIP[@]}" --no-deps xgrammar llguidance apache-tvm-ffi==0.1.11
"${PIP[@]}" -c "$ENV/constraints.txt" -e ".[kernels]"
echo "$want" > "$stamp"
echo "runtime-env: built $ENV in $(( $(date +%s) - start ))s, $(du -sh "$ENV" | cut -f1)" >&2
echo "$ENV/bin/python"
