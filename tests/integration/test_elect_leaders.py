"""ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46) on a
single broker, in raw bytes (kwire): neither kafka-python 2.0.2 nor confluent-kafka 1.7 (the
Debian packages the tests use) has these admin calls.

On one broker the only replica always leads, so every election is ELECTION_NOT_NEEDED; the only
valid reassignment target is [this broker]; no reassignment is ever in progress. The cluster
behaviour (leaderships moved back by a preferred election, replicas moved) is for the cluster
tests."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85


class ElectLeadersTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topic = "elect-%d" % os.getpid()
        kc.create_topic(cls.bootstrap, cls.topic, 3)
        with kwire.Conn.to(cls.bootstrap) as c:
            md = kwire.metadata(c, 12)
        cls.node = md["brokers"][0][0]

    def partitions(self):
        with kwire.Conn.to(self.bootstrap) as c:
            md = kwire.metadata(c, 12, [self.topic])
        return {p["index"]: (p["leader"], p["replicas"], p["isr"], p["leader_epoch"])
                for p in md["topics"][0]["partitions"]}

    def test_api_versions(self):
        with kwire.Conn.to(self.bootstrap) as c:
            err, keys = kwire.api_versions(c, 3)
        self.assertEqual(err, 0)
        self.assertEqual(keys[kwire.ELECT_LEADERS], (0, 2))
        self.assertEqual(keys[kwire.ALTER_PARTITION_REASSIGNMENTS], (0, 1))
        self.assertEqual(keys[kwire.LIST_PARTITION_REASSIGNMENTS], (0, 0))

    def test_preferred_not_needed_every_version(self):
        before = self.partitions()
        with kwire.Conn.to(self.bootstrap) as c:
            for v in (0, 1, 2):
                err, res = kwire.elect_leaders(c, v, 0, {self.topic: [0, 1, 2]})
                self.assertEqual(err, NONE, "v%d" % v)
                self.assertEqual(res, {self.topic: {p: (ELECTION_NOT_NEEDED, None)
                                                    for p in (0, 1, 2)}}, "v%d" % v)
        self.assertEqual(self.partitions(), before, "nothing changed")
        for p, (leader, replicas, isr, _) in before.items():
            self.assertEqual((leader, replicas, isr), (self.node, [self.node], [self.node]))

    def test_unclean_not_needed(self):
        with kwire.Conn.to(self.bootstrap) as c:
            for v in (1, 2):
                err, res = kwire.elect_leaders(c, v, 1, {self.topic: [1]})
                self.assertEqual((err, res), (NONE, {self.topic: {1: (ELECTION_NOT_NEEDED, None)}}))

    def test_unknown_topic_and_partition(self):
        with kwire.Conn.to(self.bootstrap) as c:
            err, res = kwire.elect_leaders(c, 2, 0, {self.topic: [7, 0], "no-such-topic": [0]})
        self.assertEqual(err, NONE)
        self.assertEqual(res[self.topic][7][0], UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(res[self.topic][0], (ELECTION_NOT_NEEDED, None))
        self.assertEqual(res["no-such-topic"][0][0], UNKNOWN_TOPIC_OR_PARTITION)

    def test_bad_election_type(self):
        with kwire.Conn.to(self.bootstrap) as c:
            err, res = kwire.elect_leaders(c, 2, 5, {self.topic: [0]})
        self.assertEqual(res[self.topic][0][0], INVALID_REQUEST)

    def test_every_partition(self):
        """Null topic_partitions: every topic is listed, and partitions that need no election
        are left out (as Kafka's controller answers)."""
        with kwire.Conn.to(self.bootstrap) as c:
            for v in (0, 1, 2):
                err, res = kwire.elect_leaders(c, v, 0, None)
                self.assertEqual(err, NONE)
                self.assertIn(self.topic, res, "v%d" % v)
                self.assertEqual(res[self.topic], {}, "v%d" % v)

    def test_reassign_to_self(self):
        before = self.partitions()
        with kwire.Conn.to(self.bootstrap) as c:
            for v in (0, 1):
                out = kwire.alter_partition_reassignments(
                    c, v, {self.topic: {0: [self.node], 2: [self.node]}})
                self.assertEqual((out["error"], out["message"]), (NONE, None))
                self.assertEqual(out["partitions"],
                                 {self.topic: {0: (NONE, None), 2: (NONE, None)}})
            out = kwire.alter_partition_reassignments(c, 1, {self.topic: {1: [self.node]}},
                                                      allow_rf_change=False)
            self.assertEqual(out["allow_rf_change"], False, "echoed")
            self.assertEqual(out["partitions"], {self.topic: {1: (NONE, None)}})
        self.assertEqual(self.partitions(), before, "a move to where it is changes nothing")

    def test_reassign_refused(self):
        with kwire.Conn.to(self.bootstrap) as c:
            out = kwire.alter_partition_reassignments(c, 0, {
                self.topic: {0: [999], 1: [self.node, self.node], 2: []},
                "no-such-topic": {0: [self.node]}})
            res = out["partitions"]
            self.assertEqual(out["error"], NONE)
            self.assertEqual(res[self.topic][0][0], INVALID_REPLICA_ASSIGNMENT)
            self.assertIn("999", res[self.topic][0][1])
            self.assertEqual(res[self.topic][1][0], INVALID_REPLICA_ASSIGNMENT)
            self.assertIn("Duplicate", res[self.topic][1][1])
            self.assertEqual(res[self.topic][2][0], INVALID_REPLICA_ASSIGNMENT)
            self.assertEqual(res["no-such-topic"][0][0], UNKNOWN_TOPIC_OR_PARTITION)

            out = kwire.alter_partition_reassignments(c, 0, {self.topic: {9: [self.node]}})
            self.assertEqual(out["partitions"][self.topic][9][0], UNKNOWN_TOPIC_OR_PARTITION)

    def test_cancel_without_reassignment(self):
        with kwire.Conn.to(self.bootstrap) as c:
            out = kwire.alter_partition_reassignments(c, 0, {self.topic: {0: None}})
        self.assertEqual(out["partitions"][self.topic][0][0], NO_REASSIGNMENT_IN_PROGRESS)

    def test_list_empty(self):
        with kwire.Conn.to(self.bootstrap) as c:
            kwire.alter_partition_reassignments(c, 0, {self.topic: {0: [self.node]}})
            self.assertEqual(kwire.list_partition_reassignments(c), (NONE, None, {}))
            self.assertEqual(kwire.list_partition_reassignments(
                c, {self.topic: [0, 1], "no-such-topic": [0]}), (NONE, None, {}))
            # the connection still serves after all of the above
            self.assertEqual(kwire.api_versions(c, 3)[0], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
