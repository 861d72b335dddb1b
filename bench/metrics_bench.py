#!/usr/bin/env python3
"""metrics_bench.py — how fast the admin API answers /metrics with many partitions.

Starts strata-server (through the integration harness: free ports, temporary data directory),
creates TOPICS topics of PARTS partitions (1,000 partitions by default), writes a record to
every partition so each has real offsets, sizes and counters, waits until the shards have
published them all, then times sequential GET /metrics (and /v1/partitions) over one
keep-alive-less connection each, as Prometheus does. Prints the response size and latency
percentiles, and exits 1 if the 99th percentile /metrics answer is over the target (50 ms).

  bench/metrics_bench.py [--server PATH] [--partitions 1000] [--requests 200] [--smp 2]
"""

import argparse
import http.client
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402


def timed_get(port, path):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    dt = time.perf_counter() - t0
    assert r.status == 200, (path, r.status)
    return dt, len(body)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("STRATA_SERVER"))
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--target-ms", type=float, default=50.0)
    a = ap.parse_args()
    if a.server:
        os.environ["STRATA_SERVER"] = os.path.abspath(a.server)
    per = a.partitions // a.topics
    s = harness.Server(smp=a.smp, name="metrics-bench")
    try:
        s.start()
        t0 = time.monotonic()
        admin = kc.admin(s.bootstrap)
        from confluent_kafka.admin import NewTopic
        names = ["bench-%02d" % i for i in range(a.topics)]
        fs = admin.create_topics([NewTopic(n, per, 1) for n in names], operation_timeout=60,
                                 request_timeout=90)
        for f in fs.values():
            f.result(timeout=120)
        p = kc.producer(s.bootstrap, linger_ms=20)
        for n in names:
            for i in range(per):
                p.produce(n, value=b"x" * 100, key=b"k", partition=i)
            p.poll(0)
        left = p.flush(120)
        assert left == 0, "%d records undelivered" % left
        del p, admin, fs  # close the clients before the server stops

        def published():
            m = ac.scrape(s.admin_port)
            rows = m.find("strata_partition_log_end_offset")
            return len(rows) == per * a.topics and all(v == 1 for _, v in rows)
        harness.wait_until(published, 60, "%d partitions with one record each in /metrics"
                           % (per * a.topics))
        setup = time.monotonic() - t0
        slow0 = ac.scrape(s.admin_port).sum("strata_shard_slow_tasks_total")
        t_slow = time.monotonic()
        for _ in range(5):                          # warm-up
            timed_get(s.admin_port, "/metrics")
        lat, size = [], 0
        for _ in range(a.requests):
            dt, size = timed_get(s.admin_port, "/metrics")
            lat.append(dt * 1e3)
        plat, psize = [], 0
        for _ in range(max(10, a.requests // 4)):
            dt, psize = timed_get(s.admin_port, "/v1/partitions")
            plat.append(dt * 1e3)
        lines = ac.http_get(s.admin_port, "/metrics")[2].count("\n")
        # The shards kept publishing (once a second each) meanwhile: callbacks over 500 us on
        # them would show here.
        slow = ac.scrape(s.admin_port).sum("strata_shard_slow_tasks_total") - slow0
        slow_secs = time.monotonic() - t_slow
        print("metrics_bench: %d partitions (%d topics), %d shards, setup %.1fs"
              % (per * a.topics, a.topics, a.smp, setup))
        print("metrics_bench: /metrics %d bytes, %d lines, %d requests: p50 %.2f ms  p90 %.2f ms"
              "  p99 %.2f ms  max %.2f ms  mean %.2f ms"
              % (size, lines, len(lat), pct(lat, 50), pct(lat, 90), pct(lat, 99), max(lat),
                 statistics.mean(lat)))
        print("metrics_bench: /v1/partitions %d bytes, %d requests: p50 %.2f ms  p99 %.2f ms"
              % (psize, len(plat), pct(plat, 50), pct(plat, 99)))
        print("metrics_bench: shard callbacks over 500 us during the %.1fs measured: %d"
              % (slow_secs, slow))
        ok = pct(lat, 99) < a.target_ms
        print("metrics_bench: target p99 < %.0f ms: %s" % (a.target_ms, "ok" if ok else "MISSED"))
        s.stop()
        return 0 if ok else 1
    finally:
        s.close()


if __name__ == "__main__":
    sys.exit(main())
