"""Produce requests written byte by byte (issue 4): the broker's answer to batches that are
corrupt, truncated, too large, marked as control batches, or sent with a bad acks value —
each a per-partition error code, never a crash — and a good batch after them still lands at
the next offset."""

import os
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
