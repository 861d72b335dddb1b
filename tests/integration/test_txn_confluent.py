"""Transactions end to end with confluent-kafka (librdkafka) (issue 21).

One broker:
  - consume-transform-produce: an input topic of N keyed records; the application (txnlib.Ctp)
    reads it with read_committed, writes one record per input record to an output topic in
    transactions of K records with its offsets (send_offsets_to_transaction), aborts every
    fourth transaction on purpose and processes those records again. A read_committed reader
    of the output sees every input exactly once and no record of an aborted transaction; a
    read_uncommitted reader sees the aborted ones too; the LSO reaches the high watermark; the
    group's committed offsets are the input's ends.
  - zombie fencing: a second producer with the same transactional.id initialises while the
    first has a transaction open: the first one's commit fails with a fatal (fenced) error, its
    records never become visible to read_committed, the second commits.
  - a producer killed (SIGKILL) mid-transaction, transaction.timeout.ms 2 s: the LSO stays at
    its first record (a later non-transactional record is not visible to read_committed) until
    the coordinator aborts it after its timeout; then the LSO moves to the high watermark and
    read_committed sees the later record.
  - DescribeTransactions reports Ongoing (with the partitions added) and CompleteCommit.

Three brokers (RF=3, min.insync.replicas=2): the same consume-transform-produce while the
transaction coordinator's broker (FindCoordinator key_type=1) is killed with SIGKILL twice and
restarted; one incarnation of the application also dies with a transaction open on purpose, and
the application restarts with the same transactional.id after that and after any fatal error.
At the end every input is in the output exactly once for read_committed.

Every loop is bounded in count and time.
"""

import os
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE if os.path.exists(os.path.join(HERE, "harness.py"))
                else os.path.dirname(HERE))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import txnlib  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

N = 600                   # input records, single broker
K = 20                    # records per transaction
PARTITIONS = 3
TXN_TIMEOUT_MS = 2000     # the hanging producer's transaction.timeout.ms
CLEANUP_MS = 500          # transaction.abort.timed.out.transaction.cleanup.interval.ms

SINGLE_SETS = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(CLEANUP_MS),
    "auto.create.topics.enable": "false",
}

HANGING = r"""
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
              "transaction.timeout.ms": int(sys.argv[4]), "client.id": "it-hanging"})
p.init_transactions(30)
t0 = time.time()
p.begin_transaction()
for i in range(3):
    p.produce(sys.argv[3], value=b"hanging-%d" % i, partition=0)
assert p.flush(30) == 0
print("ready %.3f" % t0, flush=True)
sys.stdin.readline()
"""


def check_exactly_once(tc, committed_view, uncommitted_view, n, apps):
    """The output as read_committed and read_uncommitted see it, against what the application
    incarnations did: every input number 0..n-1 exactly once for read_committed, never an
    aborted (or abandoned) transaction's record; read_uncommitted holds every record of the
    transactions aborted on purpose."""
    seen = txnlib.output_index(committed_view)
    aborted = {t for a in apps for t in a.aborted}
    forced = {t for a in apps for t in a.forced}
    crashed = {a.crashed for a in apps if a.crashed}
    missing = sorted(set(range(n)) - set(seen))
    twice = {i: tags for i, tags in seen.items() if len(tags) > 1}
    visible_aborted = {i: tags for i, tags in seen.items() if set(tags) & (aborted | crashed)}
    tc.assertEqual((missing[:20], len(missing)), ([], 0), "inputs missing from the output")
    tc.assertEqual(twice, {}, "inputs in the output more than once (with their transactions)")
    tc.assertEqual(visible_aborted, {}, "records of aborted transactions seen by read_committed")
    tc.assertEqual(len(committed_view), n)
    # read_uncommitted: the aborted transactions' records are there, each as many as written.
    tags = {}
    for _, _, _, v in uncommitted_view:
        t = v.rsplit(b"|", 1)[1].decode()
        tags[t] = tags.get(t, 0) + 1
    sizes = {t: s for a in apps for t, s in a.sizes.items()}
    delivered = {t: d for a in apps for t, d in a.delivered.items()}
    for t in sorted(aborted | crashed):
        # Every record reported delivered is in the log; a failed one may be too.
        tc.assertTrue(delivered.get(t, 0) <= tags.get(t, 0) <= sizes[t],
                      "read_uncommitted: %d records of aborted transaction %s, %d delivered of "
                      "%d written" % (tags.get(t, 0), t, delivered.get(t, 0), sizes[t]))
    on_purpose = (aborted - forced) | crashed
    tc.assertEqual({t: delivered.get(t, 0) for t in on_purpose},
                   {t: sizes[t] for t in on_purpose},
                   "records of the transactions aborted on purpose (flushed) not all delivered")


