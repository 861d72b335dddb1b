"""KIP-848 consumer groups (issue 24): the broker assigns, members reconcile.

On the wire (kwire, no client library): ConsumerGroupHeartbeat's validation and epochs, a
partition reaching its new owner only after its old owner acknowledged the revocation,
OffsetCommit with a stale member epoch, a classic JoinGroup on a consumer group, ListGroups'
types and ConsumerGroupDescribe.

With real librdkafka consumers (group.protocol=consumer; Debian's librdkafka is 2.0.2, which
does not speak ConsumerGroupHeartbeat, so the workers load a librdkafka >= 2.4 from
$STRATA_RDKAFKA_LIB or .cache/librdkafka/src-v2.15.0/src — scripts/rdkafka-suite.sh --build-only
builds it there — and these tests skip without one): 4 consumers over 12 partitions, one killed with SIGKILL and one added, each
partition owned by one member at a time, nothing consumed twice, the others consuming
throughout; a regex subscription picking up a topic created later; committed offsets fetched;
a coordinator restart keeping the group (same member ids and epochs)."""

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import HERE, SRC, Server, wait_until  # noqa: E402
from kwire import (Conn, Reader, TAGS_NONE, array, boolean, compact_array,  # noqa: E402
                   compact_string, i16, i32, i64, i8, string, uvarint)

WORKER = os.path.join(HERE, "cg_worker.py")
HB, DESCRIBE, COMMIT, JOIN, LIST = 68, 69, 8, 11, 16
NONE, INVALID_REQUEST, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR = 0, 42, 110, 112
STALE_MEMBER_EPOCH, INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID = 113, 23, 25
INVALID_REGULAR_EXPRESSION, MEMBER_ID_REQUIRED, GROUP_ID_NOT_FOUND = 128, 79, 69
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED = 111, 82, 81

SETS = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "300",
    "num.partitions": "1",
}


def rdkafka_lib():
    """A directory holding a librdkafka.so.1 that speaks KIP-848 (2.4+), or None."""
    cands = [os.environ.get("STRATA_RDKAFKA_LIB"),
             os.path.join(SRC, ".cache", "librdkafka", "src-v2.15.0", "src")]
    for d in cands:
        if not d or not os.path.exists(os.path.join(d, "librdkafka.so.1")):
            continue
        try:
            lib = ctypes.CDLL(os.path.join(d, "librdkafka.so.1"))
            lib.rd_kafka_version.restype = ctypes.c_int
            if lib.rd_kafka_version() >= 0x02040000:
                return d
        except OSError:
            continue
    return None


# ---- the wire ----------------------------------------------------------------------------

def heartbeat(c, group, member, epoch, topics=None, regex=None, assignor=None, owned=None,
              rebalance_timeout=-1, instance=None, version=1):
    def tp(x):
        return x[0].bytes + compact_array(x[1], i32) + TAGS_NONE
    if epoch == 0 and owned is None:
        owned = {}  # a join sends an empty list (Kafka refuses a null one)
    body = (compact_string(group) + compact_string(member) + i32(epoch) + compact_string(instance)
            + compact_string(None) + i32(rebalance_timeout)
            + compact_array(topics, compact_string)
            + (compact_string(regex) if version >= 1 else b"")
            + compact_string(assignor)
            + compact_array(None if owned is None else sorted(owned.items()), tp) + TAGS_NONE)
    r = c.request(HB, version, body, flexible=True)
    out = {"throttle": r.i32(), "error": r.i16(), "message": r.compact_string(),
           "member_id": r.compact_string(), "epoch": r.i32(), "interval": r.i32()}
    marker = r.i8()
    out["assignment"] = None
    if marker >= 0:
        def t(rr):
            tid = rr.uuid()
            parts = rr.compact_array(lambda x: x.i32())
            rr.tags()
            return tid, parts
        out["assignment"] = {tid: set(p) for tid, p in r.compact_array(t)}
        r.tags()
    r.tags()
    r.end()
    return out


