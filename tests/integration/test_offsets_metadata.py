"""Committed offset metadata is length-delimited bytes (issue 10, item 9).

OffsetCommit metadata holding NUL and bytes that are not UTF-8 comes back from OffsetFetch
identical, and again after a clean restart (rebuilt from __consumer_offsets). A group id
holding NUL is a group of its own, distinct from its prefix. Names of topics holding NUL are
refused with INVALID_TOPIC_EXCEPTION. Raw wire (kwire): real clients would not send these."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import i8, i16, i32, i64, string  # noqa: E402

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
INVALID_TOPIC_EXCEPTION = 17

METADATA = b"m\x00d\xff\xfe\x00\x80end"


def raw_string(r):
    n = r.i16()
    return None if n < 0 else bytes(r.take(n))


def commit_v2(group, topic, partition, offset, metadata):
    return (string(group) + i32(-1) + string("") + i64(-1) + i32(1) + string(topic) + i32(1)
            + i32(partition) + i64(offset) + string(metadata))


def fetch_v1(group, topic, partition):
    return string(group) + i32(1) + string(topic) + i32(1) + i32(partition)


class OffsetsMetadataTest(ServerTestCase):
    SMP = 2

    def retry(self, fn):
        """fn() -> error code; retried while the coordinator is loading (bounded)."""
        out = {}

        def ok():
            out["err"] = fn()
            return out["err"] not in RETRIABLE
        harness.wait_until(ok, 30, "coordinator ready")
        return out["err"]

    def find_coordinator(self, c, group):
        r = c.request(FIND_COORDINATOR, 1, string(group) + i8(0))
        r.i32()
        return r.i16()

    def commit(self, c, group, topic, offset, metadata):
        def once():
            r = c.request(OFFSET_COMMIT, 2, commit_v2(group, topic, 0, offset, metadata))
            self.assertEqual(r.i32(), 1)
            raw_string(r)
            self.assertEqual(r.i32(), 1)
            self.assertEqual(r.i32(), 0)
            return r.i16()
        return self.retry(once)

    def fetch(self, c, group, topic):
        out = {}

        def once():
            r = c.request(OFFSET_FETCH, 1, fetch_v1(group, topic, 0))
            self.assertEqual(r.i32(), 1)
            raw_string(r)
            self.assertEqual(r.i32(), 1)
            self.assertEqual(r.i32(), 0)
            out["v"] = (r.i64(), raw_string(r))
            return r.i16()
        self.assertEqual(self.retry(once), 0)
        return out["v"]

    def create_topic(self, c, topic):
        def ready():
            md = kwire.metadata(c, 12, [topic], auto_create=True)
            ps = md["topics"][0]["partitions"] or []
            return len(ps) == 1 and ps[0]["error"] == 0
        harness.wait_until(ready, 15, "topic %s created" % topic)

    def test_metadata_with_nul_survives_commit_fetch_and_restart(self):
        topic = self.unique("om")
        group = self.unique("g").encode() + b"\x00tail"
        prefix = group.split(b"\x00")[0]
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            self.create_topic(c, topic)
            self.assertEqual(self.retry(lambda: self.find_coordinator(c, group)), 0)
            self.assertEqual(self.retry(lambda: self.find_coordinator(c, prefix)), 0)
            self.assertEqual(self.commit(c, group, topic, 42, METADATA), 0)
            self.assertEqual(self.commit(c, prefix, topic, 7, b"prefix"), 0)
            self.assertEqual(self.fetch(c, group, topic), (42, METADATA))
            self.assertEqual(self.fetch(c, prefix, topic), (7, b"prefix"))
        if self.server.external:
            return
        self.server.restart(clean=True)
        with kwire.Conn.to(self.server.bootstrap, timeout=15) as c:
            self.assertEqual(self.fetch(c, group, topic), (42, METADATA))
            self.assertEqual(self.fetch(c, prefix, topic), (7, b"prefix"))

    def test_topic_name_with_nul_is_invalid(self):
        name = self.unique("bad").encode() + b"\x00x"
        with kwire.Conn.to(self.bootstrap, timeout=15) as c:
            # Metadata v4 for one topic, auto-create on: the name is refused, not cut.
            body = i32(1) + string(name) + b"\x01"
            r = c.request(kwire.METADATA, 4, body)
            r.i32()
            for _ in range(r.i32()):
                r.i32(), r.string(), r.i32(), r.string()
            r.string()
            r.i32()
            self.assertEqual(r.i32(), 1)
            self.assertEqual(r.i16(), INVALID_TOPIC_EXCEPTION)
            self.assertEqual(raw_string(r), name)
            prefix = name.split(b"\x00")[0].decode()
            md = kwire.metadata(c, 12, [prefix], auto_create=False)
            self.assertNotEqual(md["topics"][0]["error"], 0, "a topic was created by its prefix")


if __name__ == "__main__":
    harness.main()