class TxnSingleBrokerTest(ServerTestCase):
    SMP = 2
    SETS = SINGLE_SETS

    def test_consume_transform_produce(self):
        tin, tout = self.unique("in"), self.unique("out")
        for t in (tin, tout):
            kc.create_topic(self.bootstrap, t, PARTITIONS)
        ends = txnlib.fill_input(self.bootstrap, tin, N, PARTITIONS)
        t0 = time.monotonic()
        apps = txnlib.run_ctp(self.bootstrap, self.unique("tid"), self.unique("g"), tin, tout,
                              ends, K, abort=lambda n: n % 4 == 3,
                              deadline=time.monotonic() + 120, max_incarnations=1)
        app = apps[0]
        print("ctp: %d inputs, %d transactions committed, %d aborted on purpose, %.1fs"
              % (N, len(app.committed), len(app.aborted), time.monotonic() - t0))
        self.assertEqual(app.forced, [], "commits that needed an abort: %s" % app.errors)
        self.assertGreater(len(app.aborted), 0)
        rc = txnlib.read_topic(self.bootstrap, tout, PARTITIONS, "read_committed")
        ru = txnlib.read_topic(self.bootstrap, tout, PARTITIONS, "read_uncommitted")
        check_exactly_once(self, rc, ru, N, apps)
        # The output's partitions have no open transaction: LSO = high watermark.
        for q in range(PARTITIONS):
            lso, hw = txnlib.lso_and_hw(self.bootstrap, tout, q)
            self.assertEqual(lso, hw, "output partition %d: LSO below the high watermark" % q)
        # The group's offsets (committed through the transactions) are the input's ends.
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": app.consumer_group,
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            got = c.committed([TopicPartition(tin, q) for q in range(PARTITIONS)], timeout=10)
            self.assertEqual({tp.partition: tp.offset for tp in got}, ends)
        finally:
            c.close()

    def test_zombie_fencing(self):
        from confluent_kafka import KafkaError, KafkaException, Producer
        topic, tid = self.unique("fence"), self.unique("tid")
        kc.create_topic(self.bootstrap, topic, 1)

        def producer():
            return Producer({"bootstrap.servers": self.bootstrap, "transactional.id": tid,
                             "client.id": "it-fence", "linger.ms": 0})
        p1 = producer()
        p1.init_transactions(30)
        p1.begin_transaction()
        for i in range(5):
            p1.produce(topic, value=b"zombie-%d" % i, partition=0)
        self.assertEqual(p1.flush(30), 0)
        p2 = producer()
        p2.init_transactions(30)      # bumps the epoch, aborts p1's open transaction
        with self.assertRaises(KafkaException) as cm:
            p1.commit_transaction(30)
        err = cm.exception.args[0]
        self.assertTrue(err.fatal(), "the zombie's commit error is not fatal: %s" % err)
        self.assertIn(err.code(), (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                   KafkaError.INVALID_PRODUCER_EPOCH), str(err))
        p2.begin_transaction()
        for i in range(5):
            p2.produce(topic, value=b"live-%d" % i, partition=0)
        p2.commit_transaction(30)
        rc = [v for _, _, _, v in txnlib.read_topic(self.bootstrap, topic, 1, "read_committed")]
        self.assertEqual(rc, [b"live-%d" % i for i in range(5)])
        ru = [v for _, _, _, v in txnlib.read_topic(self.bootstrap, topic, 1,
                                                    "read_uncommitted")]
        self.assertEqual(ru, [b"zombie-%d" % i for i in range(5)] +
                         [b"live-%d" % i for i in range(5)])
        lso, hw = txnlib.lso_and_hw(self.bootstrap, topic)
        self.assertEqual(lso, hw)

    def test_hanging_producer_aborted_after_timeout(self):
        topic, tid = self.unique("hang"), self.unique("tid")
        kc.create_topic(self.bootstrap, topic, 1)
        child = subprocess.Popen([sys.executable, "-c", HANGING, self.bootstrap, tid, topic,
                                  str(TXN_TIMEOUT_MS)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline()
            self.assertTrue(line.startswith("ready "), "hanging producer: %r %s"
                            % (line, child.stderr.read() if child.poll() is not None else ""))
            began = float(line.split()[1])
        finally:
            child.kill()               # the producer dies mid-transaction
            child.wait(10)
        # The transaction is open: the LSO is its first offset, below the high watermark.
        p = kc.producer(self.bootstrap, client_id="it-plain")
        kc.produce_all(p, topic, [{"value": b"after", "partition": 0}])
        lso, hw = txnlib.lso_and_hw(self.bootstrap, topic)
        self.assertEqual((lso, hw), (0, 4), "LSO and high watermark with the transaction open")
        d = txnlib.describe_transactions(self.bootstrap, [tid])[tid]
        if time.time() < began + TXN_TIMEOUT_MS / 1000.0 - 0.2:
            self.assertEqual(d["state"], "Ongoing", d)
            self.assertEqual(d["partitions"], {topic: [0]}, d)
            self.assertEqual(txnlib.read_topic(self.bootstrap, topic, 1, "read_committed"), [],
                             "read_committed sees past the LSO")
        # Aborted by the coordinator once its timeout passed: the LSO moves.
        wait_until(lambda: txnlib.lso_and_hw(self.bootstrap, topic) == (5, 5), 30,
                   "the timed-out transaction aborted (LSO = high watermark = 5: 3 records, "
                   "the plain record, the ABORT marker)")
        waited = time.time() - began
        self.assertGreaterEqual(waited, TXN_TIMEOUT_MS / 1000.0 * 0.9,
                                "aborted before its transaction.timeout.ms")
        print("hanging transaction aborted %.1fs after it began (timeout %.1fs)"
              % (waited, TXN_TIMEOUT_MS / 1000.0))
        rc = [v for _, _, _, v in txnlib.read_topic(self.bootstrap, topic, 1, "read_committed")]
        self.assertEqual(rc, [b"after"])
        ru = [v for _, _, _, v in txnlib.read_topic(self.bootstrap, topic, 1,
                                                    "read_uncommitted")]
        self.assertEqual(ru, [b"hanging-0", b"hanging-1", b"hanging-2", b"after"])
        wait_until(lambda: txnlib.describe_transactions(self.bootstrap, [tid])[tid]["state"]
                   == "CompleteAbort", 10, "CompleteAbort")

    def test_describe_transactions_states(self):
        from confluent_kafka import Producer
        topic, tid = self.unique("desc"), self.unique("tid")
        kc.create_topic(self.bootstrap, topic, 2)
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": tid,
                      "client.id": "it-desc", "transaction.timeout.ms": 30000})
        p.init_transactions(30)
        d = txnlib.describe_transactions(self.bootstrap, [tid])[tid]
        self.assertEqual((d["error"], d["state"], d["timeout_ms"]), (0, "Empty", 30000), d)
        pid = d["producer_id"]
        p.begin_transaction()
        p.produce(topic, value=b"x", partition=1)
        self.assertEqual(p.flush(30), 0)
        d = txnlib.describe_transactions(self.bootstrap, [tid])[tid]
        self.assertEqual((d["state"], d["partitions"], d["producer_id"]),
                         ("Ongoing", {topic: [1]}, pid), d)
        p.commit_transaction(30)
        # EndTxn is answered once PrepareCommit is written; CompleteCommit follows the markers.
        d = wait_until(lambda: (lambda d: d if d["state"] == "CompleteCommit" else None)(
            txnlib.describe_transactions(self.bootstrap, [tid])[tid]), 10, "CompleteCommit")
        self.assertEqual((d["partitions"], d["producer_id"]), ({}, pid), d)
        # An unknown id: TRANSACTIONAL_ID_NOT_FOUND (105).
        self.assertEqual(txnlib.describe_transactions(self.bootstrap, ["nope-" + tid])
                         ["nope-" + tid]["error"], 105)


