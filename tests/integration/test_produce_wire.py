"""Produce requests written byte by byte (issue 4): the broker's answer to batches that are
corrupt, truncated, too large, marked as control batches, or sent with a bad acks value —
each a per-partition error code, never a crash — and a good batch after them still lands at
the next offset. Issue 10: compressed batches are decompressed and their records walked, so a
garbage gzip payload, a record count the records do not bear out (2^31 - 1 claimed) and a
decompression bomb are refused, and the high watermark does not move."""

import gzip
import os
import random
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import i16, i32, string  # noqa: E402

NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 2, 3
MESSAGE_TOO_LARGE, INVALID_REQUIRED_ACKS, INVALID_RECORD = 10, 21, 87
INVALID_REQUEST = 42


def produce_v3(topic, partition, records, acks=-1):
    """A Produce v3 body: transactional_id null, acks, timeout, one topic, one partition."""
    return (i16(-1) + i16(acks) + i32(10000) + i32(1) + string(topic) + i32(1) + i32(partition)
            + i32(len(records)) + records)


GZIP = 1


def batch_of(payload, count, attributes=0):
    """A batch whose records area is payload (compressed or not, as attributes say), claiming
    count records (lastOffsetDelta count - 1), with a valid CRC."""
    ts = 1700000000000
    after_crc = struct.pack(">hiqqqhii", attributes, count - 1, ts, ts, -1, -1, -1, count) + payload
    after_len = struct.pack(">ibI", 0, 2, cli_segment.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def records_area(pairs):
    """The records of an uncompressed batch of (key, value) pairs, without the header."""
    return b"".join(cli_segment._record(i, i, k, v) for i, (k, v) in enumerate(pairs))


def high_watermark(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-it-hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def parse_v3(r):
    """Returns [(partition, error, base_offset)] of the first topic."""
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            out.append((r.i32(), r.i16(), r.i64()))
            r.i64()  # log_append_time
    r.i32()  # throttle
    return out


class ProduceWireTest(ServerTestCase):
    SMP = 2

    def produce(self, conn, topic, records, acks=-1, partition=0):
        r = conn.request(0, 3, produce_v3(topic, partition, records, acks))
        return parse_v3(r)[0]

    def test_bad_batches_get_errors_and_log_stays_good(self):
        topic = self.unique("wire")
        kc.create_topic(self.bootstrap, topic, 1, config={"max.message.bytes": "2000"})
        good = cli_segment.batch(0, [(b"k", b"v%d" % i) for i in range(3)])
        bad_crc = bytearray(good)
        cli_segment.corrupt_crc(bad_crc, 0)
        control = bytearray(good)
        attrs = struct.unpack(">h", control[21:23])[0] | 0x20   # control bit
        control[21:23] = struct.pack(">h", attrs)
        control[17:21] = struct.pack(">I", cli_segment.crc32c(bytes(control[21:])))
        big = cli_segment.batch(0, [(b"k", b"x" * 3000)])
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(self.produce(c, topic, good)[1:], (NONE, 0))
            self.assertEqual(self.produce(c, topic, bytes(bad_crc))[1], CORRUPT_MESSAGE)
            self.assertEqual(self.produce(c, topic, good[:40])[1], CORRUPT_MESSAGE)
            self.assertEqual(self.produce(c, topic, good + good[:30])[1], CORRUPT_MESSAGE)
            self.assertIn(self.produce(c, topic, bytes(control))[1],
                          (INVALID_RECORD, CORRUPT_MESSAGE))
            self.assertEqual(self.produce(c, topic, big)[1], MESSAGE_TOO_LARGE)
            self.assertEqual(self.produce(c, topic, good, acks=2)[1], INVALID_REQUIRED_ACKS)
            self.assertEqual(self.produce(c, topic, good, partition=7)[1],
                             UNKNOWN_TOPIC_OR_PARTITION)
            # Nothing above was appended: the next good batch takes offset 3.
            self.assertEqual(self.produce(c, topic, good)[1:], (NONE, 3))
        got = kc.consume_partitions(self.bootstrap, topic, [0], 6)
        self.assertEqual([m.offset() for m in got], list(range(6)))

    def test_compressed_batches_are_decompressed_and_checked(self):
        topic = self.unique("wirez")
        # 64 x max.message.bytes = 6.4 MB: what a batch's records may decompress to.
        kc.create_topic(self.bootstrap, topic, 1, config={"max.message.bytes": "100000"})
        pairs = [(b"k", b"gz%d" % i) for i in range(3)]
        good = batch_of(gzip.compress(records_area(pairs)), 3, GZIP)
        garbage = batch_of(bytes(random.Random(10).getrandbits(8) for _ in range(300)), 1, GZIP)
        one = gzip.compress(records_area([(b"k", b"only")]))
        claims_2g = batch_of(one, 2**31 - 1, GZIP)
        plain_claims_2g = batch_of(records_area([(b"k", b"only")]), 2**31 - 1)
        truncated = batch_of(gzip.compress(records_area(pairs))[:-6], 3, GZIP)
        bomb_records = records_area([(None, bytes(8 << 20))])
        bomb = batch_of(gzip.compress(bomb_records), 1, GZIP)
        self.assertLess(len(bomb), 100000)
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(self.produce(c, topic, good)[1:], (NONE, 0))
            self.assertEqual(self.produce(c, topic, garbage)[1], CORRUPT_MESSAGE)
            self.assertEqual(self.produce(c, topic, claims_2g)[1], INVALID_RECORD)
            self.assertEqual(self.produce(c, topic, plain_claims_2g)[1], INVALID_RECORD)
            self.assertEqual(self.produce(c, topic, truncated)[1], CORRUPT_MESSAGE)
            self.assertEqual(self.produce(c, topic, bomb)[1], MESSAGE_TOO_LARGE)
            self.assertEqual(high_watermark(self.bootstrap, topic), 3)
            # Nothing above was appended: the next good batch takes offset 3.
            self.assertEqual(self.produce(c, topic, good)[1:], (NONE, 3))
        self.assertEqual(high_watermark(self.bootstrap, topic), 6)
        got = kc.consume_partitions(self.bootstrap, topic, [0], 6)
        self.assertEqual([(m.offset(), m.value()) for m in got],
                         [(i, b"gz%d" % (i % 3)) for i in range(6)])

    def test_metadata_names_illegal_and_auto_created_topics(self):
        ok = self.unique("md")
        with kwire.Conn.to(self.bootstrap) as c:
            md = kwire.metadata(c, 12, topics=["bad name", ok], auto_create=True)
        errors = {t["name"]: t["error"] for t in md["topics"]}
        self.assertEqual(errors, {"bad name": 17, ok: 0})  # INVALID_TOPIC_EXCEPTION; created

    def test_acks_zero_gets_no_answer_but_lands(self):
        topic = self.unique("wire0")
        kc.create_topic(self.bootstrap, topic, 1)
        good = cli_segment.batch(0, [(b"k", b"v")])
        with kwire.Conn.to(self.bootstrap) as c:
            c.send_raw(kwire.frame(kwire.request_header(0, 3, 77) + produce_v3(topic, 0, good, 0)))
            # The next request's answer is the first thing on the wire: acks=0 had none.
            err, _ = kwire.api_versions(c, 3)
            self.assertEqual(err, 0)
        got = kc.consume_partitions(self.bootstrap, topic, [0], 1)
        self.assertEqual([m.value() for m in got], [b"v"])


if __name__ == "__main__":
    import harness
    harness.main()
