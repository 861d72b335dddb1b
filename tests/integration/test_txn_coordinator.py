"""The transaction coordinator (issue 21): __transaction_state created by FindCoordinator
(key type 1), InitProducerId with a transactional id (new producer id, epoch bump, fencing of
the older producer, INVALID_TRANSACTION_TIMEOUT), AddPartitionsToTxn (v1 and v3, and the v4
verify-only form), EndTxn (v3 and v5: the epoch bumped at the end), DescribeTransactions and
ListTransactions over raw wire (kwire.py), the state kept across a restart, a transaction past
its timeout aborted with its producer fenced; then confluent-kafka (librdkafka) through
init_transactions, begin and commit/abort of transactions with nothing produced, then with
records: a read_committed consumer sees exactly the committed ones, a read_uncommitted one the
aborted ones too, and an older producer with the same transactional.id is fenced at commit.
TxnClusterTest: three brokers, RF=3 and min.insync.replicas=2: transactions committed and
aborted, the coordinator's broker killed with SIGKILL, a new producer with the same
transactional.id carrying on through the new coordinator, exactly the committed records seen.

Markers go to the partition leaders with WriteTxnMarkers: where this broker does not
advertise it yet (the receiving side is another piece of issue 21), a transaction with
partitions stays in PrepareCommit/PrepareAbort and the test checks that; once it does, the
test waits for CompleteCommit/CompleteAbort instead."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
import txnlib  # noqa: E402
from admin_client import scrape  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from kwire import (TAGS_NONE, compact_array, compact_string, i8, i16, i32, i64,  # noqa: E402
                   boolean, string)

NONE = 0
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120
RETRIABLE = (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
             CONCURRENT_TRANSACTIONS)

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 10, 22, 24, 26
WRITE_TXN_MARKERS, DESCRIBE_TXNS, LIST_TXNS = 27, 65, 66

MAX_TIMEOUT = 120000


def find_coordinator(c, txn_id):
    r = c.request(FIND_COORDINATOR, 1, string(txn_id) + i8(1))
    r.i32()
    err = r.i16()
    r.string()
    return err, r.i32()


def init_pid(c, txn_id, timeout=60000, pid=-1, epoch=-1, version=4):
    body = compact_string(txn_id) + i32(timeout)
    if version >= 3:
        body += i64(pid) + i16(epoch)
    r = c.request(INIT_PRODUCER_ID, version, body + TAGS_NONE, flexible=True)
    r.i32()
    err, p, e = r.i16(), r.i64(), r.i16()
    r.tags()
    r.end()
    return err, p, e


def add_partitions(c, txn_id, pid, epoch, topics, version=3):
    """{topic: [partitions]} into the transaction; returns {(topic, partition): error}."""
    if version >= 3:
        def topic(t):
            return (compact_string(t[0]) + compact_array(t[1], i32) + TAGS_NONE)
        body = (compact_string(txn_id) + i64(pid) + i16(epoch) +
                compact_array(list(topics.items()), topic) + TAGS_NONE)
        r = c.request(ADD_PARTITIONS, version, body, flexible=True)
        r.i32()

        def part(rr):
            v = (rr.i32(), rr.i16())
            rr.tags()
            return v

        def tres(rr):
            name = rr.compact_string()
            ps = rr.compact_array(part)
            rr.tags()
            return name, ps
        res = r.compact_array(tres)
        r.tags()
    else:
        def topic(t):
            return string(t[0]) + kwire.array(t[1], i32)
        body = string(txn_id) + i64(pid) + i16(epoch) + kwire.array(list(topics.items()), topic)
        r = c.request(ADD_PARTITIONS, version, body)
        r.i32()
        res = r.array(lambda rr: (rr.string(), rr.array(lambda r2: (r2.i32(), r2.i16()))))
    r.end()
    return {(name, p): e for name, ps in res for p, e in ps}


def verify(c, txn_id, pid, epoch, topics):
    """AddPartitionsToTxn v4 verify_only: {(topic, partition): error}, top-level error."""
    def topic(t):
        return compact_string(t[0]) + compact_array(t[1], i32) + TAGS_NONE
    txn = (compact_string(txn_id) + i64(pid) + i16(epoch) + boolean(True) +
           compact_array(list(topics.items()), topic) + TAGS_NONE)
    r = c.request(ADD_PARTITIONS, 4, compact_array([txn], lambda x: x) + TAGS_NONE,
                  flexible=True)
    r.i32()
    top = r.i16()

    def part(rr):
        v = (rr.i32(), rr.i16())
        rr.tags()
        return v

    def tres(rr):
        name = rr.compact_string()
        ps = rr.compact_array(part)
        rr.tags()
        return name, ps

    def xres(rr):
        tid = rr.compact_string()
        ts = rr.compact_array(tres)
        rr.tags()
        return tid, ts
    res = r.compact_array(xres)
    r.tags()
    r.end()
    assert [t for t, _ in res] == [txn_id]
    return top, {(name, p): e for name, ps in res[0][1] for p, e in ps}


def end_txn(c, txn_id, pid, epoch, commit, version=3):
    body = compact_string(txn_id) + i64(pid) + i16(epoch) + boolean(commit) + TAGS_NONE
    r = c.request(END_TXN, version, body, flexible=True)
    r.i32()
    err = r.i16()
    out = (err,)
    if version >= 5:
        out = (err, r.i64(), r.i16())
    r.tags()
    r.end()
    return out


def describe(c, txn_id):
    """DescribeTransactions of one id (txnlib's decoder): its entry."""
    out = txnlib.describe_transactions_on(c, [txn_id])
    assert list(out) == [txn_id], out
    return out[txn_id]


def list_txns(c, states=(), pids=(), duration=-1):
    body = (compact_array(list(states), compact_string) + compact_array(list(pids), i64) +
            i64(duration) + TAGS_NONE)
    r = c.request(LIST_TXNS, 1, body, flexible=True)
    r.i32()
    err = r.i16()
    unknown = r.compact_array(lambda rr: rr.compact_string())

    def st(rr):
        v = (rr.compact_string(), rr.i64(), rr.compact_string())
        rr.tags()
        return v
    txns = r.compact_array(st)
    r.tags()
    r.end()
    return err, unknown, {t[0]: (t[1], t[2]) for t in txns}


class TxnCoordinatorTest(ServerTestCase):
    SMP = 2
    SETS = {"transaction.max.timeout.ms": str(MAX_TIMEOUT),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
            "transaction.state.log.num.partitions": "4"}

    def coordinator(self, c, txn_id):
        """FindCoordinator until it answers (the first one creates __transaction_state)."""
        out = {}

        def ok():
            out["v"] = find_coordinator(c, txn_id)
            return out["v"][0] == NONE
        wait_until(ok, 30, "a transaction coordinator")
        return out["v"][1]

    def init(self, c, txn_id, **kw):
        """InitProducerId, retried while the answer is retriable."""
        out = {}

        def ok():
            out["v"] = init_pid(c, txn_id, **kw)
            return out["v"][0] not in RETRIABLE
        wait_until(ok, 30, "InitProducerId of " + txn_id)
        return out["v"]

    def markers_served(self, c):
        keys = kwire.api_versions(c)[1]
        return WRITE_TXN_MARKERS in keys

    def wait_state(self, c, txn_id, states):
        out = {}

        def ok():
            out["d"] = describe(c, txn_id)
            return out["d"]["state"] in states
        wait_until(ok, 20, "%s in %s" % (txn_id, states))
        return out["d"]

    def test_wire_lifecycle(self):
        topic = self.unique("txn")
        kc.create_topic(self.bootstrap, topic, 3)
        tid = self.unique("tid")
        with kwire.Conn.to(self.bootstrap) as c:
            # Before the topic exists an InitProducerId has no coordinator here.
            node = self.coordinator(c, tid)
            self.assertGreaterEqual(node, 0)
            err, pid, epoch = self.init(c, tid)
            self.assertEqual((err, epoch), (NONE, 0))
            self.assertEqual(describe(c, tid)["state"], "Empty")
            # timeouts above transaction.max.timeout.ms, or none, are refused
            self.assertEqual(init_pid(c, tid, timeout=MAX_TIMEOUT + 1)[0],
                             INVALID_TRANSACTION_TIMEOUT)
            self.assertEqual(init_pid(c, tid, timeout=0)[0], INVALID_TRANSACTION_TIMEOUT)
            self.assertEqual(describe(c, "nobody-" + tid)["error"], TRANSACTIONAL_ID_NOT_FOUND)
            # a new incarnation bumps the epoch and fences the first
            err, pid2, epoch2 = self.init(c, tid)
            self.assertEqual((err, pid2, epoch2), (NONE, pid, 1))
            self.assertEqual(add_partitions(c, tid, pid, 0, {topic: [0]}),
                             {(topic, 0): PRODUCER_FENCED})
            self.assertEqual(add_partitions(c, tid, pid, 0, {topic: [0]}, version=1),
                             {(topic, 0): INVALID_PRODUCER_EPOCH}, "v0-1 clients' code")
            self.assertEqual(add_partitions(c, tid, pid + 1, 1, {topic: [0]}),
                             {(topic, 0): INVALID_PRODUCER_ID_MAPPING})
            # v3+ InitProducerId with the old epoch: fenced
            self.assertEqual(init_pid(c, tid, pid=pid, epoch=0)[0], PRODUCER_FENCED)
            self.assertEqual(end_txn(c, tid, pid, 1, True), (INVALID_TXN_STATE,))
            # an unknown partition fails the whole request, nothing added
            self.assertEqual(add_partitions(c, tid, pid, 1, {topic: [0, 7]}),
                             {(topic, 0): OPERATION_NOT_ATTEMPTED,
                              (topic, 7): UNKNOWN_TOPIC_OR_PARTITION})
            self.assertEqual(describe(c, tid)["state"], "Empty")
            self.assertEqual(add_partitions(c, tid, pid, 1, {topic: [0, 1]}),
                             {(topic, 0): NONE, (topic, 1): NONE})
            d = describe(c, tid)
            self.assertEqual((d["state"], d["producer_id"], d["epoch"]), ("Ongoing", pid, 1))
            self.assertEqual(sorted(d["partitions"][topic]), [0, 1])
            self.assertGreater(d["start_ms"], 0)
            # the broker-to-broker check of KIP-890
            top, v = verify(c, tid, pid, 1, {topic: [0, 2]})
            self.assertEqual((top, v), (NONE, {(topic, 0): NONE, (topic, 2): TRANSACTION_ABORTABLE}))
            self.assertEqual(verify(c, tid, pid, 0, {topic: [0]})[1], {(topic, 0): PRODUCER_FENCED})
            err, unknown, txns = list_txns(c, states=["Ongoing", "Bogus"])
            self.assertEqual((err, unknown), (NONE, ["Bogus"]))
            self.assertEqual(txns.get(tid), (pid, "Ongoing"))
            self.assertNotIn(tid, list_txns(c, pids=[pid + 12345])[2])
            self.assertIn(tid, list_txns(c, pids=[pid])[2])
            self.assertNotIn(tid, list_txns(c, states=["Ongoing"], duration=3600_000)[2])
            # commit: answered once PrepareCommit is durable
            self.assertEqual(end_txn(c, tid, pid, 1, True), (NONE,))
            if self.markers_served(c):
                self.wait_state(c, tid, ["CompleteCommit"])
                self.assertEqual(end_txn(c, tid, pid, 1, True), (NONE,), "a retry is OK")
            else:
                self.assertEqual(describe(c, tid)["state"], "PrepareCommit")
                self.assertEqual(end_txn(c, tid, pid, 1, True), (CONCURRENT_TRANSACTIONS,))
                self.assertEqual(end_txn(c, tid, pid, 1, False), (INVALID_TXN_STATE,))

        # The state is durable: after a restart the same producer id, epoch and state.
        before = None
        with kwire.Conn.to(self.bootstrap) as c:
            before = describe(c, tid)
        self.server.restart(clean=False)
        with kwire.Conn.to(self.server.bootstrap) as c:
            out = {}

            def loaded():
                out["d"] = describe(c, tid)
                return out["d"]["error"] not in RETRIABLE
            wait_until(loaded, 30, "the coordinator after the restart")
            d = out["d"]
            self.assertEqual((d["error"], d["producer_id"], d["epoch"]), (NONE, pid, 1))
            self.assertEqual(d["state"] in ("PrepareCommit", "CompleteCommit"), True, d)
            if before["state"] == "CompleteCommit":
                self.assertEqual(d["state"], "CompleteCommit")

    def test_api_versions_features(self):
        with kwire.Conn.to(self.bootstrap) as c:
            body = compact_string("strata-it") + compact_string("1.0") + TAGS_NONE
            r = c.request(18, 3, body, flexible=True, flexible_response=False)
            self.assertEqual(r.i16(), NONE)

            def key(rr):
                v = (rr.i16(), rr.i16(), rr.i16())
                rr.tags()
                return v
            keys = {k: (lo, hi) for k, lo, hi in r.compact_array(key)}
            r.i32()
            tags = r.tags()
            r.end()
            for api in (ADD_PARTITIONS, 25, END_TXN, DESCRIBE_TXNS, LIST_TXNS):
                self.assertIn(api, keys)
            self.assertEqual(keys[ADD_PARTITIONS], (0, 5))
            self.assertEqual(keys[END_TXN], (0, 5))
            t = kwire.Reader(tags[0])

            def feature(rr):
                v = (rr.compact_string(), rr.i16(), rr.i16())
                rr.tags()
                return v
            self.assertIn(("transaction.version", 0, 2), t.compact_array(feature))
            self.assertEqual(kwire.Reader(tags[1]).i64(), 0, "finalized_features_epoch")

    def test_empty_transaction_and_v5_epoch_bump(self):
        tid = self.unique("v5")
        with kwire.Conn.to(self.bootstrap) as c:
            self.coordinator(c, tid)
            err, pid, epoch = self.init(c, tid)
            self.assertEqual(err, NONE)
            # AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction
            body = string(tid) + i64(pid) + i16(epoch) + string("grp-" + tid)
            r = c.request(25, 1, body)
            r.i32()
            self.assertEqual(r.i16(), NONE)
            d = describe(c, tid)
            self.assertEqual(d["state"], "Ongoing")
            self.assertEqual(list(d["partitions"]), ["__consumer_offsets"])
            # EndTxn v5 (transactions v2): the epoch is bumped at the end and answered
            err, p5, e5 = end_txn(c, tid, pid, epoch, False, version=5)
            self.assertEqual((err, p5, e5), (NONE, pid, epoch + 1))
            self.assertEqual(describe(c, tid)["epoch"], epoch + 1)

    def test_timeout_aborts_and_fences(self):
        topic = self.unique("slow")
        kc.create_topic(self.bootstrap, topic, 1)
        tid = self.unique("slow")
        with kwire.Conn.to(self.bootstrap) as c:
            self.coordinator(c, tid)
            err, pid, epoch = self.init(c, tid, timeout=1000)
            self.assertEqual(add_partitions(c, tid, pid, epoch, {topic: [0]}),
                             {(topic, 0): NONE})
            d = self.wait_state(c, tid, ["PrepareAbort", "CompleteAbort"])
            self.assertEqual(d["epoch"], epoch + 1, "the producer is fenced")
            self.assertEqual(end_txn(c, tid, pid, epoch, True), (PRODUCER_FENCED,))
            # a new incarnation gets on with it once the abort is complete (or is told to wait)
            err = self.init(c, tid)[0] if self.markers_served(c) else init_pid(c, tid)[0]
            self.assertIn(err, (NONE, CONCURRENT_TRANSACTIONS))

    def test_confluent_init_and_empty_transactions(self):
        try:
            import confluent_kafka as ck
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is not installed")
        tid = self.unique("ck")
        conf = {"bootstrap.servers": self.bootstrap, "transactional.id": tid,
                "transaction.timeout.ms": 60000}
        p1 = ck.Producer(conf)
        p1.init_transactions(30)
        p1.begin_transaction()
        p1.commit_transaction(30)
        p1.begin_transaction()
        p1.abort_transaction(30)
        with kwire.Conn.to(self.bootstrap) as c:
            d1 = describe(c, tid)
        self.assertEqual(d1["error"], NONE)
        # a second producer with the same transactional.id fences the first
        p2 = ck.Producer(conf)
        p2.init_transactions(30)
        with kwire.Conn.to(self.bootstrap) as c:
            d2 = describe(c, tid)
        self.assertEqual(d2["producer_id"], d1["producer_id"])
        self.assertEqual(d2["epoch"], d1["epoch"] + 1)
        p2.begin_transaction()
        p2.commit_transaction(30)
        # a timeout above transaction.max.timeout.ms is refused at init
        bad = ck.Producer(dict(conf, **{"transactional.id": tid + "-bad",
                                        "transaction.timeout.ms": MAX_TIMEOUT + 1}))
        with self.assertRaises(ck.KafkaException) as ctx:
            bad.init_transactions(30)
        self.assertEqual(ctx.exception.args[0].code(),
                         ck.KafkaError.INVALID_TRANSACTION_TIMEOUT)

    def consume_all(self, topic, partitions, isolation):
        return sorted(v for _, _, _, v in txnlib.read_topic(self.bootstrap, topic, partitions,
                                                             isolation))

    def test_confluent_commit_and_abort_round_trips(self):
        try:
            import confluent_kafka as ck
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is not installed")
        topic = self.unique("data")
        kc.create_topic(self.bootstrap, topic, 2)
        tid = self.unique("rt")
        conf = {"bootstrap.servers": self.bootstrap, "transactional.id": tid}
        p = ck.Producer(conf)
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=b"c%d" % i, partition=i % 2)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, value=b"a%d" % i, partition=i % 2)
        p.flush(30)  # written, then aborted (not purged from the queue unsent)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, value=b"c-last", partition=1)
        p.commit_transaction(30)
        with kwire.Conn.to(self.bootstrap) as c:
            d = self.wait_state(c, tid, ["CompleteCommit"])
            self.assertEqual(d["partitions"], {})
        committed = sorted([b"c%d" % i for i in range(6)] + [b"c-last"])
        self.assertEqual(self.consume_all(topic, 2, "read_committed"), committed)
        self.assertEqual(self.consume_all(topic, 2, "read_uncommitted"),
                         sorted(committed + [b"a%d" % i for i in range(4)]))

        # zombie fencing: once a new producer initialised, the old one cannot commit
        zombie = p
        zombie.begin_transaction()
        zombie.produce(topic, value=b"zombie", partition=0)
        zombie.flush(30)
        fresh = ck.Producer(conf)
        fresh.init_transactions(30)  # aborts the zombie's transaction, fences its epoch
        with self.assertRaises(ck.KafkaException) as ctx:
            zombie.commit_transaction(30)
        self.assertTrue(ctx.exception.args[0].fatal() or
                        ctx.exception.args[0].txn_requires_abort(), ctx.exception)
        fresh.begin_transaction()
        fresh.produce(topic, value=b"fresh", partition=0)
        fresh.commit_transaction(30)
        got = self.consume_all(topic, 2, "read_committed")
        self.assertIn(b"fresh", got)
        self.assertNotIn(b"zombie", got)


    def test_coordinator_metrics(self):
        """/metrics counts the coordinator's transactions: a commit, an abort and a timeout
        each move their counter by one, the ids are counted by state, and every
        __transaction_state partition is coordinated by some shard."""
        topic = self.unique("met")
        kc.create_topic(self.bootstrap, topic, 1)
        tid = self.unique("met")

        def totals():
            m = scrape(self.server.admin_port)
            return (m.sum("strata_txn_coordinator_transactions_total", result="commit"),
                    m.sum("strata_txn_coordinator_transactions_total", result="abort"),
                    m.sum("strata_txn_coordinator_timed_out_total"), m)
        with kwire.Conn.to(self.bootstrap) as c:
            self.coordinator(c, tid)
            # every partition loaded somewhere (and published) before the counts are taken
            wait_until(lambda: totals()[3].sum("strata_txn_coordinator_partitions") == 4, 20,
                       "4 __transaction_state partitions coordinated")
            c0, a0, t0, _ = totals()
            err, pid, epoch = self.init(c, tid, timeout=60000)
            self.assertEqual(err, NONE)
            for commit in (True, False):
                self.assertEqual(add_partitions(c, tid, pid, epoch, {topic: [0]}),
                                 {(topic, 0): NONE})
                self.assertEqual(end_txn(c, tid, pid, epoch, commit), (NONE,))
                self.wait_state(c, tid, ["CompleteCommit" if commit else "CompleteAbort"])
            wait_until(lambda: totals()[:2] == (c0 + 1, a0 + 1), 20,
                       "one commit and one abort counted")
            m = totals()[3]
            self.assertGreaterEqual(m.sum("strata_txn_coordinator_transactional_ids",
                                          state="CompleteAbort"), 1)
            # an open transaction is Ongoing, then times out: aborted and counted as such
            slow = self.unique("met-slow")
            self.coordinator(c, slow)
            err, spid, sepoch = self.init(c, slow, timeout=1000)
            self.assertEqual(add_partitions(c, slow, spid, sepoch, {topic: [0]}),
                             {(topic, 0): NONE})
            self.wait_state(c, slow, ["CompleteAbort"])
            wait_until(lambda: totals()[1:3] == (a0 + 2, t0 + 1), 20,
                       "the timed-out transaction counted (abort and timeout)")
            self.assertEqual(totals()[0], c0 + 1)


class TxnClusterTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        import cluster as cl
        self.cluster = cl.Cluster(3, name="txn", sets={"broker.session.timeout.ms": "3000"})
        try:
            self.cluster.start()
            self.cluster.wait_for_quorum(30)
        except BaseException:
            self.cluster.close()
            raise

    def tearDown(self):
        try:
            self.cluster.stop_all()
        finally:
            self.cluster.close()

    def bootstrap(self, nodes):
        return ",".join(self.cluster.node(n).bootstrap for n in nodes)

    def coordinator_of(self, nid, tid):
        out = {}

        def ok():
            try:
                with kwire.Conn.to(self.cluster.node(nid).bootstrap) as c:
                    out["v"] = find_coordinator(c, tid)
            except OSError:
                return False
            return out["v"][0] == NONE
        wait_until(ok, 60, "the coordinator of " + tid)
        return out["v"][1]

    def consume(self, bootstrap, topic, partitions, isolation):
        return sorted(v for _, _, _, v in txnlib.read_topic(bootstrap, topic, partitions,
                                                             isolation, timeout=60))

    def test_coordinator_killed(self):
        try:
            import confluent_kafka as ck
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is not installed")
        topic = "txn-rf3-%d" % os.getpid()
        from confluent_kafka.admin import NewTopic
        a = kc.admin(self.bootstrap([1, 2, 3]))
        a.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[topic].result(timeout=60)

        def led():
            t = a.list_topics(topic, timeout=5).topics.get(topic)
            return (t is not None and not t.error and len(t.partitions) == 3 and
                    all(pm.leader >= 1 and len(pm.isrs) == 3 for pm in t.partitions.values()))
        wait_until(led, 60, "%s led, its ISRs full" % topic)
        tid = "txn-cluster-%d" % os.getpid()
        conf = {"bootstrap.servers": self.bootstrap([1, 2, 3]), "transactional.id": tid}
        p = ck.Producer(conf)
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(9):
            p.produce(topic, value=b"c%d" % i, partition=i % 3)
        p.commit_transaction(60)
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"a%d" % i, partition=i % 3)
        p.flush(30)
        p.abort_transaction(60)
        victim = self.coordinator_of(1, tid)
        self.assertIn(victim, (1, 2, 3))
        self.cluster.kill9(victim)
        rest = [n for n in (1, 2, 3) if n != victim]
        # the application restarts with the same transactional.id, on the new coordinator
        p2 = ck.Producer(dict(conf, **{"bootstrap.servers": self.bootstrap(rest)}))
        p2.init_transactions(60)
        p2.begin_transaction()
        for i in range(6):
            p2.produce(topic, value=b"d%d" % i, partition=i % 3)
        p2.commit_transaction(60)
        new = self.coordinator_of(rest[0], tid)
        self.assertNotEqual(new, victim)
        with kwire.Conn.to(self.cluster.node(new).bootstrap) as c:
            out = {}

            def complete():
                out["d"] = describe(c, tid)
                return out["d"]["state"] == "CompleteCommit"
            wait_until(complete, 30, "CompleteCommit on the new coordinator")
            self.assertGreaterEqual(out["d"]["epoch"], 1)
        want = sorted([b"c%d" % i for i in range(9)] + [b"d%d" % i for i in range(6)])
        self.assertEqual(self.consume(self.bootstrap(rest), topic, 3, "read_committed"), want)
        self.cluster.restart(victim)


if __name__ == "__main__":
    harness.main()
