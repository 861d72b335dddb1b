"""A cluster of three real strata-server processes (issue 12, "Done means").

  ColdStartTest       the quorum forms from a cold start in two start orders; a lone voter
                      says it waits for its quorum
  FailoverTest        kill -9 the active controller: another is elected and CreateTopics
                      works within seconds; the restarted node catches up
  ClientsTest         an RF=3 topic created by each client family (confluent-kafka,
                      kafka-python, KafkaJS, @platformatic/kafka), Metadata from every broker
                      agreeing; produce and consume through librdkafka with one bootstrap broker
  FencingTest         SIGSTOP a broker that leads partitions: fenced after the session timeout,
                      its leaderships moved (leader epoch bumped); SIGCONT: unfenced
  SnapshotTest        metadata snapshots are taken and a node restarted after its log was
                      compacted catches up

Elections use 500 ms timeouts so the whole file runs in well under two minutes. Every wait is
bounded and fails with the last state seen and the tail of each node's log.
"""

import json
import os
import re
import shutil
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from cluster import ANY, Cluster  # noqa: E402
from harness import run_cmd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "js")
QUORUM_TIMEOUT = 30.0      # a cold cluster under sanitizers on two cores
FAILOVER_BOUND = 10.0      # kill -9 of the controller -> a topic created through a survivor


def unique(what):
    return "c-%s-%d-%d" % (what, os.getpid(), time.monotonic_ns() % 10**9)


