"""groups.py — measures consumer-group numbers against a real strata-server (issue 5 report):

  * rebalance time 3 -> 2 members: three librdkafka (range) members of a group on six
    partitions; one leaves cleanly (LeaveGroup); time until the two others hold 3 each;
  * the same after SIGKILL of one (bounded below by session.timeout.ms);
  * OffsetCommit latency: synchronous commits of 6 partitions, one client in a loop, and ten
    clients at once, p50/p99.

    STRATA_SERVER=build-group/strata-server python3 bench/groups.py
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import wait_until  # noqa: E402
from test_groups_confluent import Worker, partitioned  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000


def rebalance(b, kill, runs=3):
    out = []
    for i in range(runs):
        topic, group = "rb-%d-%d" % (kill, i), "rbg-%d-%d" % (kill, i)
        kc.create_topic(b, topic, 6)
        ws = [Worker(b, group, topic, "range", session_timeout_ms=6000) for _ in range(3)]
        try:
            wait_until(lambda: partitioned(ws, 6, each=2), 60, "3 members")
            t0 = time.monotonic()
            if kill:
                ws[0].kill9()
            else:
                ws[0].quit()
            wait_until(lambda: partitioned(ws[1:], 6, each=3), 60, "2 members")
            out.append(time.monotonic() - t0)
        finally:
            for w in ws:
                w.cleanup()
    return out


def commits(b, nthreads, per):
    from confluent_kafka import Consumer, TopicPartition
    topic = "lat-%d" % nthreads
    kc.create_topic(b, topic, 6)
    lat, lock = [], threading.Lock()

    def run(k):
        c = Consumer({"bootstrap.servers": b, "group.id": "lat-%d-%d" % (nthreads, k),
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, q, 0) for q in range(6)], asynchronous=False)
        mine = []
        for i in range(per):
            offs = [TopicPartition(topic, q, i + 1) for q in range(6)]
            t0 = time.monotonic()
            c.commit(offsets=offs, asynchronous=False)
            mine.append(time.monotonic() - t0)
        c.close()
        with lock:
            lat.extend(mine)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return lat


def main():
    s = harness.Server(smp=2, sets={"group.initial.rebalance.delay.ms": "0"}, name="bench")
    s.start()
    try:
        b = s.bootstrap
        leave = rebalance(b, False)
        print("rebalance 3 -> 2 after a clean leave: %s s" % ", ".join("%.2f" % x for x in leave))
        kill = rebalance(b, True, runs=1)
        print("rebalance 3 -> 2 after SIGKILL (session.timeout.ms=6000): %.2f s" % kill[0])
        one = commits(b, 1, 500)
        print("commit latency, 1 client x 500: p50 %.2f ms, p99 %.2f ms"
              % (pct(one, 0.5), pct(one, 0.99)))
        ten = commits(b, 10, 100)
        print("commit latency, 10 clients x 100: p50 %.2f ms, p99 %.2f ms"
              % (pct(ten, 0.5), pct(ten, 0.99)))
    finally:
        s.stop()
        s.close()


if __name__ == "__main__":
    main()
