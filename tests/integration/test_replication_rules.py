"""Kafka's replication rules, one real-process scenario per numbered item of issue 19.

Each test drives real strata-server brokers on loopback (a fault proxy, tests/tools/faultproxy.py,
in front of each Kafka listener: a fault set there cuts or slows the followers' fetches from that
broker, not the controller's traffic and not this test's own clients, whose client ids start
"it-") with real clients (confluent-kafka) and raw requests (kwire) where confluent-kafka 1.7 has
no call (ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, DeleteRecords,
OffsetForLeaderEpoch). What was acknowledged is read back with raw Fetch requests to the leader
(a consumer group's client can hang in close() waiting for a coordinator a scenario just killed)
and the replicas' segment files are compared byte for byte (test_replication.compare_replicas).
RF=3, min.insync.replicas=2 unless an item needs otherwise.

  1  a leader that is kill -9ed and restarted at once while its followers' fetches are cut must
     not acknowledge records only it has (the acknowledged records must be on min.insync.replicas
     replicas, and survive the loss of that broker)
  2  KAFKA-7128: a replica lacking acknowledged records must not rejoin the ISR at a new leader
     whose high watermark lags, so that a preferred election cannot make it leader
  3  a new leader that has not written in its epoch answers OffsetForLeaderEpoch with its epoch
     and log end, and its followers keep their logs (nothing lost if it dies then)
  4  divergence over several epochs (KIP-279): after leadership moves back and forth with acks=1
     writes during short cuts, the replicas are identical below the high watermark
  5  a topic's unclean.leader.election.enable=false holds when the broker default is true
  6  DeleteRecords' low watermark is replicated and survives a leader move
  7  a reassignment never drops the only in-sync replica; while pending, ListPartitionReassignments
     shows it (adding/removing), and it can be cancelled
  8  (also found) an acks=all Produce the ISR cannot acknowledge within its timeout_ms is answered
     REQUEST_TIMED_OUT, not left unanswered

Items 1, 3, 4, 6, 7 and 8 share one 3-broker cluster (started at first use, a topic per item);
items 2 and 5 need other settings and start their own. Run one item with
`python3 test_replication_rules.py RulesTest.test_item3_empty_epoch`. Every wait is bounded;
a failure prints what was seen (offsets, replicas' log ends, every node's log tail).
"""

import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import cli_segment  # noqa: E402
import kwire  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import WaitTimeout  # noqa: E402
from test_replication import compare_replicas, read_batches  # noqa: E402

SESSION_MS = 3000
LAG_MS = 3000
QUORUM_TIMEOUT = 30.0
CLIENT_PREFIX = "it-"             # the proxies' faults skip these clients (not followers)

BASE_SETS = {
    "broker.session.timeout.ms": SESSION_MS,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": LAG_MS,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 1,
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": 0,
}

NONE = 0
OFFSET_OUT_OF_RANGE = 1
REQUEST_TIMED_OUT = 7
ELECTION_NOT_NEEDED = 84


def unique(what):
    return "rr-%s-%d-%d" % (what, os.getpid(), time.monotonic_ns() % 10**9)


def fetcher_id(nid):
    """The client id a broker's follower fetcher uses (replica/fetcher.c)."""
    return "^strata-replica-%d$" % nid


# ---- records in a replica's segment files ------------------------------------------------------

def _varint(b, pos):
    shift = v = 0
    while True:
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            break
        shift += 7
    return (v >> 1) ^ -(v & 1), pos


def batch_records(batch):
    """[(offset, value)] of an uncompressed RecordBatch v2 (its 12-byte prefix included)."""
    base = struct.unpack_from(">q", batch, 0)[0]
    attrs = struct.unpack_from(">h", batch, 21)[0]
    if attrs & 0x7:
        raise AssertionError("compressed batch at %d: the test produces uncompressed" % base)
    count = struct.unpack_from(">i", batch, 57)[0]
    pos, out = 61, []
    for _ in range(count):
        _, pos = _varint(batch, pos)           # length
        pos += 1                               # attributes
        _, pos = _varint(batch, pos)           # timestamp delta
        od, pos = _varint(batch, pos)
        kl, pos = _varint(batch, pos)
        pos += max(kl, 0)
        vl, pos = _varint(batch, pos)
        value = bytes(batch[pos:pos + vl]) if vl >= 0 else None
        pos += max(vl, 0)
        nh, pos = _varint(batch, pos)
        for _ in range(nh):
            hk, pos = _varint(batch, pos)
            pos += hk
            hv, pos = _varint(batch, pos)
            pos += max(hv, 0)
        out.append((base + od, value))
    return out


def read_batch_run(recs):
    """The whole batches in a Fetch answer's records bytes."""
    pos, out = 0, []
    while pos + 12 <= len(recs):
        (length,) = struct.unpack_from(">i", recs, pos + 8)
        if length < 49 or pos + 12 + length > len(recs):
            break
        out.append(recs[pos:pos + 12 + length])
        pos += 12 + length
    return out


# ---- raw requests confluent-kafka 1.7 does not have -------------------------------------------

def delete_records(conn, topic, partition, offset, timeout_ms=15000):
    """DeleteRecords v1 of one partition: (error, low_watermark)."""
    body = (kwire.i32(1) + kwire.string(topic) + kwire.i32(1) + kwire.i32(partition)
            + kwire.i64(offset) + kwire.i32(timeout_ms))
    r = conn.request(21, 1, body, timeout=timeout_ms / 1000 + 5)
    r.i32()                                    # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    low, err = r.i64(), r.i16()
    r.end()
    return err, low


