#!/usr/bin/env python3
"""compaction.py — the log cleaner's speed and what it costs the requests of its shard (issue 14).

One strata-server with --smp 1, so the large compacted topic and the probe partition share a
shard. Steps:

  1. fill topic "big" (cleanup.policy=compact, min.compaction.lag.ms one hour so nothing is
     cleanable yet, segment.bytes 16 MiB): --mb megabytes of --size byte values over --keys keys;
  2. baseline: --probes produce requests to topic "probe" (1 partition, same shard), one at a
     time (each waits for its acknowledgement: acks=all, so each includes its fdatasync),
     --probe-size bytes each; latency p50/p99;
  3. set min.compaction.lag.ms of "big" to 0 (AlterConfigs) and probe again while the clean runs
     (probes counted only while /v1/partitions says a clean is in progress);
  4. cleaning speed: the clean's bytes read over (last_clean_ms - time of the AlterConfigs);
     the tick picks it up within 100 ms, so this slightly understates it.

    STRATA_SERVER=build-rel/strata-server python3 bench/compaction.py [--mb 1024]
    ... --json        one JSON object for machines
"""
import argparse
import json
import os
import statistics
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import harness  # noqa: E402
import kclients as kc  # noqa: E402


def cleaner(server, topic):
    url = "http://%s:%d/v1/partitions?topic=%s" % (server.host, server.admin_port, topic)
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())["partitions"][0]["cleaner"]


def probe(p, n, size, keep_going=None):
    """n produce requests one at a time; latencies in ms (only those while keep_going())."""
    lat = []
    value = b"p" * size
    for i in range(n):
        if keep_going is not None and not keep_going():
            break
        t0 = time.perf_counter()
        p.produce("probe", key=b"%d" % i, value=value, partition=0)
        p.flush(10)
        lat.append((time.perf_counter() - t0) * 1000)
    return lat


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=512, help="size of the compacted topic (MB)")
    ap.add_argument("--size", type=int, default=1000, help="value bytes of its records")
    ap.add_argument("--keys", type=int, default=10000, help="distinct keys")
    ap.add_argument("--batch", type=int, default=1 << 20,
                    help="producer batch.size filling the compacted topic (bytes)")
    ap.add_argument("--probes", type=int, default=2000, help="probe requests per phase")
    ap.add_argument("--probe-size", type=int, default=100, help="probe value bytes")
    ap.add_argument("--io-limit", type=int, default=0,
                    help="log.cleaner.io.max.bytes.per.second (0: unlimited)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sets = {"log.cleaner.io.max.bytes.per.second": str(a.io_limit)} if a.io_limit else {}
    s = harness.Server(smp=1, sets=sets, name="bench-compaction")
    s.start()
    try:
        b = s.bootstrap
        kc.create_topic(b, "big", 1, config={"cleanup.policy": "compact",
                                             "segment.bytes": str(16 << 20),
                                             "min.compaction.lag.ms": "3600000"})
        kc.create_topic(b, "probe", 1)
        p = kc.producer(b, linger_ms=5, batch_size=a.batch, acks="all")
        n = a.mb * 1000000 // (a.size + 20)
        value = b"v" * (a.size - 8)
        t0 = time.monotonic()
        for i in range(n):
            while True:
                try:
                    p.produce("big", key=b"k%07d" % (i % a.keys), value=value + b"%08d" % i)
                    break
                except BufferError:
                    p.poll(0.01)
        assert p.flush(300) == 0, "not every record of the big topic was delivered"
        fill_s = time.monotonic() - t0
        q = kc.producer(b, linger_ms=0, acks="all")
        probe(q, 100, a.probe_size)  # warm up
        idle = probe(q, a.probes, a.probe_size)
        from confluent_kafka.admin import ConfigResource
        res = ConfigResource("topic", "big", set_config={
            "cleanup.policy": "compact", "segment.bytes": str(16 << 20),
            "min.compaction.lag.ms": "0"})
        adm = kc.admin(b)
        assert cleaner(s, "big")["cleans"] == 0, "nothing may be cleaned before the change"
        adm.alter_configs([res])[res].result(30)
        t_alter_ms = time.time() * 1000
        harness.wait_until(lambda: cleaner(s, "big")["in_progress"], 10, "clean started")
        busy = probe(q, a.probes * 50, a.probe_size,
                     keep_going=lambda: cleaner(s, "big")["in_progress"])
        st = harness.wait_until(lambda: (lambda c: c if c["cleans"] >= 1 and not c["in_progress"]
                                         else None)(cleaner(s, "big")), 600, "clean done")
        clean_s = (st["last_clean_ms"] - t_alter_ms) / 1000
        out = {
            "topic_mb": a.mb, "records": n, "value_bytes": a.size, "keys": a.keys,
            "fill_seconds": round(fill_s, 1),
            "clean_bytes_read": st["bytes_read"], "clean_seconds": round(clean_s, 2),
            "clean_mb_per_s": round(st["bytes_read"] / 1e6 / clean_s, 1),
            "bytes_reclaimed": st["bytes_reclaimed"], "records_removed": st["records_removed"],
            "probe": {"value_bytes": a.probe_size, "acks": "all", "partitions": 1,
                      "one_request_at_a_time": True},
            "idle_ms": {"n": len(idle), "p50": round(pct(idle, 0.5), 3),
                        "p99": round(pct(idle, 0.99), 3), "max": round(max(idle), 3)},
            "cleaning_ms": {"n": len(busy), "p50": round(pct(busy, 0.5), 3),
                            "p99": round(pct(busy, 0.99), 3), "max": round(max(busy), 3)},
        }
        if a.json:
            print(json.dumps(out))
        else:
            for k, v in out.items():
                print("%-18s %s" % (k, v))
    finally:
        try:
            s.stop()
        finally:
            s.close()


if __name__ == "__main__":
    main()
