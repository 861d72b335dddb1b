"""`strata cluster reassign|reassignments|elect-leaders` (issue 26) against a real 3-broker
cluster (tests/integration/cluster.py, smp=1), checked with raw Metadata (kwire) and
confluent-kafka:

  - reassign --wait moves an RF=2 partition to another replica set: on return the controller's
    metadata has replicas == target and ISR == target, and every record produced before with
    acks=all is read back;
  - a move to a broker that is down stays in progress: `reassign --wait --timeout 3s` gives up
    at its deadline (exit 1), `cluster reassignments` lists it (adding and removing replicas),
    `reassign --cancel --wait` ends it with the old replicas;
  - after the preferred leader of a partition is stopped and restarted (leadership moved to
    the other replica), `elect-leaders --type preferred` moves it back (Metadata) and a second
    run says ELECTION_NOT_NEEDED, exit 0;
  - bad input (unknown topic or partition, bad --replicas, an unregistered broker, bad --type)
    gives a clear error and exit 1 (refused by the broker) or 2 (usage);
  - ElectLeaders and AlterPartitionReassignments sent (raw, kwire) to a broker that is not the
    controller are forwarded to it (KIP-590, as Kafka 4's brokers do): answered as the
    controller answers, never NOT_CONTROLLER, and the move they start completes.

auto.leader.rebalance.enable=false, so only the command moves a leadership back."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from cluster import ANY, Cluster  # noqa: E402
from harness import run_cmd  # noqa: E402

CLI = os.environ.get("STRATA_CLI")
QUORUM_TIMEOUT = 30.0
SETS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": 3000,
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    "default.replication.factor": 2,
    "group.initial.rebalance.delay.ms": 0,
}


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class CliClusterAdminTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3, sets=SETS, smp=1, name="cliadm")
        try:
            cls.c.start()
            cls.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[1, 2, 3])
        except BaseException:
            cls.c.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.c.stop_all()
        finally:
            cls.c.close()

    # ---- helpers ----

    def bootstrap(self):
        return ",".join(self.c.node(n).bootstrap for n in self.c.running())

    def cli(self, *args, rc=0, timeout="20s"):
        r = run_cmd([CLI, "cluster"] + list(args) + ["-b", self.bootstrap(), "--timeout", timeout],
                    timeout=60)
        if rc is not None:
            self.assertEqual(r.returncode, rc, "strata cluster %s:\n%s%s"
                             % (" ".join(args), r.stdout, r.stderr))
        return r

    def part(self, topic, nid=None, p=0):
        nid = nid or self.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=ANY)
        return self.c.metadata(nid, [topic])["topics"][topic]["partitions"][p]

    def wait_part(self, topic, pred, what, timeout=20.0):
        last = {}

        def cond():
            last["p"] = self.part(topic)
            return pred(last["p"])
        self.c.wait(cond, timeout, what, state=lambda: "last: %s" % last.get("p"))
        return last["p"]

    def create(self, topic, partitions=1):
        ctrl = self.c.wait_for_quorum(QUORUM_TIMEOUT)
        from confluent_kafka.admin import NewTopic
        a = kc.admin(self.c.node(ctrl).bootstrap)
        a.create_topics([NewTopic(topic, partitions, 2)], operation_timeout=15,
                        request_timeout=20)[topic].result(30)
        self.c.wait_topic_agreed(topic, partitions)
        return self.wait_part(topic, lambda p: sorted(p["isr"]) == sorted(p["replicas"])
                              and len(p["replicas"]) == 2 and p["leader"] >= 1,
                              "both replicas of %s in sync" % topic)

    # ---- tests ----

    def test_1_reassign_wait_keeps_records(self):
        topic = "cliadm-move-%d" % os.getpid()
        before = self.create(topic)
        old = before["replicas"]
        spare = ({1, 2, 3} - set(old)).pop()
        target = [spare, old[1]]                   # old[0] leaves, spare joins
        values = [b"m-%04d" % i for i in range(300)]
        p = kc.producer(self.bootstrap(), acks="all")
        kc.produce_all(p, topic, [{"value": v, "partition": 0} for v in values])

        r = self.cli("reassign", "--topic", topic, "--partition", "0", "--replicas",
                     ",".join(map(str, target)), "--wait", timeout="30s")
        self.assertIn("reassignment to [%d,%d] started" % tuple(target), r.stdout)
        self.assertIn("reassignment complete", r.stdout)
        now = self.part(topic)                     # the controller's view, right after
        self.assertEqual(now["replicas"], target, r.stdout)
        self.assertEqual(sorted(now["isr"]), sorted(target), r.stdout)
        self.assertIn(now["leader"], target)
        r = self.cli("reassignments")
        self.assertIn("no reassignment in progress", r.stdout)

        got = kc.consume_partitions(self.bootstrap(), topic, [0], len(values))
        self.assertEqual([m.value() for m in got], values)

    def test_2_elect_preferred_and_pending_move(self):
        topic = "cliadm-elect-%d" % os.getpid()
        before = self.create(topic)
        pref, other = before["replicas"]
        if before["leader"] != pref:               # start from the preferred leader
            self.cli("elect-leaders", "--topic", topic)
            self.wait_part(topic, lambda p: p["leader"] == pref, "%d leads" % pref)

        self.c.stop(pref)
        self.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=ANY)
        self.wait_part(topic, lambda p: p["leader"] == other, "%d leads after %d stopped"
                       % (other, pref))

        # A move onto the stopped broker cannot complete: listed, then cancelled.
        spare = ({1, 2, 3} - {pref, other}).pop()
        t0 = time.monotonic()
        r = self.cli("reassign", "--topic", topic, "--partition", "0", "--replicas",
                     "%d,%d" % (spare, pref), "--wait", rc=1, timeout="3s")
        took = time.monotonic() - t0
        self.assertIn("reassignment to [%d,%d] started" % (spare, pref), r.stdout)
        self.assertIn("moving: replicas", r.stdout)
        self.assertIn("did not complete within --timeout 3000ms", r.stderr)
        self.assertLess(took, 8.0, "the --timeout deadline holds")
        r = self.cli("reassignments", "--topic", topic)
        self.assertIn(topic, r.stdout)
        line = [x for x in r.stdout.splitlines() if x.startswith(topic)][0]
        self.assertIn("[%d]" % spare, line, r.stdout)      # ADDING: the live one is added
        self.assertIn("[%d]" % other, line, r.stdout)      # REMOVING
        r = self.cli("reassign", "--topic", topic, "--partition", "0", "--cancel", "--wait")
        self.assertIn("reassignment cancelled", r.stdout)
        self.assertIn("no longer in progress", r.stdout)
        self.assertEqual(sorted(self.part(topic)["replicas"]), sorted([pref, other]))
        r = self.cli("reassignments")
        self.assertIn("no reassignment in progress", r.stdout)

        self.c.start_node(pref)
        self.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[1, 2, 3])
        self.wait_part(topic, lambda p: pref in p["isr"], "%d back in the ISR" % pref)
        self.assertEqual(self.part(topic)["leader"], other, "no automatic rebalance")

        r = self.cli("elect-leaders", "--type", "preferred", "--topic", topic)
        self.assertIn("%s-0: elected (preferred)" % topic, r.stdout)
        self.wait_part(topic, lambda p: p["leader"] == pref, "%d leads again" % pref,
                       timeout=5.0)
        r = self.cli("elect-leaders", "--type", "preferred", "--topic", topic, "--partition", "0")
        self.assertIn("%s-0: ELECTION_NOT_NEEDED" % topic, r.stdout)
        r = self.cli("elect-leaders")             # every partition: none needs one
        self.assertNotIn("%s-0" % topic, r.stdout)

    def test_3_bad_input(self):
        topic = "cliadm-bad-%d" % os.getpid()
        self.create(topic)
        r = self.cli("reassign", "--topic", "no-such-topic", "--partition", "0", "--replicas",
                     "1,2", rc=1)
        self.assertIn("no topic 'no-such-topic'", r.stderr)
        r = self.cli("reassign", "--topic", topic, "--partition", "7", "--replicas", "1,2", rc=1)
        self.assertIn("has no partition 7", r.stderr)
        for bad in ("1,x", "1,,2", "", "1,1", "-1"):
            r = self.cli("reassign", "--topic", topic, "--partition", "0", "--replicas", bad,
                         rc=2)
            self.assertIn("bad --replicas", r.stderr)
        r = self.cli("reassign", "--topic", topic, "--partition", "0", "--replicas", "1,99", rc=1)
        self.assertIn("INVALID_REPLICA_ASSIGNMENT", r.stderr)
        self.assertIn("99 is not a registered broker", r.stderr)
        r = self.cli("reassign", "--topic", topic, "--partition", "0", rc=2)
        self.assertIn("--replicas or --cancel", r.stderr)
        r = self.cli("reassign", "--topic", topic, "--partition", "0", "--cancel", rc=1)
        self.assertIn("NO_REASSIGNMENT_IN_PROGRESS", r.stderr)
        r = self.cli("elect-leaders", "--topic", "no-such-topic", rc=1)
        self.assertIn("no topic 'no-such-topic'", r.stderr)
        r = self.cli("elect-leaders", "--topic", topic, "--partition", "9", rc=1)
        self.assertIn("%s-9: UNKNOWN_TOPIC_OR_PARTITION" % topic, r.stdout)
        r = self.cli("elect-leaders", "--type", "unclean", "--topic", topic)
        self.assertIn("%s-0: ELECTION_NOT_NEEDED" % topic, r.stdout)   # its leader is live
        r = self.cli("elect-leaders", "--type", "sideways", rc=2)
        self.assertIn("preferred or unclean", r.stderr)
        r = self.cli("elect-leaders", "--partition", "0", rc=2)
        self.assertIn("--partition needs --topic", r.stderr)

    def test_4_forwarded_from_a_non_controller(self):
        topic = "cliadm-fwd-%d" % os.getpid()
        before = self.create(topic)
        ctrl = self.c.wait_for_quorum(QUORUM_TIMEOUT)
        other = [n for n in self.c.running() if n != ctrl][0]
        with kwire.Conn.to(self.c.node(other).bootstrap) as conn:
            # its leader is live: the controller's answer is ELECTION_NOT_NEEDED (84)
            err, res = kwire.elect_leaders(conn, 2, 1, {topic: [0]})
            self.assertEqual(err, 0)
            self.assertEqual(res[topic][0][0], 84, "forwarded, not NOT_CONTROLLER (41): %s" % res)
            err, res = kwire.elect_leaders(conn, 2, 0, {topic: [5]})
            self.assertEqual(res[topic][5][0], 3, res)        # UNKNOWN_TOPIC_OR_PARTITION
            spare = ({1, 2, 3} - set(before["replicas"])).pop()
            target = [before["replicas"][0], spare]
            out = kwire.alter_partition_reassignments(conn, 0, {topic: {0: target}})
            self.assertEqual((out["error"], out["partitions"]), (0, {topic: {0: (0, None)}}), out)
        self.wait_part(topic, lambda p: p["replicas"] == target and sorted(p["isr"]) ==
                       sorted(target), "the forwarded move to %s completed" % target)


if __name__ == "__main__":
    harness.main()
