#!/usr/bin/python3
"""kafka_report.py — turns bench/run_kafka.sh's results.jsonl into the comparison table.

Each line of the results file is {"system", "kind", "partitions", "rep", "r"} where r is the
JSON summary of `strata bench produce|consume --json` or of bench_jetstream_bench (null when
the run failed). For every (partitions, metric) it prints the median over the repetitions,
the spread (min-max), and the ratios Strata/mock and Strata/JetStream, as a Markdown table.

    /usr/bin/python3 bench/kafka_report.py results.jsonl [--secs 3 --lat-rate 20000 ...]
    /usr/bin/python3 bench/kafka_report.py --p10k '<json from partitions10k.py>'
"""

import argparse
import json
import statistics
import sys

SYSTEMS = ("strata", "mock", "jetstream")


def load(path):
    runs, failed = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or not line.startswith('{"system"'):
                continue
            d = json.loads(line)
            key = (d["system"], d["kind"], d["partitions"])
            r = d["r"]
            if r is None or r.get("failed"):
                failed.append("%s %s p=%d rep %d" % (key + (d["rep"],)))
                continue
            runs.setdefault(key, []).append(r)
    return runs, failed


def metric(runs, system, kind, parts, fn):
    vals = []
    for r in runs.get((system, kind, parts), []):
        v = fn(r)
        if v is not None:
            vals.append(v)
    return vals


def cell(vals, fmt):
    if not vals:
        return "n/a"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt % m
    return (fmt + " (" + fmt + "–" + fmt + ")") % (m, min(vals), max(vals))


def ratio(a, b):
    if not a or not b:
        return "n/a"
    mb = statistics.median(b)
    return "%.2f" % (statistics.median(a) / mb) if mb else "n/a"


def lat(key):
    return lambda r: r.get("latency_ms", {}).get(key)


def steady_mbs(r):
    """Consume MB/s from the first message to the last (client start-up excluded)."""
    t = r["seconds"] - r.get("first_message_seconds", 0)
    return r["bytes"] / t / 1e6 if t > 0 else None


def table(path, a):
    runs, failed = load(path)
    parts = sorted({k[2] for k in runs})
    print()
    print("Workload: 1 KiB records (no key, uncompressed), acks=all, one librdkafka producer "
          "(Strata, mock) or one NATS connection (JetStream).")
    print("Throughput: closed loop for %ss, librdkafka defaults linger.ms=5, batch.size=1000000, "
          "queue 1,000,000 msgs; JetStream: %d publishes in flight." % (a.secs, a.js_window))
    print("Latency: open loop at %s msgs/s (%.1f MB/s) for %ss, linger.ms=%s, measured from each "
          "message's intended send time to its ack." % (a.lat_rate, a.lat_rate * 1024 / 1e6,
                                                       a.lat_secs, a.lat_linger))
    print("fsync: Strata --smp %d, strict (ack after fdatasync, group commit); mock: never "
          "(memory); JetStream: nats-server default (ack after write(), fsync every 2 min)."
          % a.smp)
    print("JetStream 'partitions' = that many file-storage streams, one subject each, published "
          "round robin. Cells: median (min–max) over %d reps." % a.reps if a.reps else "")
    print()
    print("| partitions | metric | Strata | mock | JetStream | Strata/mock | Strata/JetStream |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = [
        ("produce MB/s", "produce", lambda r: r["mb_per_sec"], "%.1f", True),
        ("latency p50 ms @rate", "latency", lat("p50"), "%.2f", True),
        ("latency p99 ms @rate", "latency", lat("p99"), "%.2f", True),
        ("latency p99.9 ms @rate", "latency", lat("p99_9"), "%.2f", True),
        ("achieved rate MB/s", "latency", lambda r: r["mb_per_sec"], "%.1f", False),
        ("p50 ms at saturation", "produce", lat("p50"), "%.0f", False),
        ("consume MB/s (incl. start-up)", "consume", lambda r: r["mb_per_sec"], "%.1f", True),
        ("consume MB/s (1st msg to last)", "consume", steady_mbs, "%.1f", True),
        ("consume volume MB", "consume", lambda r: r["bytes"] / 1e6, "%.0f", False),
    ]
    for p in parts:
        for name, kind, fn, fmt, with_ratio in rows:
            v = {s: metric(runs, s, kind, p, fn) for s in SYSTEMS}
            if not any(v.values()):
                continue
            cells = [cell(v[s], fmt) if v[s] else "—" for s in SYSTEMS]
            rm = ratio(v["strata"], v["mock"]) if with_ratio and v["mock"] else "—"
            rj = ratio(v["strata"], v["jetstream"]) if with_ratio and v["jetstream"] else "—"
            print("| %d | %s | %s | %s | %s | %s | %s |" % ((p, name) + tuple(cells) + (rm, rj)))
    for p in parts:
        s = metric(runs, "strata", "produce", p, lambda r: r["mb_per_sec"])
        m = metric(runs, "mock", "produce", p, lambda r: r["mb_per_sec"])
        j = metric(runs, "jetstream", "produce", p, lambda r: r["mb_per_sec"])
        if s and m and j:
            rm = statistics.median(s) / statistics.median(m)
            rj = statistics.median(s) / statistics.median(j)
            print("\n%d partition(s): Strata/mock %.2f (target >= 0.5: %s), Strata/JetStream %.2f "
                  "(target >= 2: %s)" % (p, rm, "met" if rm >= 0.5 else "NOT met", rj,
                                         "met" if rj >= 2 else "NOT met"), end="")
    print()
    if failed:
        print("\nFAILED runs (left out): " + "; ".join(failed))


def p10k(js):
    d = json.loads(js)
    print()
    print("| measure | value |")
    print("| --- | --- |")
    print("| layout | %d topics x %d partitions = %d, replication 1, --smp %d, strict fsync |"
          % (d["topics"], d["partitions_per_topic"], d["partitions"], d["smp"]))
    print("| CreateTopics (one request, all topics) | %.2f s |" % d["create_s"])
    print("| ... until Metadata lists every partition | %.2f s |" % d["create_until_metadata_s"])
    print("| RSS empty broker | %.1f MiB |" % d["empty"]["rss_mib"])
    print("| RSS idle with %d partitions (peak) | %.1f MiB (%.1f MiB), %.1f KiB/partition |"
          % (d["partitions"], d["idle"]["rss_mib"], d["idle"]["hwm_mib"],
             d["per_partition_rss_kib"]))
    print("| open fds idle | %d (empty broker: %d) |" % (d["idle"]["open_fds"], d["empty"]["open_fds"]))
    print("| clean stop (SIGTERM to exit 0) | %.2f s (rc %d) |" % (d["stop_s"], d["stop_rc"]))
    print("| restart: exec to Kafka port open | %.3f s |" % d["restart_port_s"])
    print("| restart: exec to Metadata listing all %d | %.2f s |" % (d["partitions"], d["restart_s"]))
    print("| after restart: RSS, open fds | %.1f MiB, %d |"
          % (d["after_restart"]["rss_mib"], d["after_restart"]["open_fds"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--p10k")
    ap.add_argument("--secs", default="3")
    ap.add_argument("--lat-rate", type=float, default=20000)
    ap.add_argument("--lat-secs", default="2")
    ap.add_argument("--lat-linger", default="1")
    ap.add_argument("--js-window", type=int, default=256)
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--reps", type=int, default=0)
    a = ap.parse_args()
    if a.p10k:
        p10k(a.p10k)
    if a.results:
        table(a.results, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
