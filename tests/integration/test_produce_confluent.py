"""Produce and fetch end to end with librdkafka: confluent-kafka and kcat (issue 4).

Keys, null keys, null values, headers, explicit timestamps, a 900 KiB message, every codec,
acks 0/1/all, per-key order, contiguous offsets, 20,000 keyed messages over 6 partitions, a
long-polling consumer woken by a produce, offsets by timestamp, watermarks, auto-create."""

import json
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, run_cmd, wait_until  # noqa: E402


class ProduceConfluentTest(ServerTestCase):
    SMP = 2
    SETS = {"num.partitions": "3"}

    def test_record_fields_roundtrip(self):
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 1)
        ts0 = 1_600_000_000_000
        msgs = [
            {"key": b"k1", "value": b"v1"},
            {"key": None, "value": b"no key"},
            {"key": b"k-null-value", "value": None},
            {"key": None, "value": None},
            {"key": b"", "value": b""},
            {"key": b"h", "value": b"with headers",
             "headers": [("a", b"1"), ("b", None), ("a", b"dup"), ("empty", b"")]},
            {"key": b"t", "value": b"explicit ts", "timestamp": ts0},
            {"key": b"t", "value": b"older ts", "timestamp": ts0 - 5000},
            {"key": bytes(range(256)), "value": bytes(range(255, -1, -1)) * 40},
        ]
        for m in msgs:
            m["partition"] = 0
        p = kc.producer(self.bootstrap)
        reports = kc.produce_all(p, topic, msgs)
        self.assertEqual([r[2] for r in reports], list(range(len(msgs))),
                         "acks must report offsets 0..n-1 in order")
        got = kc.consume_partitions(self.bootstrap, topic, [0], len(msgs))
        kc.assert_contiguous_from(self, got)
        for want, m in zip(msgs, got):
            self.assertEqual(m.key(), want["key"])
            self.assertEqual(m.value(), want["value"])
            hdrs = m.headers()
            self.assertEqual(hdrs or [], want.get("headers", []))
            if "timestamp" in want:
                self.assertEqual(m.timestamp()[1], want["timestamp"])
            else:
                self.assertGreater(m.timestamp()[1], ts0)

    def test_compression_codecs(self):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            with self.subTest(codec=codec):
                topic = self.unique("c-" + codec)
                kc.create_topic(self.bootstrap, topic, 2)
                rnd = random.Random(codec)
                msgs = [{"key": b"key-%d" % (i % 17),
                         "value": (b"%06d " % i) + bytes(rnd.choice(b"abc ") for _ in range(
                             rnd.randrange(0, 3000)))} for i in range(500)]
                p = kc.producer(self.bootstrap, compression_type=codec, linger_ms=20)
                kc.produce_all(p, topic, msgs)
                got = kc.consume_partitions(self.bootstrap, topic, [0, 1], len(msgs))
                self.assertEqual(sorted(m.value() for m in got), sorted(m["value"] for m in msgs))
                kc.assert_contiguous_from(self, got)

    def test_900k_message(self):
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 1)
        big = os.urandom(900 * 1024)
        p = kc.producer(self.bootstrap, message_max_bytes=2_000_000)
        kc.produce_all(p, topic, [{"key": b"big", "value": big, "partition": 0},
                                  {"key": b"small", "value": b"after", "partition": 0}])
        got = kc.consume_partitions(self.bootstrap, topic, [0], 2)
        self.assertEqual(got[0].value(), big)
        self.assertEqual(got[1].value(), b"after")

    def test_message_too_large_refused(self):
        """A batch above the topic's max.message.bytes gets MESSAGE_TOO_LARGE; the log is
        unchanged and later messages still go in."""
        from confluent_kafka import KafkaError
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 1, config={"max.message.bytes": "10000"})
        p = kc.producer(self.bootstrap, message_max_bytes=2_000_000)
        errs = []
        p.produce(topic, os.urandom(50_000), partition=0, on_delivery=lambda e, m: errs.append(e))
        p.flush(30)
        self.assertEqual(len(errs), 1)
        self.assertIsNotNone(errs[0])
        self.assertEqual(errs[0].code(), KafkaError.MSG_SIZE_TOO_LARGE, errs[0])
        kc.produce_all(p, topic, [{"value": b"fits", "partition": 0}])
        got = kc.consume_partitions(self.bootstrap, topic, [0], 1)
        self.assertEqual((got[0].offset(), got[0].value()), (0, b"fits"))

    def test_acks_levels(self):
        for acks in ("0", "1", "all"):
            with self.subTest(acks=acks):
                topic = self.unique("acks" + acks)
                kc.create_topic(self.bootstrap, topic, 1)
                p = kc.producer(self.bootstrap, acks=acks)
                msgs = [{"key": b"k", "value": b"acks=%s #%d" % (acks.encode(), i),
                         "partition": 0} for i in range(300)]
                reports = kc.produce_all(p, topic, msgs)
                if acks != "0":
                    self.assertEqual([r[2] for r in reports], list(range(300)))
                got = kc.consume_partitions(self.bootstrap, topic, [0], 300)
                self.assertEqual([m.value() for m in got], [m["value"] for m in msgs])

    def test_20000_keyed_over_6_partitions(self):
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 6)
        n = 20000
        msgs = [{"key": b"key-%d" % (i % 97), "value": b"%d" % i} for i in range(n)]
        p = kc.producer(self.bootstrap, linger_ms=10, batch_num_messages=1000)
        kc.produce_all(p, topic, msgs, timeout=120)
        got = kc.consume_partitions(self.bootstrap, topic, range(6), n, timeout=60,
                                    fetch_wait_max_ms=50)
        values = [int(m.value()) for m in got]
        self.assertEqual(len(values), len(set(values)), "duplicates")
        self.assertEqual(set(values), set(range(n)), "lost messages")
        kc.assert_contiguous_from(self, got)
        parts = kc.by_partition(got)
        self.assertEqual(len(parts), 6, "keys should spread over all 6 partitions")
        key_part = {}
        for pnum, ms in parts.items():
            last = {}
            for m in ms:
                k = m.key()
                self.assertEqual(key_part.setdefault(k, pnum), pnum, "key in two partitions")
                v = int(m.value())
                self.assertGreater(v, last.get(k, -1), "per-key order broken for %r" % k)
                last[k] = v

    def test_waiting_consumer_woken_by_produce(self):
        """A fetch parked at the end of the log (fetch.wait.max.ms=5000) must return as soon
        as a message arrives — on whichever shard the produce lands — not at max wait."""
        from confluent_kafka import Consumer, TopicPartition
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 4)
        cons = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "strata-it-lp",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5000,
                         "fetch.min.bytes": 1, "enable.partition.eof": False})
        p = kc.producer(self.bootstrap, linger_ms=0)
        try:
            cons.assign([TopicPartition(topic, i, 0) for i in range(4)])
            # The producer connects and learns the topic's leaders first, so the figures
            # below time the broker's wake-up, not the client's start-up.
            p.list_topics(topic, timeout=10)
            self.assertIsNone(cons.poll(1.0))        # fetches are now parked
            lat = []
            for i in range(6):
                time.sleep(random.uniform(0.05, 0.6))  # land at a random point in the wait
                t0 = time.monotonic()
                p.produce(topic, b"wake %d" % i, partition=i % 4)
                p.poll(0)
                m = None
                while m is None and time.monotonic() - t0 < 8:
                    m = cons.poll(0.05)
                self.assertIsNotNone(m, "no message within 8 s")
                self.assertIsNone(m.error())
                lat.append(time.monotonic() - t0)
                p.flush(10)
            print("wake-up latencies (ms):", [round(x * 1000) for x in lat])
            self.assertLess(max(lat), 1.0, "a waiting fetch was not woken by the produce: %s"
                            % lat)
        finally:
            cons.close()

    def test_watermarks_and_offsets_for_times(self):
        from confluent_kafka import Consumer, TopicPartition
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 1)
        base = 1_700_000_000_000
        msgs = [{"value": b"m%d" % i, "timestamp": base + i * 1000, "partition": 0}
                for i in range(10)]
        kc.produce_all(kc.producer(self.bootstrap), topic, msgs)
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "strata-it-ts"})
        try:
            self.assertEqual(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10),
                             (0, 10))
            for ts, want in ((base - 1, 0), (base, 0), (base + 2500, 3), (base + 9000, 9),
                             (base + 9001, -1)):
                r = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
                self.assertEqual(r[0].offset, want, "timestamp %d" % ts)
        finally:
            c.close()

    def test_auto_create_on_produce_and_metadata(self):
        topic = self.unique("auto")
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"auto %d" % i} for i in range(30)])
        md = kc.admin(self.bootstrap).list_topics(topic, timeout=10)
        self.assertEqual(len(md.topics[topic].partitions), 3, "num.partitions=3 not honoured")
        got = kc.consume_partitions(self.bootstrap, topic, range(3), 30)
        self.assertEqual(sorted(m.value() for m in got), sorted(b"auto %d" % i for i in range(30)))

    def test_unknown_partition(self):
        from confluent_kafka import KafkaError
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 1)
        p = kc.producer(self.bootstrap)
        errs = []
        p.produce(topic, b"x", partition=5, on_delivery=lambda e, m: errs.append(e))
        p.flush(15)
        self.assertEqual(len(errs), 1)
        self.assertEqual(errs[0].code(), KafkaError._UNKNOWN_PARTITION, errs[0])

    def test_kcat_produce_consume(self):
        topic = self.unique("kcat")
        kc.create_topic(self.bootstrap, topic, 1)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            lines = "".join("k%d:%s value %d\n" % (i % 3, codec, i) for i in range(20))
            args = ["kcat", "-P", "-b", self.bootstrap, "-t", topic, "-p", "0", "-K", ":",
                    "-H", "codec=" + codec, "-X", "acks=all"]
            if codec != "none":
                args += ["-z", codec] if codec != "zstd" else ["-X", "compression.codec=zstd"]
            r = run_cmd(args, timeout=30, input=lines)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = run_cmd(["kcat", "-C", "-b", self.bootstrap, "-t", topic, "-p", "0", "-o",
                     "beginning", "-e", "-J"], timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        self.assertEqual(len(recs), 100)
        self.assertEqual([x["offset"] for x in recs], list(range(100)))
        codecs = ("none", "gzip", "snappy", "lz4", "zstd")
        for j, x in enumerate(recs):
            codec, i = codecs[j // 20], j % 20
            self.assertEqual(x["key"], "k%d" % (i % 3))
            self.assertEqual(x["payload"], "%s value %d" % (codec, i))
            self.assertEqual(x["headers"], ["codec", codec])


if __name__ == "__main__":
    harness.main()
