"""Idempotent producers: InitProducerId, sequence checks on Produce, duplicates answered with
their first offsets and not written twice, epochs fencing, and the producer state rebuilt
from the log after a restart, from its snapshot after a clean one (and without it when the
snapshot is corrupt); idle producer ids expire and a partition keeps a bounded number of them.
Raw wire for the exact cases, then librdkafka with enable.idempotence=true end to end."""

import glob
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

NONE, OUT_OF_ORDER, INVALID_EPOCH, NOT_COORDINATOR = 0, 45, 47, 16
NOT_LEADER_OR_FOLLOWER = 6


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
            # A transactional id goes to its coordinator: none before FindCoordinator created
            # __transaction_state (test_txn_coordinator.py drives the rest).
            self.assertEqual(init_producer_id(c, "txn")[0], NOT_COORDINATOR)

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

    def snapshots(self, topic):
        return sorted(glob.glob(os.path.join(self.server.data_dir, topic + "-0", "*.snapshot")))

    def test_snapshot_at_clean_close_then_replay_after_it(self):
        topic = self.unique("idemsnap")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            _, pid, _ = init_producer_id(c)
            _, other, _ = init_producer_id(c)
            b0 = pbatch(pid, 0, 0, [b"a", b"b"])
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0))
            self.assertEqual(self.produce(c, topic, pbatch(other, 0, 0, [b"o"])), (NONE, 2))
        self.assertEqual(self.snapshots(topic), [])
        self.server.restart(clean=True)
        snaps = self.snapshots(topic)
        self.assertEqual([os.path.basename(p) for p in snaps], ["%020d.snapshot" % 3])
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0), "from the snapshot")
            b1 = pbatch(pid, 0, 2, [b"c"])
            self.assertEqual(self.produce(c, topic, b1), (NONE, 3))
        # A crash: the snapshot at 3, then the batch header after it.
        self.server.restart(clean=False)
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(self.produce(c, topic, b1), (NONE, 3), "replayed after the snapshot")
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0), "from the snapshot")
            self.assertEqual(self.produce(c, topic, pbatch(other, 0, 1, [b"p"])), (NONE, 4))
        # A corrupt snapshot is skipped, never fatal: the whole log is read instead.
        self.server.stop()
        for p in self.snapshots(topic):
            with open(p, "r+b") as f:
                f.seek(40)
                f.write(b"\xff\xff")
        self.server.start()
        self.assertIn("unusable", self.server.stderr_text())
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(self.produce(c, topic, b0), (NONE, 0))
            self.assertEqual(self.produce(c, topic, b1), (NONE, 3))
            # the gap is refused (a forgotten producer's would be appended): retriable, as the
            # producer's state is from before this leadership (partition.h, the gap grace)
            self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 5, [b"gap"]))[0],
                             NOT_LEADER_OR_FOLLOWER)
        got = kc.consume_partitions(self.server.bootstrap, topic, [0], 5)
        self.assertEqual([m.value() for m in got], [b"a", b"b", b"o", b"c", b"p"])

    def test_librdkafka_idempotent_producer(self):
        topic = self.unique("idemrk")
        kc.create_topic(self.bootstrap, topic, 3)
        p = kc.producer(self.bootstrap, **{"enable.idempotence": True})
        msgs = [{"value": b"%d" % i, "partition": i % 3} for i in range(3000)]
        kc.produce_all(p, topic, msgs)
        got = kc.consume_partitions(self.bootstrap, topic, range(3), 3000)
        kc.assert_contiguous_from(self, got)
        self.assertEqual(sorted(int(m.value()) for m in got), list(range(3000)))


class ProducerBoundsTest(ServerTestCase):
    """Idle producer ids expire (producer.id.expiration.ms) and a partition keeps at most
    producer.ids.max.per.partition of them: a forgotten producer is taken as a new one, so a
    batch with any sequence is appended."""
    SMP = 1
    SETS = {"producer.id.expiration.ms": "4000", "producer.ids.max.per.partition": "3"}

    def produce(self, conn, topic, records):
        return parse_v3(conn.request(0, 3, produce_v3(topic, 0, records)))[0][1:]

    def test_idle_producer_expires(self):
        topic = self.unique("idemexp")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            _, pid, _ = init_producer_id(c)
            self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 0, [b"a"])), (NONE, 0))
            gap = pbatch(pid, 0, 7, [b"late"])
            self.assertEqual(self.produce(c, topic, gap)[0], OUT_OF_ORDER)
            t0 = time.monotonic()
            # Refused (and not written) while remembered; appended once expired.
            harness.wait_until(lambda: self.produce(c, topic, gap)[0] == NONE, 20,
                               "the idle producer to expire")
            self.assertGreater(time.monotonic() - t0, 2.0, "expired far too early")

    def test_cap_evicts_least_recently_used(self):
        topic = self.unique("idemcap")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            pids = [init_producer_id(c)[1] for _ in range(4)]
            for i, pid in enumerate(pids):
                self.assertEqual(self.produce(c, topic, pbatch(pid, 0, 0, [b"x"])), (NONE, i))
            # The fourth evicted the first (least recently used); the others are kept.
            self.assertEqual(self.produce(c, topic, pbatch(pids[1], 0, 9, [b"g"]))[0],
                             OUT_OF_ORDER)
            self.assertEqual(self.produce(c, topic, pbatch(pids[0], 0, 9, [b"g"])), (NONE, 4))
        harness.wait_until(lambda: "producer id(s) evicted" in self.server.stderr_text(), 10,
                           "the eviction to be logged")


if __name__ == "__main__":
    harness.main()
