"""KIP-848 consumer group across a coordinator failover (issue 24): three brokers,
__consumer_offsets replicated on all three; two librdkafka consumers (group.protocol=consumer)
consuming; the broker coordinating the group is killed with SIGKILL. The group's records,
replicated with the offsets, are loaded by the partition's new leader: the group comes back
with the same group epoch, the same members at the same epochs and assignments, the consumers
go on without rejoining, and nothing committed before is read again.

Needs a librdkafka >= 2.4 (see test_consumer_groups.py); skipped without one."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import wait_until  # noqa: E402
from kwire import TAGS_NONE, compact_string, i8  # noqa: E402
from test_consumer_groups import Worker, coordinator_conn, describe, rdkafka_lib  # noqa: E402

SETS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": 3000,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "auto.leader.rebalance.enable": "false",
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 300,
}


def find_coordinator(bootstrap, group):
    """(node id, host:port) of the group's coordinator, or None while there is none."""
    with coordinator_conn(bootstrap) as c:
        r = c.request(10, 3, compact_string(group) + i8(0) + TAGS_NONE, flexible=True)
        r.i32()
        err = r.i16()
        r.compact_string()
        node, host, port = r.i32(), r.compact_string(), r.i32()
        return None if err else (node, "%s:%d" % (host, port))


class FailoverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = rdkafka_lib()
        if not cls.lib:
            raise unittest.SkipTest("no librdkafka >= 2.4 (KIP-848) found")
        harness.need_server_binary()
        from cluster import Cluster
        cls.cluster = Cluster(3, sets=SETS, name="cgfo")
        try:
            cls.cluster.start()
            cls.cluster.wait_for_quorum(30)
        except BaseException:
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.cluster.stop_all()
        finally:
            cls.cluster.close()

    def test_coordinator_killed(self):
        from test_cluster import create_topics
        c = self.cluster
        tag = "%d" % os.getpid()
        topic, group = "fo-" + tag, "fog-" + tag
        everyone = ",".join(c.node(n).bootstrap for n in c.nodes)
        ctrl = c.wait_for_quorum(30)
        create_topics(c.node(ctrl).bootstrap, [topic], partitions=4, rf=3)
        c.wait_topic_agreed(topic, 4)
        p = kc.producer(everyone, acks="all")
        for i in range(40):
            p.produce(topic, value=b"%d" % i, partition=i % 4)
        p.flush(30)
        ws = [Worker(self.lib, everyone, group, topic) for _ in range(2)]
        try:
            wait_until(lambda: sum(len(w.msgs()) for w in ws) == 40, 60, "40 records consumed")
            coord = None

            def stable():
                nonlocal coord
                coord = find_coordinator(c.node(ctrl).bootstrap, group)
                return coord and describe_at(coord[1])["state"] == "Stable"

            def describe_at(hp):
                with coordinator_conn(hp) as conn:
                    return describe(conn, group)
            wait_until(stable, 30, "a stable group")
            before = describe_at(coord[1])
            c.kill9(coord[0])
            live = [n for n in c.nodes if n != coord[0]]

            def moved():
                nonlocal coord
                for n in live:
                    try:
                        coord = find_coordinator(c.node(n).bootstrap, group)
                    except OSError:
                        continue
                    if coord and coord[0] != before_node:
                        return describe_at(coord[1])["error"] == 0
                return False
            before_node = coord[0]
            wait_until(moved, 60, "a new coordinator serving the group")
            after = describe_at(coord[1])
            self.assertEqual(after["group_epoch"], before["group_epoch"])
            key = lambda d: {m["member_id"]: (m["epoch"], m["assignment"])  # noqa: E731
                             for m in d["members"]}
            self.assertEqual(key(after), key(before))
            alive = ",".join(c.node(n).bootstrap for n in live)
            p2 = kc.producer(alive, acks="all")
            for i in range(20):
                p2.produce(topic, value=b"n%d" % i, partition=i % 4)
            p2.flush(30)
            wait_until(lambda: sum(len(w.msgs()) for w in ws) == 60, 60,
                       "the records produced after the failover consumed")
            got = [(m["p"], m["o"]) for w in ws for m in w.msgs()]
            self.assertEqual(len(got), len(set(got)), "a record consumed twice")
            self.assertEqual(describe_at(coord[1])["group_epoch"], before["group_epoch"],
                             "no member had to rejoin")
        finally:
            for w in ws:
                w.quit()
            for n in c.nodes:
                if not c.node(n).alive():
                    c.restart(n)


if __name__ == "__main__":
    if not rdkafka_lib():
        # the only test needs it: CTest's skip (77) rather than a run of no test
        print("skipped: no librdkafka >= 2.4 (KIP-848) found", flush=True)
        sys.exit(77)
    harness.main()
