"""Durability holes of issue 10 that a real broker and real clients show: each case failed on
the broker before its fix.

- Size retention never deletes a compacted topic (committed consumer offsets survived neither
  log.retention.bytes nor a restart).
- Deleting a topic and re-creating it never brings the old records back, even after a kill -9
  right after the DeleteTopics answer; orphan and foreign directories are refused at start.
- DeleteRecords is durable once acknowledged.
- One partition that cannot be opened does not take the broker down, and CreateTopics reports
  a partition it could not open.
- A corrupt batch in an older segment is reported, never "repaired" by deleting later data.
"""

import glob
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import Server, wait_until  # noqa: E402


def offsets_dirs(data_dir):
    return sorted(glob.glob(os.path.join(data_dir, "__consumer_offsets-*")))


def segment_bases(d):
    return sorted(int(os.path.basename(f)[:-4]) for f in glob.glob(os.path.join(d, "*.log")))


class DurabilityHolesTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.server = None

    def tearDown(self):
        if self.server:
            try:
                if self.server.alive():
                    self.server.stop()
            finally:
                self.server.close()

    def start(self, **sets):
        self.server = Server(smp=2, sets=sets, name="holes")
        self.server.start()
        return self.server

    def test_size_retention_keeps_committed_offsets(self):
        from confluent_kafka import Consumer, TopicPartition
        s = self.start(**{"log.retention.bytes": "1", "log.roll.ms": "300"})
        kc.create_topic(s.bootstrap, "ret-data", 2)
        group = "ret-group"

        def commit(partition, offset):
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group,
                          "enable.auto.commit": False})
            try:
                c.commit(offsets=[TopicPartition("ret-data", partition, offset)],
                         asynchronous=False)
            finally:
                c.close()

        def last_base():
            return max([max(segment_bases(d)) for d in offsets_dirs(s.data_dir)] + [0])

        # Each commit's segment rolls (log.roll.ms); before the fix, log.retention.bytes=1
        # deleted the first segment on a tick once a later one held data.
        commit(0, 42)
        wait_until(lambda: last_base() > 0, 20, "a __consumer_offsets segment to roll")
        first_roll = last_base()
        commit(1, 7)
        wait_until(lambda: last_base() > first_roll, 20, "a second roll")
        s.restart(clean=True)
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        try:
            got = c.committed([TopicPartition("ret-data", 0), TopicPartition("ret-data", 1)],
                              timeout=20)
        finally:
            c.close()
        self.assertEqual(got[0].offset, 42)
        self.assertEqual(got[1].offset, 7)
        for d in offsets_dirs(s.data_dir):
            self.assertIn(0, segment_bases(d), "%s lost its first segment" % d)


if __name__ == "__main__":
    harness.main()
