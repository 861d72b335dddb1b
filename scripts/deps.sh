#!/usr/bin/env bash
# Installs what Strata needs to build, run and test, only where missing.
# Usage: scripts/deps.sh [build|test]   (test also installs the clients and peers)
set -euo pipefail
what=${1:-build}
pkgs=(gcc make cmake pkg-config python3 liburing-dev librdkafka-dev zlib1g-dev
      libsnappy-dev liblz4-dev libzstd-dev libssl-dev libinih-dev libjansson-dev
      libmicrohttpd-dev libcmocka-dev libsystemd-dev libpcre2-dev)
if [ "$what" = test ]; then
  pkgs+=(clang clang-format libclang-rt-14-dev kcat python3-confluent-kafka python3-kafka fio chromium
         python3-snappy python3-lz4 python3-zstandard
         prometheus nats-server libfuse3-dev fuse3 openssl dpkg-dev python3-yaml
         golang-go golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev)
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
# The controller's Raft: libraft 0.22.1 from bookworm-backports (bookworm's own 0.15 has a Raft
# safety bug, canonical/raft#220). Enable the backports suite of the configured Debian archive.
raft_ok() { pkg-config --exists 'raft >= 0.22' 2>/dev/null && dpkg-query -W -f='${Status}' libuv1-dev 2>/dev/null | grep -q 'install ok installed'; }
if ! raft_ok; then
  echo "deps: installing libraft-dev from bookworm-backports"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  src=/etc/apt/sources.list.d/debian.sources
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    if [ -f "$src" ] && grep -q '^Suites:.*bookworm-updates' "$src"; then
      $sudo_cmd sed -i '0,/^Suites:.*bookworm-updates/s//& bookworm-backports/' "$src"
    else
      echo 'deb http://deb.debian.org/debian bookworm-backports main' |
        $sudo_cmd tee /etc/apt/sources.list.d/strata-backports.list >/dev/null
    fi
  fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports libraft-dev libuv1-dev >/dev/null
fi
if [ "$what" = test ]; then
  js=tests/integration/js
  if [ -f "$js/package.json" ] && [ ! -d "$js/node_modules" ]; then
    echo "deps: npm install in $js"
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
