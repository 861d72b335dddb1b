#!/usr/bin/env bash
# Installs what Strata needs to build, run and test, only where missing.
# Usage: scripts/deps.sh [build|test]   (test also installs the clients and peers)
set -euo pipefail
what=${1:-build}
pkgs=(gcc make cmake pkg-config python3 liburing-dev librdkafka-dev zlib1g-dev
      libsnappy-dev liblz4-dev libzstd-dev libssl-dev libinih-dev libjansson-dev
      libmicrohttpd-dev libcmocka-dev)
if [ "$what" = test ]; then
  pkgs+=(clang clang-format libclang-rt-14-dev kcat python3-confluent-kafka python3-kafka fio
         python3-snappy python3-lz4 python3-zstandard
         prometheus nats-server libfuse3-dev fuse3)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$what" = test ]; then
  js=tests/integration/js
  if [ -f "$js/package.json" ] && [ ! -d "$js/node_modules" ]; then
    echo "deps: npm install in $js"
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
