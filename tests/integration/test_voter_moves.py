"""Voters named by host name move to new addresses, as pods and containers do (issue 25).

Three voters and a broker-only node name the voters by host name in controller.quorum.voters
(b1..b3.strata.test). The names resolve through a hosts file the test owns: every broker runs
in a mount namespace of its own (unshare) where that file is bound over /etc/hosts, so a
rewrite of the file is what every broker's resolver sees next, like a DNS record that changed.
Each broker binds its own loopback address (127.0.0.1N).

The voters are moved one at a time, a rolling restart where each comes back at a new address
(127.0.0.2N), the way a restarted pod or container does. The brokers that kept running held
the old addresses: the broker-only node (4) was never restarted, so after the third move every
voter address it resolved at start is gone. What must hold afterwards:

  - every broker keeps reaching the active controller with its heartbeats, whichever voter it
    is: no broker is fenced over two session timeouts (the controller fences a broker it has
    not heard from for broker.session.timeout.ms), and broker 4 logs each voter's new address;
  - the quorum still elects: kill -9 the active controller, and the two voters left elect one
    of themselves (they reach each other at the new addresses) that every survivor agrees on,
    with no survivor fenced;
  - records produced with acks=all to a partition the broker-only node leads (an explicit
    replica assignment naming it first), replicated on the two voters left, are acknowledged.

Before the quorum forms, voter 1 alone serves Kafka but is not ready (/v1/status/ready answers
503, "not registered with the controller yet"): readiness in a cluster means registered and
unfenced, Kafka's RUNNING, so a rolling restart waits for it.

It starts with voter 3's name missing from the file (its pod not scheduled yet): the others
start and elect with two voters, and 3 joins once its name appears.

Before the fix the heartbeats' UDP addresses were resolved once at start: broker 4 ended up
fenced (its heartbeats went to addresses nobody held), and a broker exited at start when a
voter's name did not resolve yet.

Needs mount namespaces (unshare --mount, bind mounts; root in CI): skipped (exit 77) where the
probe cannot make one.
"""

import json
import os
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from cluster import ANY, Cluster  # noqa: E402

SESSION_MS = 3000
HEARTBEAT_MS = 250
VOTERS = 3
WRAP = 'mount --bind "$0" /etc/hosts && exec "$@"'


def name_of(nid):
    return "b%d.strata.test" % nid


def ready(node):
    """(HTTP status, JSON body) of node's /v1/status/ready."""
    url = "http://%s:%d/v1/status/ready" % (node.host, node.admin_port)
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def can_unshare(hosts):
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount --bind "$0" /etc/hosts && getent hosts %s' % name_of(1), hosts],
                       capture_output=True, timeout=10)
    return p.returncode == 0, p.stderr.decode(errors="replace")[-300:]


