"""rebalance_kip848.py — rebalance time when one of 10 members leaves, classic cooperative-sticky
vs KIP-848 (group.protocol=consumer), the same librdkafka (2.4+) and broker in one run (issue
24).

Ten cg_worker.py processes in a group over 30 partitions; once the 30 are owned (3 each, no
overlap), one member closes cleanly (it leaves the group); the time measured runs from the
close until the nine others own the 30 partitions again with no overlap (as their processes
report each change of assignment). The protocols alternate run by run, so drift in the
machine's load hits both. Heartbeats every 300 ms on both sides (classic: the client's
heartbeat.interval.ms; KIP-848: group.consumer.heartbeat.interval.ms), sessions of 6 s,
group.initial.rebalance.delay.ms 0.

    STRATA_SERVER=build/strata-server STRATA_RDKAFKA_LIB=.cache/librdkafka/src-v2.15.0/src \\
        /usr/bin/python3 bench/rebalance_kip848.py [RUNS]
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import wait_until  # noqa: E402
from test_consumer_groups import Worker, rdkafka_lib  # noqa: E402

CLASSIC = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
           "session.timeout.ms": "6000", "heartbeat.interval.ms": "300"}


def owned(ws, n):
    parts = [w.assignment() for w in ws]
    return sum(len(p) for p in parts) == n and len(set().union(*parts)) == n


def one(lib, b, proto, i, members=10, partitions=30):
    topic, group = "rb-%s-%d" % (proto, i), "rbg-%s-%d" % (proto, i)
    kc.create_topic(b, topic, partitions)
    conf = CLASSIC if proto == "classic" else {}
    ws = []
    try:
        kw = {k.replace(".", "_"): v for k, v in conf.items()}
        for _ in range(members):
            ws.append(Worker(lib, b, group, topic, **kw))
        wait_until(lambda: owned(ws, partitions) and all(len(w.assignment()) == 3 for w in ws),
                   90, "%d members owning %d partitions" % (members, partitions))
        t0 = time.monotonic()
        ws[0].quit()
        rest = ws[1:]
        wait_until(lambda: owned(rest, partitions), 60, "the others owning every partition")
        # the last change of assignment any remaining member reported
        t1 = max(e["t"] for w in rest for e in w.snapshot() if e["ev"] == "assign")
        return t1 - t0
    finally:
        for w in ws:
            if w.proc.poll() is None:
                w.kill9()


def main():
    lib = rdkafka_lib()
    if not lib:
        sys.exit("no librdkafka >= 2.4: set STRATA_RDKAFKA_LIB")
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    s = harness.Server(smp=2, sets={"group.initial.rebalance.delay.ms": "0",
                                    "group.consumer.min.session.timeout.ms": "1000",
                                    "group.consumer.session.timeout.ms": "6000",
                                    "group.consumer.min.heartbeat.interval.ms": "100",
                                    "group.consumer.heartbeat.interval.ms": "300"},
                       name="rb848")
    s.start()
    res = {"classic": [], "consumer": []}
    try:
        for i in range(runs):
            for proto in ("classic", "consumer") if i % 2 == 0 else ("consumer", "classic"):
                res[proto].append(one(lib, s.bootstrap, proto, i))
                print("run %d %-8s %.0f ms" % (i, proto, res[proto][-1] * 1000), flush=True)
    finally:
        s.stop()
        s.close()
    for proto, xs in res.items():
        xs = sorted(xs)
        print("%-8s median %.0f ms  min %.0f  max %.0f  (%d runs)" % (
            proto, xs[len(xs) // 2] * 1000, xs[0] * 1000, xs[-1] * 1000, len(xs)))


if __name__ == "__main__":
    main()
