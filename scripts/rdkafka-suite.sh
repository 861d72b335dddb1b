#!/usr/bin/env bash
# rdkafka-suite.sh — librdkafka's own test suite (its tests/test-runner) against a Strata broker.
#
# The peer suite of issues 21 and 22: librdkafka's transaction tests (0103_transactions,
# 0129_fetch_aborted_msgs, 0098_consumer_txn), its security tests over SSL and SASL_SSL
# (0081_admin's ACL part, 0097_ssl_verify, 0135_sasl_credentials, 0142_reauthentication) and any
# others named, run by librdkafka's own test-runner against a strata-server. Not part of `make test` (it builds librdkafka and runs for
# minutes). Everything it builds lives in .cache/librdkafka/ at the repository root (git-ignored),
# never in the tracked tree.
#
# The source comes from a local git mirror of confluentinc/librdkafka (offline: nothing is
# downloaded; configure runs with --no-download and without the optional libraries a build would
# fetch; OpenSSL is required, which also gives librdkafka's builtin SCRAM). The version is a tag
# of that mirror, v2.15.0 by default (the fetch tool's github:confluentinc/librdkafka).
#
#   scripts/rdkafka-suite.sh [--build-only] [--start] [--security ssl|sasl_ssl|sasl_plaintext]
#                            [--brokers N]
#                            [TEST...]
#
#   TEST        test numbers (0103 0129 0098 by default), as the suite's TESTS variable takes them
#   --start     start a strata-server here (build-dev/strata-server or $STRATA_SERVER, one broker,
#               --smp 2, a temporary log.dirs) for the run, and stop it after; otherwise BROKERS
#               (host:port[,...]) names a running broker
#   --security P  (implies --start) the suite's clients use security.protocol P against a listener
#               of that protocol (sasl_plaintext: the same without TLS, to tell TLS's part in a
#               failure apart), as librdkafka's trivup sets one up: a CA, a broker certificate
#               and a client certificate (PEM, DER and PKCS#12, the SSL_* variables 0097 reads)
#               made with openssl for the run; ssl.client.auth=required broker-wide (which a
#               SASL_SSL listener ignores, as Kafka's KIP-684 says); SASL user testuser /
#               testpass (SCRAM-SHA-256 and -512 from sasl.bootstrap.users; the client's
#               mechanism is $SASL_MECHANISM, default SCRAM-SHA-512; OAUTHBEARER: the broker
#               takes Kafka's unsecured tokens, the clients make them); ACLs on
#               (StandardAuthorizer, allow.everyone.if.no.acl.found=true, testuser no super
#               user, so 0081's authorized-operations checks mean something); num.partitions=4
#               (trivup's); the secure listener is the broker's only Kafka listener, the
#               brokers' own connections included (User:broker, SCRAM-SHA-512, on SASL_SSL;
#               the broker certificate on SSL; both super users); connections.max.reauth.ms=
#               $REAUTH_MS (default 10000, for 0142) when the server has the setting
#   --brokers N with --start (or --security): N brokers (a cluster, the first three voters of
#               its controller quorum), for the tests that create topics with replication
#               factor 3 (0103, 0135, 0142)
#   --build-only  build librdkafka and the test-runner, run nothing
#
# Environment: LIBRDKAFKA_GIT (the mirror's git dir, default
# /work/.mirror/confluentinc+librdkafka/repo), LIBRDKAFKA_REF (default v2.15.0), BROKERS,
# STRATA_SERVER, TEST_KAFKA_VERSION (the broker version the suite assumes, default 4.0.0.0: it
# skips tests needing a newer broker), JOBS (make -j, default 2), RDKAFKA_SUITE_ARGS (more
# test-runner arguments, e.g. -Q for the quick mode), RDKAFKA_SUITE_SETS (extra --set k=v for
# --start, space separated), SUBTESTS (the suite's own: run only subtests whose name holds it,
# e.g. SUBTESTS=Acls for 0081's ACL part), SASL_MECHANISM, REAUTH_MS.
#
# Prints one line per test, "PASS 0103 (12 s)", "SKIP 0098 (why)" or "FAIL 0103" with the first
# failure lines (the whole test-runner output is kept in
# .cache/librdkafka/logs-<worktree>/run-[<protocol>-]<test>.log, the brokers' logs beside it),
# and exits 1 if any failed. Example, the security set on three brokers:
#
#   STRATA_SERVER=build/strata-server scripts/rdkafka-suite.sh --security sasl_ssl --brokers 3 \
#       0097 0135 0142 0103 0129 0001 0012 0030
#   SUBTESTS=Acls STRATA_SERVER=build/strata-server scripts/rdkafka-suite.sh --security sasl_ssl 0081
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=$ROOT/.cache/librdkafka
GIT=${LIBRDKAFKA_GIT:-/work/.mirror/confluentinc+librdkafka/repo}
REF=${LIBRDKAFKA_REF:-v2.15.0}
JOBS=${JOBS:-2}
SRC=$CACHE/src-$REF
BUILD_ONLY=0
START=0
NBROKERS=1
SECURITY=
TESTS=()
while [ $# -gt 0 ]; do
    a=$1
    shift
    case $a in
    --build-only) BUILD_ONLY=1 ;;
    --start) START=1 ;;
    --brokers)
        [ $# -gt 0 ] && [[ "$1" =~ ^[1-9]$ ]] || { echo "--brokers wants 1..9" >&2; exit 2; }
        NBROKERS=$1
        shift
        ;;
    --security | --security=*)
        if [ "$a" = --security ]; then
            [ $# -gt 0 ] || { echo "--security wants ssl, sasl_ssl or sasl_plaintext" >&2; exit 2; }
            SECURITY=$1
            shift
        else
            SECURITY=${a#--security=}
        fi
        SECURITY=$(echo "$SECURITY" | tr '[:lower:]' '[:upper:]')
        case $SECURITY in
        SSL | SASL_SSL | SASL_PLAINTEXT) ;;
        *) echo "--security $SECURITY: expected ssl, sasl_ssl or sasl_plaintext" >&2; exit 2 ;;
        esac
        START=1
        ;;
    -h | --help)
        sed -n '2,/^set -euo/{/^set -euo/!p}' "$0"
        exit 0
        ;;
    *) TESTS+=("$a") ;;
    esac
