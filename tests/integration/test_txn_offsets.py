"""Transactional offsets in __consumer_offsets (issue 21, the groups' part), on the raw wire.

TxnOffsetCommit is answered as Kafka answers it before anything is written (unknown topics,
an empty group id, KIP-447's generation check of a group that does not exist), at a classic
(v0) and a flexible (v3) version. Then offsets committed in a transaction are pending — OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
(v7 and v8) and without it the offset committed before — until a COMMIT marker makes them
committed, across a restart too; an ABORT drops them; a pending offset survives a restart
before its marker. And with librdkafka (confluent-kafka): send_offsets_to_transaction in an
aborted transaction leaves the group's offset as it was, in a committed one sets it, and the
committed offset survives a restart. A stale producer epoch is fenced by the partition."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import (boolean, compact_array, compact_string, i8, i16, i32, i64,  # noqa: E402
                   string, TAGS_NONE)

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
INIT_PRODUCER_ID, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 22, 27, 28
RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION, INVALID_GROUP_ID = 3, 22, 24
UNSTABLE_OFFSET_COMMIT = 88
INVALID_PRODUCER_EPOCH = 47
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default


def partition_for(group):
    """Kafka's abs(String.hashCode) % partitions, for an ASCII group id."""
    h = 0
    for ch in group:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    h = 0 if h == -(1 << 31) else abs(h)
    return h % OFFSETS_PARTITIONS


def cnullable(s):
    return compact_string(s)


def txn_commit_body(version, group, pid, epoch, topic, partition, offset, generation=-1,
                    member="", instance=None):
    if version >= 3:
        part = i32(partition) + i64(offset) + i32(-1) + cnullable("m") + TAGS_NONE
        tp = compact_string(topic) + compact_array([part], lambda x: x) + TAGS_NONE
        return (compact_string("txn-" + group) + compact_string(group) + i64(pid) + i16(epoch)
                + i32(generation) + compact_string(member) + cnullable(instance)
                + compact_array([tp], lambda x: x) + TAGS_NONE)
    part = i32(partition) + i64(offset) + (i32(-1) if version >= 2 else b"") + string("m")
    tp = string(topic) + i32(1) + part
    return string("txn-" + group) + string(group) + i64(pid) + i16(epoch) + i32(1) + tp


def parse_txn_commit(r, version):
    """[(topic, partition, error)]."""
    flex = version >= 3
    r.i32()
    out = []

    def partition(rr):
        p, e = rr.i32(), rr.i16()
        if flex:
            rr.tags()
        return p, e

    def topic(rr):
        name = rr.compact_string() if flex else rr.string()
        for p, e in (rr.compact_array(partition) if flex else rr.array(partition)):
            out.append((name, p, e))
        if flex:
            rr.tags()
        return name
    if flex:
        r.compact_array(topic)
        r.tags()
    else:
        r.array(topic)
    r.end()
    return out


