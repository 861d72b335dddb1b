"""Faults at the Kafka layer (issue 10): idempotent produce and OffsetCommit while the
storage's fdatasync fails.

The server is a test build: POST /v1/debug/fail-sync?count=N&errno=EIO on the admin port
makes the next N syncs on any shard complete with that error (the real sync still runs).
A failed sync cuts the log back to its durable offset and later appends reuse the freed
offsets, so whatever was remembered about the cut batches must go with them:

  * an idempotent producer's retry of a batch that got KAFKA_STORAGE_ERROR is appended
    again, never answered with the offset another producer's record took meanwhile;
  * a retry that arrives while its original is still syncing waits for that sync and
    shares its fate;
  * a failed OffsetCommit is answered with an error, and after a clean restart OffsetFetch
    returns the last commit that succeeded.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import i16, i32, i64, string  # noqa: E402
from test_idempotence import init_producer_id, pbatch  # noqa: E402
from test_produce_wire import parse_v3, produce_v3  # noqa: E402

NONE, STORAGE_ERROR = 0, 56


def fail_syncs(port, count, err="EIO"):
    status, _, body = admin_client.http_get(
        port, "/v1/debug/fail-sync?count=%d&errno=%s" % (count, err), method="POST")
    if status == 404:
        raise AssertionError("no /v1/debug/fail-sync: this strata-server is not a test build")
    assert status == 200, "fail-sync: %d %s" % (status, body)


def syncs_left(port):
    return admin_client.get_json(port, "/v1/debug/fail-sync")["remaining"]


def offset_commit_v2(conn, group, topic, partition, offset):
    """A simple (generation -1, no member) OffsetCommit; returns the partition's error."""
    body = (string(group) + i32(-1) + string("") + i64(-1) + i32(1) + string(topic) + i32(1)
            + i32(partition) + i64(offset) + string(""))
    r = conn.request(8, 2, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    return r.i16()


def offset_fetch_v1(conn, group, topic, partition):
    """Returns (error, committed offset) of one partition."""
    body = string(group) + i32(1) + string(topic) + i32(1) + i32(partition)
    r = conn.request(9, 1, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    off = r.i64()
    r.string()
    return r.i16(), off


class FaultsKafkaTest(ServerTestCase):
    SMP = 2

    def setUp(self):
        super().setUp()
        self.admin = self.server.admin_port
        fail_syncs(self.admin, 0)  # a test that failed early leaves nothing armed

    def produce(self, conn, topic, records):
        return parse_v3(conn.request(0, 3, produce_v3(topic, 0, records)))[0][1:]

    def values(self, topic, n):
        got = kc.consume_partitions(self.server.bootstrap, topic, [0], n)
        return {m.offset(): m.value() for m in got}

    def test_retry_after_failed_sync_is_not_acked_at_another_producers_offset(self):
        topic = self.unique("fsync-idem")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as p, kwire.Conn.to(self.bootstrap) as q:
            _, pid_p, _ = init_producer_id(p)
            _, pid_q, _ = init_producer_id(q)
            self.assertEqual(self.produce(p, topic, pbatch(pid_p, 0, 0, [b"p0", b"p1", b"p2"])),
                             (NONE, 0))
            fail_syncs(self.admin, 1)
            p3 = pbatch(pid_p, 0, 3, [b"p3"])
            self.assertEqual(self.produce(p, topic, p3), (STORAGE_ERROR, -1))
            self.assertEqual(syncs_left(self.admin), 0)
            # Offset 3 was cut off with P's batch: Q's record takes it.
            self.assertEqual(self.produce(q, topic, pbatch(pid_q, 0, 0, [b"q0"])), (NONE, 3))
            # P's retry is a new append, not a duplicate of what was cut.
            err, off = self.produce(p, topic, p3)
            self.assertEqual(err, NONE)
            self.assertEqual(off, 4, "P's retry was acknowledged at offset %d" % off)
            # And from now on it is a duplicate, at its real offset.
            self.assertEqual(self.produce(p, topic, p3), (NONE, 4))
            self.assertEqual(self.produce(p, topic, pbatch(pid_p, 0, 4, [b"p4"])), (NONE, 5))
        got = self.values(topic, 6)
        self.assertEqual([got[o] for o in range(6)], [b"p0", b"p1", b"p2", b"q0", b"p3", b"p4"])

    def test_retry_while_original_syncs_shares_its_fate(self):
        topic = self.unique("fsync-dup")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as p, kwire.Conn.to(self.bootstrap) as q:
            _, pid_p, _ = init_producer_id(p)
            _, pid_q, _ = init_producer_id(q)
            self.assertEqual(self.produce(p, topic, pbatch(pid_p, 0, 0, [b"p0"])), (NONE, 0))
            fail_syncs(self.admin, 1)
            # The batch and its retry in one write: the retry is checked while the original
            # is appended but not yet synced (or, if the sync already failed, is appended
            # again). Either way no answer may claim an offset that does not hold P's record.
            b1 = pbatch(pid_p, 0, 1, [b"p1"])
            body = produce_v3(topic, 0, b1)
            frames = b""
            for corr in (1001, 1002):
                frames += kwire.frame(kwire.request_header(0, 3, corr) + body)
            p.send_raw(frames)
            answers = []
            for corr in (1001, 1002):
                r = kwire.Reader(p.recv_frame())
                self.assertEqual(r.i32(), corr)
                answers.append(parse_v3(r)[0][1:])
            self.assertEqual(answers[0], (STORAGE_ERROR, -1))
            self.assertEqual(syncs_left(self.admin), 0)
            q_off = 1 if answers[1][0] else 2
            self.assertEqual(self.produce(q, topic, pbatch(pid_q, 0, 0, [b"q0"])),
                             (NONE, q_off))
            err, off = self.produce(p, topic, b1)
            self.assertEqual(err, NONE)
            self.assertNotEqual(off, q_off, "P's retry was acknowledged at Q's offset")
            if answers[1][0] == NONE:
                self.assertEqual(off, answers[1][1], "a duplicate of the appended retry")
            else:
                self.assertEqual(answers[1], (STORAGE_ERROR, -1))
        got = self.values(topic, 3)
        self.assertEqual(got[off], b"p1", "P's record is not at the offset it was given")
        self.assertEqual(sorted(got.values()), [b"p0", b"p1", b"q0"], "p1 written once")

    def test_failed_offset_commit_is_an_error_and_not_kept(self):
        topic = self.unique("fsync-commit")
        group = self.unique("g")
        kc.create_topic(self.bootstrap, topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(offset_commit_v2(c, group, topic, 0, 5), NONE)
            fail_syncs(self.admin, 1)
            self.assertNotEqual(offset_commit_v2(c, group, topic, 0, 7), NONE,
                                "a commit whose sync failed was answered as a success")
            self.assertEqual(syncs_left(self.admin), 0)
            self.assertEqual(offset_fetch_v1(c, group, topic, 0), (NONE, 5))
        self.server.restart(clean=True)
        self.admin = self.server.admin_port
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(offset_fetch_v1(c, group, topic, 0), (NONE, 5))
            # A commit after the failure reuses the cut offsets and survives a restart.
            self.assertEqual(offset_commit_v2(c, group, topic, 0, 6), NONE)
            fail_syncs(self.admin, 1)
            self.assertNotEqual(offset_commit_v2(c, group, topic, 0, 8), NONE)
            self.assertEqual(syncs_left(self.admin), 0)
        self.server.restart(clean=True)
        self.admin = self.server.admin_port
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(offset_fetch_v1(c, group, topic, 0), (NONE, 6))


if __name__ == "__main__":
    harness.main()