def create_topics(bootstrap, names, partitions=1, rf=1, timeout=30.0, one_per_request=False):
    """Create topics with confluent-kafka's AdminClient through `bootstrap`, retrying
    retriable errors (a controller change) until `timeout`. TOPIC_ALREADY_EXISTS after a
    retried attempt counts as done (the first attempt may have committed)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic
    a = kc.admin(bootstrap)
    deadline = time.monotonic() + timeout
    left, attempt = list(names), 0
    while left:
        attempt += 1
        if one_per_request:
            fs = {}
            for n in left:
                fs.update(a.create_topics([NewTopic(n, partitions, rf)], operation_timeout=15,
                                          request_timeout=20))
        else:
            fs = a.create_topics([NewTopic(n, partitions, rf) for n in left],
                                 operation_timeout=15, request_timeout=20)
        retry = []
        for n, f in fs.items():
            try:
                f.result(timeout=max(1.0, deadline - time.monotonic()) + 5)
            except KafkaException as e:
                err = e.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 1:
                    continue
                if not err.retriable() or time.monotonic() >= deadline:
                    raise AssertionError("CreateTopics %s through %s: %s (attempt %d)"
                                         % (n, bootstrap, err, attempt))
                retry.append(n)
        left = retry
        if left:
            time.sleep(0.2)     # back off before retrying a retriable error
    return a


class ClusterCase(unittest.TestCase):
    """A test that makes its own clusters: each is stopped (clean exits asserted) and
    removed at the end of the test."""

    def make(self, n=3, **kw):
        harness.need_server_binary()
        c = Cluster(n, name=self._testMethodName[5:20].replace("_", "-"), **kw)
        self.addCleanup(c.close)
        self.addCleanup(lambda: c.stop_all() if c.running() else None)
        return c

    def check_topic(self, c, name, partitions, rf, nodes=None, spread=True):
        """Every node (default: every running one) reports topic `name` alike; its partitions
        have `rf` distinct replicas among the brokers, a leader in the ISR, the ISR within the
        replicas, no offline replica; with `spread`, leaders and replicas are spread evenly.
        Returns {index: partition}."""
        parts = c.wait_topic_agreed(name, partitions, nodes)
        brokers = set(c.metadata((nodes or c.running())[0])["brokers"])
        leaders, replica_count = {}, {}
        for i, p in sorted(parts.items()):
            where = "%s[%d]: %s" % (name, i, p)
            self.assertEqual(len(p["replicas"]), rf, where)
            self.assertEqual(len(set(p["replicas"])), rf, "a replica twice: " + where)
            self.assertLessEqual(set(p["replicas"]), brokers, where)
            self.assertIn(p["leader"], p["replicas"], where)
            self.assertIn(p["leader"], p["isr"], where)
            self.assertLessEqual(set(p["isr"]), set(p["replicas"]), where)
            self.assertEqual(p["offline"], [], where)
            self.assertGreaterEqual(p["leader_epoch"], 0, where)
            leaders[p["leader"]] = leaders.get(p["leader"], 0) + 1
            for r in p["replicas"]:
                replica_count[r] = replica_count.get(r, 0) + 1
        if spread and partitions % len(brokers) == 0:
            each = partitions // len(brokers)
            self.assertEqual(leaders, {b: each for b in brokers},
                             "leaders of %s not spread evenly over %s: %s"
                             % (name, sorted(brokers), parts))
            self.assertEqual(replica_count, {b: each * rf for b in brokers},
                             "replicas of %s not spread evenly: %s" % (name, parts))
        return parts


class ColdStartTest(ClusterCase):
    """(a) The cluster forms from a cold start whatever the order the nodes come up in."""

    def formed(self, order):
        c = self.make()
        t0 = time.monotonic()
        c.start(order=order)
        ctrl = c.wait_for_quorum(QUORUM_TIMEOUT)
        print("order %s: controller %d after %.1fs" % (order, ctrl, time.monotonic() - t0))
        for n in c.nodes:
            md = c.metadata(n)
            self.assertEqual(sorted(md["brokers"]), [1, 2, 3], md)
            for b, (host, port, _rack) in md["brokers"].items():
                self.assertEqual((host, port), ("127.0.0.1", c.node(b).kafka_port), md)
            dc = c.describe_cluster(n)
            self.assertEqual(dc["error"], 0, dc)
            self.assertEqual(dc["controller_id"], ctrl, "DescribeCluster from %d: %s" % (n, dc))
            self.assertEqual(sorted(dc["brokers"]), [1, 2, 3], dc)
            self.assertFalse(any(b["fenced"] for b in dc["brokers"].values()), dc)
        ids = {n: c.metadata(n)["cluster_id"] for n in c.nodes}
        self.assertEqual(len(set(ids.values())), 1, "the nodes disagree on the cluster id: %s"
                         % ids)
        for n in c.nodes:       # the admin API (strata cluster info, dashboards) says the same
            adm = c.admin_get(n, "/v1/cluster")
            self.assertEqual((adm["cluster_id"], adm["controller_id"]), (ids[n], ctrl),
                             "node %d's /v1/cluster: %s" % (n, adm))
        c.stop_all()

    def test_start_order_1_2_3(self):
        self.formed([1, 2, 3])

    def test_start_order_3_1_2(self):
        self.formed([3, 1, 2])

    def test_broker_only_node_follows(self):
        """A fourth node with process.roles=broker joins as a broker without a vote: it lists
        and is listed by everyone, never becomes the controller, and an admin request sent to
        it is carried out by the controller."""
        c = self.make(broker_only=1)
        c.start()
        ctrl = c.wait_for_quorum(QUORUM_TIMEOUT)
        self.assertIn(ctrl, (1, 2, 3))
        name = unique("via-broker4")
        create_topics(c.node(4).bootstrap, [name], partitions=4)
        self.check_topic(c, name, 4, 1)
        self.assertEqual(c.admin_get(4, "/v1/cluster")["controller_id"], ctrl)
        c.stop_all()

    def test_lone_voter_says_it_waits_for_quorum(self):
        """A voter whose peers are not up yet logs that it waits for its quorum (rather than
        nothing); once they come, the quorum forms with it."""
        c = self.make()
        h = c.spawn(2)
        node = c.node(2)
        c.wait(lambda: "quorum" in node.server.stderr_text().lower() or not h["thread"].is_alive()
               and not node.alive(), 10, "node 2 alone to log a line about its quorum")
        self.assertTrue(node.alive(), node.tail())
        c.start(order=[1, 3])
        c.join([h])
        c.wait_for_quorum(QUORUM_TIMEOUT)


class FailoverTest(ClusterCase):
    """(b) kill -9 the active controller: a new one serves admin requests within seconds;
    the crashed node, restarted, catches up with what changed while it was down."""

    def test_controller_killed_and_restarted(self):
        c = self.make()
        c.start()
        old = c.wait_for_quorum(QUORUM_TIMEOUT)
        survivors = [n for n in c.nodes if n != old]
        before = unique("before")
        create_topics(c.node(survivors[0]).bootstrap, [before], partitions=3)
        self.check_topic(c, before, 3, 1)

        t0 = time.monotonic()
        c.kill9(old)
        new = c.wait_for_quorum(FAILOVER_BOUND, nodes=survivors, brokers=ANY,
                                not_controller=old)
        elected = time.monotonic() - t0
        during = unique("during")
        create_topics(c.node(survivors[1]).bootstrap, [during], partitions=3,
                      timeout=max(1.0, FAILOVER_BOUND - elected))
        created = time.monotonic() - t0
        print("controller %d killed: %d elected after %.1fs, topic created after %.1fs"
              % (old, new, elected, created))
        self.assertLess(created, FAILOVER_BOUND + 5)
        for n in survivors:
            self.assertEqual(c.describe_cluster(n)["controller_id"], new)
        c.wait_topic_agreed(during, 3, survivors)

        c.start_node(old)
        back = c.wait_for_quorum(QUORUM_TIMEOUT)
        print("node %d back; controller %d%s" % (old, back, "" if back == new else
                                                 " (moved again when it came back)"))
        for t in (before, during):
            c.wait_topic_agreed(t, 3, list(c.nodes))
        md = c.metadata(old)
        self.assertIn(during, md["topics"], "node %d did not catch up" % old)


class ClientsTest(ClusterCase):
    """(c) An RF=3 topic from each client family, each through a different bootstrap broker;
    every broker's Metadata agrees. (f) librdkafka produces to and consumes from leaders on
    every broker, given one bootstrap broker."""

    cluster = None

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        cls.cluster = Cluster(3, name="clients")
        try:
            cls.cluster.start()
            cls.cluster.wait_for_quorum(QUORUM_TIMEOUT)
        except BaseException:
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.cluster.stop_all()
        finally:
            cls.cluster.close()

    def setUp(self):
        down = [n for n in self.cluster.nodes if not self.cluster.node(n).alive()]
        if down:
            self.fail("nodes %s are down\n%s" % (down, self.cluster.logs()))

    def bootstrap(self, nid):
        return self.cluster.node(nid).bootstrap

    # ---- (c) one RF=3 topic per client family -----------------------------------------------

    def test_create_rf3_confluent(self):
        name = unique("rf3-confluent")
        create_topics(self.bootstrap(1), [name], partitions=3, rf=3)
        self.check_topic(self.cluster, name, 3, 3)

    def test_create_rf3_kafka_python(self):
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        name = unique("rf3-kpy")
        a = KafkaAdminClient(bootstrap_servers=self.bootstrap(2), request_timeout_ms=20000,
                             client_id="strata-it-cluster")
        try:
            resp = a.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)],
                                   timeout_ms=15000)
        finally:
            a.close()
        # kafka-python raises on an error code; check the answer all the same.
        errs = [tuple(t[:2]) for t in resp.topic_errors]
        self.assertEqual(errs, [(name, 0)], "CreateTopics answer: %s" % (resp,))
        self.check_topic(self.cluster, name, 3, 3)

    def js_create(self, family, nid):
        if not shutil.which("node"):
            self.skipTest("node is not installed (scripts/deps.sh test installs it)")
        mod = "kafkajs" if family == "kafkajs" else os.path.join("@platformatic", "kafka")
        if not os.path.isdir(os.path.join(JS, "node_modules", mod)):
            self.skipTest("%s is not installed in tests/integration/js (scripts/deps.sh test)"
                          % mod)
        name = unique("rf3-" + family)
        r = run_cmd(["node", os.path.join(JS, "cluster_admin.mjs"), family, self.bootstrap(nid),
                     name, "3", "3"], timeout=90, cwd=JS)
        self.assertEqual(r.returncode, 0, "%s createTopics through node %d failed:\n%s\n%s\n%s"
                         % (family, nid, r.stdout, r.stderr[-3000:], self.cluster.logs(15)))
        seen = json.loads(r.stdout.strip().splitlines()[-1])
        parts = self.check_topic(self.cluster, name, 3, 3)
        self.assertEqual(len(seen["partitions"]), 3, seen)
        for p in seen["partitions"]:
            self.assertEqual(sorted(p["replicas"]), sorted(parts[p["partition"]]["replicas"]),
                             "%s sees %s" % (family, seen))

    def test_create_rf3_kafkajs(self):
        self.js_create("kafkajs", 3)

    def test_create_rf3_platformatic(self):
        self.js_create("platformatic", 2)

    # ---- (f) produce and consume through librdkafka --------------------------------------

    def produce_consume(self, rf, bootstrap_node):
        c = self.cluster
        name = unique("pc-rf%d" % rf)
        create_topics(self.bootstrap(bootstrap_node), [name], partitions=3, rf=rf)
        parts = self.check_topic(c, name, 3, rf)
        self.assertEqual({p["leader"] for p in parts.values()}, {1, 2, 3},
                         "want a leader on every broker: %s" % parts)
        bs = self.bootstrap(bootstrap_node)
        p = kc.producer(bs, message_timeout_ms=30000)
        msgs = [{"key": b"k%d" % i, "value": b"v%d-%d" % (rf, i), "partition": i % 3}
                for i in range(300)]
        reports = kc.produce_all(p, name, msgs, timeout=45)
        for m, part, off in reports:
            self.assertEqual(part, m["partition"])
        got = kc.consume_partitions(bs, name, [0, 1, 2], len(msgs), timeout=30)
        byp = kc.by_partition(got)
        for part in range(3):
            want = [m["value"] for m in msgs if m["partition"] == part]
            self.assertEqual([m.value() for m in byp.get(part, [])], want,
                             "partition %d (leader %d)" % (part, parts[part]["leader"]))
        kc.assert_contiguous_from(self, got)
        # each leader reports its partitions' replication: the ISR, not under-replicated, and
        # its followers' lag (the admin API's Prometheus text)
        for part, pm in parts.items():
            node = c.node(pm["leader"])
            url = "http://%s:%d/metrics" % (node.host, node.admin_port)
            lab = '{topic="%s",partition="%d"}' % (name, part)
            rows = []

            def published():
                # the shards publish what the admin API shows about once a second
                with urllib.request.urlopen(url, timeout=5) as r:
                    rows[:] = [ln for ln in r.read().decode().splitlines() if lab in ln]
                return any(ln.startswith("strata_partition_in_sync_replicas") for ln in rows)

            c.wait(published, 10, "%s-%d's replication metrics on node %d"
                   % (name, part, pm["leader"]), lambda: repr(rows))
            self.assertIn("strata_partition_in_sync_replicas%s %d" % (lab, rf), rows)
            self.assertIn("strata_partition_under_replicated%s 0" % lab, rows)
            self.assertTrue(any(re.fullmatch(r"strata_partition_max_follower_lag_offsets%s -?\d+"
                                             % re.escape(lab), ln) for ln in rows), rows)

    def test_produce_consume_rf1(self):
        self.produce_consume(1, 1)

    def test_produce_consume_rf3(self):
        self.produce_consume(3, 2)


class FencingTest(ClusterCase):
    """(d) A broker that stops heartbeating (SIGSTOP) is fenced once its session times out:
    every partition it led gets a new leader from the ISR with the leader epoch bumped, and it
    leaves the brokers list and the ISRs; SIGCONT: it re-registers and is unfenced."""

    SESSION_MS = 3000

    def test_sigstop_fences_sigcont_unfences(self):
        c = self.make(sets={"broker.session.timeout.ms": self.SESSION_MS,
                            "broker.heartbeat.interval.ms": 250})
        c.start()
        ctrl = c.wait_for_quorum(QUORUM_TIMEOUT)
        name = unique("fence")
        create_topics(c.node(ctrl).bootstrap, [name], partitions=6, rf=3)
        before = self.check_topic(c, name, 6, 3)
        victim = next((n for n in c.nodes if n != ctrl
                       and any(p["leader"] == n for p in before.values())), None)
        self.assertIsNotNone(victim, "no broker but the controller leads a partition: %s"
                             % before)
        led = {i: p for i, p in before.items() if p["leader"] == victim}
        others = [n for n in c.nodes if n != victim]

        t0 = time.monotonic()
        c.sigstop(victim)
        last = {}

        def fenced():
            last.clear()
            for n in others:
                md = c.metadata(n, [name])
                parts = md["topics"][name]["partitions"]
                last[n] = (sorted(md["brokers"]), parts)
                if victim in md["brokers"]:
                    return False
                for i, p in parts.items():
                    if victim in p["isr"]:
                        return False
                    if i in led and not (p["leader"] >= 0 and p["leader"] != victim
                                         and p["leader_epoch"] > led[i]["leader_epoch"]):
                        return False
            return True

        c.wait(fenced, self.SESSION_MS / 1000 + 6, "broker %d fenced and its leaderships "
               "(partitions %s) moved with a new leader epoch" % (victim, sorted(led)),
               state=lambda: "last seen (brokers, partitions) per node: %s" % last)
        print("broker %d fenced after %.1fs" % (victim, time.monotonic() - t0))
        after = c.wait_topic_agreed(name, 6, others)
        for i, p in after.items():
            self.assertIn(p["leader"], others, p)
            self.assertIn(p["leader"], p["isr"], p)
        for n in others:
            dc = c.describe_cluster(n, include_fenced=True)
            self.assertEqual(dc["controller_id"], ctrl, dc)
            self.assertIn(victim, dc["brokers"], "DescribeCluster v2 with fenced brokers: %s"
                          % dc)
            self.assertTrue(dc["brokers"][victim]["fenced"], dc)

        t1 = time.monotonic()
        c.sigcont(victim)
        c.wait_for_quorum(10.0)      # every node lists all three brokers again
        print("broker %d unfenced %.1fs after SIGCONT" % (victim, time.monotonic() - t1))
        for n in c.nodes:
            dc = c.describe_cluster(n, include_fenced=True)
            self.assertFalse(dc["brokers"][victim]["fenced"], dc)


class SnapshotTest(ClusterCase):
    """(e) With a snapshot every 64 metadata entries, 100 topics make every node snapshot;
    a node stopped while 100 more are created catches up when it comes back (from its own
    snapshot plus what the leader sends)."""

    def wait_topics(self, c, nid, names, timeout=45.0):
        want = set(names)
        last = {}

        def seen():
            have = set(c.metadata(nid)["topics"])
            last["missing"] = sorted(want - have)
            return not last["missing"]

        c.wait(seen, timeout, "node %d to show all %d topics" % (nid, len(want)),
               state=lambda: "missing %d: %s..." % (len(last.get("missing", [])),
                                                   last.get("missing", [])[:5]))

    def snapshots(self, c, nid):
        d = c.node(nid).metadata_dir
        return sorted(f for f in os.listdir(d) if f.startswith("snapshot-")) \
            if os.path.isdir(d) else []

    def test_restart_after_log_compaction(self):
        c = self.make(sets={"metadata.log.snapshot.entries": 64})
        c.start()
        ctrl = c.wait_for_quorum(QUORUM_TIMEOUT)
        first = [unique("s1-%03d" % i) for i in range(100)]
        create_topics(c.node(ctrl).bootstrap, first, one_per_request=True, timeout=60)
        for n in c.nodes:
            self.wait_topics(c, n, first)
        for n in c.nodes:
            c.wait(lambda: self.snapshots(c, n), 20,
                   "a snapshot-* file in node %d's %s" % (n, c.node(n).metadata_dir),
                   state=lambda: "files: %s" % (os.listdir(c.node(n).metadata_dir)
                                                if os.path.isdir(c.node(n).metadata_dir)
                                                else "no such directory"))

        victim = next(n for n in c.nodes if n != ctrl)
        c.stop(victim)
        second = [unique("s2-%03d" % i) for i in range(100)]
        others = [n for n in c.nodes if n != victim]
        create_topics(c.node(others[0]).bootstrap, second, one_per_request=True, timeout=60)
        for n in others:
            self.wait_topics(c, n, second)

        c.start_node(victim)
        self.wait_topics(c, victim, first + second)
        c.wait_for_quorum(QUORUM_TIMEOUT)
        ref = c.metadata(others[0])["topics"]
        mine = c.metadata(victim)["topics"]
        for t in first + second:
            self.assertEqual(mine[t]["topic_id"], ref[t]["topic_id"], t)
            self.assertEqual(mine[t]["partitions"], ref[t]["partitions"], t)
        self.assertTrue(self.snapshots(c, victim))


if __name__ == "__main__":
    harness.main()
