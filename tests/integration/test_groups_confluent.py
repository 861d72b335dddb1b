"""Consumer groups with librdkafka (confluent-kafka) (issue 5): assignors split partitions
with no overlap or gap, SIGKILL of a member moves its partitions after the session timeout
without re-reading committed messages, a clean leave rebalances at once, committed offsets
survive a server restart, static membership, ListGroups/DescribeGroups, and 100 groups
committing at once."""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, wait_until, HERE  # noqa: E402

WORKER = os.path.join(HERE, "group_worker.py")


class Worker:
    """A group_worker.py process and the events it reported."""

    def __init__(self, bootstrap, group, topic, assignor, **conf):
        args = [sys.executable, WORKER, bootstrap, group, topic, assignor]
        args += ["%s=%s" % (k.replace("_", "."), v) for k, v in conf.items()]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.events = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def assignment(self):
        with self.lock:
            a = [e["parts"] for e in self.events if e["ev"] == "assign"]
        return set(a[-1]) if a else set()

    def assigns(self):
        with self.lock:
            return [e["parts"] for e in self.events if e["ev"] == "assign"]

    def msgs(self):
        with self.lock:
            return [(e["p"], e["o"]) for e in self.events if e["ev"] == "msg"]

    def quit(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(30)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def partitioned(workers, n=6, each=None):
    """The workers' current assignments cover 0..n-1 exactly once (and, if each is given,
    every worker holds `each`)."""
    sets = [w.assignment() for w in workers]
    allp = [p for s in sets for p in s]
    ok = sorted(allp) == list(range(n))
    if each is not None:
        ok = ok and all(len(s) == each for s in sets)
    return ok and sets


class GroupsConfluentTest(ServerTestCase):
    SMP = 2

    def setUp(self):
        super().setUp()
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            w.cleanup()

    def start_workers(self, n, group, topic, assignor="range", **conf):
        ws = [Worker(self.bootstrap, group, topic, assignor, **conf) for _ in range(n)]
        self.workers += ws
        return ws

    def test_assignors_split_six_partitions(self):
        for assignor in ("range", "roundrobin", "cooperative-sticky"):
            with self.subTest(assignor=assignor):
                topic, group = self.unique("as"), self.unique("g")
                kc.create_topic(self.bootstrap, topic, 6)
                ws = self.start_workers(3, group, topic, assignor)
                sets = wait_until(lambda: partitioned(ws, 6, each=2), 40,
                                  "3 %s members holding 2 partitions each" % assignor)
                print(assignor, [sorted(s) for s in sets])
                for w in ws:
                    w.quit()

    def test_sigkill_member_partitions_move_no_reread(self):
        topic, group = self.unique("kill"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 6)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"a%d" % i, "partition": i % 6} for i in range(300)])
        ws = self.start_workers(3, group, topic, "range", session_timeout_ms=6000)
        wait_until(lambda: partitioned(ws, 6, each=2), 40, "3 members, 2 partitions each")
        wait_until(lambda: sum(len(w.msgs()) for w in ws) == 300, 40, "first 300 read")
        victim, rest = ws[0], ws[1:]
        t0 = time.monotonic()
        victim.kill9()
        wait_until(lambda: partitioned(rest, 6, each=3), 40, "2 survivors with 3 each")
        print("rebalance after SIGKILL took %.2fs (session.timeout.ms=6000)"
              % (time.monotonic() - t0))
        kc.produce_all(p, topic, [{"value": b"b%d" % i, "partition": i % 6}
                                  for i in range(300)])
        wait_until(lambda: sum(len(w.msgs()) for w in rest) + len(victim.msgs()) >= 600, 40,
                   "all 600 read")
        seen = victim.msgs() + [m for w in rest for m in w.msgs()]
        self.assertEqual(len(seen), len(set(seen)),
                         "a committed message was read twice")
        self.assertEqual(set(seen), {(q, o) for q in range(6) for o in range(100)})

    def test_clean_leave_rebalances_at_once(self):
        topic, group = self.unique("leave"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 6)
        ws = self.start_workers(3, group, topic, "roundrobin", session_timeout_ms=45000)
        wait_until(lambda: partitioned(ws, 6, each=2), 40, "3 members")
        t0 = time.monotonic()
        ws[0].quit()
        wait_until(lambda: partitioned(ws[1:], 6, each=3), 15,
                   "the 2 others take over well before the 45 s session timeout")
        dt = time.monotonic() - t0
        print("rebalance after clean leave: %.2fs" % dt)
        self.assertLess(dt, 10)

    def test_static_membership_restart_keeps_partitions(self):
        topic, group = self.unique("static"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 6)
        ws = [Worker(self.bootstrap, group, topic, "range", group_instance_id="member-%d" % i,
                     session_timeout_ms=30000) for i in range(3)]
        self.workers += ws
        sets = wait_until(lambda: partitioned(ws, 6, each=2), 60, "3 static members")
        others_before = [len(w.assigns()) for w in ws[1:]]
        ws[0].kill9()
        back = Worker(self.bootstrap, group, topic, "range", group_instance_id="member-0",
                      session_timeout_ms=30000)
        self.workers.append(back)
        wait_until(lambda: back.assignment() == sets[0], 20,
                   "restarted static member gets %s back" % sorted(sets[0]))
        self.assertEqual([len(w.assigns()) for w in ws[1:]], others_before,
                         "the other members saw a rebalance")

    def test_commit_restart_resume(self):
        from confluent_kafka import Consumer, TopicPartition
        harness.need_server_binary()
        topic, group = self.unique("resume"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 3)
        kc.produce_all(kc.producer(self.bootstrap), topic,
                       [{"value": b"%d" % i, "partition": i % 3} for i in range(90)])
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        offs = [TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 20),
                TopicPartition(topic, 2, 25)]
        res = c.commit(offsets=offs, asynchronous=False)
        self.assertTrue(all(r.error is None for r in res), res)
        c.close()
        self.server.restart(clean=True)
        b = self.server.bootstrap
        c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "error"})
        try:
            got = c.committed([TopicPartition(topic, q) for q in range(3)], timeout=20)
            self.assertEqual([x.offset for x in got], [7, 20, 25])
            c.subscribe([topic])
            first = {}
            deadline = time.monotonic() + 40
            while len(first) < 3 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    first.setdefault(m.partition(), m.offset())
            self.assertEqual(first, {0: 7, 1: 20, 2: 25})
        finally:
            c.close()

    def test_list_and_describe_groups(self):
        topic, group = self.unique("desc"), self.unique("g")
        kc.create_topic(self.bootstrap, topic, 6)
        ws = self.start_workers(2, group, topic, "roundrobin")
        wait_until(lambda: partitioned(ws, 6, each=3), 40, "2 members")
        a = kc.admin(self.bootstrap)

        def described():
            gs = [g for g in a.list_groups(group, timeout=10) if g.id == group]
            return gs and gs[0].state == "Stable" and gs[0]
        g = wait_until(described, 20, "group Stable in DescribeGroups")
        self.assertEqual(g.protocol_type, "consumer")
        self.assertEqual(g.protocol, "roundrobin")
        self.assertEqual(len(g.members), 2)
        for m in g.members:
            self.assertTrue(m.id and m.client_id)
            self.assertTrue(m.assignment, "member assignment bytes present")
        self.assertIn(group, [x.id for x in a.list_groups(timeout=10)])
        for w in ws:
            w.quit()
        wait_until(lambda: [x for x in a.list_groups(group, timeout=10)
                            if x.id == group and x.state == "Empty"], 20, "group Empty")

    def test_100_groups_commit_concurrently(self):
        from confluent_kafka import Consumer, TopicPartition
        topic = self.unique("many")
        kc.create_topic(self.bootstrap, topic, 6)
        groups = [self.unique("g%03d" % i) for i in range(100)]
        errors = []
        lat = []

        def work(gs):
            for gi, g in gs:
                c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": g,
                              "enable.auto.commit": False})
                try:
                    offs = [TopicPartition(topic, q, gi * 10 + q) for q in range(6)]
                    t0 = time.monotonic()
                    r = c.commit(offsets=offs, asynchronous=False)
                    lat.append(time.monotonic() - t0)
                    errors.extend(x for x in r if x.error)
                finally:
                    c.close()
        threads = [threading.Thread(target=work, args=(list(enumerate(groups))[i::10],))
                   for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertFalse(errors, errors[:3])
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": groups[0]})
        c.close()
        for gi, g in enumerate(groups):
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": g})
            try:
                got = c.committed([TopicPartition(topic, q) for q in range(6)], timeout=15)
                self.assertEqual([x.offset for x in got], [gi * 10 + q for q in range(6)], g)
            finally:
                c.close()
        lat.sort()
        print("commit latency p50 %.1f ms, p99 %.1f ms (first commit of each group)"
              % (lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000))


if __name__ == "__main__":
    harness.main()
