"""Transactions on the partition side (issue 21), over the raw wire (kwire): a transactional
Produce with a hand-built transactional batch, WriteTxnMarkers (27) writing COMMIT and ABORT
markers, and Fetches at both isolation levels on one broker.

Checks: the last stable offset (Fetch's last_stable_offset, ListOffsets latest with
isolation_level 1) stops at the first ongoing transaction; read_committed returns nothing past
it and lists the aborted transactions its records overlap; read_uncommitted returns everything
below the high watermark; a waiting read_committed fetch wakes when a marker moves the LSO;
the fencing errors (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED), INVALID_TXN_STATE
for a non-transactional batch inside a transaction, UNKNOWN_TOPIC_OR_PARTITION; DescribeProducers
(61); and that the ongoing transaction and the aborted list survive a restart (producer state
snapshot, .txnindex)."""

import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import (array, compact_array, compact_string, i8, i16, i32, i64, string,  # noqa: E402
                   uvarint)

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
UNKNOWN_TOPIC_OR_PARTITION = 3


def txn_batch(pid, epoch, seq, values, transactional=True):
    """One uncompressed batch of producer pid (transactional attribute set when asked)."""
    recs = b"".join(cli_segment._record(i, i, None, v) for i, v in enumerate(values))
    n = len(values)
    ts = int(time.time() * 1000)
    attrs = 0x10 if transactional else 0
    after_crc = struct.pack(">hiqqqhii", attrs, n - 1, ts, ts, pid, epoch, seq, n) + recs
    after_len = struct.pack(">ibI", 0, 2, cli_segment.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def produce(c, topic, records, txn_id="tx"):
    """Produce v3 (transactional_id, acks=-1) of one partition; returns (error, base_offset)."""
    body = (string(txn_id) + i16(-1) + i32(10000) + i32(1) + string(topic) + i32(1) + i32(0)
            + i32(len(records)) + records)
    r = c.request(0, 3, body, timeout=15)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, base = r.i16(), r.i64()
    return err, base


def write_marker(c, topic, pid, epoch, commit, coordinator_epoch, partition=0):
    """WriteTxnMarkers v0 for one partition; returns its error code."""
    body = array([0], lambda _: (i64(pid) + i16(epoch) + i8(1 if commit else 0)
                                 + array([0], lambda _: string(topic)
                                         + array([partition], i32))
                                 + i32(coordinator_epoch)))
    r = c.request(27, 0, body, timeout=15)
    assert r.i32() == 1
    assert r.i64() == pid
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    assert r.i32() == partition
    return r.i16()


def fetch(c, topic, offset, isolation, min_bytes=1, max_wait_ms=0, timeout=15):
    """Fetch v4; returns dict(error, hw, lso, aborted=[(pid, first)] or None, records)."""
    body = (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(8 << 20) + i8(isolation) + i32(1)
            + string(topic) + i32(1) + i32(0) + i64(offset) + i32(1 << 20))
    r = c.request(1, 4, body, timeout=timeout)
    r.i32()
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    out = {"error": r.i16(), "hw": r.i64(), "lso": r.i64()}
    n = r.i32()
    out["aborted"] = None if n < 0 else [(r.i64(), r.i64()) for _ in range(n)]
    size = r.i32()
    out["records"] = bytes(r.take(size)) if size > 0 else b""
    return out


def batches(recs):
    """(base offset, last offset, attributes) of each whole batch."""
    out, pos = [], 0
    while pos + 61 <= len(recs):
        base, length = struct.unpack_from(">qi", recs, pos)
        if pos + 12 + length > len(recs):
            break
        (attrs,) = struct.unpack_from(">h", recs, pos + 21)
        (delta,) = struct.unpack_from(">i", recs, pos + 23)
        out.append((base, base + delta, attrs))
        pos += 12 + length
    return out


def list_latest(c, topic, isolation):
    """ListOffsets v2 latest (-1) of partition 0: (error, offset)."""
    body = (i32(-1) + i8(isolation) + array([0], lambda _: string(topic)
                                            + array([0], lambda p: i32(p) + i64(-1))))
    r = c.request(2, 2, body)
    r.i32()
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err = r.i16()
    r.i64()
    return err, r.i64()


def describe_producers(c, topic):
    """DescribeProducers v0 of partition 0: (error, {pid: (epoch, last_seq, coord_epoch,
    txn_start)})."""
    body = compact_array([0], lambda _: compact_string(topic) + compact_array([0], i32)
                         + uvarint(0)) + uvarint(0)
    r = c.request(61, 0, body, flexible=True)
    r.i32()
    assert r.uvarint() - 1 == 1
    r.compact_string()
    assert r.uvarint() - 1 == 1
    r.i32()
    err = r.i16()
    r.compact_string()
    prods = {}
    for _ in range(r.uvarint() - 1):
        pid, epoch, seq, _ts, ce, start = r.i64(), r.i32(), r.i32(), r.i64(), r.i32(), r.i64()
        r.tags()
        prods[pid] = (epoch, seq, ce, start)
    return err, prods


class TxnPartitionTest(ServerTestCase):
    SMP = 2
    # the partition layer alone: batches of producers no coordinator knows, so the produce
    # verification of KIP-890 (test_txn_verify.py) is off
    SETS = {"num.partitions": "1", "transaction.partition.verification.enable": "false"}

    def topic(self):
        topic = self.unique("txp")
        with kwire.Conn.to(self.bootstrap) as c:
            def ready():
                md = kwire.metadata(c, 12, [topic], auto_create=True)
                ps = md["topics"][0]["partitions"] or []
                return len(ps) == 1 and ps[0]["error"] == 0 and ps[0]["leader"] >= 0
            harness.wait_until(ready, 15, "topic %s created" % topic)
        return topic

    def test_lso_isolation_markers_and_fencing(self):
        topic = self.topic()
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.assertEqual(produce(c, topic, cli_segment.batch(0, [(None, b"a"), (None, b"b")]),
                                     txn_id=None), (0, 0))
            # transaction of producer 1000: offsets 2..4
            self.assertEqual(produce(c, topic, txn_batch(1000, 0, 0, [b"x1", b"x2", b"x3"])),
                             (0, 2))
            f = fetch(c, topic, 0, 0)
            self.assertEqual((f["error"], f["hw"], f["lso"]), (0, 5, 2))
            self.assertEqual([b[:2] for b in batches(f["records"])], [(0, 1), (2, 4)])
            f = fetch(c, topic, 0, 1)
            self.assertEqual((f["hw"], f["lso"]), (5, 2))
            self.assertEqual([b[:2] for b in batches(f["records"])], [(0, 1)])
            self.assertEqual(f["aborted"], [])
            self.assertEqual(list_latest(c, topic, 0), (0, 5))
            self.assertEqual(list_latest(c, topic, 1), (0, 2))
            # a read_committed fetch at the LSO finds nothing
            self.assertEqual(fetch(c, topic, 2, 1)["records"], b"")

            # transaction of producer 2000: offsets 5..6
            self.assertEqual(produce(c, topic, txn_batch(2000, 0, 0, [b"y1", b"y2"])), (0, 5))
            # 1000 aborts (marker at 7): the LSO moves to 2000's start
            self.assertEqual(write_marker(c, topic, 1000, 0, False, 5), 0)
            f = fetch(c, topic, 0, 1)
            self.assertEqual((f["hw"], f["lso"]), (8, 5))
            self.assertEqual([b[:2] for b in batches(f["records"])], [(0, 1), (2, 4)])
            self.assertEqual(f["aborted"], [(1000, 2)])

        # a waiting read_committed fetch wakes when the LSO moves (2000 commits, marker at 8)
        got = {}

        def waiter():
            with kwire.Conn.to(self.bootstrap, timeout=20) as w:
                t0 = time.monotonic()
                got["f"] = fetch(w, topic, 5, 1, min_bytes=1, max_wait_ms=10000, timeout=20)
                got["took"] = time.monotonic() - t0

        th = threading.Thread(target=waiter)
        th.start()
        time.sleep(0.3)  # let the fetch register (the answer must come from the marker)
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.assertEqual(write_marker(c, topic, 2000, 0, True, 5), 0)
        th.join(20)
        self.assertIn("f", got)
        self.assertLess(got["took"], 8, "the waiting read_committed fetch did not wake")
        self.assertEqual(got["f"]["lso"], 9)
        self.assertEqual([b[:2] for b in batches(got["f"]["records"])], [(5, 6), (7, 7), (8, 8)])

        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            f = fetch(c, topic, 0, 1)
            self.assertEqual((f["hw"], f["lso"]), (9, 9))
            self.assertEqual(f["aborted"], [(1000, 2)])
            control = [b for b in batches(f["records"]) if b[2] & 0x20]
            self.assertEqual([b[:2] for b in control], [(7, 7), (8, 8)])
            self.assertEqual(fetch(c, topic, 8, 1)["aborted"], [], "1000's abort ended below 8")
            # read_uncommitted: no aborted list
            self.assertIn(fetch(c, topic, 0, 0)["aborted"], ([], None))

            # fencing: an older coordinator epoch, an older producer epoch
            self.assertEqual(write_marker(c, topic, 2000, 0, True, 3),
                             TRANSACTION_COORDINATOR_FENCED)
            self.assertEqual(produce(c, topic, txn_batch(3000, 2, 0, [b"z"])), (0, 9))
            self.assertEqual(write_marker(c, topic, 3000, 1, False, 5), INVALID_PRODUCER_EPOCH)
            # a non-transactional batch inside 3000's transaction
            self.assertEqual(produce(c, topic, txn_batch(3000, 2, 1, [b"w"], transactional=False),
                                     txn_id=None)[0], INVALID_TXN_STATE)
            self.assertEqual(write_marker(c, topic + "-none", 3000, 2, False, 5),
                             UNKNOWN_TOPIC_OR_PARTITION)
            err, prods = describe_producers(c, topic)
            self.assertEqual(err, 0)
            self.assertEqual(prods[3000], (2, 0, -1, 9))
            self.assertEqual(prods[2000][2:], (5, -1))
            self.assertEqual(list_latest(c, topic, 1), (0, 9))

        if self.server.external:
            return
        # a restart keeps 3000's ongoing transaction and 1000's abort
        self.server.restart()
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            def back():
                return fetch(c, topic, 0, 1)["error"] == 0
            harness.wait_until(back, 15, "partition back")
            f = fetch(c, topic, 0, 1)
            self.assertEqual((f["hw"], f["lso"]), (10, 9))
            self.assertEqual(f["aborted"], [(1000, 2)])
            self.assertEqual(write_marker(c, topic, 3000, 2, False, 5), 0)
            f = fetch(c, topic, 0, 1)
            self.assertEqual((f["hw"], f["lso"]), (11, 11))
            self.assertEqual(sorted(f["aborted"]), [(1000, 2), (3000, 9)])


if __name__ == "__main__":
    harness.main()
