"""Idempotent producers: InitProducerId, sequence checks on Produce, duplicates answered with
their first offsets and not written twice, epochs fencing, and the producer state rebuilt
from the log after a restart. Raw wire for the exact cases, then librdkafka with
enable.idempotence=true end to end."""

import os
import struct
import time
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from test_produce_wire import produce_v3, parse_v3  # noqa: E402

NONE, OUT_OF_ORDER, INVALID_EPOCH, TXN_REFUSED = 0, 45, 47, 53


def pbatch(pid, epoch, seq, values):
    """An uncompressed batch of `values` from producer pid/epoch starting at sequence seq."""
    n = len(values)
    recs = b"".join(cli_segment._record(i, i, None, v) for i, v in enumerate(values))
    ts = int(time.time() * 1000)  # now: old timestamps would fall to retention.ms
    after_crc = struct.pack(">hiqqqhii", 0, n - 1, ts, ts + n - 1, pid, epoch, seq, n) + recs
    after_len = struct.pack(">ibI", 0, 2, cli_segment.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def init_producer_id(conn, transactional_id=None):
    body = kwire.string(transactional_id) + kwire.i32(60000)
    r = conn.request(22, 1, body)
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


class IdempotenceTest(ServerTestCase):
    SMP = 2

    def produce(self, conn, topic, records):
        return parse_v3(conn.request(0, 3, produce_v3(topic, 0, records)))[0][1:]

    def test_sequences_duplicates_epochs_and_restart(self):
        topic = self.unique("idem")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            err, pid, epoch = init_producer_id(c)
            self.assertEqual((err, epoch), (NONE, 0))
            self.assertGreaterEqual(pid, 0)
            _, pid2, _ = init_producer_id(c)
            self.assertNotEqual(pid, pid2, "every InitProducerId gets a new id")
            self.assertEqual(init_producer_id(c, "txn")[0], TXN_REFUSED)

            b0 = pbatch(pid, 0, 0, [b"a", b"b", b"c"])
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0))
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0), "a retry is a duplicate")
            self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 5, [b"gap"]))[0], OUT_OF_ORDER)
            self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 3, [b"d"])), (NONE, 3))
            # A new epoch restarts at sequence 0 and fences the old one.
            b1 = pbatch(pid, 1, 0, [b"e", b"f"])
            self.assertEqual(self.produce(c, topic, b1), (NONE, 4))
            self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 4, [b"old"]))[0],
                             INVALID_EPOCH)
            self.assertEqual(self.produce(c, topic, pbatch(pid, 2, 7, [b"x"]))[0], OUT_OF_ORDER)
        self.server.restart(clean=False)
        with kwire.Conn.to(self.server.bootstrap) as c:
            # The state came back from the log: the retry is still recognised.
            self.assertEqual(self.produce(c, topic, b1), (NONE, 4))
            self.assertEqual(self.produce(c, topic, pbatch(pid, 1, 2, [b"g"])), (NONE, 6))
        got = kc.consume_partitions(self.server.bootstrap, topic, [0], 7)
        self.assertEqual([m.value() for m in got], [b"a", b"b", b"c", b"d", b"e", b"f", b"g"])

    def test_librdkafka_idempotent_producer(self):
        topic = self.unique("idemrk")
        kc.create_topic(self.bootstrap, topic, 3)
        p = kc.producer(self.bootstrap, **{"enable.idempotence": True})
        msgs = [{"value": b"%d" % i, "partition": i % 3} for i in range(3000)]
        kc.produce_all(p, topic, msgs)
        got = kc.consume_partitions(self.bootstrap, topic, range(3), 3000)
        kc.assert_contiguous_from(self, got)
        self.assertEqual(sorted(int(m.value()) for m in got), list(range(3000)))


if __name__ == "__main__":
    harness.main()
