"""Records without a key in a compacted topic are refused at produce (issue 14), as Kafka does:
the partition's whole append fails with INVALID_RECORD (87), the Produce response (v8+) lists
each keyless record in record_errors (KIP-467: its index within its batch, and Kafka's text
"Compacted topic cannot accept message without key in topic partition <topic>-<partition>."),
and nothing is appended. Compressed batches are walked too. Topics whose cleanup.policy does
not hold "compact" take keyless records as before.

Raw wire at v3, v8 and v9 (flexible) for the exact fields; then confluent-kafka (librdkafka)
and kafka-python, whose keyless sends fail while keyed ones land."""

import gzip
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import (compact_array, compact_string, i16, i32, string,  # noqa: E402
                   uvarint)

NONE, INVALID_RECORD = 0, 87
GZIP = 1


def kafka_message(topic, partition):
    return ("Compacted topic cannot accept message without key in topic partition %s-%d."
            % (topic, partition))


def produce_body(version, topic, parts):
    """A Produce body (v3-v8 classic, v9-v12 flexible) for one topic; parts: [(index, records)]."""
    if version >= 9:
        def part(p):
            return i32(p[0]) + uvarint(len(p[1]) + 1) + p[1] + b"\x00"
        return (compact_string(None) + i16(-1) + i32(10000)
                + compact_array([topic], lambda t: compact_string(t)
                                + compact_array(parts, part) + b"\x00") + b"\x00")
    return (i16(-1) + i16(-1) + i32(10000) + i32(1) + string(topic) + i32(len(parts))
            + b"".join(i32(i) + i32(len(r)) + r for i, r in parts))


def parse_produce(r, version):
    """{partition: {error, base_offset, record_errors [(index, message)], error_message}}."""
    flex = version >= 9
    arr = r.compact_array if flex else r.array
    s = r.compact_string if flex else r.string
    out = {}

    def record_error(rr):
        e = (rr.i32(), s())
        if flex:
            rr.tags()
        return e

    def partition(rr):
        p = {"index": rr.i32(), "error": rr.i16(), "base_offset": rr.i64()}
        rr.i64()  # log_append_time_ms
        if version >= 5:
            rr.i64()  # log_start_offset
        p["record_errors"] = arr(record_error) if version >= 8 else None
        p["error_message"] = s() if version >= 8 else None
        if flex:
            rr.tags()
        out[p["index"]] = p

    def topic(rr):
        s()
        arr(partition)
        if flex:
            rr.tags()

    arr(topic)
    r.i32()  # throttle_time_ms
    if flex:
        r.tags()
    r.end()
    return out


