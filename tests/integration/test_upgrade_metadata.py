"""test_upgrade_metadata.py — a data directory written by the release before the single metadata
path (a single broker's strata-metadata.json, fixtures/single-broker-v0, made by
fixtures/make_single_broker_v0.py) upgrades in place at the first start: topics, topic ids,
partition counts, configs, records and a group's committed offsets are all kept, the file is
renamed strata-metadata.json.migrated, and a second start needs it no more.
"""
import base64
import json
import os
import shutil
import sys
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "single-broker-v0")
# what make_single_broker_v0.py wrote
RECORDS = {("plain", p): [b"plain-%d" % i for i in range(10) if i % 3 == p] for p in range(3)}
RECORDS.update({("tuned", p): [b"tuned-%d" % i for i in range(4) if i % 2 == p] for p in range(2)})
COMMITTED = {("plain", 0): 3, ("plain", 1): 2, ("tuned", 1): 1}


def kafka_uuid(hex_id):
    return base64.urlsafe_b64encode(bytes.fromhex(hex_id)).decode().rstrip("=")


class UpgradeMetadataTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        with open(os.path.join(FIXTURE, "strata-metadata.json")) as f:
            self.legacy = {t["name"]: t for t in json.load(f)["topics"]}
        self.server = harness.Server(smp=2, name="upgrade",
                                     sets={"offsets.topic.num.partitions": "3"})
        shutil.rmtree(self.server.data_dir)
        shutil.copytree(FIXTURE, self.server.data_dir)

    def tearDown(self):
        if self.server.proc is not None:
            self.server.stop()
        self.server.close()

    def topics_http(self):
        url = "http://127.0.0.1:%d/v1/topics" % self.server.admin_port
        with urllib.request.urlopen(url, timeout=5) as r:
            return {t["name"]: t for t in json.loads(r.read().decode())["topics"]}

    def check_everything(self):
        s = self.server
        topics = self.topics_http()
        for name, t in self.legacy.items():
            self.assertIn(name, topics)
            self.assertEqual(topics[name]["id"], kafka_uuid(t["id"]), name)
            self.assertEqual(topics[name]["partitions"], len(t["partitions"]), name)
            self.assertEqual(topics[name]["internal"], t["internal"], name)
        a = AdminClient({"bootstrap.servers": s.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, "tuned")
        cfg = a.describe_configs([res])[res].result(30)
        self.assertEqual(cfg["cleanup.policy"].value, "compact")
        self.assertEqual(cfg["retention.ms"].value, "123456789")
        self.assertFalse(cfg["retention.ms"].is_default)
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "upgrade-reader",
                      "enable.auto.commit": False})
        for (topic, p), want in RECORDS.items():
            c.assign([TopicPartition(topic, p, 0)])
            got, deadline = [], time.monotonic() + 30
            while len(got) < len(want) and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got.append(m.value())
            self.assertEqual(got, want, (topic, p))
        c.close()
        g = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "fixture-group",
                      "enable.auto.commit": False})
        tps = [TopicPartition(t, p) for (t, p) in COMMITTED]
        got = {(tp.topic, tp.partition): tp.offset for tp in g.committed(tps, timeout=30)}
        g.close()
        self.assertEqual(got, COMMITTED)

    def test_upgrade_in_place(self):
        s = self.server
        s.start()
        self.assertIn("upgraded", s.stderr_text())
        self.assertFalse(os.path.exists(os.path.join(s.data_dir, "strata-metadata.json")))
        self.assertTrue(os.path.exists(os.path.join(s.data_dir, "strata-metadata.json.migrated")))
        self.assertNotIn("-stray", " ".join(os.listdir(s.data_dir)))
        self.check_everything()
        # the second start reads the metadata log only
        s.restart(clean=True)
        self.assertNotIn("upgraded", s.stderr_text())
        self.check_everything()


if __name__ == "__main__":
    harness.main()
