#!/usr/bin/env bash
# Storage benchmark: bench_storage (append no-sync / group commit / sync-per-batch, sequential
# and random reads) and fio's sequential buffered write + fdatasync at 1 MiB blocks in the same
# directory, then the ratio group-commit / fio per record size. Default run: about 1-2 minutes.
#   BUILD=build  STORAGE_BENCH_DIR=<dir>  STORAGE_BENCH_MB=256  STORAGE_BENCH_SECS=3
set -euo pipefail
BUILD=${BUILD:-build}
BIN=${BUILD}/bench_storage
DIR=${STORAGE_BENCH_DIR:-${BUILD}/bench-data/storage}
MB=${STORAGE_BENCH_MB:-256}
SECS=${STORAGE_BENCH_SECS:-3}
mkdir -p "$DIR"
[ -x "$BIN" ] || { echo "run_storage.sh: $BIN not built" >&2; exit 1; }

echo "== storage: bench_storage ($DIR, $(df -h "$DIR" | awk 'NR==2{print $1" "$2}'))"
OUT=$(mktemp)
trap 'rm -f "$OUT"; rm -rf "$DIR"/fio-* ' EXIT
"$BIN" --dir "$DIR" --mb "$MB" --secs "$SECS" | tee "$OUT"

FIO_MBPS=""
if command -v fio >/dev/null; then
    echo "== storage: fio sequential write, 1 MiB blocks, fdatasync after each ($MB MiB)"
    FIO_JSON=$(fio --name=fio-seq --directory="$DIR" --rw=write --bs=1M --size="${MB}M" \
        --ioengine=psync --fdatasync=1 --runtime="$SECS" --time_based=0 --output-format=json \
        2>/dev/null || true)
    FIO_MBPS=$(printf '%s' "$FIO_JSON" | python3 -c '
import json, sys
try:
    j = json.load(sys.stdin)
    print("%.1f" % (j["jobs"][0]["write"]["bw_bytes"] / 1048576.0))
except Exception:
    print("")
')
    echo "fio seq write+fdatasync 1MiB: ${FIO_MBPS:-n/a} MB/s"
else
    echo "fio not installed: no baseline"
fi
if [ -n "$FIO_MBPS" ]; then
    echo "== storage: group commit / fio (target >= 0.70)"
    grep '^group_mbps_' "$OUT" | while read -r k v; do
        python3 -c "import sys; print('%-6s B records: %7.1f / %7.1f MB/s = %.2f' % (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[2]) / float(sys.argv[3])))" \
            "${k#group_mbps_}" "$v" "$FIO_MBPS"
    done
fi