def batch_of(payload, count, attributes=0):
    """A batch whose records area is payload (compressed as attributes say), with a good CRC."""
    ts = 1700000000000
    after_crc = struct.pack(">hiqqqhii", attributes, count - 1, ts, ts, -1, -1, -1, count) + payload
    after_len = struct.pack(">ibI", 0, 2, cli_segment.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def gzip_batch(pairs):
    recs = b"".join(cli_segment._record(i, i, k, v) for i, (k, v) in enumerate(pairs))
    return batch_of(gzip.compress(recs), len(pairs), GZIP)


def high_watermark(bootstrap, topic, partition=0):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-it-hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


class CompactProduceWireTest(ServerTestCase):
    SMP = 2

    def produce(self, conn, version, topic, parts):
        r = conn.request(0, version, produce_body(version, topic, parts), flexible=version >= 9)
        return parse_produce(r, version)

    def assert_refused(self, got, topic, partition, indices, version=8):
        self.assertEqual(got["error"], INVALID_RECORD, got)
        self.assertEqual(got["base_offset"], -1)
        if version < 8:
            return
        msg = kafka_message(topic, partition)
        self.assertEqual(got["record_errors"], [(i, msg) for i in indices])
        self.assertTrue(got["error_message"].startswith(
            "One or more records have been rejected due to %d record errors in total, and only "
            "showing the first three errors at most: [RecordError(batchIndex=%d, message='%s')"
            % (len(indices), indices[0], msg)), got["error_message"])

    def test_keyless_records_refused_with_record_errors(self):
        topic = self.unique("cmp")
        kc.create_topic(self.bootstrap, topic, 2, config={"cleanup.policy": "compact"})
        keyed = cli_segment.batch(0, [(b"k%d" % i, b"v%d" % i) for i in range(3)])
        mixed = cli_segment.batch(0, [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")])
        all_keyless = cli_segment.batch(0, [(None, b"x%d" % i) for i in range(5)])
        with kwire.Conn.to(self.bootstrap) as c:
            got = self.produce(c, 8, topic, [(0, keyed)])[0]
            self.assertEqual((got["error"], got["base_offset"], got["record_errors"]),
                             (NONE, 0, []))
            self.assertIsNone(got["error_message"])
            self.assert_refused(self.produce(c, 8, topic, [(0, mixed)])[0], topic, 0, [1, 3])
            self.assert_refused(self.produce(c, 9, topic, [(1, all_keyless)])[1], topic, 1,
                                list(range(5)), version=9)
            self.assert_refused(self.produce(c, 3, topic, [(0, mixed)])[0], topic, 0, [1, 3], 3)
            # A request with a good partition and a bad one: only the bad one is refused.
            got = self.produce(c, 8, topic, [(0, keyed), (1, mixed)])
            self.assertEqual((got[0]["error"], got[0]["base_offset"]), (NONE, 3))
            self.assert_refused(got[1], topic, 1, [1, 3])
            # Several batches in one partition: a keyless record in the second refuses them
            # all, its index counted within its batch, as Kafka does.
            got = self.produce(c, 8, topic, [(0, keyed + mixed + keyed)])[0]
            self.assert_refused(got, topic, 0, [1, 3])
            # An empty key is a key.
            got = self.produce(c, 8, topic, [(0, cli_segment.batch(0, [(b"", b"e")]))])[0]
            self.assertEqual((got["error"], got["base_offset"]), (NONE, 6))
        self.assertEqual(high_watermark(self.bootstrap, topic, 0), 7)
        self.assertEqual(high_watermark(self.bootstrap, topic, 1), 0)
        got = kc.consume_partitions(self.bootstrap, topic, [0], 7)
        self.assertTrue(all(m.key() is not None for m in got))

    def test_compressed_batches_are_checked(self):
        topic = self.unique("cmpz")
        kc.create_topic(self.bootstrap, topic, 1, config={"cleanup.policy": "compact,delete"})
        good = gzip_batch([(b"k%d" % i, b"v%d" % i) for i in range(4)])
        bad = gzip_batch([(b"k0", b"v"), (b"k1", b"v"), (None, b"v")])
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(self.produce(c, 8, topic, [(0, good)])[0]["error"], NONE)
            self.assert_refused(self.produce(c, 8, topic, [(0, bad)])[0], topic, 0, [2])
            # 20,000 keyless records: the answer lists the first 10,000 and counts them all.
            many = gzip_batch([(None, b"")] * 20000)
            got = self.produce(c, 8, topic, [(0, many)])[0]
            self.assertEqual(got["error"], INVALID_RECORD)
            self.assertEqual([i for i, _ in got["record_errors"]], list(range(10000)))
            self.assertIn("rejected due to 20000 record errors in total", got["error_message"])
            self.assertEqual(high_watermark(self.bootstrap, topic), 4)
            got = self.produce(c, 8, topic, [(0, good)])[0]
            self.assertEqual((got["error"], got["base_offset"]), (NONE, 4))

    def test_corrupt_batch_keeps_its_own_error(self):
        """Batch-level checks come first, as in Kafka: a keyless batch with a bad CRC is
        CORRUPT_MESSAGE, not INVALID_RECORD."""
        topic = self.unique("cmpc")
        kc.create_topic(self.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
        bad_crc = bytearray(cli_segment.batch(0, [(None, b"v")]))
        cli_segment.corrupt_crc(bad_crc, 0)
        with kwire.Conn.to(self.bootstrap) as c:
            got = self.produce(c, 8, topic, [(0, bytes(bad_crc))])[0]
            self.assertEqual((got["error"], got["record_errors"]), (2, []))  # CORRUPT_MESSAGE
        self.assertEqual(high_watermark(self.bootstrap, topic), 0)

    def test_delete_policy_topics_take_keyless_records(self):
        topic = self.unique("del")
        kc.create_topic(self.bootstrap, topic, 1)
        keyless = cli_segment.batch(0, [(None, b"a"), (None, b"b")])
        keyed = cli_segment.batch(0, [(b"k", b"c")])
        with kwire.Conn.to(self.bootstrap) as c:
            want = 0
            for version in (8, 9, 3):
                for records, n in ((keyless, 2), (keyed, 1)):
                    got = self.produce(c, version, topic, [(0, records)])[0]
                    self.assertEqual((got["error"], got["base_offset"]), (NONE, want))
                    want += n
        self.assertEqual(high_watermark(self.bootstrap, topic), 9)


class CompactProduceClientsTest(ServerTestCase):
    SMP = 2

    def deliver(self, p, topic, key, value):
        """Produce one message and flush; returns (error or None, offset)."""
        out = []
        p.produce(topic, key=key, value=value, partition=0,
                  on_delivery=lambda err, m: out.append((err, m.offset())))
        self.assertEqual(p.flush(30), 0)
        return out[0]

    def test_confluent_keyless_send_fails_keyed_lands(self):
        from confluent_kafka import KafkaError
        topic = self.unique("cfk")
        kc.create_topic(self.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
        p = kc.producer(self.bootstrap, linger_ms=0, retries=0)
        err, _ = self.deliver(p, topic, None, b"no key")
        self.assertIsNotNone(err, "a keyless message to a compacted topic must fail")
        self.assertEqual(err.code(), KafkaError.INVALID_RECORD, err)
        self.assertFalse(err.retriable())
        self.assertEqual(self.deliver(p, topic, b"k", b"keyed"), (None, 0))
        err, _ = self.deliver(p, topic, None, b"again")
        self.assertEqual(err.code(), KafkaError.INVALID_RECORD, err)
        self.assertEqual(self.deliver(p, topic, b"k", b"keyed 2"), (None, 1))
        got = kc.consume_partitions(self.bootstrap, topic, [0], 2)
        self.assertEqual([(m.key(), m.value()) for m in got],
                         [(b"k", b"keyed"), (b"k", b"keyed 2")])

    def test_confluent_policy_changed_to_compact(self):
        """The check follows the topic's config as altered at run time, both ways."""
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import ConfigResource
        topic = self.unique("cfa")
        a = kc.create_topic(self.bootstrap, topic, 1)
        p = kc.producer(self.bootstrap, linger_ms=0, retries=0)
        self.assertEqual(self.deliver(p, topic, None, b"before"), (None, 0))

        def set_policy(v):
            res = ConfigResource("topic", topic, set_config={"cleanup.policy": v})
            for f in a.alter_configs([res]).values():
                f.result(timeout=30)

        set_policy("compact")
        err, _ = self.deliver(p, topic, None, b"during")
        self.assertEqual(err.code() if err else None, KafkaError.INVALID_RECORD)
        self.assertEqual(self.deliver(p, topic, b"k", b"keyed"), (None, 1))
        set_policy("delete")
        self.assertEqual(self.deliver(p, topic, None, b"after"), (None, 2))

    def test_kafka_python_keyless_send_fails_keyed_lands(self):
        import kafka.errors
        from kafka import KafkaProducer
        topic = self.unique("kpc")
        kc.create_topic(self.bootstrap, topic, 1, config={"cleanup.policy": "compact"})
        p = KafkaProducer(bootstrap_servers=self.bootstrap, retries=0, acks="all")
        try:
            with self.assertRaises(kafka.errors.KafkaError) as ctx:
                p.send(topic, value=b"no key", partition=0).get(timeout=30)
            self.assertNotIsInstance(ctx.exception, kafka.errors.KafkaTimeoutError)
            md = p.send(topic, key=b"k", value=b"keyed", partition=0).get(timeout=30)
            self.assertEqual(md.offset, 0)
        finally:
            p.close(timeout=10)
        self.assertEqual(high_watermark(self.bootstrap, topic), 1)


if __name__ == "__main__":
    import harness
    harness.main()
