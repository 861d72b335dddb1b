"""Durability across restarts (issue 4): a clean restart keeps every message at its offset,
and a kill -9 in the middle of an acks=all produce load loses no acknowledged message and
changes no offset. New appends after the restart continue the offsets."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import Server, wait_until  # noqa: E402


class DurabilityTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.server = Server(smp=2, name="durability")
        self.server.start()

    def tearDown(self):
        try:
            if self.server.alive():
                self.server.stop()
        finally:
            self.server.close()

    def read_back(self, topic, partitions, n):
        got = kc.consume_partitions(self.server.bootstrap, topic, range(partitions), n,
                                    timeout=40)
        return {(m.partition(), m.offset()): m.value() for m in got}

    def test_clean_restart_keeps_offsets(self):
        topic = "durable-clean"
        kc.create_topic(self.server.bootstrap, topic, 3)
        msgs = [{"key": b"k%d" % (i % 11), "value": b"v%d" % i} for i in range(3000)]
        reports = kc.produce_all(kc.producer(self.server.bootstrap), topic, msgs)
        acked = {(p, o): m["value"] for m, p, o in reports}
        self.server.restart(clean=True)
        self.assertEqual(self.read_back(topic, 3, len(msgs)), acked)
        # Appends continue after the highest offset, no reuse.
        more = kc.produce_all(kc.producer(self.server.bootstrap), topic,
                              [{"value": b"after", "partition": 0}])
        last0 = max(o for (p, o) in acked if p == 0)
        self.assertEqual(more[0][2], last0 + 1)

    def test_kill9_during_acks_all_load(self):
        topic = "durable-kill"
        kc.create_topic(self.server.bootstrap, topic, 4)
        p = kc.producer(self.server.bootstrap, acks="all", linger_ms=2,
                        message_timeout_ms=5000, retries=0)
        acked = {}
        failed = [0]

        def cb(err, m):
            if err is None:
                acked[(m.partition(), m.offset())] = m.value()
            else:
                failed[0] += 1
        i = 0
        killed_at = None
        deadline = time.monotonic() + 40
        # Produce steadily; once enough is acknowledged, kill the broker mid-stream and keep
        # producing a little so requests are in flight at the moment of the crash.
        while time.monotonic() < deadline:
            try:
                p.produce(topic, b"load-%07d" % i, key=b"k%d" % (i % 13), on_delivery=cb)
                i += 1
            except BufferError:
                pass
            p.poll(0.001 if i % 50 == 0 else 0)
            if killed_at is None and len(acked) >= 5000:
                self.server.kill9()
                killed_at = i
            if killed_at is not None and i >= killed_at + 500:
                break
        self.assertIsNotNone(killed_at, "only %d acknowledged before the deadline" % len(acked))
        p.flush(10)       # what was unacknowledged fails (message.timeout.ms)
        n_acked = len(acked)
        self.server.start()
        wait_until(lambda: kc.admin(self.server.bootstrap).list_topics(topic, timeout=5)
                   .topics[topic].partitions, 15, "topic back after restart")
        # Every acknowledged message is there at its offset. Unacknowledged ones may or may
        # not be; nothing else may be.
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.server.bootstrap, "group.id": "dur"})
        highs = {q: c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1]
                 for q in range(4)}
        c.close()
        total = sum(highs.values())
        self.assertGreaterEqual(total, n_acked)
        self.assertLessEqual(total, i)
        got = self.read_back(topic, 4, total)
        for key, v in acked.items():
            self.assertEqual(got.get(key), v, "acknowledged message lost or moved at %s" % (key,))
        values = list(got.values())
        self.assertEqual(len(values), len(set(values)), "duplicated records after recovery")
        print("acked %d, on disk %d, sent %d" % (n_acked, total, i))


if __name__ == "__main__":
    harness.main()
