#!/usr/bin/env bash
# System packages the fuzzing-campaign tests need: a Redis-protocol server (Valkey, else Redis) for the
# shared Hypothesis database and headless Chromium with its driver for the dashboard test.
# Idempotent and quick: apt runs only when something is missing (CI runs as root).
set -euo pipefail
missing=()
command -v valkey-server >/dev/null 2>&1 || command -v redis-server >/dev/null 2>&1 || missing+=(valkey-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ "${#missing[@]}" -eq 0 ]; then
  echo "system-deps: valkey/redis and chromium are installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  # older Debian/Ubuntu have no valkey-server package: fall back to redis-server
  apt-get install -y -qq --no-install-recommends "${missing[@]/valkey-server/redis-server}" >/dev/null
fi