def describe(c, group, version=1):
    r = c.request(DESCRIBE, version, compact_array([group], compact_string) + boolean(False)
                  + TAGS_NONE, flexible=True)
    r.i32()

    def tps(rr):
        def t(x):
            v = (x.uuid(), x.compact_string(), sorted(x.compact_array(lambda y: y.i32())))
            x.tags()
            return v
        v = rr.compact_array(t)
        rr.tags()
        return {name: parts for _, name, parts in v}

    def member(rr):
        m = {"member_id": rr.compact_string(), "instance_id": rr.compact_string(),
             "rack_id": rr.compact_string(), "epoch": rr.i32(), "client_id": rr.compact_string(),
             "client_host": rr.compact_string(),
             "topics": rr.compact_array(lambda x: x.compact_string()),
             "regex": rr.compact_string(), "assignment": tps(rr), "target": tps(rr)}
        if version >= 1:
            m["type"] = rr.i8()
        rr.tags()
        return m

    def grp(rr):
        g = {"error": rr.i16(), "message": rr.compact_string(), "group_id": rr.compact_string(),
             "state": rr.compact_string(), "group_epoch": rr.i32(),
             "assignment_epoch": rr.i32(), "assignor": rr.compact_string(),
             "members": rr.compact_array(member), "ops": rr.i32()}
        rr.tags()
        return g
    g = r.compact_array(grp)[0]
    r.tags()
    r.end()
    return g


def list_groups(c, types=None):
    r = c.request(LIST, 5, compact_array([], compact_string) + compact_array(types or [],
                                                                           compact_string)
                  + TAGS_NONE, flexible=True)
    r.i32()
    r.i16()

    def g(rr):
        v = (rr.compact_string(), rr.compact_string(), rr.compact_string(), rr.compact_string())
        rr.tags()
        return v
    out = r.compact_array(g)
    r.tags()
    return {x[0]: x for x in out}


def offset_commit_v9(c, group, member, epoch, topic, partition, offset):
    part = i32(partition) + i64(offset) + i32(-1) + compact_string(None) + TAGS_NONE
    body = (compact_string(group) + i32(epoch) + compact_string(member) + compact_string(None)
            + compact_array([topic], lambda t: compact_string(t) + compact_array([part],
                                                                                 lambda p: p)
                            + TAGS_NONE) + TAGS_NONE)
    r = c.request(COMMIT, 9, body, flexible=True)
    r.i32()
    errs = []
    for t in r.compact_array(lambda rr: (rr.compact_string(),
                                         rr.compact_array(lambda x: (x.i32(), x.i16(),
                                                                     x.tags())), rr.tags())):
        errs += [e for _, e, _ in t[1]]
    return errs[0]


def join_v5(c, group):
    meta = i16(0) + array(["x"], string) + i32(-1)
    body = (string(group) + i32(10000) + i32(10000) + string("") + string(None)
            + string("consumer") + array([("range", meta)],
                                         lambda p: string(p[0]) + i32(len(p[1])) + p[1]))
    r = c.request(JOIN, 5, body)
    r.i32()
    return r.i16()


