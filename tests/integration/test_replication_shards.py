"""Replication on brokers with several shards (issue 23): one follower fetcher per shard.

Three real strata-server processes, `--smp 2` each, a topic of 12 partitions with RF=3 and
min.insync.replicas=2 (every broker follows partitions on both of its shards from both other
brokers). Checks:

  - every acks=all record produced (librdkafka, to every partition) is acknowledged, and each
    partition's log reads back the same from every broker's copy once it leads: after the
    produce, the preferred leaders are killed one at a time (kill -9) so that each other broker
    leads some of the partitions, and a consumer reads every record back in order;
  - the follower connections are one per (leader broker, local shard): a broker holds, to each
    other broker's Kafka port, exactly as many established connections as there are distinct
    shards among the partitions it follows from that broker (read from /proc: the process's
    sockets and their peers), while no transaction marker ever made the inter-broker client
    connect;
  - the ISR stays full throughout the produce (no follower fell behind for lack of a fetcher).

Every wait is bounded; the brokers are stopped (clean exit asserted) at the end.
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from cluster import Cluster  # noqa: E402

PARTITIONS = 12
RECORDS = 1200
QUORUM_TIMEOUT = 30.0


def socket_peers(pid):
    """The remote (ip, port) of every established TCP socket of process pid."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    peers = []
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[3] != "01" or cols[9] not in inodes:  # 01: ESTABLISHED
                continue
            port = int(cols[2].split(":")[1], 16)
            peers.append(port)
    return peers


class ShardedReplicationTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        cls.c = Cluster(3, smp=2, name="repl-shards",
                        sets={"broker.session.timeout.ms": 3000,
                              "broker.heartbeat.interval.ms": 250,
                              "controller.quorum.election.timeout.ms": 500})
        try:
            cls.c.start()
            cls.c.wait_for_quorum(QUORUM_TIMEOUT)
        except BaseException:
            cls.c.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.c.running():
                cls.c.stop_all()
        finally:
            cls.c.close()

    def bootstrap(self):
        return ",".join(self.c.node(n).bootstrap for n in self.c.running())

    def partitions(self, nid, topic):
        doc = self.c.admin_get(nid, "/v1/partitions?topic=" + topic)
        return {p["partition"]: p for p in doc["partitions"] if p["topic"] == topic}

    def isr_full(self, topic):
        for nid in self.c.running():
            v = self.c.topic_views(topic, [nid])[nid]
            if v is None:
                return False
            for p in v["partitions"].values():
                if len(p["isr"]) != 3:
                    return False
        return True

    def test_sharded_followers(self):
        from confluent_kafka.admin import NewTopic
        c = self.c
        topic = "shards-%d" % os.getpid()
        a = kc.admin(self.bootstrap())
        fs = a.create_topics([NewTopic(topic, PARTITIONS, 3,
                                       config={"min.insync.replicas": "2"})],
                             operation_timeout=15, request_timeout=20)
        for f in fs.values():
            f.result(timeout=30)
        c.wait_topic_agreed(topic, PARTITIONS)
        c.wait(lambda: self.isr_full(topic), 30, "%s's ISRs full on every broker" % topic)
        # every broker follows, on each of its two shards, partitions of each other broker
        shard_of = {}
        for nid in c.nodes:
            parts = {}
            # the shards publish what the admin API shows about once a second

            def listed():
                parts.clear()
                parts.update(self.partitions(nid, topic))
                return len(parts) == PARTITIONS

            c.wait(listed, 15, "node %d's admin API to list %s's partitions" % (nid, topic),
                   lambda: repr(parts))
            shard_of[nid] = {i: p["shard"] for i, p in parts.items()}
            self.assertEqual(set(shard_of[nid].values()), {0, 1},
                             "node %d's partitions not on both shards: %s" % (nid, parts))
        p = kc.producer(self.bootstrap(), message_timeout_ms=60000, acks="all")
        msgs = [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % PARTITIONS}
                for i in range(RECORDS)]
        reports = kc.produce_all(p, topic, msgs, timeout=90)
        self.assertEqual(len(reports), RECORDS)
        self.assertTrue(self.isr_full(topic), "an ISR shrank during the produce: %s"
                        % c.topic_views(topic))

        # the follower connections: one per (leader, local shard followed from it)
        views = c.topic_views(topic)
        for nid in c.nodes:
            want = {}
            for i, pm in views[nid]["partitions"].items():
                if pm["leader"] != nid and nid in pm["replicas"]:
                    want.setdefault(pm["leader"], set()).add(shard_of[nid][i])
            peers = []

            def settled():
                peers[:] = socket_peers(c.node(nid).pid)
                return all(peers.count(c.node(l).kafka_port) == len(s) for l, s in want.items())

            c.wait(settled, 15, "node %d: one follower connection per (leader, shard) %s"
                   % (nid, want), lambda: "peer ports %s, leaders' ports %s"
                   % (sorted(peers), {l: c.node(l).kafka_port for l in want}))
            self.assertTrue(any(len(s) == 2 for s in want.values()),
                            "node %d follows no leader on both shards: %s" % (nid, want))

        # each broker's copy serves the records once it leads: kill -9 the leaders in turn
        got_before = kc.consume_partitions(self.bootstrap(), topic, list(range(PARTITIONS)),
                                           RECORDS, timeout=60)
        self.assertEqual(sorted(m.value() for m in got_before),
                         sorted(m["value"] for m in msgs))
        for victim in (1, 2):
            c.kill9(victim)
            c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[n for n in c.nodes if n != victim])

            def moved():
                v = c.topic_views(topic, [n for n in c.running()])
                return all(nv is not None and all(pm["leader"] not in (victim, -1)
                                                  for pm in nv["partitions"].values())
                           for nv in v.values())

            c.wait(moved, 30, "every partition led by a broker other than %d" % victim)
            got = kc.consume_partitions(",".join(c.node(n).bootstrap for n in c.running()),
                                        topic, list(range(PARTITIONS)), RECORDS, timeout=60)
            byp = kc.by_partition(got)
            for part in range(PARTITIONS):
                want_vals = [m["value"] for m in msgs if m["partition"] == part]
                self.assertEqual([m.value() for m in byp.get(part, [])], want_vals,
                                 "partition %d after node %d died" % (part, victim))
            c.start_node(victim)
            c.wait_for_quorum(QUORUM_TIMEOUT)
            c.wait(lambda: self.isr_full(topic), 45, "%s's ISRs full again after node %d "
                   "came back" % (topic, victim))


if __name__ == "__main__":
    harness.main()