# ---- three brokers ----------------------------------------------------------------------------

CLUSTER_N = 2400  # records: the application must outlast two kills and their recoveries
CLUSTER_K = 25
KILLS = 2
CLUSTER_SETS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": 3000,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
}


class TxnClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        from cluster import Cluster
        cls.cluster = Cluster(3, sets=CLUSTER_SETS, name="txn")
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

    def live(self):
        return [self.cluster.node(n).bootstrap for n in self.cluster.running()]

    def test_ctp_with_coordinator_killed_twice(self):
        from test_cluster import create_topics
        c = self.cluster
        tag = "%d-%d" % (os.getpid(), time.monotonic_ns() % 10**9)
        tin, tout, tid, group = "in-" + tag, "out-" + tag, "tid-" + tag, "g-" + tag
        bootstrap = ",".join(c.node(n).bootstrap for n in c.nodes)
        ctrl = c.wait_for_quorum(30)
        create_topics(c.node(ctrl).bootstrap, [tin, tout], partitions=PARTITIONS, rf=3)
        c.wait_topic_agreed(tin, PARTITIONS)
        c.wait_topic_agreed(tout, PARTITIONS)
        ends = txnlib.fill_input(bootstrap, tin, CLUSTER_N, PARTITIONS)
        apps, result = [], {}
        deadline = time.monotonic() + 200

        def app_thread():
            try:
                result["apps"] = txnlib.run_ctp(
                    bootstrap, tid, group, tin, tout, ends, CLUSTER_K,
                    abort=lambda n: n % 5 == 4, deadline=deadline, max_incarnations=12,
                    on_incarnation=apps.append, crash_at=(0, 6),
                    producer_conf={"transaction.timeout.ms": 30000, "message.timeout.ms": 30000})
            except BaseException as e:
                result["error"] = e

        def progress():
            return sum(len(a.committed) for a in list(apps))

        th = threading.Thread(target=app_thread, daemon=True, name="ctp")
        th.start()
        kills = []
        for k in range(KILLS):
            p0 = progress()
            c.wait(lambda: progress() >= p0 + 4 or not th.is_alive(), 60,
                   "the application to commit 4 more transactions before kill %d" % (k + 1))
            self.assertTrue(th.is_alive(), "the application ended before kill %d: %s" % (
                k + 1, ("failed: %r; errors per incarnation: %s" % (
                    result["error"], [a.errors[-5:] for a in apps])) if "error" in result
                else "too fast for the scenario (raise CLUSTER_N)"))
            victim = txnlib.wait_coordinator(self.live(), tid, 30)
            t_kill = time.monotonic()
            c.kill9(victim)
            new = txnlib.wait_coordinator(self.live(), tid, 30, not_node=victim)
            p1 = progress()
            c.wait(lambda: progress() > p1 or not th.is_alive(), 60,
                   "a commit after the coordinator %d was killed" % victim)
            kills.append((victim, new, time.monotonic() - t_kill))
            c.start_node(victim)
            c.wait_for_quorum(30)
        th.join(max(1.0, deadline - time.monotonic()) + 30)
        self.assertFalse(th.is_alive(), "the application did not finish")
        if "error" in result:
            raise AssertionError("the application failed: %r; errors per incarnation: %s"
                                 % (result["error"], [a.errors[-5:] for a in apps]))
        apps = result["apps"]
        print("ctp on 3 brokers: %d inputs, %d incarnations, %d committed, %d aborted on purpose,"
              " coordinator kills (victim, new, s to the next commit): %s" % (
                  CLUSTER_N, len(apps), sum(len(a.committed) for a in apps),
                  sum(len(a.aborted) for a in apps), kills))
        self.assertTrue(any(a.crashed for a in apps), "no incarnation crashed on purpose")
        rc = txnlib.read_topic(bootstrap, tout, PARTITIONS, "read_committed", timeout=60)
        ru = txnlib.read_topic(bootstrap, tout, PARTITIONS, "read_uncommitted", timeout=60)
        check_exactly_once(self, rc, ru, CLUSTER_N, apps)


if __name__ == "__main__":
    harness.main()
