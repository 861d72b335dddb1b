"""kafka-python (Debian python3-kafka 2.0.2) end to end (issues 4 and 5): produce with every
codec the installed client can use, consume back with keys, null values, headers and
timestamps; then a consumer group of three splitting six partitions with no overlap, and
resuming from committed offsets."""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402


def codecs_available():
    """The codecs this kafka-python install can actually use (each needs a Python module)."""
    from kafka import codec
    out = ["gzip"]
    if codec.has_snappy():
        out.append("snappy")
    if codec.has_lz4():
        out.append("lz4")
    if codec.has_zstd():
        out.append("zstd")
    return out


class KafkaPythonTest(ServerTestCase):
    SMP = 2

    def consumer(self, **kw):
        from kafka import KafkaConsumer
        conf = dict(bootstrap_servers=self.bootstrap, auto_offset_reset="earliest",
                    enable_auto_commit=False, fetch_max_wait_ms=100,
                    consumer_timeout_ms=20000, request_timeout_ms=30000)
        conf.update(kw)
        return KafkaConsumer(**conf)

    def test_produce_consume_fields_and_codecs(self):
        from kafka import KafkaProducer, TopicPartition
        print("kafka-python codecs here:", codecs_available())
        for ctype in [None] + codecs_available():
            for acks in (0, 1, "all"):
                with self.subTest(codec=ctype, acks=acks):
                    topic = self.unique("kp")
                    kc.create_topic(self.bootstrap, topic, 1)
                    p = KafkaProducer(bootstrap_servers=self.bootstrap, acks=acks,
                                      compression_type=ctype, linger_ms=5)
                    sent = []
                    for i in range(50):
                        key = None if i % 5 == 0 else b"k%d" % (i % 3)
                        # kafka-python refuses a record with neither key nor value.
                        val = None if i % 7 == 3 and key is not None else b"v%d" % i
                        hdrs = [("i", b"%d" % i)] if i % 2 else []
                        ts = 1_650_000_000_000 + i
                        f = p.send(topic, key=key, value=val, headers=hdrs, partition=0,
                                   timestamp_ms=ts)
                        sent.append((key, val, hdrs, ts, f))
                    p.flush(30)
                    for i, s in enumerate(sent):
                        md = s[4].get(timeout=30)
                        if acks != 0:
                            self.assertEqual(md.offset, i)
                    p.close()
                    c = self.consumer()
                    c.assign([TopicPartition(topic, 0)])
                    got = []
                    for m in c:
                        got.append(m)
                        if len(got) == 50:
                            break
                    c.close()
                    self.assertEqual([m.offset for m in got], list(range(50)))
                    for (key, val, hdrs, ts, _), m in zip(sent, got):
                        self.assertEqual((m.key, m.value, list(m.headers), m.timestamp),
                                         (key, val, hdrs, ts))

    def test_group_of_three_and_resume(self):
        from kafka import KafkaProducer, TopicPartition
        topic, group = self.unique("kpg"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 6)
        p = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        for i in range(600):
            p.send(topic, value=b"%d" % i, partition=i % 6)
        p.flush(30)
        p.close()
        stop = threading.Event()
        seen = [[] for _ in range(3)]
        assigned = [set() for _ in range(3)]

        def run(i):
            c = self.consumer(group_id=group, consumer_timeout_ms=200,
                              session_timeout_ms=10000, heartbeat_interval_ms=500)
            c.subscribe([topic])
            while not stop.is_set():
                recs = c.poll(timeout_ms=200)
                assigned[i] = {tp.partition for tp in c.assignment()}
                for tp, ms in recs.items():
                    for m in ms:
                        seen[i].append((m.partition, m.offset))
                if recs:
                    c.commit()
            c.close()
        ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        try:
            wait_until(lambda: sorted(p for s in assigned for p in s) == list(range(6))
                       and all(len(s) == 2 for s in assigned), 60, "3 members x 2 partitions")
            wait_until(lambda: sum(map(len, seen)) >= 600, 60, "600 messages read")
        finally:
            stop.set()
            for t in ts:
                t.join(30)
        allseen = [x for s in seen for x in s]
        # Before the group settled a member may read then lose a partition uncommitted;
        # whatever happened, every message was read and committed.
        self.assertEqual(set(allseen), {(q, o) for q in range(6) for o in range(100)})
        from kafka import KafkaConsumer
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group,
                          enable_auto_commit=False)
        try:
            for q in range(6):
                self.assertEqual(c.committed(TopicPartition(topic, q)), 100)
        finally:
            c.close()


if __name__ == "__main__":
    harness.main()
