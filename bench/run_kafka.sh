#!/usr/bin/env bash
# Kafka-protocol benchmark (issue 4): Strata against librdkafka's mock cluster and against
# nats-server with JetStream file storage, in one run, then 10,000 partitions on one broker.
#
#   1. produce, 1 KiB records, acks=all, 1 and 8 partitions, librdkafka as the client
#      (`strata bench produce`), against
#        - strata-server --smp 2, fresh data dir, default strict durability (an ack leaves only
#          after fdatasync, group commit);
#        - `strata debug mock-cluster` (librdkafka's in-memory mock; never syncs);
#        - nats-server -js (file storage; its default sync policy) with bench_jetstream_bench,
#          a pipelined publisher over NATS's text protocol; "8 partitions" = 8 streams.
#      Each (system, partitions) pair: a closed-loop throughput run (KB_SECS), a consume of what
#      it wrote (Strata, mock), and an open-loop latency run at KB_LAT_RATE msgs/s. KB_REPS
#      repetitions, interleaved; medians and spread (min-max) in the table.
#   2. bench/partitions10k.py: CreateTopics for 100 topics x 100 partitions, idle RSS and fds,
#      clean restart until Metadata lists all 10,000 partitions.
#
# Default run: about 3-4 minutes on 2 cores. Knobs (environment):
#   BUILD=build  KB_DIR=$BUILD/bench-data/kafka  KB_REPS=3  KB_SECS=3  KB_LAT_RATE=20000
#   KB_LAT_SECS=2  KB_LAT_LINGER=1  KB_JS_WINDOW=256  KB_PARTITIONS="1 8"  KB_SMP=2
#   KB_P10K_TOPICS=100  KB_P10K_PARTS=100  KB_SKIP_P10K=1  KB_RESULTS=<file.jsonl>
set -euo pipefail
BUILD=${BUILD:-build}
DIR=${KB_DIR:-${BUILD}/bench-data/kafka}
REPS=${KB_REPS:-3}
SECS=${KB_SECS:-3}
LAT_RATE=${KB_LAT_RATE:-20000}
LAT_SECS=${KB_LAT_SECS:-2}
LAT_LINGER=${KB_LAT_LINGER:-1}
JS_WINDOW=${KB_JS_WINDOW:-256}
PARTS=${KB_PARTITIONS:-"1 8"}
SMP=${KB_SMP:-2}
SIZE=1024
HERE=$(cd "$(dirname "$0")" && pwd)
SERVER=$BUILD/strata-server
CLI=$BUILD/strata
JSB=$BUILD/bench_jetstream_bench
PY=/usr/bin/python3

for b in "$SERVER" "$CLI" "$JSB"; do
    [ -x "$b" ] || { echo "run_kafka.sh: $b not built (make release)" >&2; exit 1; }
done
command -v nats-server >/dev/null || { echo "run_kafka.sh: nats-server missing (scripts/deps.sh test)" >&2; exit 1; }

rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
RESULTS=${KB_RESULTS:-$DIR/results.jsonl}
: > "$RESULTS"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$DIR/strata" "$DIR/nats" "$DIR/p10k/data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port, seconds
    local i
    for ((i = 0; i < $2 * 50; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.02
    done
    echo "run_kafka.sh: nothing listens on 127.0.0.1:$1 after $2 s" >&2
    return 1
}
# Appends one result line: the tool's JSON object plus what was measured where.
record() { # system kind partitions rep json
    printf '{"system":"%s","kind":"%s","partitions":%s,"rep":%s,"r":%s}\n' "$1" "$2" "$3" "$4" "${5:-null}" \
        >> "$RESULTS"
}

echo "== kafka bench: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "data in $DIR ($(df -h "$DIR" | awk 'NR==2{print $1}'))"
echo "   librdkafka $(pkg-config --modversion rdkafka 2>/dev/null || echo ?), $(nats-server --version)"

# --- the three servers -------------------------------------------------------------------
SPORT=$(free_port)
mkdir -p "$DIR/strata"
"$SERVER" --smp "$SMP" --set log.dirs="$DIR/strata" --set listeners=PLAINTEXT://127.0.0.1:$SPORT \
    --set admin.listen= --set log.level=warn > "$DIR/strata.log" 2>&1 &
SPID=$!
PIDS+=("$SPID")
wait_port "$SPORT" 30

mock_topics=()
for p in $PARTS; do
    for ((r = 0; r < REPS; r++)); do mock_topics+=(--topic "b$p-$r:$p"); done
done
exec {MOCK_OUT}< <(exec "$CLI" debug mock-cluster "${mock_topics[@]}" 2> "$DIR/mock.log")
MPID=$!
PIDS+=("$MPID")
read -r -t 30 MOCK_ADDR <&"$MOCK_OUT"
read -r -t 30 _ready <&"$MOCK_OUT"

NPORT=$(free_port)
mkdir -p "$DIR/nats"
nats-server -a 127.0.0.1 -p "$NPORT" -js -sd "$DIR/nats" > "$DIR/nats.log" 2>&1 &
NPID=$!
PIDS+=("$NPID")
wait_port "$NPORT" 30

# --- produce / consume / latency ---------------------------------------------------------
kbench() { # addr mode args...
    local addr=$1 mode=$2
    shift 2
    timeout 120 "$CLI" bench "$mode" -b "$addr" --size $SIZE --json "$@" 2>> "$DIR/bench.log"
}
for ((r = 0; r < REPS; r++)); do
    for p in $PARTS; do
        t="b$p-$r"
        echo "-- rep $((r + 1))/$REPS, $p partition(s)"
        for sys in strata mock; do
            if [ $sys = strata ]; then addr=127.0.0.1:$SPORT; else addr=$MOCK_ADDR; fi
            record $sys produce "$p" $r "$(kbench "$addr" produce --topic "$t" --partitions "$p" --duration "${SECS}s")"
            record $sys consume "$p" $r "$(kbench "$addr" consume --topic "$t")"
            record $sys latency "$p" $r "$(kbench "$addr" produce --topic "$t" --duration "${LAT_SECS}s" \
                --rate "$LAT_RATE" --linger "$LAT_LINGER")"
        done
        timeout 60 "$CLI" topic delete -b 127.0.0.1:$SPORT "$t" > /dev/null 2>> "$DIR/bench.log" || true
        record jetstream produce "$p" $r "$(timeout 120 "$JSB" --port "$NPORT" --streams "$p" --size $SIZE \
            --duration "$SECS" --window "$JS_WINDOW" --prefix "b$p$r" 2>> "$DIR/bench.log")"
        record jetstream latency "$p" $r "$(timeout 120 "$JSB" --port "$NPORT" --streams "$p" --size $SIZE \
            --duration "$LAT_SECS" --rate "$LAT_RATE" --window "$JS_WINDOW" --prefix "l$p$r" 2>> "$DIR/bench.log")"
    done
done
STRATA_RSS=$(awk '/VmHWM/{print $2}' /proc/$SPID/status)
kill "$SPID" "$MPID" "$NPID" 2>/dev/null || true
wait "$SPID" "$MPID" "$NPID" 2>/dev/null || true
PIDS=()
echo "   strata-server peak RSS during the runs: $((STRATA_RSS / 1024)) MiB"

"$PY" "$HERE/kafka_report.py" "$RESULTS" --secs "$SECS" --lat-rate "$LAT_RATE" --lat-secs "$LAT_SECS" \
    --lat-linger "$LAT_LINGER" --js-window "$JS_WINDOW" --smp "$SMP" --reps "$REPS"

# --- 10,000 partitions -------------------------------------------------------------------
if [ "${KB_SKIP_P10K:-0}" != 1 ]; then
    T=${KB_P10K_TOPICS:-100}
    N=${KB_P10K_PARTS:-100}
    echo "== $((T * N)) partitions on one broker ($T topics x $N partitions, --smp $SMP)"
    mkdir -p "$DIR/p10k"
    P10K=$(timeout 600 "$PY" "$HERE/partitions10k.py" --server "$SERVER" --dir "$DIR/p10k" \
        --topics "$T" --partitions "$N" --smp "$SMP" 2>> "$DIR/p10k/client.log")
    echo "$P10K" >> "$RESULTS"
    "$PY" "$HERE/kafka_report.py" --p10k "$P10K"
fi
echo "   raw results: $RESULTS"