def coordinator_conn(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    return Conn(host, int(port))


class WireTest(harness.ServerTestCase):
    SMP = 2
    SETS = SETS

    def test_heartbeat_validation(self):
        t = self.unique("v")
        kc.create_topic(self.bootstrap, t, 2)
        g = self.unique("g")
        with coordinator_conn(self.bootstrap) as c:
            self.assertEqual(heartbeat(c, "", "m", 0, [t], rebalance_timeout=5000)["error"],
                             INVALID_REQUEST)
            r = heartbeat(c, g, "", 0, [t], rebalance_timeout=5000)
            self.assertEqual(r["error"], INVALID_REQUEST, "v1 needs the client's member id")
            r = heartbeat(c, g, "m", 0, [t])
            self.assertEqual(r["error"], INVALID_REQUEST, "no rebalance timeout in a join")
            self.assertEqual(heartbeat(c, g, "m", 0, [t], rebalance_timeout=5000,
                                       assignor="nope")["error"], UNSUPPORTED_ASSIGNOR)
            self.assertEqual(heartbeat(c, g, "m", 0, None, regex="(unclosed",
                                       rebalance_timeout=5000)["error"],
                             INVALID_REGULAR_EXPRESSION)
            # v0: the coordinator hands out the member id
            r = heartbeat(c, g, "", 0, [t], rebalance_timeout=5000, version=0)
            self.assertEqual(r["error"], NONE, r)
            self.assertEqual(len(r["member_id"]), 22)
            self.assertEqual(r["epoch"], 1)
            self.assertEqual(r["interval"], 300)
            self.assertEqual(sum(len(p) for p in r["assignment"].values()), 2)
            m = r["member_id"]
            self.assertEqual(heartbeat(c, g, m, 7)["error"], FENCED_MEMBER_EPOCH)
            self.assertEqual(heartbeat(c, g, "nobody", 1)["error"], UNKNOWN_MEMBER_ID)
            # a hostile owned list (200,000 partitions of an unknown topic) is answered at once
            t0 = time.monotonic()
            r = heartbeat(c, g, m, 1, owned={uuid.uuid4(): list(range(200000, 0, -1))})
            self.assertEqual((r["error"], r["epoch"]), (NONE, 1))
            self.assertLess(time.monotonic() - t0, 5)
            # a classic member cannot join it
            self.assertEqual(join_v5(c, g), INCONSISTENT_GROUP_PROTOCOL)
            # leave
            r = heartbeat(c, g, m, -1)
            self.assertEqual((r["error"], r["epoch"]), (NONE, -1))
            d = describe(c, g)
            self.assertEqual((d["error"], d["state"], d["members"]), (NONE, "Empty", []))
            # empty, it becomes a classic group when a classic member comes (Kafka's
            # maybeDeleteEmptyConsumerGroup): JoinGroup v5 asks for a member id
            self.assertEqual(join_v5(c, g), MEMBER_ID_REQUIRED)
            self.assertEqual(describe(c, g)["error"], GROUP_ID_NOT_FOUND)
            self.assertEqual(list_groups(c)[g][3], "classic")

    def test_revocation_before_reassignment(self):
        """m2 gets a partition m1 held only after m1's heartbeat no longer owns it."""
        t = self.unique("r")
        kc.create_topic(self.bootstrap, t, 4)
        g = self.unique("g")
        with coordinator_conn(self.bootstrap) as c:
            r1 = heartbeat(c, g, "m1", 0, [t], rebalance_timeout=30000, assignor="range")
            self.assertEqual((r1["error"], r1["epoch"]), (NONE, 1))
            (tid, parts), = r1["assignment"].items()
            self.assertEqual(parts, {0, 1, 2, 3})
            r2 = heartbeat(c, g, "m2", 0, [t], rebalance_timeout=30000, assignor="range")
            self.assertEqual(r2["error"], NONE)
            self.assertEqual(r2["epoch"], 2)
            self.assertEqual(sum(len(p) for p in r2["assignment"].values()), 0,
                             "nothing is free yet: m1 still holds every partition")
            d = describe(c, g)
            self.assertEqual((d["group_epoch"], d["assignment_epoch"], d["assignor"]),
                             (2, 2, "range"))
            targets = {m["member_id"]: m["target"].get(t, []) for m in d["members"]}
            self.assertEqual(targets, {"m1": [0, 1], "m2": [2, 3]})
            self.assertEqual(d["state"], "Reconciling")
            # m1 is asked to revoke 2 and 3: it stays at epoch 1 until it says it did
            r = heartbeat(c, g, "m1", 1, owned={tid: [0, 1, 2, 3]})
            self.assertEqual((r["error"], r["epoch"]), (NONE, 1))
            self.assertEqual(r["assignment"], {tid: {0, 1}})
            r = heartbeat(c, g, "m2", 2)
            self.assertIsNone(r["assignment"], "still held by m1, pending revocation")
            offset_err = offset_commit_v9(c, g, "m1", 0, t, 0, 5)
            self.assertEqual(offset_err, STALE_MEMBER_EPOCH)
            self.assertEqual(offset_commit_v9(c, g, "m1", 1, t, 0, 5), NONE)
            # m1 acknowledges: epoch 2, and m2 now gets 2 and 3
            r = heartbeat(c, g, "m1", 1, owned={tid: [0, 1]})
            self.assertEqual((r["error"], r["epoch"]), (NONE, 2))
            r = heartbeat(c, g, "m2", 2)
            self.assertEqual((r["error"], r["epoch"], r["assignment"]), (NONE, 2, {tid: {2, 3}}))
            d = describe(c, g)
            self.assertEqual(d["state"], "Stable")
            self.assertEqual({m["member_id"]: (m["epoch"], m["assignment"][t], m["type"])
                              for m in d["members"]},
                             {"m1": (2, [0, 1], 1), "m2": (2, [2, 3], 1)})
            groups = list_groups(c, ["consumer"])
            self.assertEqual(groups[g][1:], ("consumer", "Stable", "consumer"))
            self.assertNotIn(g, list_groups(c, ["classic"]))
            cli = os.environ.get("STRATA_CLI")
            if cli:
                out = subprocess.run([cli, "group", "describe", g, "-b", self.bootstrap],
                                     capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn("protocol:         consumer (KIP-848)", out.stdout)
                self.assertIn("group epoch:      2", out.stdout)
                self.assertRegex(out.stdout, r"\nm1 +2 .* %s/0,%s/1 +%s/0,%s/1\n" % ((t,) * 4))
            # the previous epoch is still accepted with owned partitions inside the assignment
            r = heartbeat(c, g, "m1", 1, owned={tid: [0]})
            self.assertEqual((r["error"], r["epoch"]), (NONE, 2))
            for m in ("m1", "m2"):
                self.assertEqual(heartbeat(c, g, m, -1)["error"], NONE)


    def test_static_member(self):
        """Epoch -2 keeps the slot and its partitions; the instance comes back under a new
        member id with its assignment; another process with the same instance id while the
        slot is held is refused."""
        t = self.unique("s")
        kc.create_topic(self.bootstrap, t, 3)
        g = self.unique("g")
        with coordinator_conn(self.bootstrap) as c:
            r = heartbeat(c, g, "a1", 0, [t], rebalance_timeout=30000, instance="i1")
            self.assertEqual((r["error"], r["epoch"]), (NONE, 1))
            (tid, parts), = r["assignment"].items()
            self.assertEqual(parts, {0, 1, 2})
            r = heartbeat(c, g, "a2", 0, [t], rebalance_timeout=30000, instance="i1")
            self.assertEqual(r["error"], UNRELEASED_INSTANCE_ID)
            self.assertEqual(heartbeat(c, g, "zz", 1, instance="i1")["error"],
                             FENCED_INSTANCE_ID)
            r = heartbeat(c, g, "a1", -2, instance="i1")
            self.assertEqual((r["error"], r["epoch"]), (NONE, -2))
            d = describe(c, g)
            self.assertEqual([(m["member_id"], m["epoch"], m["instance_id"], m["assignment"])
                              for m in d["members"]], [("a1", -2, "i1", {t: [0, 1, 2]})])
            # another member meanwhile gets nothing: the slot still holds the partitions
            r = heartbeat(c, g, "b1", 0, [t], rebalance_timeout=30000)
            self.assertEqual(sum(len(p) for p in r["assignment"].values()), 0)
            r = heartbeat(c, g, "a3", 0, [t], rebalance_timeout=30000, instance="i1")
            self.assertEqual(r["error"], NONE)
            self.assertTrue(r["assignment"][tid] <= {0, 1, 2} and r["assignment"][tid])
            d = describe(c, g)
            self.assertEqual(sorted(m["member_id"] for m in d["members"]), ["a3", "b1"])
            self.assertEqual(heartbeat(c, g, "a3", -1, instance="i1")["error"], NONE)
            self.assertEqual(heartbeat(c, g, "b1", -1)["error"], NONE)


# ---- real consumers ---------------------------------------------------------------------

class Worker:
    """A cg_worker.py process and the events it reported."""

    def __init__(self, lib, bootstrap, group, subscription, **conf):
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        args = [sys.executable, WORKER, bootstrap, group, subscription]
        args += ["%s=%s" % (k.replace("_", "."), v) for k, v in conf.items()]
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, env=env)
        self.events = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def stderr_tail(self, n=15):
        self.err.seek(0)
        return "".join([x for x in self.err.read().splitlines(True)
                        if not x.startswith("%7|")][-n:])

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def assignment(self):
        a = [e["parts"] for e in self.snapshot() if e["ev"] == "assign"]
        return {tuple(x) for x in a[-1]} if a else set()

    def msgs(self):
        return [e for e in self.snapshot() if e["ev"] == "msg"]

    def quit(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(5)


class ProducerThread(threading.Thread):
    """Produces to every partition of a topic, round robin, until stopped (bounded in count
    and time); `sent` holds what was acknowledged."""

    def __init__(self, bootstrap, topic, partitions, limit=6000, seconds=60):
        super().__init__(daemon=True)
        self.p = kc.producer(bootstrap, linger_ms=5)
        self.topic, self.partitions, self.limit, self.seconds = topic, partitions, limit, seconds
        self.stop_ev = threading.Event()
        self.sent = set()

    def run(self):
        end = time.monotonic() + self.seconds

        def cb(err, m):
            if err is None:
                self.sent.add((m.partition(), m.offset()))
        i = 0
        while not self.stop_ev.is_set() and i < self.limit and time.monotonic() < end:
            self.p.produce(self.topic, value=b"%d" % i, partition=i % self.partitions,
                           on_delivery=cb)
            i += 1
            self.p.poll(0)
            time.sleep(0.004)
        self.p.flush(20)

    def stop(self):
        self.stop_ev.set()
        self.join(30)


class MaxSizeTest(harness.ServerTestCase):
    """group.consumer.max.size and group.max.size (2 each): one member more is refused
    GROUP_MAX_SIZE_REACHED, the members there go on, a member leaving makes room."""
    SMP = 1
    SETS = dict(SETS, **{"group.consumer.max.size": "2", "group.max.size": "2"})

    def test_consumer_group_third_member_refused(self):
        t, g = self.unique("mx"), self.unique("g")
        kc.create_topic(self.bootstrap, t, 4)
        with coordinator_conn(self.bootstrap) as c:
            for m in ("m1", "m2"):
                r = heartbeat(c, g, m, 0, [t], rebalance_timeout=5000)
                self.assertEqual(r["error"], NONE, r)
            r = heartbeat(c, g, "m3", 0, [t], rebalance_timeout=5000)
            self.assertEqual(r["error"], GROUP_MAX_SIZE_REACHED, r)
            self.assertIn("maximum capacity", r["message"] or "")
            self.assertEqual(sorted(m["member_id"] for m in describe(c, g)["members"]),
                             ["m1", "m2"])
            self.assertEqual(heartbeat(c, g, "m1", -1)["error"], NONE)
            r = heartbeat(c, g, "m3", 0, [t], rebalance_timeout=5000)
            self.assertEqual(r["error"], NONE, r)
            self.assertEqual(sorted(m["member_id"] for m in describe(c, g)["members"]),
                             ["m2", "m3"])

    def test_classic_group_third_consumer_told(self):
        """librdkafka (classic protocol): the third consumer's poll reports the refusal; the
        two in the group own the topic's partitions between them."""
        from confluent_kafka import Consumer
        t, g = self.unique("mxc"), self.unique("gc")
        kc.create_topic(self.bootstrap, t, 4)
        conf = {"bootstrap.servers": self.bootstrap, "group.id": g,
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                "auto.offset.reset": "earliest"}
        cs = [Consumer(conf) for _ in range(3)]
        try:
            for x in cs[:2]:
                x.subscribe([t])
            wait_until(lambda: [x.poll(0.1) for x in cs[:2]] and
                       sum(len(x.assignment()) for x in cs[:2]) == 4, 30,
                       "two consumers own the 4 partitions")
            cs[2].subscribe([t])
            errors = []

            def told():
                for x in cs:
                    m = x.poll(0.1)
                    if x is cs[2] and m is not None and m.error():
                        errors.append(m.error().code())
                return GROUP_MAX_SIZE_REACHED in errors
            wait_until(told, 30, "the third consumer told GROUP_MAX_SIZE_REACHED")
            self.assertEqual(cs[2].assignment(), [])
            self.assertEqual(sum(len(x.assignment()) for x in cs[:2]), 4)
        finally:
            for x in cs:
                x.close()


class RealConsumersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = rdkafka_lib()
        if not cls.lib:
            raise unittest.SkipTest("no librdkafka >= 2.4 (KIP-848) found: set STRATA_RDKAFKA_LIB "
                                    "or build it with scripts/rdkafka-suite.sh --build-only")
        cls.server = Server(smp=2, sets=SETS, name="cg")
        cls.server.start()
        cls.bootstrap = cls.server.bootstrap

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.server.alive():
                cls.server.stop()
        finally:
            cls.server.close()

    def setUp(self):
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            w.quit()

    def worker(self, group, subscription):
        w = Worker(self.lib, self.bootstrap, group, subscription)
        self.workers.append(w)
        return w

    def owners_ok(self, live, n):
        parts = [w.assignment() for w in live]
        allp = set().union(*parts)
        return len(allp) == n and sum(len(p) for p in parts) == n and all(parts)

    def test_kill_and_add_member(self):
        topic, group = "cg-kill-%d" % os.getpid(), "cg-kill-g-%d" % os.getpid()
        kc.create_topic(self.bootstrap, topic, 12)
        prod = ProducerThread(self.bootstrap, topic, 12)
        prod.start()
        ws = [self.worker(group, topic) for _ in range(4)]
        wait_until(lambda: self.owners_ok(ws, 12), 30, "4 members owning the 12 partitions")
        self.assertEqual(sorted(len(w.assignment()) for w in ws), [3, 3, 3, 3])
        victim = ws[0]
        wait_until(lambda: len(victim.msgs()) > 0, 15, "the victim consuming")
        t_kill = time.monotonic()
        victim.kill9()
        newcomer = self.worker(group, topic)
        live = ws[1:] + [newcomer]
        try:
            wait_until(lambda: self.owners_ok(live, 12) and
                       sorted(len(w.assignment()) for w in live) == [3, 3, 3, 3], 30,
                       "the 4 live members owning the 12 partitions, 3 each")
        except harness.WaitTimeout:
            with coordinator_conn(self.bootstrap) as c:
                self.fail("group: %s\nworkers: %s\n%s" % (
                    describe(c, group), [sorted(w.assignment()) for w in live],
                    "\n".join(w.stderr_tail() for w in live)))
        t_done = time.monotonic()
        prod.stop()
        self.assertGreater(len(prod.sent), 100)

        everyone = ws + [newcomer]

        def consumed():
            got = set()
            for w in everyone:
                got |= {(m["p"], m["o"]) for m in w.snapshot() if m["ev"] == "got"}
            return got
        try:
            wait_until(lambda: prod.sent <= consumed(), 30, "every produced record consumed")
        except harness.WaitTimeout:
            missing = sorted(prod.sent - consumed())
            self.fail("%d of %d records never consumed, e.g. %s; owners %s" % (
                len(missing), len(prod.sent), missing[:10],
                [sorted(w.assignment()) for w in live]))
        # a record committed by one member is never consumed by another: only the victim's
        # last record, consumed but not committed when it died, may come again
        seen = {}
        for w in everyone:
            for m in w.msgs():
                k = (m["p"], m["o"])
                self.assertNotIn(k, seen, "record %s committed twice" % (k,))
                seen[k] = w
        for w in everyone:
            for m in w.snapshot():
                k = (m.get("p"), m.get("o"))
                if m["ev"] == "got" and k in seen and seen[k] is not w:
                    self.fail("record %s committed by one member, consumed by another" % (k,))
        # one owner at a time: per partition, ownership intervals do not overlap
        for p in range(12):
            spans = []
            for w in ws + [newcomer]:
                start = None
                for e in w.snapshot():
                    if e["ev"] != "assign":
                        continue
                    has = [topic, p] in e["parts"]
                    if has and start is None:
                        start = e["t"]
                    elif not has and start is not None:
                        spans.append((start, e["t"], w))
                        start = None
                if start is not None:
                    end = t_kill if w is victim else float("inf")
                    spans.append((start, end, w))
            spans.sort(key=lambda s: s[0])
            for a, b in zip(spans, spans[1:]):
                self.assertLessEqual(a[1], b[0], "partition %d owned by two members at once" % p)
        # the members that were not touched kept consuming during the rebalance
        for w in ws[1:]:
            during = [m for m in w.msgs() if t_kill <= m["t"] <= t_done]
            self.assertTrue(during, "a surviving member stopped consuming during the rebalance")
        # committed offsets, fetched by a KIP-848 consumer's OffsetFetch (v9: member epoch)
        with coordinator_conn(self.bootstrap) as c:
            d = describe(c, group)
            self.assertEqual(d["state"], "Stable")
            self.assertEqual(len(d["members"]), 4)
            self.assertTrue(all(m["assignment"] == m["target"] for m in d["members"]))
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(12)], timeout=10)
        finally:
            c.close()
        for tp in got:
            last = max(o for (p, o) in seen if p == tp.partition)
            self.assertEqual(tp.offset, last + 1, "committed offset of partition %d" % tp.partition)

    def test_regex_subscription_picks_up_new_topic(self):
        pre = "rx%d" % os.getpid()
        group = pre + "-g"
        kc.create_topic(self.bootstrap, pre + "-a", 2)
        kc.create_topic(self.bootstrap, "other-" + pre, 1)
        w = self.worker(group, "^%s-.*" % pre)
        wait_until(lambda: w.assignment() == {(pre + "-a", 0), (pre + "-a", 1)}, 30,
                   "the regex's topic assigned")
        kc.create_topic(self.bootstrap, pre + "-b", 3)
        wait_until(lambda: len(w.assignment()) == 5, 30, "the new topic assigned too")
        self.assertNotIn("other-" + pre, {t for t, _ in w.assignment()})
        p = kc.producer(self.bootstrap)
        for i in range(3):
            p.produce(pre + "-b", value=b"x", partition=i)
        p.flush(10)
        wait_until(lambda: {m["p"] for m in w.msgs() if m["topic"] == pre + "-b"} == {0, 1, 2},
                   30, "the new topic's records consumed")
        with coordinator_conn(self.bootstrap) as c:
            d = describe(c, group)
            # librdkafka sends its regexes joined as "(re1)|(re2)"
            self.assertIn("^%s-.*" % pre, d["members"][0]["regex"])

    def test_restart_keeps_group(self):
        topic, group = "cg-rs-%d" % os.getpid(), "cg-rs-g-%d" % os.getpid()
        kc.create_topic(self.bootstrap, topic, 4)
        p = kc.producer(self.bootstrap)
        for i in range(40):
            p.produce(topic, value=b"%d" % i, partition=i % 4)
        p.flush(10)
        ws = [self.worker(group, topic) for _ in range(2)]
        wait_until(lambda: sum(len(w.msgs()) for w in ws) == 40, 30, "40 records consumed")
        with coordinator_conn(self.bootstrap) as c:
            wait_until(lambda: describe(c, group)["state"] == "Stable", 15, "a stable group")
            before = describe(c, group)
        self.server.kill9()
        self.server.start()
        # the members come back to the same group: same ids, same epochs, nothing re-read
        with coordinator_conn(self.bootstrap) as c:
            after = describe(c, group)
            self.assertEqual(after["error"], NONE)
            self.assertEqual(after["group_epoch"], before["group_epoch"])
            self.assertEqual({m["member_id"]: (m["epoch"], m["assignment"])
                              for m in after["members"]},
                             {m["member_id"]: (m["epoch"], m["assignment"])
                              for m in before["members"]})
        for i in range(8):
            p.produce(topic, value=b"n%d" % i, partition=i % 4)
        p.flush(20)
        wait_until(lambda: sum(len(w.msgs()) for w in ws) == 48, 30, "the new records consumed")
        with coordinator_conn(self.bootstrap) as c:
            self.assertEqual(describe(c, group)["group_epoch"], before["group_epoch"],
                             "no member had to rejoin")
        got = [(m["p"], m["o"]) for w in ws for m in w.msgs()]
        self.assertEqual(len(got), len(set(got)), "a record consumed twice across the restart")


if __name__ == "__main__":
    harness.main()
