#!/usr/bin/env bash
# Fails (listing the files) when a C source is not formatted as .clang-format says.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(find src tests bench -name '*.[ch]' -print0 |
      xargs -0 -n 20 clang-format --dry-run 2>&1 | grep -o '^[^:]*\.[ch]' | sort -u || true)
if [ -n "$bad" ]; then
  echo "not clang-formatted (run 'make format'):"; echo "$bad"; echo "0 passed, 1 failed"; exit 1
fi
echo "1 passed, 0 failed"