class TxnOffsetsTest(ServerTestCase):
    SMP = 2

    def retry(self, fn, what="coordinator ready"):
        """fn() -> error code; retried while the coordinator is loading (bounded)."""
        out = {}

        def ok():
            out["err"] = fn()
            return out["err"] not in RETRIABLE
        harness.wait_until(ok, 30, what)
        return out["err"]

    def create_topic(self, c, topic, partitions=1):
        def ready():
            md = kwire.metadata(c, 12, [topic], auto_create=True)
            ps = md["topics"][0]["partitions"] or []
            return len(ps) >= 1 and ps[0]["error"] == 0
        harness.wait_until(ready, 15, "topic %s created" % topic)

    def find_coordinator(self, c, group):
        def once():
            r = c.request(FIND_COORDINATOR, 1, string(group) + i8(0))
            r.i32()
            return r.i16()
        self.assertEqual(self.retry(once), 0)

    def txn_commit(self, c, version, group, pid, epoch, topic, partition, offset, **kw):
        def once():
            r = c.request(TXN_OFFSET_COMMIT, version,
                          txn_commit_body(version, group, pid, epoch, topic, partition, offset,
                                          **kw), flexible=version >= 3)
            res = parse_txn_commit(r, version)
            self.assertEqual(len(res), 1)
            self.assertEqual(res[0][:2], (topic, partition))
            return res[0][2]
        return self.retry(once)

    def commit(self, c, group, topic, partition, offset):
        body = (string(group) + i32(-1) + string("") + i64(-1) + i32(1) + string(topic) + i32(1)
                + i32(partition) + i64(offset) + string(""))

        def once():
            r = c.request(OFFSET_COMMIT, 2, body)
            r.i32(), r.string(), r.i32(), r.i32()
            return r.i16()
        self.assertEqual(self.retry(once), 0)

    def fetch(self, c, version, group, topic, partition, require_stable):
        """(offset, partition error) from OffsetFetch v7 (one group) or v8 (groups)."""
        out = {}

        def part(rr):
            v = (rr.i32(), rr.i64(), rr.i32(), rr.compact_string(), rr.i16())
            rr.tags()
            return v

        def topic_(rr):
            name = rr.compact_string()
            ps = rr.compact_array(part)
            rr.tags()
            return name, ps

        def once():
            tp = compact_string(topic) + compact_array([i32(partition)], lambda x: x) + TAGS_NONE
            if version < 8:
                body = (compact_string(group) + compact_array([tp], lambda x: x)
                        + boolean(require_stable) + TAGS_NONE)
            else:
                g = compact_string(group) + compact_array([tp], lambda x: x) + TAGS_NONE
                body = compact_array([g], lambda x: x) + boolean(require_stable) + TAGS_NONE
            r = c.request(OFFSET_FETCH, version, body, flexible=True)
            r.i32()
            if version < 8:
                topics = r.compact_array(topic_)
                err = r.i16()
            else:
                def group_(rr):
                    rr.compact_string()
                    ts = rr.compact_array(topic_)
                    e = rr.i16()
                    rr.tags()
                    return ts, e
                (topics, err), = r.compact_array(group_)
            r.tags()
            r.end()
            if err:
                return err
            (name, ps), = topics
            self.assertEqual(name, topic)
            (p, off, _epoch, _md, perr), = ps
            self.assertEqual(p, partition)
            out["v"] = (off, perr)
            return 0
        self.assertEqual(self.retry(once), 0)
        return out["v"]

    def api_range(self, c, key):
        _err, apis = kwire.api_versions(c, 3)
        return apis.get(key)

    # ---- what is answered before anything is written ----

    def test_refusals_before_the_write(self):
        topic, group = self.unique("tr"), self.unique("g")
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.assertEqual(self.api_range(c, TXN_OFFSET_COMMIT), (0, 5))
            self.create_topic(c, topic)
            self.find_coordinator(c, group)
            for v in (0, 3, 5):
                self.assertEqual(self.txn_commit(c, v, group, 1, 0, "no-such-" + topic, 0, 5),
                                 UNKNOWN_TOPIC_OR_PARTITION)
                self.assertEqual(self.txn_commit(c, v, group, 1, 0, topic, 999, 5),
                                 UNKNOWN_TOPIC_OR_PARTITION)
                self.assertEqual(self.txn_commit(c, v, "", 1, 0, topic, 0, 5), INVALID_GROUP_ID)
            # KIP-447: a generation for a group that does not exist
            self.assertEqual(self.txn_commit(c, 3, group, 1, 0, topic, 0, 5, generation=4,
                                             member="m"), ILLEGAL_GENERATION)
            # nothing was made of it: the group has no offset
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True), (-1, 0))

    # ---- pending, markers, restarts (needs the partition layer's transactions) ----

    def init_producer(self, c):
        r = c.request(INIT_PRODUCER_ID, 0, string(None) + i32(60000))
        r.i32()
        self.assertEqual(r.i16(), 0)
        return r.i64(), r.i16()

    def marker(self, c, pid, epoch, group, commit):
        """WriteTxnMarkers v1 for the group's __consumer_offsets partition; its error."""
        tp = (compact_string("__consumer_offsets")
              + compact_array([i32(partition_for(group))], lambda x: x) + TAGS_NONE)
        m = (i64(pid) + i16(epoch) + boolean(commit) + compact_array([tp], lambda x: x)
             + i32(0) + TAGS_NONE)
        body = compact_array([m], lambda x: x) + TAGS_NONE

        def once():
            r = c.request(WRITE_TXN_MARKERS, 1, body, flexible=True)
            errs = []

            def part(rr):
                rr.i32()
                errs.append(rr.i16())
                rr.tags()

            def topic(rr):
                rr.compact_string()
                rr.compact_array(part)
                rr.tags()

            def marker_(rr):
                rr.i64()
                rr.compact_array(topic)
                rr.tags()
            r.compact_array(marker_)
            r.tags()
            self.assertEqual(len(errs), 1)
            return errs[0]
        return self.retry(once, "marker written")

    def need_markers(self, c):
        self.assertIsNotNone(self.api_range(c, WRITE_TXN_MARKERS), "WriteTxnMarkers advertised")

    def test_commit_marker_then_restart(self):
        topic, group = self.unique("tc"), self.unique("g")
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.need_markers(c)
            self.create_topic(c, topic)
            self.find_coordinator(c, group)
            pid, epoch = self.init_producer(c)
            self.commit(c, group, topic, 0, 5)
            self.assertEqual(self.txn_commit(c, 3, group, pid, epoch, topic, 0, 10), 0)
            for v in (7, 8):
                self.assertEqual(self.fetch(c, v, group, topic, 0, True),
                                 (-1, UNSTABLE_OFFSET_COMMIT))
                self.assertEqual(self.fetch(c, v, group, topic, 0, False), (5, 0))
        if self.server.external:
            return
        # pending survives a restart before its marker
        self.server.restart(clean=True)
        with kwire.Conn.to(self.server.bootstrap, timeout=15) as c:
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True), (-1, UNSTABLE_OFFSET_COMMIT))
            self.assertEqual(self.marker(c, pid, epoch, group, True), 0)
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True), (10, 0))
            self.assertEqual(self.fetch(c, 8, group, topic, 0, False), (10, 0))
        self.server.restart(clean=True)
        with kwire.Conn.to(self.server.bootstrap, timeout=15) as c:
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True), (10, 0))

    def test_abort_marker_then_restart(self):
        topic, group = self.unique("ta"), self.unique("g")
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.need_markers(c)
            self.create_topic(c, topic)
            self.find_coordinator(c, group)
            pid, epoch = self.init_producer(c)
            self.commit(c, group, topic, 0, 5)
            self.assertEqual(self.txn_commit(c, 0, group, pid, epoch, topic, 0, 20), 0)
            self.assertEqual(self.fetch(c, 8, group, topic, 0, True), (-1, UNSTABLE_OFFSET_COMMIT))
            self.assertEqual(self.marker(c, pid, epoch, group, False), 0)
            self.assertEqual(self.fetch(c, 8, group, topic, 0, True), (5, 0))
        if self.server.external:
            return
        self.server.restart(clean=True)
        with kwire.Conn.to(self.server.bootstrap, timeout=15) as c:
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True), (5, 0))

    def test_stale_producer_epoch(self):
        """The partition fences an epoch older than the producer's latest in it; the answer
        is the partition's (INVALID_PRODUCER_EPOCH), as Kafka passes it through."""
        topic, group = self.unique("tf"), self.unique("g")
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.need_markers(c)
            self.create_topic(c, topic)
            self.find_coordinator(c, group)
            pid, epoch = self.init_producer(c)
            self.assertEqual(self.txn_commit(c, 3, group, pid, epoch + 1, topic, 0, 10), 0)
            self.assertEqual(self.marker(c, pid, epoch + 1, group, True), 0)
            self.assertEqual(self.txn_commit(c, 3, group, pid, epoch, topic, 0, 11),
                             INVALID_PRODUCER_EPOCH)
            self.assertEqual(self.fetch(c, 8, group, topic, 0, True), (10, 0))

    # ---- a real client: consume-transform-produce's offsets ----

    def test_send_offsets_to_transaction_confluent(self):
        try:
            from confluent_kafka import Consumer, Producer, TopicPartition
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is not installed")
        topic, group = self.unique("tk"), self.unique("g")
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.create_topic(c, topic)
            self.create_topic(c, topic + "-out")
        cons = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        prod = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "tx-" + group})
        try:
            cons.subscribe([topic])
            harness.wait_until(lambda: cons.poll(0.2) is None and cons.assignment(), 30,
                               "the consumer has its assignment")
            meta = cons.consumer_group_metadata()
            prod.init_transactions(30)

            def committed():
                return cons.committed([TopicPartition(topic, 0)], 15)[0].offset

            for commit, offset in ((False, 4), (True, 7)):
                prod.begin_transaction()
                prod.produce(topic + "-out", b"x")
                prod.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], meta, 30)
                if commit:
                    prod.commit_transaction(30)
                else:
                    prod.abort_transaction(30)
                    self.assertLess(committed(), 0, "an aborted transaction's offset")
            self.assertEqual(committed(), 7)
        finally:
            prod.flush(10)
            cons.close()
        if self.server.external:
            return
        self.server.restart(clean=True)
        with kwire.Conn.to(self.server.bootstrap, timeout=15) as c:
            self.assertEqual(self.fetch(c, 7, group, topic, 0, True)[0], 7)


if __name__ == "__main__":
    harness.main()
