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
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [[ " ${missing[*]} " == *" valkey-server "* ]] && ! apt-cache show valkey-server >/dev/null 2>&1; then
  missing=("${missing[@]/valkey-server/redis-server}")  # no Valkey package here (Debian 12): Redis 7.0, BSD
fi
echo "system-deps: installing ${missing[*]}"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
