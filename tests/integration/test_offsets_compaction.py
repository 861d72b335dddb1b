"""Committed offsets under the log cleaner (issue 14), end to end against a real server.

__consumer_offsets is a cleanup.policy=compact topic cleaned by the broker's generic cleaner
(the group coordinator does no compaction of its own). Here its segments roll every second
(log.roll.ms) and any dirt starts a clean, so a group committing the same partitions over and
over is cleaned down to about one record per key while the test runs. What must hold: the
committed offsets, the group that left (Empty, with its metadata) and the deleted group (its
tombstones) come out of cleaning and of a kill -9 restart exactly as they went in, also once
the tombstones themselves are cleaned away after delete.retention.ms.

Clients: kafka-python (commits, a subscribing member, admin: delete, list and describe
groups, offsets); the topic itself read back raw with kafka-python to see what the cleaner
left."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from test_compaction import cleaner  # noqa: E402

OFFSETS = "__consumer_offsets"
COMMITS = 200  # rounds of commits to 3 partitions by one group


class OffsetsCompactionTest(ServerTestCase):
    SMP = 2
    SETS = {"offsets.topic.num.partitions": "1",  # every group in __consumer_offsets-0
            "log.roll.ms": "1000",
            "log.cleaner.min.cleanable.ratio": "0.01",
            "log.cleaner.delete.retention.ms": "1000"}

    def admin(self):
        from kafka import KafkaAdminClient
        return KafkaAdminClient(bootstrap_servers=self.server.bootstrap)

    def committed(self, group):
        a = self.admin()
        try:
            return {(tp.topic, tp.partition): (om.offset, om.metadata)
                    for tp, om in a.list_consumer_group_offsets(group).items()}
        finally:
            a.close()

    def groups(self):
        a = self.admin()
        try:
            return {g for g, _ in a.list_consumer_groups()}
        finally:
            a.close()

    def offsets_records(self):
        """Every record of __consumer_offsets-0: (offset, key, value or None)."""
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=self.server.bootstrap, enable_auto_commit=False,
                          consumer_timeout_ms=1500)
        try:
            tp = TopicPartition(OFFSETS, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            out = []
            deadline = time.monotonic() + 20
            while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
                for recs in c.poll(500).values():
                    out.extend((r.offset, r.key, r.value) for r in recs)
            return out
        finally:
            c.close()

    def wait_cleaned(self, after=0, removed=0, timeout=60):
        def done():
            c = cleaner(self.server, OFFSETS)
            return c if (c and c["cleans"] > after and c["records_removed"] >= removed
                         and c["dirty_ratio"] == 0 and not c["in_progress"]) else None
        return wait_until(done, timeout, "%s cleaned (more than %d cleans, %d records removed)"
                          % (OFFSETS, after, removed))

    def check_state(self, topic, want):
        self.assertEqual(self.committed("oc-simple"), want["simple"])
        self.assertEqual(self.committed("oc-member"), want["member"])
        self.assertEqual(self.committed("oc-gone"), {})
        groups = self.groups()
        self.assertIn("oc-simple", groups)
        self.assertIn("oc-member", groups)
        self.assertNotIn("oc-gone", groups)
        a = self.admin()
        try:
            d = a.describe_consumer_groups(["oc-member"])[0]
        finally:
            a.close()
        self.assertEqual((d.state, d.protocol_type), ("Empty", "consumer"))

    def test_committed_offsets_survive_cleaning_and_restart(self):
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata
        topic = self.unique("oc")
        kc.create_topic(self.bootstrap, topic, 3)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"v%d" % i, "partition": i % 3} for i in range(30)])

        # One group committing the same three keys over and over (generation -1 commits).
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id="oc-simple",
                          enable_auto_commit=False)
        for i in range(COMMITS):
            c.commit({TopicPartition(topic, q): OffsetAndMetadata(i + q, "m%d" % i)
                      for q in range(3)})
        c.close(autocommit=False)
        # A group deleted (DeleteGroups: tombstones for its offsets and its metadata).
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id="oc-gone",
                          enable_auto_commit=False)
        for i in range(20):
            c.commit({TopicPartition(topic, 0): OffsetAndMetadata(i, "")})
        c.close(autocommit=False)
        a = self.admin()
        self.assertEqual([e for _, e in a.delete_consumer_groups(["oc-gone"])][0].errno, 0)
        a.close()
        # A member that joined, committed and left: the group stays, Empty.
        m = KafkaConsumer(topic, bootstrap_servers=self.bootstrap, group_id="oc-member",
                          enable_auto_commit=False, auto_offset_reset="earliest",
                          session_timeout_ms=10000)
        got = 0
        deadline = time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            got += sum(len(v) for v in m.poll(500).values())
        self.assertEqual(got, 30)
        m.commit()
        m.close(autocommit=False)

        last = COMMITS - 1
        want = {"simple": {(topic, q): (last + q, "m%d" % last) for q in range(3)},
                "member": {(topic, q): (10, "") for q in range(3)}}
        self.check_state(topic, want)

        # The cleaner (which may have begun already): the superseded commits go; the
        # tombstones stay for now.
        st = self.wait_cleaned(removed=3 * COMMITS - 3)
        recs = self.offsets_records()
        print("  %s: %d records left; cleaner: %s" % (OFFSETS, len(recs), st))
        self.assertLess(len(recs), 60)
        self.check_state(topic, want)
        self.server.restart(clean=False)
        self.check_state(topic, want)

        # After delete.retention.ms the tombstones go too (each needs a clean after the one
        # it survived); oc-gone must not come back from anything left behind.
        deadline = time.monotonic() + 60
        c = KafkaConsumer(bootstrap_servers=self.server.bootstrap, group_id="oc-simple",
                          enable_auto_commit=False)
        while True:
            cleans = (cleaner(self.server, OFFSETS) or {}).get("cleans", 0)  # since the restart
            c.commit({TopicPartition(topic, q): OffsetAndMetadata(last + q, "m%d" % last)
                      for q in range(3)})
            self.wait_cleaned(after=cleans)
            recs = self.offsets_records()
            tombstones = [o for o, _, v in recs if v is None]
            if not tombstones or time.monotonic() > deadline:
                break
        c.close(autocommit=False)
        self.assertEqual(tombstones, [], "tombstones older than delete.retention.ms cleaned")
        self.check_state(topic, want)
        self.server.restart(clean=False)
        self.check_state(topic, want)


if __name__ == "__main__":
    harness.main()