def list_offset(conn, topic, partition, timestamp):
    """ListOffsets v1 (-2: earliest, -1: latest): (error, offset)."""
    body = (kwire.i32(-1) + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
            + kwire.i32(partition) + kwire.i64(timestamp))
    r = conn.request(2, 1, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, _, off = r.i16(), r.i64(), r.i64()
    r.end()
    return err, off


def offset_for_leader_epoch(conn, topic, partition, epoch, current_epoch=-1, replica_id=-1):
    """OffsetForLeaderEpoch v3 of one partition: (error, leader_epoch, end_offset)."""
    body = (kwire.i32(replica_id) + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
            + kwire.i32(partition) + kwire.i32(current_epoch) + kwire.i32(epoch))
    r = conn.request(23, 3, body)
    r.i32()                                    # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    err, _, ep, end = r.i16(), r.i32(), r.i32(), r.i64()
    r.end()
    return err, ep, end


# ---- clients -----------------------------------------------------------------------------------

class Producer:
    """A confluent-kafka producer whose delivery reports are kept: acked[value] = offset."""

    def __init__(self, bootstrap, acks="all", idempotent=True, name="producer", **extra):
        from confluent_kafka import Producer as P
        conf = {"bootstrap.servers": bootstrap, "client.id": CLIENT_PREFIX + name,
                "acks": acks, "enable.idempotence": idempotent, "linger.ms": 0,
                "compression.type": "none", "message.timeout.ms": 30000,
                "request.timeout.ms": 5000, "socket.timeout.ms": 10000,
                "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000}
        conf.update(extra)
        self.p = P(conf)
        self.acked, self.errors = {}, {}

    def send(self, topic, values, partition=0):
        for v in values:
            def cb(err, m, v=v):
                if err is not None:
                    self.errors[v] = str(err)
                else:
                    self.acked[v] = m.offset()
            self.p.produce(topic, v, partition=partition, on_delivery=cb)
        self.p.poll(0)

    def wait(self, values, timeout, what="records acknowledged"):
        """Poll until every value has a delivery report (ok or error); True if all are ok."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.p.poll(0.05)
            if all(v in self.acked or v in self.errors for v in values):
                break
        return all(v in self.acked for v in values)

    def send_acked(self, topic, values, timeout=20, partition=0):
        self.send(topic, values, partition)
        if not self.wait(values, timeout):
            raise AssertionError("not acknowledged within %ds: %s; errors %s" % (
                timeout, [v for v in values if v not in self.acked][:5],
                list(self.errors.items())[:5]))
        return [self.acked[v] for v in values]

    def close(self):
        self.p.purge()
        self.p.flush(2)
        self.p = None


# ---- the test case -----------------------------------------------------------------------------

class RulesTest(unittest.TestCase):
    shared = None            # the 3-broker cluster items 1, 3, 4, 6 and 7 share

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()

    @classmethod
    def tearDownClass(cls):
        c, RulesTest.shared = RulesTest.shared, None
        if c is not None:
            try:
                c.stop_all()
            finally:
                c.close()

    # ---- clusters ----

    def shared_cluster(self):
        """The shared cluster, started at first use; every fault healed, every node up."""
        c = RulesTest.shared
        if c is None:
            c = Cluster(3, sets=BASE_SETS, name="rules", proxied=True)
            try:
                c.start()
            except BaseException:
                c.close()
                raise
            RulesTest.shared = c
        for nid, n in c.nodes.items():
            n.proxy.heal()
            if n.stopped:
                c.sigcont(nid)
            if not n.alive():
                c.start_node(nid)
        c.wait_for_quorum(QUORUM_TIMEOUT)
        self.c = c
        return c

    def own_cluster(self, n=3, broker_only=0, sets=None, name="rules-own"):
        s = dict(BASE_SETS)
        s.update(sets or {})
        c = Cluster(n, broker_only=broker_only, sets=s, name=name, proxied=True)
        try:
            c.start()
            c.wait_for_quorum(QUORUM_TIMEOUT, brokers=list(c.nodes))
        except BaseException:
            c.close()
            raise

        def done():
            try:
                for nid, nd in c.nodes.items():
                    nd.proxy.heal()
                    if nd.stopped:
                        c.sigcont(nid)
                c.stop_all()
            finally:
                c.close()
        self.addCleanup(done)
        self.c = c
        return c

    # ---- views ----

    def bootstrap(self):
        return ",".join(n.advertised for n in self.c.nodes.values())

    def live(self):
        return [n for n in self.c.running() if not self.c.node(n).stopped]

    def part(self, topic, p=0, via=None):
        last = None
        for n in ([via] if via else self.live()):
            try:
                t = self.c.metadata(n, [topic])["topics"].get(topic)
                if t is not None and t["error"] == 0:
                    return t["partitions"][p]
            except Exception as e:
                last = e
        raise AssertionError("no node reports topic %s (%r)" % (topic, last))

    def local(self, nid, topic, p=0):
        """Node nid's own replica as its admin API reports it: dict(log_start_offset,
        log_end_offset, high_watermark, leader, leader_epoch) or None."""
        for x in self.c.admin_get(nid, "/v1/partitions?topic=%s" % topic)["partitions"]:
            if x["partition"] == p:
                return x
        return None

    def ends(self, topic, nodes=None, p=0):
        """{node: (log start, log end, high watermark)} of the replicas that answer."""
        out = {}
        for n in (nodes or self.live()):
            try:
                x = self.local(n, topic, p)
                out[n] = (x["log_start_offset"], x["log_end_offset"], x["high_watermark"]) \
                    if x else None
            except Exception as e:
                out[n] = "no answer: %r" % (e,)
        return out

    def values_on(self, nid, topic, p=0):
        """{offset: value} in node nid's segment files."""
        out = {}
        d = os.path.join(self.c.node(nid).data_dir, "%s-%d" % (topic, p))
        for b in read_batches(d, 1 << 62).values():
            out.update(batch_records(b))
        return out

    def file_end(self, nid, topic, p=0):
        """The log end of node nid's replica as its segment files hold it now."""
        v = self.values_on(nid, topic, p)
        return max(v) + 1 if v else 0

    def create(self, topic, config=None, assignment=None, rf=3):
        from confluent_kafka.admin import NewTopic
        import kclients as kc
        ctrl = self.c.wait_for_quorum(QUORUM_TIMEOUT)
        a = kc.admin(self.c.node(ctrl).bootstrap)
        # (a cluster's CreateTopics takes no replica assignment: a reassignment places them)
        nt = NewTopic(topic, 1, len(assignment) if assignment else rf, config=config or {})
        a.create_topics([nt], operation_timeout=15, request_timeout=20)[topic].result(30)
        self.c.wait_topic_agreed(topic, 1, nodes=self.live())
        self.wait_part(topic, lambda p: sorted(p["isr"]) == sorted(p["replicas"])
                       and p["leader"] >= 1, 20, "every replica of %s in the ISR" % topic)
        if assignment:
            self.reassign(topic, assignment)
            self.wait_part(topic, lambda p: p["replicas"] == assignment
                           and sorted(p["isr"]) == sorted(assignment), 30,
                           "%s placed on %s, all in sync" % (topic, assignment))
            if self.part(topic)["leader"] != assignment[0]:
                err, res = self.elect_preferred(topic)
                self.assertEqual((err, res[topic][0][0]), (NONE, NONE), res)
            self.wait_led_by(topic, assignment[0], 10)
        return self.part(topic)

    def wait_part(self, topic, pred, timeout, what, p=0):
        last = {}

        def cond():
            last["p"] = self.part(topic, p)
            return pred(last["p"])
        self.c.wait(cond, timeout, what, state=lambda: "last: %s; replicas' (start, end, hw): %s"
                    % (last.get("p"), self.ends(topic)))
        return last["p"]

    def wait_ends(self, topic, nodes, end, timeout=10):
        """Wait until each of `nodes` holds `end` records of partition 0 (its log end)."""
        last = {}

        def cond():
            last.clear()
            last.update(self.ends(topic, nodes))
            return all(isinstance(v, tuple) and v[1] == end for v in last.values())
        self.c.wait(cond, timeout, "nodes %s to reach log end %d on %s" % (nodes, end, topic),
                    state=lambda: "replicas' (start, end, hw): %s" % last)

    def controller(self):
        """The active controller as the live nodes report it (never a frozen node)."""
        frozen = [n for n in self.c.running() if self.c.node(n).stopped]
        return self.c.wait_for_quorum(QUORUM_TIMEOUT, nodes=self.live(), brokers=harness_any(),
                                      not_controller=frozen[0] if frozen else None)

    def reassign(self, topic, replicas, expect_error=NONE):
        with kwire.Conn.to(self.c.node(self.controller()).bootstrap, 10) as conn:
            r = kwire.alter_partition_reassignments(conn, 0, {topic: {0: replicas}})
        self.assertEqual((r["error"], r["partitions"][topic][0][0]), (NONE, expect_error), r)

    def elect_preferred(self, topic):
        with kwire.Conn.to(self.c.node(self.controller()).bootstrap, 10) as conn:
            return kwire.elect_leaders(conn, 1, 0, {topic: [0]})

    def move_leader(self, topic, to, timeout=10):
        """Make `to` lead partition 0: reorder the replica list to start with it (same set),
        then a preferred election, both through the controller; wait until every live node
        says so. Returns the new partition view."""
        p = self.part(topic)
        self.reassign(topic, [to] + [r for r in p["replicas"] if r != to])
        self.wait_part(topic, lambda q: q["replicas"][0] == to, 10,
                       "node %d first in the replicas of %s" % (to, topic))
        self.wait_part(topic, lambda q: to in q["isr"], 10,
                       "node %d in the ISR of %s before its election" % (to, topic))
        last = {}

        def elected():
            last["r"] = self.elect_preferred(topic)
            return last["r"][1][topic][0][0] in (NONE, ELECTION_NOT_NEEDED)
        try:
            harness.wait_until(elected, timeout, "the preferred election of node %d" % to)
        except WaitTimeout:
            self.fail("preferred election of node %d for %s: %s; view %s; replicas' (start, "
                      "end, hw) %s" % (to, topic, last.get("r"), self.part(topic),
                                       self.ends(topic)))
        return self.wait_led_by(topic, to, timeout)

    def wait_led_by(self, topic, to, timeout):
        """Wait until every live node (the leader itself included) says `to` leads."""
        last = {}

        def cond():
            last.clear()
            for n in self.live():
                last[n] = self.part(topic, via=n)
            return all(v["leader"] == to for v in last.values())
        self.c.wait(cond, timeout, "node %d to lead %s as every live node sees it" % (to, topic),
                    state=lambda: "views: %s; replicas' (start, end, hw): %s"
                    % (last, self.ends(topic)))
        return last[to]

    def wait_leader_hw(self, topic, want, timeout):
        """Waits (bounded) until partition 0's leader answers ListOffsets(latest) >= want; at
        the end the caller's checks say what is missing, so a timeout is not an error here."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ld = self.part(topic)["leader"]
                if ld >= 1 and self.c.node(ld).alive():
                    with kwire.Conn.to(self.c.node(ld).bootstrap, 5) as conn:
                        err, hw = list_offset(conn, topic, 0, -1)
                    if not err and hw >= want:
                        return
            except (AssertionError, OSError, EOFError):
                pass
            time.sleep(0.1)

    def read_all(self, topic, timeout=20):
        """Every record of partition 0 from its log start to its high watermark, as its leader
        serves them now: ({offset: value}, (log start, high watermark)). Raw Fetch requests
        (kwire) to the leader the metadata names, bounded: a consumer group's client would
        wait for a coordinator the scenario may have just killed."""
        deadline = time.monotonic() + timeout
        out, lo, off, last = {}, None, None, None
        while time.monotonic() < deadline:
            try:
                ld = self.part(topic)["leader"]
                if ld < 1 or not self.c.node(ld).alive():
                    raise AssertionError("no live leader (%d)" % ld)
                with kwire.Conn.to(self.c.node(ld).bootstrap, 5) as conn:
                    if off is None:
                        err, lo = list_offset(conn, topic, 0, -2)
                        if err:
                            raise AssertionError("ListOffsets error %d at node %d" % (err, ld))
                        off = lo
                    r = conn.request(1, 4, kwire.fetch_v4(topic, 0, off, 1, 100))
                    err, hw, recs = kwire.parse_fetch_v4(r)
                if err:
                    raise AssertionError("Fetch at %d: error %d at node %d" % (off, err, ld))
                if off >= hw:
                    return out, (lo, hw)
                for b in read_batch_run(recs):
                    for o, v in batch_records(b):
                        if o >= off:
                            out[o] = v
                if out and max(out) + 1 > off:
                    off = max(out) + 1
            except (AssertionError, OSError, EOFError) as e:
                last = e
            time.sleep(0.05)
        raise WaitTimeout("reading %s through its high watermark within %.0fs: at offset %s, "
                          "last error %r; replicas' (start, end, hw) %s"
                          % (topic, timeout, off, last, self.ends(topic)))

    def assert_acked_readable(self, topic, acked, what, timeout=20):
        """Every acknowledged value is readable (a consumer through the leader) at its offset."""
        got, marks = self.read_all(topic, timeout=timeout)
        lost = sorted((o, v) for v, o in acked.items() if got.get(o) != v)
        if lost:
            self.fail("%s: %d of %d acknowledged records lost, e.g. %s; read %d records, "
                      "watermarks %s (first read: %s); replicas' (start, end, hw): %s\n%s"
                      % (what, len(lost), len(acked), lost[:6], len(got), marks,
                         sorted(got.items())[:3], self.ends(topic), self.c.logs(30)))

    def assert_identical(self, topic, through, nodes=None, timeout=15):
        """The replicas' segment files hold the same batches through offset `through`."""
        c, last = self.c, []
        nodes = nodes or self.part(topic)["replicas"]

        def same():
            logs = {n: read_batches(os.path.join(c.node(n).data_dir, "%s-0" % topic), through)
                    for n in nodes}
            last[:] = compare_replicas(logs, through)
            return not last
        try:
            c.wait(same, timeout, "the replicas of %s identical through offset %d"
                   % (topic, through), state=lambda: "\n".join(last))
        except WaitTimeout as e:
            vals = {n: sorted(self.values_on(n, topic).items())[:40] for n in nodes}
            raise AssertionError("%s\nvalues per replica: %s" % (e, vals)) from None

    def producer(self, **kw):
        pr = Producer(self.bootstrap(), **kw)
        self.addCleanup(pr.close)
        return pr

    # ---- 1: a restarted leader acknowledges records only it has ----

    def test_item1_restarted_leader(self):
        c = self.shared_cluster()
        topic = unique("item1")
        p = self.create(topic)
        L = p["leader"]
        followers = [r for r in p["replicas"] if r != L]
        # linger: the 10 records of the cut go in one batch (an idempotent producer has at most
        # 5 requests in flight; one-record batches would leave some unsent)
        pr = self.producer(name="producer1", **{"linger.ms": 100})
        first = [b"a-%02d" % i for i in range(20)]
        pr.send_acked(topic, first)
        self.wait_ends(topic, p["replicas"], 20)
        # the followers' fetches from L cut (for under a second: they stay in the ISR)
        c.node(L).proxy.drop("both", skip="^" + CLIENT_PREFIX)
        t_cut = time.monotonic()
        more = [b"b-%02d" % i for i in range(10)]
        pr.send(topic, more)
        self.wait_ends(topic, [L], 30, timeout=5)
        self.assertEqual([v for v in more if v in pr.acked], [],
                         "acknowledged with the followers cut off: %s" % self.ends(topic))
        c.kill9(L)
        c.start_node(L)
        cut_for = time.monotonic() - t_cut
        # the followers stay cut from L: whatever is acknowledged now must be on a follower
        acked_cut = pr.wait(more, 6)
        seen = {n: sorted(v for v in self.values_on(n, topic).values() if v in more)
                for n in followers}
        view = self.part(topic)
        print("  item 1: cut %.1fs incl. kill -9 + restart of node %d; acknowledged while cut: "
              "%d of 10; followers hold %s of them; partition now %s; (start, end, hw) %s"
              % (cut_for, L, sum(v in pr.acked for v in more),
                 {n: len(s) for n, s in seen.items()}, view, self.ends(topic)), flush=True)
        only_leader = [v for v in more if v in pr.acked and not any(v in s for s in seen.values())]
        if only_leader:
            self.fail("records acknowledged while only the restarted node %d had them (its "
                      "followers %s cut off; min.insync.replicas=2): %s; partition %s; replicas' "
                      "(start, end, hw): %s\n%s" % (L, followers, only_leader, view,
                                                    self.ends(topic), c.logs(30)))
        c.node(L).proxy.heal()
        if not acked_cut:
            self.assertTrue(pr.wait(more, 30), "not acknowledged after the heal: %s; errors %s"
                            % ([v for v in more if v not in pr.acked], pr.errors))
        # and they survive the loss of whichever broker leads now
        self.wait_part(topic, lambda q: sorted(q["isr"]) == sorted(q["replicas"]), 30,
                       "every replica of %s back in the ISR" % topic)
        acked = {v: pr.acked[v] for v in first + more}
        victim = self.part(topic)["leader"]
        c.kill9(victim)
        self.wait_part(topic, lambda q: q["leader"] not in (-1, victim), SESSION_MS / 1000 + 10,
                       "a new leader of %s after node %d died" % (topic, victim))
        self.assert_acked_readable(topic, acked, "after node %d (the leader) died" % victim)
        c.start_node(victim)

    # ---- 2: KAFKA-7128 ----

    def test_item2_rejoin_lagging_hw(self):
        # 3 voters and a broker-only node 4; the partition's replicas are 4 (A, preferred), 2
        # and 3; voter 1 keeps the metadata quorum alive while A is down and B frozen. Sessions
        # and lag are long so that the frozen B stays in the ISR (unheard) through the scenario.
        c = self.own_cluster(3, broker_only=1, name="rules-7128",
                             sets={"broker.session.timeout.ms": 15000,
                                   "replica.lag.time.max.ms": 12000})
        topic = unique("item2")
        A = 4
        self.create(topic, assignment=[A, 2, 3])
        self.wait_part(topic, lambda q: q["leader"] == A, 10, "node 4 to lead %s" % topic)
        pr = self.producer(name="producer2")
        first = [b"a-%02d" % i for i in range(10)]
        pr.send_acked(topic, first)
        self.wait_ends(topic, [A, 2, 3], 10)
        # A goes down; B (whichever of 2, 3 takes over) and C take records 10..19
        c.stop(A)
        p = self.wait_part(topic, lambda q: q["leader"] in (2, 3) and A not in q["isr"], 20,
                           "node 2 or 3 to lead %s with node 4 out of the ISR" % topic)
        B = p["leader"]
        C = 5 - B
        # C's answers from B slowed: C gets the records (and hw 10) in one answer, its next fetch
        # moves B's high watermark to 20, and the answer telling it so is still in the proxy
        # when B is frozen
        c.node(B).proxy.delay(1200, "down", only=fetcher_id(C))
        more = [b"b-%02d" % i for i in range(10)]
        pr.send_acked(topic, more, timeout=15)
        c.sigstop(B)
        c.node(B).proxy.reset()
        c.node(B).proxy.heal()
        self.wait_ends(topic, [C], 20, timeout=5)
        hw_c = self.local(C, topic)
        print("  item 2: B=%d frozen after 20 acknowledged; C=%d (start, end, hw) = (%s, %s, %s)"
              % (B, C, hw_c["log_start_offset"], hw_c["log_end_offset"],
                 hw_c["high_watermark"]), flush=True)
        acked = {v: pr.acked[v] for v in first + more}
        # C leads (B, frozen but not fenced, stays in the ISR unheard); A comes back as a
        # follower of C with C's answers to it slowed, so that it stays at 10 for a while
        self.move_leader(topic, C, timeout=15)
        c.node(C).proxy.delay(2500, "down", only=fetcher_id(A))
        c.start_node(A)
        t0 = time.monotonic()
        q = self.wait_part(topic, lambda q: A in q["isr"], 25,
                           "node 4 back in the ISR of %s (C=%d leads)" % (topic, C))
        a_end = self.file_end(A, topic)         # its files: the admin view may be 100s of ms old
        # the answer carrying 10..19 to node 4 may sit in C's proxy now: closing the connection
        # drops it (node 4 reconnects, and its answers are slowed again)
        c.node(C).proxy.reset()
        c_at = self.local(C, topic)
        joined = time.monotonic() - t0
        print("  item 2: node 4 rejoined the ISR %.1fs after its start with log end %s (C's hw "
              "%s, end %s); ISR %s" % (joined, a_end, c_at["high_watermark"],
                                       c_at["log_end_offset"], q["isr"]), flush=True)
        # the preferred replica is in the ISR: make it leader at once
        p = self.part(topic)
        self.reassign(topic, [A] + [r for r in p["replicas"] if r != A])
        self.wait_part(topic, lambda q: q["replicas"][0] == A, 10, "node 4 first again")
        err, res = self.elect_preferred(topic)
        print("  item 2: preferred election of node 4: %s %s" % (err, res), flush=True)
        c.node(C).proxy.heal()
        c.sigcont(B)
        self.wait_part(topic, lambda q: sorted(q["isr"]) == sorted(q["replicas"])
                       and q["leader"] >= 1, 40, "every replica of %s back in the ISR" % topic)
        # the new leader's high watermark starts at its own (10) and moves once its followers
        # fetched from it: what is acknowledged must become readable, in bounded time (not at
        # once: the metadata's full ISR above is the old leader's word)
        self.wait_leader_hw(topic, 20, 20)
        got, marks = self.read_all(topic)
        lost = sorted(o for v, o in acked.items() if got.get(o) != v)
        if lost or a_end < 20:
            self.fail("node 4 rejoined the ISR of %s at leader %d holding %d records where 20 "
                      "were acknowledged (the leader's hw %d, its epoch started at 20); after the "
                      "preferred election made node 4 leader (%s), %d of 20 acknowledged records "
                      "are lost (offsets %s, watermarks %s); replicas' (start, end, hw) %s\n%s"
                      % (topic, C, a_end, c_at["high_watermark"], res,
                         len(lost), lost[:10], marks, self.ends(topic), c.logs(20)))
        self.assert_identical(topic, 19)

    # ---- 3: an empty epoch answers -1 and followers truncate to 0 ----

    def test_item3_empty_epoch(self):
        # Epochs: X e0 (no write), Y e1 (20 records, everyone), X e2 (one acks=1 record at 20 only
        # X has: its followers cut), Y e3 (no write yet). X asks Y for its latest epoch 2, above
        # every epoch Y wrote in: Kafka's answer is epoch 1 ending at 20 (Y recorded e3 at 20 when
        # elected), and X cuts to 20; never to 0.
        c = self.shared_cluster()
        topic = unique("item3")
        p0 = self.create(topic)
        X = p0["leader"]
        Y, Z = [r for r in p0["replicas"] if r != X]
        p1 = self.move_leader(topic, Y)
        pr = self.producer(name="producer3")
        values = [b"a-%02d" % i for i in range(20)]
        pr.send_acked(topic, values)
        self.wait_ends(topic, [X, Y, Z], 20)
        acked = {v: pr.acked[v] for v in values}
        c.node(X).proxy.drop("both", skip="^" + CLIENT_PREFIX)
        p2 = self.move_leader(topic, X)
        pa1 = self.producer(acks="1", idempotent=False, name="producer3-acks1")
        pa1.send_acked(topic, [b"x-only"])
        # Y's answers to its followers slowed: a follower that cuts its log stays cut long
        # enough to be seen
        c.node(Y).proxy.delay(1500, "down", skip="^" + CLIENT_PREFIX)
        q = self.move_leader(topic, Y)
        c.node(X).proxy.heal()
        with kwire.Conn.to(c.node(Y).bootstrap, 5) as conn:
            ans_new = offset_for_leader_epoch(conn, topic, 0, q["leader_epoch"])
            ans_x = offset_for_leader_epoch(conn, topic, 0, p2["leader_epoch"])
        low, isr_low, t0 = {}, {}, time.monotonic()
        while time.monotonic() - t0 < 4.0:       # bounded watch: two slowed rounds
            isr = self.part(topic)["isr"]
            for n, v in self.ends(topic, [X, Z]).items():
                if isinstance(v, tuple) and v[1] < 20:
                    low[n] = min(low.get(n, 20), v[1])
                    if n in isr:
                        isr_low[n] = low[n]
            if isr_low:
                break
            time.sleep(0.05)
        c.node(Y).proxy.heal()
        logged = [n for n in (X, Z)
                  if "%s-0: truncated to 0" % topic in c.node(n).server.stderr_text()]
        print("  item 3: X=%d Y=%d Z=%d; Y leads at epoch %d with no write in it; "
              "OffsetForLeaderEpoch (error, epoch, end) at Y for epoch %d: %s, for X's epoch %d: "
              "%s; followers' lowest log end seen %s (in the ISR: %s); logged truncation to 0: %s"
              % (X, Y, Z, q["leader_epoch"], q["leader_epoch"], ans_new, p2["leader_epoch"],
                 ans_x, low, isr_low, logged), flush=True)
        if isr_low or logged:
            self.fail("followers cut their logs below the 20 acknowledged records after "
                      "node %d became leader at epoch %d without writing in it (lowest log end "
                      "seen %s, in the ISR %s; logged 'truncated to 0': %s); OffsetForLeaderEpoch "
                      "answered %s for epoch %d and %s for its own epoch\n%s"
                      % (Y, q["leader_epoch"], low, isr_low, logged, ans_x, p2["leader_epoch"],
                         ans_new, c.logs(20)))
        self.assertEqual(ans_new, (NONE, q["leader_epoch"], 20),
                         "OffsetForLeaderEpoch at the new leader for its own epoch")
        self.assertEqual(ans_x, (NONE, p1["leader_epoch"], 20),
                         "OffsetForLeaderEpoch at the new leader for the epoch X last wrote in")
        self.assert_acked_readable(topic, acked, "after the leader moves")
        self.assert_identical(topic, 19)

    # ---- 4: divergence over several epochs (KIP-279) ----

    def test_item4_multi_epoch_divergence(self):
        # Epochs: A e0 (0..9, everyone), B e1 (p1 at 10..12, B alone), A e2 (p2 at 10..14, A and
        # C), B e3 (p3 at 13..15, B alone), A e4 (p4 at 15, then everyone). Back at A, B asks for
        # its latest epoch 3; A's largest epoch <= 3 is 2, which ends at 15; B's own log has no
        # epoch 2: it must search again (epoch 1: A ends it at 10) rather than stop at 13 with
        # p1 at 10..12 where A has p2.
        c = self.shared_cluster()
        topic = unique("item4")
        p = self.create(topic)
        A = p["leader"]
        B, C = [r for r in p["replicas"] if r != A]
        pa = self.producer(name="producer4")
        base = [b"a-%02d" % i for i in range(10)]
        pa.send_acked(topic, base)
        self.wait_ends(topic, [A, B, C], 10)
        p1 = self.producer(acks="1", idempotent=False, name="producer4-acks1")
        skip = "^" + CLIENT_PREFIX
        t0 = time.monotonic()
        # e1: B leads, its followers cut
        c.node(B).proxy.drop("both", skip=skip)
        self.move_leader(topic, B)
        for i in range(3):
            p1.send_acked(topic, [b"p1-%d" % i])
        # e2: A leads, B cut from it, C follows
        c.node(A).proxy.drop("both", only=fetcher_id(B))
        self.move_leader(topic, A)
        for i in range(5):
            p1.send_acked(topic, [b"p2-%d" % i])
        self.wait_ends(topic, [A, C], 15, timeout=5)
        # e3: B leads again, its followers still cut
        self.move_leader(topic, B)
        for i in range(3):
            p1.send_acked(topic, [b"p3-%d" % i])
        # e4: A leads, writes once before anyone fetches from it, then every fault healed
        c.node(A).proxy.drop("both", skip=skip)
        self.move_leader(topic, A)
        p1.send_acked(topic, [b"p4-0"])
        cut_s = time.monotonic() - t0
        before = {n: self.ends(topic, [n])[n] for n in (A, B, C)}
        c.node(A).proxy.heal()
        c.node(B).proxy.heal()
        # acks=all from here: the high watermark moves past the divergent offsets
        tail = [b"z-%02d" % i for i in range(5)]
        pa.send_acked(topic, tail, timeout=30)
        end = pa.acked[tail[-1]]
        self.wait_part(topic, lambda q: sorted(q["isr"]) == sorted(q["replicas"]), 20,
                       "every replica of %s in the ISR" % topic)
        at10 = {n: self.values_on(n, topic).get(10) for n in (A, B, C)}
        print("  item 4: A=%d B=%d C=%d; the moves took %.1fs; (start, end, hw) before the heal "
              "%s, after %s; offset 10 per replica: %s"
              % (A, B, C, cut_s, before, self.ends(topic), at10), flush=True)
        self.assert_identical(topic, end, nodes=[A, B, C])

    # ---- 5: a topic's unclean.leader.election.enable=false ----

    def test_item5_topic_unclean_false(self):
        c = self.own_cluster(3, name="rules-unclean",
                             sets={"unclean.leader.election.enable": "true"})
        topic = unique("item5")
        p = self.create(topic, config={"unclean.leader.election.enable": "false",
                                       "min.insync.replicas": "1"})
        L = p["leader"]
        pr = self.producer(name="producer5")
        first = [b"a-%02d" % i for i in range(10)]
        pr.send_acked(topic, first)
        self.wait_ends(topic, p["replicas"], 10)
        c.node(L).proxy.drop("both", skip="^" + CLIENT_PREFIX)
        self.wait_part(topic, lambda q: q["isr"] == [L], LAG_MS / 1000 + 10,
                       "the ISR of %s to shrink to its leader %d" % (topic, L))
        more = [b"b-%02d" % i for i in range(10)]
        pr.send_acked(topic, more)
        acked = {v: pr.acked[v] for v in first + more}
        c.kill9(L)
        c.node(L).proxy.heal()
        # the only in-sync replica is gone: with unclean election off for the topic the partition
        # stays without a leader until it returns
        seen, t0 = [], time.monotonic()
        while time.monotonic() - t0 < SESSION_MS / 1000 + 3:     # bounded watch
            q = self.part(topic)
            if not seen or seen[-1] != (q["leader"], q["isr"]):
                seen.append((q["leader"], q["isr"]))
            if q["leader"] not in (-1, L):
                break
            time.sleep(0.1)
        c.start_node(L)
        if seen[-1][0] not in (-1, L):
            self.wait_part(topic, lambda q: q["leader"] >= 1, 20, "a leader of %s" % topic)
            self.wait_part(topic, lambda q: sorted(q["isr"]) == sorted(q["replicas"]), 30,
                           "every replica of %s in the ISR" % topic)
            got, marks = self.read_all(topic)
            lost = sorted(o for v, o in acked.items() if got.get(o) != v)
            self.fail("node %d, out of sync, was elected leader of %s although the topic sets "
                      "unclean.leader.election.enable=false (broker default true); (leader, isr) "
                      "seen: %s; after node %d returned %d of 20 acknowledged records are lost "
                      "(offsets %s)\n%s" % (seen[-1][0], topic, seen, L, len(lost), lost[:10],
                                            c.logs(20)))
        self.wait_part(topic, lambda q: q["leader"] == L, 20, "node %d to lead %s again"
                       % (L, topic))
        self.assert_acked_readable(topic, acked, "after node %d returned" % L)

    # ---- 6: DeleteRecords is replicated ----

    def test_item6_delete_records(self):
        c = self.shared_cluster()
        topic = unique("item6")
        p = self.create(topic)
        L = p["leader"]
        pr = self.producer(name="producer6")
        pr.send_acked(topic, [b"a-%02d" % i for i in range(20)])
        self.wait_ends(topic, p["replicas"], 20)
        with kwire.Conn.to(c.node(L).bootstrap, 20) as conn:
            err, low = delete_records(conn, topic, 0, 10)
        self.assertEqual((err, low), (NONE, 10), "DeleteRecords at the leader %d" % L)
        # answered: the low watermark over the replicas has reached 10 (Kafka's rule); the
        # admin view is a snapshot, give it a moment
        starts = {}

        def moved():
            starts.clear()
            starts.update(self.ends(topic, p["replicas"]))
            return all(isinstance(v, tuple) and v[0] >= 10 for v in starts.values())
        try:
            harness.wait_until(moved, 5, "log start 10 on every replica")
            replicated = True
        except WaitTimeout:
            replicated = False
        to = next(r for r in p["replicas"] if r != L)
        self.move_leader(topic, to)
        with kwire.Conn.to(c.node(to).bootstrap, 5) as conn:
            earliest = list_offset(conn, topic, 0, -2)
            r = conn.request(1, 4, kwire.fetch_v4(topic, 0, 0, 1, 100))
            ferr, _, recs = kwire.parse_fetch_v4(r)
        print("  item 6: DeleteRecords(10) at node %d answered low watermark %d; replicas' "
              "(start, end, hw) %s; after the move to node %d: earliest %s, fetch at 0 error %d "
              "(%d records)" % (L, low, starts, to, earliest, ferr, kwire.count_records(recs)),
              flush=True)
        self.assertEqual(earliest, (NONE, 10),
                         "ListOffsets(earliest) at the new leader %d after DeleteRecords(10) "
                         "at node %d; replicas' (start, end, hw) when it was answered: %s"
                         % (to, L, starts))
        self.assertEqual(ferr, OFFSET_OUT_OF_RANGE,
                         "a fetch at offset 0 from the new leader %d read %d deleted records"
                         % (to, kwire.count_records(recs)))
        self.assertTrue(replicated, "DeleteRecords answered with low watermark 10 while the "
                        "replicas' (start, end, hw) were %s" % starts)

    # ---- 7: a reassignment never drops the only in-sync replica ----

    def test_item7_reassign_keeps_isr(self):
        c = self.shared_cluster()
        topic = unique("item7")
        p = self.create(topic, config={"min.insync.replicas": "1"})
        L = p["leader"]
        original = list(p["replicas"])
        others = [r for r in original if r != L]
        pr = self.producer(name="producer7")
        first = [b"a-%02d" % i for i in range(20)]
        pr.send_acked(topic, first)
        self.wait_ends(topic, original, 20)
        c.node(L).proxy.drop("both", skip="^" + CLIENT_PREFIX)
        self.wait_part(topic, lambda q: q["isr"] == [L], LAG_MS / 1000 + 10,
                       "the ISR of %s to shrink to its leader %d" % (topic, L))
        more = [b"b-%02d" % i for i in range(10)]
        pr.send_acked(topic, more)
        acked = {v: pr.acked[v] for v in first + more}

        def listed():
            with kwire.Conn.to(c.node(self.controller()).bootstrap, 10) as conn:
                err, msg, out = kwire.list_partition_reassignments(conn, {topic: [0]})
            self.assertEqual(err, NONE, msg)
            return out.get(topic, {}).get(0)

        # reassign to the two lagging replicas: pending while they cannot catch up
        self.reassign(topic, others)
        views, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 2.0:         # bounded watch of the pending reassignment
            q = self.part(topic)
            if not views or views[-1] != (q["leader"], q["replicas"], q["isr"]):
                views.append((q["leader"], q["replicas"], q["isr"]))
            if q["leader"] != L or L not in q["replicas"]:
                break
            time.sleep(0.1)
        pending = listed()
        print("  item 7: ISR [%d]; reassigned to %s; (leader, replicas, isr) seen: %s; "
              "ListPartitionReassignments: %s; (start, end, hw) %s"
              % (L, others, views, pending, self.ends(topic)), flush=True)
        last = views[-1]
        if last[0] != L or L not in last[1]:
            c.node(L).proxy.heal()
            got, marks = self.read_all(topic)
            lost = sorted(o for v, o in acked.items() if got.get(o) != v)
            self.fail("the reassignment of %s to %s dropped its only in-sync replica %d: "
                      "(leader, replicas, isr) seen %s; %d of 30 acknowledged records lost "
                      "(offsets %s)\n%s" % (topic, others, L, views, len(lost), lost[:12],
                                            c.logs(20)))
        self.assertIsNotNone(pending, "no reassignment of %s listed while it is pending" % topic)
        replicas, adding, removing = pending
        self.assertEqual((sorted(replicas), sorted(adding), sorted(removing)),
                         (sorted(original), [], [L]),
                         "ListPartitionReassignments (replicas, adding, removing) while pending")
        # cancelled: back to the original replicas, nothing listed
        self.reassign(topic, None)
        self.wait_part(topic, lambda q: sorted(q["replicas"]) == sorted(original)
                       and q["leader"] == L, 10, "the cancelled reassignment's replicas")
        self.assertIsNone(listed(), "a cancelled reassignment still listed")
        # again, and this time the targets catch up: the move completes without a loss
        self.reassign(topic, others)
        c.node(L).proxy.heal()
        self.wait_part(topic, lambda q: sorted(q["replicas"]) == sorted(others)
                       and sorted(q["isr"]) == sorted(others) and q["leader"] in others, 30,
                       "the reassignment of %s to %s to complete" % (topic, others))
        self.assertIsNone(listed(), "a completed reassignment still listed")
        self.assert_acked_readable(topic, acked, "after the reassignment to %s" % others)

    # ---- also found: an acks=all Produce past its timeout_ms is answered ----

    def test_item8_produce_timeout_answered(self):
        c = self.shared_cluster()
        topic = unique("item8")
        p = self.create(topic)
        L = p["leader"]
        pr = self.producer(name="producer8")
        pr.send_acked(topic, [b"a-%02d" % i for i in range(5)])
        self.wait_ends(topic, p["replicas"], 5)
        # the followers' fetches cut: the ISR (still all three for replica.lag.time.max.ms)
        # cannot have the next batch
        c.node(L).proxy.drop("both", skip="^" + CLIENT_PREFIX)
        try:
            body = (kwire.i16(-1) + kwire.i16(-1) + kwire.i32(1000) + kwire.i32(1)
                    + kwire.string(topic) + kwire.i32(1) + kwire.i32(0))
            recs = cli_segment.batch(0, [(b"k", b"late")])
            body += kwire.i32(len(recs)) + recs
            with kwire.Conn.to(c.node(L).bootstrap, 10) as conn:
                t0 = time.monotonic()
                r = conn.request(0, 3, body, client_id=CLIENT_PREFIX + "raw8", timeout=10)
                took = time.monotonic() - t0
            r.i32()
            r.string()
            r.i32()
            r.i32()
            err = r.i16()
        finally:
            c.node(L).proxy.heal()
        print("  item 8: acks=all Produce with timeout_ms 1000 and the followers cut: error %d "
              "after %.2fs" % (err, took), flush=True)
        self.assertEqual(err, REQUEST_TIMED_OUT,
                         "an acks=all Produce the ISR could not acknowledge within its timeout")
        self.assertLess(took, 5.0, "answered only after %.1fs (timeout_ms 1000)" % took)

def harness_any():
    import cluster
    return cluster.ANY


if __name__ == "__main__":
    harness.main()
