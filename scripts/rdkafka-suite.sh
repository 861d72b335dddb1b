#!/usr/bin/env bash
# rdkafka-suite.sh — librdkafka's own test suite (its tests/test-runner) against a Strata broker.
#
# The peer suite of issue 21: librdkafka's transaction tests (0103_transactions,
# 0129_fetch_aborted_msgs, 0098_consumer_txn) and any others named, run by librdkafka's own
# test-runner against a strata-server. Not part of `make test` (it builds librdkafka and runs for
# minutes). Everything it builds lives in .cache/librdkafka/ at the repository root (git-ignored),
# never in the tracked tree.
#
# The source comes from a local git mirror of confluentinc/librdkafka (offline: nothing is
# downloaded; configure runs with --no-download and without the optional libraries a build would
# fetch). The version is a tag of that mirror, v2.15.0 by default.
#
#   scripts/rdkafka-suite.sh [--build-only] [--start] [TEST...]
#
#   TEST        test numbers (0103 0129 0098 by default), as the suite's TESTS variable takes them
#   --start     start a strata-server here (build-dev/strata-server or $STRATA_SERVER, one broker,
#               --smp 2, a temporary log.dirs) for the run, and stop it after; otherwise BROKERS
#               (host:port[,...]) names a running broker
#   --build-only  build librdkafka and the test-runner, run nothing
#
# Environment: LIBRDKAFKA_GIT (the mirror's git dir, default
# /work/.mirror/confluentinc+librdkafka/repo), LIBRDKAFKA_REF (default v2.15.0), BROKERS,
# STRATA_SERVER, TEST_KAFKA_VERSION (the broker version the suite assumes, default 4.0.0.0: it
# skips tests needing a newer broker), JOBS (make -j, default 2), RDKAFKA_SUITE_ARGS (more
# test-runner arguments, e.g. -Q for the quick mode), RDKAFKA_SUITE_SETS (extra --set k=v for
# --start, space separated).
#
# Prints one line per test, "PASS 0103", "SKIP 0098 (why)" or "FAIL 0103" with the first
# failure lines (the whole test-runner output is kept in .cache/librdkafka/run-<test>.log), and
# exits 1 if any failed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=$ROOT/.cache/librdkafka
GIT=${LIBRDKAFKA_GIT:-/work/.mirror/confluentinc+librdkafka/repo}
REF=${LIBRDKAFKA_REF:-v2.15.0}
JOBS=${JOBS:-2}
SRC=$CACHE/src-$REF
BUILD_ONLY=0
START=0
TESTS=()
for a in "$@"; do
    case $a in
    --build-only) BUILD_ONLY=1 ;;
    --start) START=1 ;;
    -h | --help)
        sed -n '2,30p' "$0"
        exit 0
        ;;
    *) TESTS+=("$a") ;;
    esac
done
[ ${#TESTS[@]} -gt 0 ] || TESTS=(0103 0129 0098)
mkdir -p "$CACHE"

# ---- build (once per ref; make is incremental after that) ------------------------------------
if [ ! -f "$SRC/.extracted" ]; then
    [ -d "$GIT" ] || { echo "no librdkafka mirror at $GIT (LIBRDKAFKA_GIT)" >&2; exit 2; }
    rm -rf "$SRC"
    mkdir -p "$SRC"
    git --git-dir="$GIT" archive --format=tar "$REF" | tar -x -C "$SRC"
    touch "$SRC/.extracted"
fi
if [ ! -f "$SRC/Makefile.config" ]; then
    (cd "$SRC" && ./configure --no-download --disable-gssapi --disable-curl --disable-sasl \
        --disable-zstd --disable-lz4-ext >"$CACHE/configure.log" 2>&1) || {
        tail -30 "$CACHE/configure.log" >&2
        exit 2
    }
fi
if [ ! -x "$SRC/tests/test-runner" ]; then
    echo "building librdkafka $REF in $SRC (log: $CACHE/build.log)" >&2
    (cd "$SRC" && make -j"$JOBS" libs >"$CACHE/build.log" 2>&1 &&
        make -C tests -j"$JOBS" test-runner >>"$CACHE/build.log" 2>&1) || {
        tail -40 "$CACHE/build.log" >&2
        exit 2
    }
fi
[ $BUILD_ONLY = 1 ] && { echo "built $SRC/tests/test-runner"; exit 0; }

# ---- the broker --------------------------------------------------------------------------------
SERVER_PID=
TMP=
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    [ -z "$TMP" ] || rm -rf "$TMP"
}
trap cleanup EXIT
if [ $START = 1 ]; then
    BIN=${STRATA_SERVER:-$ROOT/build-dev/strata-server}
    [ -x "$BIN" ] || { echo "no strata-server at $BIN (STRATA_SERVER)" >&2; exit 2; }
    TMP=$(mktemp -d /tmp/strata-rdkafka-suite-XXXXXX)
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    APORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    SETS=()
    # One broker: the transaction log on one replica (when this server has the setting).
    if "$BIN" --help 2>&1 | grep -q "transaction.state.log.replication.factor"; then
        SETS+=(--set transaction.state.log.replication.factor=1
            --set transaction.state.log.min.isr=1)
    fi
    for kv in ${RDKAFKA_SUITE_SETS:-}; do SETS+=(--set "$kv"); done
    "$BIN" --smp 2 --set "listeners=PLAINTEXT://127.0.0.1:$PORT" \
        --set "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT" --set "log.dirs=$TMP/data" \
        --set "admin.listen=127.0.0.1:$APORT" "${SETS[@]}" >"$CACHE/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 200); do
        grep -q " ready: kafka on " "$CACHE/server.log" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$CACHE/server.log" >&2; exit 2; }
        sleep 0.1
    done
    BROKERS=127.0.0.1:$PORT
fi
[ -n "${BROKERS:-}" ] || { echo "BROKERS is not set (or use --start)" >&2; exit 2; }
export BROKERS

# The suite reads its client settings from test.conf (RDKAFKA_TEST_CONF).
CONF=$CACHE/test.conf
{
    echo "metadata.broker.list=$BROKERS"
    echo "test.topic.random=true"
} >"$CONF"
export RDKAFKA_TEST_CONF=$CONF
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-4.0.0.0}

# The suite's own librdkafka, not the system's (the test-runner links it dynamically).
export LD_LIBRARY_PATH=$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

failed=0
cd "$SRC/tests"
for t in "${TESTS[@]}"; do
    log=$CACHE/run-$t.log
    # shellcheck disable=SC2086
    if TESTS=$t ./test-runner -p1 ${RDKAFKA_SUITE_ARGS:-} >"$log" 2>&1; then
        if grep -q "SKIPPED" "$log"; then
            echo "SKIP $t ($(grep -m1 -o 'SKIPPING TEST: .*' "$log" | sed 's/\x1b\[[0-9;]*m//g'))"
        else
            echo "PASS $t"
        fi
    else
        echo "FAIL $t (see $log)"
        grep -E "### Test|failed|Assert" "$log" | head -6 | sed 's/\x1b\[[0-9;]*m//g; s/^/    /'
        failed=1
    fi
done
exit $failed