done
[ ${#TESTS[@]} -gt 0 ] || TESTS=(0103 0129 0098)
mkdir -p "$CACHE"

# ---- build (once per ref; make is incremental after that) ------------------------------------
# .cache may be shared by several worktrees: one build at a time (flock on the cache).
exec 9>"$CACHE/.build.lock"
flock 9
if [ ! -f "$SRC/.extracted" ]; then
    [ -d "$GIT" ] || { echo "no librdkafka mirror at $GIT (LIBRDKAFKA_GIT)" >&2; exit 2; }
    rm -rf "$SRC"
    mkdir -p "$SRC"
    git --git-dir="$GIT" archive --format=tar "$REF" | tar -x -C "$SRC"
    touch "$SRC/.extracted"
fi
if [ ! -f "$SRC/Makefile.config" ]; then
    # OpenSSL is required (--enable-ssl fails the configure without it): it gives the SSL
    # transport and, with it, librdkafka's builtin SCRAM and OAUTHBEARER. PLAIN is builtin too;
    # libsasl2 (Cyrus) would only add GSSAPI, which is not wanted here.
    (cd "$SRC" && ./configure --no-download --enable-ssl --disable-gssapi --disable-curl \
        --disable-sasl --disable-zstd --disable-lz4-ext >"$CACHE/configure.log" 2>&1) || {
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
flock -u 9
[ $BUILD_ONLY = 1 ] && { echo "built $SRC/tests/test-runner"; exit 0; }

# Logs go to a directory of this worktree's own (.cache may be shared).
LOGS=${RDKAFKA_SUITE_LOGS:-$CACHE/logs-$(basename "$ROOT")}
mkdir -p "$LOGS"
TAG=${SECURITY:+$(echo "$SECURITY" | tr '[:upper:]' '[:lower:]')-}

# ---- the broker --------------------------------------------------------------------------------
SERVER_PID=
TMP=
cleanup() {
    local p
    for p in $SERVER_PID; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $SERVER_PID; do wait "$p" 2>/dev/null || true; done
    [ -z "$TMP" ] || rm -rf "$TMP"
}
trap cleanup EXIT
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The certificates of a --security run, laid out as trivup's SslApp hands them to the suite
# (0097 reads them through SSL_* variables): everything signed by one CA, the client's key in
# PEM and DER, its certificate in PEM and DER, and both with the CA in a PKCS#12 file.
SSL_PASS=12345678
make_pki() {
    local d=$1
    mkdir -p "$d"
    (
        cd "$d"
        o() { openssl "$@" >/dev/null 2>&1 || { echo "openssl $*: failed" >&2; exit 2; }; }
        o req -x509 -newkey rsa:2048 -nodes -days 30 -keyout ca.key -out ca.pem \
            -subj "/C=NN/O=Strata/CN=Strata suite CA"
        o x509 -in ca.pem -outform der -out ca.der
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.cnf
        o req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr \
            -subj "/C=NN/O=Strata/CN=localhost"
        o x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
            -extfile san.cnf -out broker.pem
        cat broker.key broker.pem >broker-keystore.pem
        o genpkey -algorithm RSA -out client-priv.pem
        o req -new -key client-priv.pem -out client.csr -subj "/C=NN/O=Strata/CN=librdkafka"
        o x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAserial ca.srl -days 30 \
            -out client-pub.pem
        o x509 -in client-pub.pem -outform der -out client-pub.der
        o rsa -in client-priv.pem -outform der -out client-priv.der
        o pkcs12 -export -out client.pfx -inkey client-priv.pem -in client-pub.pem \
            -certfile ca.pem -passout "pass:$SSL_PASS"
    )
}

if [ $START = 1 ]; then
    BIN=${STRATA_SERVER:-$ROOT/build-dev/strata-server}
    [ -x "$BIN" ] || { echo "no strata-server at $BIN (STRATA_SERVER)" >&2; exit 2; }
    TMP=$(mktemp -d /tmp/strata-rdkafka-suite-XXXXXX)
    SETS=()
    # What this server knows (grep -q would end the pipe early: under pipefail the server's
    # SIGPIPE then reads as "not known", now and then).
    HELP=$("$BIN" --help 2>&1 || true)
    # One broker: the transaction log on one replica (when this server has the setting).
    if [ "$NBROKERS" = 1 ] && grep -q "transaction.state.log.replication.factor" <<<"$HELP"; then
        SETS+=(--set transaction.state.log.replication.factor=1
            --set transaction.state.log.min.isr=1)
    fi
    if [ -n "$SECURITY" ]; then
        command -v openssl >/dev/null || { echo "--security needs the openssl CLI" >&2; exit 2; }
        PKI=$TMP/pki
        make_pki "$PKI"
        # The secure listener is the only one, the brokers' own connections included (a
        # broker registers its inter-broker listener's address, which the others' Metadata
        # answers give): SASL_SSL brokers authenticate as User:broker with SCRAM-SHA-512, and
        # present their certificate (ssl.client.auth=required), which is their principal on SSL.
        SETS+=(--set "inter.broker.listener.name=$SECURITY"
            --set "ssl.keystore.location=$PKI/broker-keystore.pem"
            --set "ssl.truststore.location=$PKI/ca.pem"
            --set ssl.client.auth=required
            --set "sasl.bootstrap.users=testuser:SCRAM-SHA-256:testpass,testuser:SCRAM-SHA-512:testpass,broker:SCRAM-SHA-512:broker-pw"
            --set sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
            --set "listener.name.${TAG%-}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"broker-pw\";"
            --set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
            --set allow.everyone.if.no.acl.found=true
            --set "super.users=User:broker;User:CN=localhost,O=Strata,C=NN"
            --set num.partitions=4)
        if grep -q "connections.max.reauth.ms" <<<"$HELP"; then
            SETS+=(--set "connections.max.reauth.ms=${REAUTH_MS:-10000}")
        fi
        # SASL_MECHANISM=OAUTHBEARER: Kafka's unsecured tokens, as the suite's clients make
        # them (enable.sasl.oauthbearer.unsecure.jwt)
        if [ "${SASL_MECHANISM:-}" = OAUTHBEARER ]; then
            SETS+=(--set sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
                --set sasl.oauthbearer.unsecured.validator.enable=true)
        fi
    fi
    for kv in ${RDKAFKA_SUITE_SETS:-}; do SETS+=(--set "$kv"); done
    # Ports: Kafka (PLAINTEXT), the secure listener, the controller quorum, admin; all distinct.
    USED=" "
    pick() {
        local p
        p=$(free_port)
        while [[ "$USED" == *" $p "* ]]; do p=$(free_port); done
        USED+="$p "
        echo "$p"
    }
    declare -a KP SP CP AP
    VOTERS=
    for i in $(seq 1 "$NBROKERS"); do
        KP[i]=$(pick)
        SP[i]=$(pick)
        CP[i]=$(pick)
        AP[i]=$(pick)
        [ "$i" -gt 3 ] || VOTERS+="${VOTERS:+,}$i@127.0.0.1:${CP[i]}"
    done
    BROKERS=
    SERVER_PIDS=()
    for i in $(seq 1 "$NBROKERS"); do
        LISTENERS=PLAINTEXT://127.0.0.1:${KP[i]}
        [ -z "$SECURITY" ] || LISTENERS=$SECURITY://127.0.0.1:${SP[i]}
        NODE=()
        if [ "$NBROKERS" -gt 1 ]; then
            roles=broker
            [ "$i" -gt 3 ] || roles=broker,controller
            NODE=(--set "node.id=$i" --set "process.roles=$roles"
                --set "controller.quorum.voters=$VOTERS" --set controller.listener.names=CONTROLLER)
            ADV=$LISTENERS
            LISTENERS+=",CONTROLLER://127.0.0.1:${CP[i]}"
        else
            ADV=$LISTENERS
        fi
        "$BIN" --smp 2 "${NODE[@]}" --set "listeners=$LISTENERS" --set "advertised.listeners=$ADV" \
            --set "log.dirs=$TMP/data$i" --set "admin.listen=127.0.0.1:${AP[i]}" "${SETS[@]}" \
            >"$LOGS/${TAG}server$i.log" 2>&1 &
        SERVER_PIDS+=($!)
        SERVER_PID="${SERVER_PID:+$SERVER_PID }$!"
        if [ -n "$SECURITY" ]; then
            BROKERS+="${BROKERS:+,}127.0.0.1:${SP[i]}"
        else
            BROKERS+="${BROKERS:+,}127.0.0.1:${KP[i]}"
        fi
    done
    for i in $(seq 1 "$NBROKERS"); do
        for _ in $(seq 1 300); do
            grep -q " ready: kafka on " "$LOGS/${TAG}server$i.log" 2>/dev/null && break
            kill -0 "${SERVER_PIDS[i - 1]}" 2>/dev/null || { tail -20 "$LOGS/${TAG}server$i.log" >&2; exit 2; }
            sleep 0.1
        done
    done
fi
[ -n "${BROKERS:-}" ] || { echo "BROKERS is not set (or use --start)" >&2; exit 2; }
export BROKERS

# The suite reads its client settings from test.conf (RDKAFKA_TEST_CONF).
CONF=$LOGS/test.conf
[ -z "$SECURITY" ] || CONF=$TMP/test.conf
{
    echo "metadata.broker.list=$BROKERS"
    echo "test.topic.random=true"
    [ -z "$SECURITY" ] || echo "security.protocol=$SECURITY"
    if [[ "$SECURITY" == *SSL ]]; then
        echo "ssl.ca.location=$PKI/ca.pem"
        echo "ssl.certificate.location=$PKI/client-pub.pem"
        echo "ssl.key.location=$PKI/client-priv.pem"
        echo "ssl.key.password=$SSL_PASS"
    fi
    if [[ "$SECURITY" == SASL_* ]]; then
        echo "sasl.mechanism=${SASL_MECHANISM:-SCRAM-SHA-512}"
        echo "sasl.username=testuser"
        echo "sasl.password=testpass"
        if [ "${SASL_MECHANISM:-}" = OAUTHBEARER ]; then
            echo "enable.sasl.oauthbearer.unsecure.jwt=true"
            echo "sasl.oauthbearer.config=principal=testuser"
        fi
    fi
} >"$CONF"
export RDKAFKA_TEST_CONF=$CONF
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-4.0.0.0}
if [ -n "$SECURITY" ]; then
    export SSL_pkcs=$PKI/client.pfx SSL_password=$SSL_PASS SSL_client_auth=required
    export SSL_pub_pem=$PKI/client-pub.pem SSL_pub_der=$PKI/client-pub.der
    export SSL_priv_pem=$PKI/client-priv.pem SSL_priv_der=$PKI/client-priv.der
    export SSL_ca_pem=$PKI/ca.pem SSL_ca_der=$PKI/ca.der SSL_all_cas_pem=$PKI/ca.pem
fi

# The suite's own librdkafka, not the system's (the test-runner links it dynamically).
export LD_LIBRARY_PATH=$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# SASL users come from sasl.bootstrap.users, which the controller writes shortly after start,
# and a cluster's brokers register one by one: wait (bounded) until the test configuration gets
# a Metadata answer listing every broker, with the suite's own librdkafka.
if [ $START = 1 ]; then
    PROBE=$TMP/probe.conf
    grep -v '^test\.' "$CONF" >"$PROBE"
    ok=0
    for _ in $(seq 1 100); do
        if python3 - "$PROBE" "$SRC/src/librdkafka.so.1" "$NBROKERS" <<'PY' 2>/dev/null; then ok=1; break; fi
import ctypes, sys
rk = ctypes.CDLL(sys.argv[2])
rk.rd_kafka_conf_new.restype = ctypes.c_void_p
rk.rd_kafka_new.restype = ctypes.c_void_p
conf = rk.rd_kafka_conf_new()
err = ctypes.create_string_buffer(512)
for line in open(sys.argv[1]):
    k, _, v = line.strip().partition("=")
    if k and rk.rd_kafka_conf_set(ctypes.c_void_p(conf), k.encode(), v.encode(), err, 512) != 0:
        sys.exit(2)
h = rk.rd_kafka_new(0, ctypes.c_void_p(conf), err, 512)
if not h:
    sys.exit(2)
md = ctypes.c_void_p()
r = rk.rd_kafka_metadata(ctypes.c_void_p(h), 1, None, ctypes.byref(md), 2000)
n = 0
if r == 0:
    n = ctypes.cast(md, ctypes.POINTER(ctypes.c_int))[0]  # struct rd_kafka_metadata: broker_cnt
    rk.rd_kafka_metadata_destroy(md)
rk.rd_kafka_destroy(ctypes.c_void_p(h))
sys.exit(0 if r == 0 and n >= int(sys.argv[3]) else 1)
PY
        for p in $SERVER_PID; do
            kill -0 "$p" 2>/dev/null || { tail -20 "$LOGS/${TAG}server"*.log >&2; exit 2; }
        done
        sleep 0.2
    done
    [ $ok = 1 ] || { echo "no Metadata answer with $NBROKERS broker(s) within the wait" >&2; exit 2; }
fi

failed=0
cd "$SRC/tests"
for t in "${TESTS[@]}"; do
    log=$LOGS/run-$TAG$t.log
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if TESTS=$t ./test-runner -p1 ${RDKAFKA_SUITE_ARGS:-} >"$log" 2>&1; then
        if grep -q "SKIPPED" "$log"; then
            echo "SKIP $t ($(grep -m1 -o 'SKIPPING TEST: .*' "$log" | sed 's/\x1b\[[0-9;]*m//g'))"
        else
            echo "PASS $t ($(($(date +%s) - t0)) s)"
        fi
    else
        echo "FAIL $t (see $log)"
        # the suite's own failure lines (### Test ... failed ###, then the reason); || true:
        # head closing the pipe early must not end the run (set -e, pipefail)
        { sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -A1 "^### Test" | grep -v '^--$' |
            head -6 | sed 's/^/    /'; } || true
        failed=1
    fi
done
exit $failed
