#!/usr/bin/env python3
"""cli_compare.py — checks `strata bench produce` against a separately written librdkafka client.

The same workload (N messages of S bytes, acks=all, P partitions, librdkafka's default linger
and batch size) is measured twice per round, each side on a fresh topic: once by `strata bench
produce --json`, once by a plain python3-confluent-kafka producer loop written here (no code in
common with the CLI but librdkafka). Rounds alternate which side goes first, so a warming or
tiring broker does not favour one. The figures should agree within noise: the script prints
both, the ratio of the medians, and exits 1 when throughput differs by more than --tolerance.

    STRATA_SERVER=build/strata-server STRATA_CLI=build/strata python3 bench/cli_compare.py
    python3 bench/cli_compare.py -b 127.0.0.1:9092 --count 200000 --size 1024 --rounds 5
    ... --json        one JSON object (both sides' runs, medians, ratio) for machines

Without -b a strata-server is started for the run (tests/integration/harness.py: free ports,
temporary data directory, clean stop checked).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))


def cli_path():
    p = os.environ.get("STRATA_CLI")
    if p:
        return p
    root = os.path.dirname(HERE)
    for b in ("build", "build-test", "build-it"):
        c = os.path.join(root, b, "strata")
        if os.access(c, os.X_OK):
            return c
    sys.exit("cli_compare: set STRATA_CLI to the strata tool")


def create_topic(cli, bootstrap, topic, partitions):
    r = subprocess.run([cli, "topic", "create", topic, "-p", str(partitions), "-b", bootstrap],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit("cli_compare: cannot create %s: %s" % (topic, r.stderr.strip()))


def percentile(sorted_ms, q):
    if not sorted_ms:
        return 0.0
    i = min(len(sorted_ms) - 1, max(0, int(round(q / 100.0 * len(sorted_ms) + 0.5)) - 1))
    return sorted_ms[i]


def run_cli(cli, bootstrap, topic, a):
    """strata bench produce; returns its JSON summary."""
    r = subprocess.run([cli, "bench", "produce", "--topic", topic, "--partitions",
                        str(a.partitions), "-n", str(a.count), "--size", str(a.size),
                        "--acks", "all", "--json", "-b", bootstrap],
                       capture_output=True, text=True, timeout=a.timeout)
    if r.returncode != 0:
        sys.exit("cli_compare: strata bench failed (%d): %s" % (r.returncode, r.stderr))
    s = json.loads(r.stdout)
    return {"messages": s["messages"], "failed": s["failed"], "bytes": s["bytes"],
            "seconds": s["seconds"], "msgs_per_sec": s["msgs_per_sec"],
            "mb_per_sec": s["mb_per_sec"], "p50_ms": s["latency_ms"]["p50"],
            "p99_ms": s["latency_ms"]["p99"]}


def run_python(bootstrap, topic, a):
    """A confluent-kafka producer loop: N messages of S bytes, acks=all; send -> delivery."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "queue.buffering.max.messages": 1000000, "client.id": "cli-compare"})
    # Connect and learn the topic's leaders before the clock starts, as the CLI does.
    p.list_topics(topic, timeout=30)
    payload = b"x" * a.size
    lat_ns = []
    failed = [0]
    now = time.perf_counter_ns

    def make_cb(sent):
        def cb(err, msg):
            if err is not None:
                failed[0] += 1
            else:
                lat_ns.append(now() - sent)
        return cb

    t0 = now()
    for _ in range(a.count):
        while True:
            try:
                p.produce(topic, payload, on_delivery=make_cb(now()))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(a.timeout)
    secs = (now() - t0) / 1e9
    if left:
        sys.exit("cli_compare: %d messages still undelivered after %ds" % (left, a.timeout))
    n = len(lat_ns)
    ms = sorted(x / 1e6 for x in lat_ns)
    return {"messages": n, "failed": failed[0], "bytes": n * a.size, "seconds": round(secs, 3),
            "msgs_per_sec": round(n / secs, 1), "mb_per_sec": round(n * a.size / secs / 1e6, 3),
            "p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", "--bootstrap", help="a running broker (default: start strata-server)")
    ap.add_argument("-n", "--count", type=int, default=100000)
    ap.add_argument("-s", "--size", type=int, default=1024)
    ap.add_argument("-p", "--partitions", type=int, default=1)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.25,
                    help="largest accepted relative throughput difference (0.25)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cli = cli_path()
    server = None
    bootstrap = a.bootstrap
    if not bootstrap:
        import harness
        server = harness.Server(smp=2, name="cli-compare").start()
        bootstrap = server.bootstrap
    runs = {"strata": [], "confluent": []}
    try:
        tag = "%d-%d" % (os.getpid(), int(time.time()))
        for rnd in range(a.rounds):
            order = ["strata", "confluent"] if rnd % 2 == 0 else ["confluent", "strata"]
            for side in order:
                topic = "cmp-%s-%s-%d" % (side, tag, rnd)
                create_topic(cli, bootstrap, topic, a.partitions)
                res = (run_cli(cli, bootstrap, topic, a) if side == "strata"
                       else run_python(bootstrap, topic, a))
                res["topic"] = topic
                runs[side].append(res)
                if not a.json:
                    print("round %d %-9s %8d msgs %6.2f s %10.1f msgs/s %7.2f MB/s "
                          "p50 %7.3f ms p99 %7.3f ms" % (
                              rnd, side, res["messages"], res["seconds"], res["msgs_per_sec"],
                              res["mb_per_sec"], res["p50_ms"], res["p99_ms"]), flush=True)
    finally:
        if server:
            server.stop()
            server.close()
    med = {side: {k: statistics.median(r[k] for r in rs)
                  for k in ("msgs_per_sec", "mb_per_sec", "p50_ms", "p99_ms")}
           for side, rs in runs.items()}
    ratio = med["strata"]["msgs_per_sec"] / med["confluent"]["msgs_per_sec"]
    agree = abs(ratio - 1.0) <= a.tolerance
    counts_ok = all(r["messages"] == a.count and r["failed"] == 0
                    for rs in runs.values() for r in rs)
    out = {"count": a.count, "size": a.size, "partitions": a.partitions, "rounds": a.rounds,
           "runs": runs, "median": med, "throughput_ratio": round(ratio, 3),
           "tolerance": a.tolerance, "agree": agree, "counts_ok": counts_ok}
    if a.json:
        print(json.dumps(out))
    else:
        for side in ("strata", "confluent"):
            m = med[side]
            print("median    %-9s %10.1f msgs/s %7.2f MB/s p50 %7.3f ms p99 %7.3f ms" % (
                side, m["msgs_per_sec"], m["mb_per_sec"], m["p50_ms"], m["p99_ms"]))
        print("throughput strata/confluent = %.3f (%s within %.0f%%); counts %s" % (
            ratio, "agree" if agree else "DISAGREE", a.tolerance * 100,
            "ok" if counts_ok else "WRONG"))
    sys.exit(0 if agree and counts_ok else 1)


if __name__ == "__main__":
    main()