class VoterMovesTest(unittest.TestCase):

    def setUp(self):
        self.c = Cluster(VOTERS, broker_only=1, name="moves", sets={
            "broker.session.timeout.ms": SESSION_MS,
            "broker.heartbeat.interval.ms": HEARTBEAT_MS})
        self.hosts = os.path.join(self.c.nodes[1].server.tmp, "hosts")
        self.addr = {nid: "127.0.0.%d" % (10 + nid) for nid in self.c.nodes}
        self.unnamed = set()
        self.write_hosts()
        ok, why = can_unshare(self.hosts)
        if not ok:
            self.c.close()
            raise unittest.SkipTest("no mount namespace here: " + why)
        voters = ",".join("%d@%s:%d" % (v, name_of(v), self.c.nodes[v].controller_port)
                          for v in self.c.voters)
        for nid, node in self.c.nodes.items():
            node.server.sets["controller.quorum.voters"] = voters
            self.place(nid)
            orig = node.server.command
            node.server.command = (lambda orig=orig: ["unshare", "--mount", "--propagation",
                                                      "private", "sh", "-c", WRAP,
                                                      self.hosts] + orig())

    def tearDown(self):
        self.c.close()

    def write_hosts(self):
        # rewritten in place (same inode): the bind mounts see the new text
        with open(self.hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for nid, a in sorted(self.addr.items()):
                if nid not in self.unnamed:
                    f.write("%s %s\n" % (a, name_of(nid)))

    def place(self, nid):
        """Node nid listens on (and advertises) its address in self.addr."""
        node, a = self.c.nodes[nid], self.addr[nid]
        node.host = node.server.host = a
        node.server.sets["listeners"] = "PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (
            a, node.kafka_port, a, node.controller_port)
        node.server.sets["advertised.listeners"] = "PLAINTEXT://%s:%d" % (a, node.kafka_port)

    def fenced(self, via):
        """Ids of the brokers node `via` lists fenced, and every id it lists."""
        brokers = self.c.describe_cluster(via)["brokers"]
        return ({b for b, v in brokers.items() if v["fenced"]}, set(brokers))

    def wait_all_unfenced(self, nodes, timeout=30):
        last = {}

        def cond():
            ctrl = self.c.controller_id()
            if ctrl is None or ctrl not in nodes:
                return False
            fenced, listed = self.fenced(ctrl)
            last.update(controller=ctrl, fenced=sorted(fenced), listed=sorted(listed))
            return not fenced and set(nodes) <= listed
        self.c.wait(cond, timeout, "every broker of %s registered and unfenced" % sorted(nodes),
                    state=lambda: "last: %s" % last)

    def assert_none_fenced_for(self, nodes, seconds):
        """No broker of nodes is fenced, as the active controller says, over `seconds`."""
        end = time.monotonic() + seconds
        checks = 0
        while time.monotonic() < end:
            ctrl = self.c.controller_id()
            if ctrl is not None:
                fenced, listed = self.fenced(ctrl)
                self.assertFalse(fenced, "controller %d fenced %s %.1f s into the watch\n%s" % (
                    ctrl, sorted(fenced), seconds - (end - time.monotonic()), self.c.logs()))
                self.assertTrue(set(nodes) <= listed, (sorted(listed), self.c.logs()))
                checks += 1
            time.sleep(0.2)  # the watch's pace: a fencing stays until the broker is heard again
        self.assertGreater(checks, 5)

    def test_voters_move_one_by_one(self):
        c = self.c
        all_nodes = sorted(c.nodes)
        # Voter 3's name does not resolve yet (its pod not scheduled): the others start, elect
        # among two voters, and reach 3 once its name appears.
        self.unnamed = {3}
        self.write_hosts()
        # Voter 1 alone serves Kafka but has no quorum to register with: not ready (a rolling
        # restart or a Service must not count it), and says why.
        c.start(order=[1])
        code, body = ready(c.nodes[1])
        self.assertEqual((code, body.get("ready")), (503, False), body)
        self.assertIn("not registered", body.get("reason", ""))
        c.start(order=[2, 4])
        c.wait_for_quorum(timeout=60)
        self.wait_all_unfenced([1, 2, 4])
        c.wait(lambda: all(ready(c.nodes[n])[0] == 200 for n in (1, 2, 4)), 10,
               "brokers 1, 2 and 4 ready once registered and unfenced")
        self.assertIn("b3.strata.test does not resolve (IPv4) yet", c.nodes[4].server.stderr_text())
        self.unnamed = set()
        self.write_hosts()
        c.start_node(3)
        c.wait_for_quorum(timeout=60)
        self.wait_all_unfenced(all_nodes)

        for v in c.voters:
            c.stop(v)
            self.addr[v] = "127.0.0.%d" % (20 + v)
            self.write_hosts()
            self.place(v)
            c.start_node(v)
            c.wait_for_quorum(timeout=60)
            self.wait_all_unfenced(all_nodes)

        # Broker 4 resolved every voter once at start, at addresses now gone.
        self.assert_none_fenced_for(all_nodes, 2 * SESSION_MS / 1000.0)
        log4 = c.nodes[4].server.stderr_text()
        for v in c.voters:
            self.assertIn("voter %d (%s) is at %s now (was 127.0.0.%d)" % (
                v, name_of(v), self.addr[v], 10 + v), log4)

        # The quorum elects at the new addresses.
        ctrl = c.controller_id()
        c.kill9(ctrl)
        left = [n for n in all_nodes if n != ctrl]
        c.wait_for_quorum(timeout=60, nodes=left, not_controller=ctrl, brokers=ANY)
        self.wait_all_unfenced(left)
        # the killed one fenced (silent a session): new partitions go to the live brokers
        c.wait(lambda: ctrl in self.fenced(c.controller_id() or left[0])[0] or
               ctrl not in self.fenced(c.controller_id() or left[0])[1], 30,
               "broker %d fenced after its kill" % ctrl)

        # Records with acks=all to a partition the broker-only node leads, replicated on every
        # broker left (an explicit assignment, 4 first: the preferred leader).
        from confluent_kafka import Producer
        from confluent_kafka.admin import NewTopic
        boot = c.nodes[4].bootstrap
        a = kc.admin(boot)
        topic = "moves-%d" % os.getpid()
        others = [n for n in left if n != 4]
        a.create_topics([NewTopic(topic, 1, replica_assignment=[[4] + others])])[topic].result(30)

        def led():
            t = a.list_topics(topic, timeout=5).topics.get(topic)
            return (t is not None and t.error is None and len(t.partitions) == 1 and
                    t.partitions[0].leader == 4 and t.partitions[0])
        part = c.wait(led, 30, "partition 0 of %s led by broker 4" % topic)
        self.assertEqual(list(part.replicas), [4] + others)
        self.assertEqual(sorted(part.isrs), sorted([4] + others))
        p = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 30000})
        got = []
        for i in range(3):
            p.produce(topic, value=b"moved %d" % i, on_delivery=lambda e, m: got.append(e))
        self.assertEqual(p.flush(40), 0)
        self.assertEqual(got, [None] * 3)

if __name__ == "__main__":
    harness.main()
