"""Dynamic broker settings (issue 26): DescribeConfigs / IncrementalAlterConfigs / AlterConfigs
on BROKER resources against a real 3-broker cluster (cluster.py, smp=1), driven by
`strata cluster config get|set`, confluent-kafka's and kafka-python's admin clients:

  - a cluster default (resource "") set once applies on every broker without a restart (the
    same pids): message.max.bytes lowered refuses a 3,000-byte record on the partitions each
    broker leads, and its removal lets it through again; every broker describes it as
    DYNAMIC_DEFAULT_BROKER_CONFIG (Kafka's ConfigSource 3);
  - one broker's own value wins on that broker only (DYNAMIC_BROKER_CONFIG, 2) and the synonyms
    list each source; AlterConfigs (kafka-python) replaces that broker's whole set;
  - read-only settings, unknown ones and bad values are refused (INVALID_CONFIG) and change
    nothing; a broker name that is not a number is INVALID_REQUEST;
  - min.insync.replicas set as a default: acks=all with a replica down is refused
    (NOT_ENOUGH_REPLICAS) until it is removed; the values survive a kill -9 and restart (they
    are in the metadata log);
  - max.connections.per.ip.overrides and log.level change on the running process: a second
    connection from the overridden address is closed, the broker logs at debug."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import run_cmd, wait_until  # noqa: E402
from test_quotas import connect_from, served  # noqa: E402

CLI = os.environ.get("STRATA_CLI")
QUORUM_TIMEOUT = 30.0
APPLY_TIMEOUT = 30.0
TOPIC = "dyncfg"
SETS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": 3000,
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    "log.retention.ms": 86400000,  # static: STATIC_BROKER_CONFIG until a dynamic one is set
}
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


def src(entry):
    """A ConfigEntry's source as Kafka's number (confluent-kafka gives a ConfigSource)."""
    return getattr(entry.source, "value", entry.source)


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class DynamicConfigTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3, sets=SETS, smp=1, name="dyncfg")
        try:
            cls.c.start()
            cls.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[1, 2, 3])
            cls.pids = {n: cls.c.node(n).pid for n in (1, 2, 3)}
            from confluent_kafka.admin import AdminClient, NewTopic
            a = AdminClient({"bootstrap.servers": cls.bootstrap_of(cls.c)})
            a.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
            cls.c.wait_topic_agreed(TOPIC, 3)
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

    @staticmethod
    def bootstrap_of(c):
        return ",".join(c.node(n).bootstrap for n in c.running())

    def cli(self, *args, rc=0):
        r = run_cmd([CLI, "cluster", "config"] + list(args) +
                    ["-b", self.bootstrap_of(self.c), "--timeout", "20s"], timeout=60)
        if rc is not None:
            self.assertEqual(r.returncode, rc, "strata cluster config %s:\n%s%s"
                             % (" ".join(args), r.stdout, r.stderr))
        return r

    def describe(self, nid, keys=None):
        """{name: ConfigEntry} of broker nid, as it answers for itself (confluent-kafka)."""
        from confluent_kafka.admin import AdminClient, ConfigResource
        a = AdminClient({"bootstrap.servers": self.c.node(nid).bootstrap})
        res = ConfigResource(ConfigResource.Type.BROKER, str(nid))
        out = a.describe_configs([res], request_timeout=10)[res].result(15)
        return {k: v for k, v in out.items() if keys is None or k in keys}

    def synonyms(self, nid, key):
        """[(value, source)] of key's synonyms on broker nid (kafka-python, DescribeConfigs
        with include_synonyms)."""
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=self.c.node(nid).bootstrap,
                             request_timeout_ms=15000)
        try:
            resp = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(nid),
                                                      configs={key: None})], include_synonyms=True)
        finally:
            a.close()
        res = resp[0].resources[0]
        self.assertEqual(res[0], 0, res)
        entry = next(e for e in res[4] if e[0] == key)
        return [(syn[1], syn[2]) for syn in entry[-1]]

    def wait_value(self, key, value, source, nodes=(1, 2, 3)):
        def cond():
            for n in nodes:
                e = self.describe(n, [key]).get(key)
                if e is None or e.value != value or src(e) != source:
                    return False
            return True
        wait_until(cond, APPLY_TIMEOUT, "%s=%s (source %d) on brokers %s" % (key, value, source,
                                                                               list(nodes)))

    def leaders(self):
        md = self.c.metadata(self.c.running()[0], [TOPIC])
        return {i: p["leader"] for i, p in md["topics"][TOPIC]["partitions"].items()}

    def produce_one(self, partition, size, acks="all"):
        """The error of one record of `size` bytes to partition (None when acknowledged)."""
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap_of(self.c), "acks": acks,
                      "message.timeout.ms": 8000, "retries": 0, "linger.ms": 0})
        got = []
        p.produce(TOPIC, b"x" * size, partition=partition, on_delivery=lambda e, m: got.append(e))
        p.flush(15)
        self.assertEqual(len(got), 1, "no delivery report within 15 s")
        return got[0]

    def assert_not_restarted(self):
        for n, pid in self.pids.items():
            self.assertEqual(self.c.node(n).pid, pid, "broker %d was restarted" % n)

    # ---- tests ----

    def test_1_cluster_default_applies_on_every_broker(self):
        from confluent_kafka import KafkaError
        leaders = self.leaders()
        self.assertEqual(sorted(set(leaders.values())), [1, 2, 3], leaders)
        for p in leaders:
            self.assertIsNone(self.produce_one(p, 3000))
        r = self.cli("set", "--default", "message.max.bytes=2000")
        self.assertIn("every broker", r.stdout)
        self.wait_value("message.max.bytes", "2000", DYNAMIC_DEFAULT)
        # the logs follow the adopted snapshot: each leader refuses the record
        for p, leader in leaders.items():
            wait_until(lambda: (self.produce_one(p, 3000) or KafkaError(0)).code()
                       == KafkaError.MSG_SIZE_TOO_LARGE, APPLY_TIMEOUT,
                       "partition %d (leader %d) refusing 3,000 bytes" % (p, leader))
            self.assertIsNone(self.produce_one(p, 1000))
        g = self.cli("get", "--default")
        self.assertIn("message.max.bytes=2000  (DYNAMIC_DEFAULT_BROKER_CONFIG)", g.stdout)
        self.cli("set", "--default", "--delete", "message.max.bytes")
        self.wait_value("message.max.bytes", "1048588", DEFAULT)
        for p in leaders:
            wait_until(lambda: self.produce_one(p, 3000) is None, APPLY_TIMEOUT,
                       "partition %d taking 3,000 bytes again" % p)
        self.assert_not_restarted()

    def test_2_one_brokers_value_wins_there(self):
        self.cli("set", "--default", "log.retention.ms=3600000")
        self.cli("set", "--broker", "2", "log.retention.ms=7200000")
        self.wait_value("log.retention.ms", "3600000", DYNAMIC_DEFAULT, nodes=(1, 3))
        self.wait_value("log.retention.ms", "7200000", DYNAMIC_BROKER, nodes=(2,))
        e = self.describe(2, ["log.retention.ms"])["log.retention.ms"]
        self.assertFalse(e.is_read_only)
        # every source in Kafka's order, the winning one first (kafka-python keeps them all;
        # confluent-kafka keys synonyms by name, and these share one)
        self.assertEqual(self.synonyms(2, "log.retention.ms"),
                         [("7200000", DYNAMIC_BROKER), ("3600000", DYNAMIC_DEFAULT),
                          ("86400000", STATIC)])
        self.assertEqual(self.synonyms(1, "log.retention.ms"),
                         [("3600000", DYNAMIC_DEFAULT), ("86400000", STATIC)])
        g = self.cli("get", "--broker", "2", "log.retention.ms")
        self.assertEqual(g.stdout.strip(), "log.retention.ms=7200000  (DYNAMIC_BROKER_CONFIG)")
        # kafka-python's AlterConfigs replaces broker 2's whole set: with none given, its own
        # value goes and the default shows through
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=self.c.node(1).bootstrap, request_timeout_ms=15000)
        try:
            out = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "2", configs={})])
            self.assertEqual([r[0] for r in out.resources], [0], out)
        finally:
            a.close()
        self.wait_value("log.retention.ms", "3600000", DYNAMIC_DEFAULT)
        self.cli("set", "--default", "--delete", "log.retention.ms")
        self.wait_value("log.retention.ms", "86400000", STATIC)

    def test_3_refusals_change_nothing(self):
        cases = [("log.dirs=/elsewhere", "Cannot update these configs dynamically"),
                 ("listeners=PLAINTEXT://127.0.0.1:1", "Cannot update these configs dynamically"),
                 ("no.such.setting=1", "Unknown broker config"),
                 ("log.segment.bytes=4096", "log.segment.bytes"),
                 ("log.level=loud", "log.level"),
                 ("log.message.timestamp.type=Sometimes", "String must be one of")]
        for kv, why in cases:
            r = self.cli("set", "--default", "log.retention.ms=1000", kv, rc=1)
            self.assertIn("INVALID_CONFIG", r.stderr, kv)
            self.assertIn(why, r.stderr, kv)
        self.assertIn("no cluster-wide dynamic broker setting", self.cli("get", "--default").stdout)
        # a broker resource must be named by a number
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=self.c.node(1).bootstrap, request_timeout_ms=15000)
        try:
            out = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "two",
                                                  configs={"log.retention.ms": "5"})])
            self.assertEqual(out.resources[0][0], 42, out)  # INVALID_REQUEST
        finally:
            a.close()
        # validate-only answers, changes nothing
        self.cli("set", "--default", "--validate-only", "log.retention.ms=5000")
        self.assertIn("no cluster-wide dynamic broker setting", self.cli("get", "--default").stdout)

    def test_4_min_isr_and_a_restart(self):
        from confluent_kafka import KafkaError
        self.cli("set", "--default", "min.insync.replicas=3")
        self.wait_value("min.insync.replicas", "3", DYNAMIC_DEFAULT)
        leaders = self.leaders()
        p = next(p for p, l in leaders.items() if l == 1)
        self.c.kill9(3)
        try:
            wait_until(lambda: (self.produce_one(p, 100) or KafkaError(0)).code() in
                       (KafkaError.NOT_ENOUGH_REPLICAS,
                        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND), 30,
                       "acks=all refused with 2 of 3 replicas and min.insync.replicas=3")
            self.cli("set", "--default", "--delete", "min.insync.replicas")
            wait_until(lambda: self.produce_one(p, 100) is None, APPLY_TIMEOUT,
                       "acks=all taken again with min.insync.replicas back at 1")
            # a value set while broker 3 was down, and one set before, reach it from the log
            self.cli("set", "--default", "log.roll.ms=3600000")
        finally:
            self.c.restart(3)
            self.pids[3] = self.c.node(3).pid
        self.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[1, 2, 3])
        self.wait_value("log.roll.ms", "3600000", DYNAMIC_DEFAULT, nodes=(3,))
        self.c.kill9(1)
        self.c.restart(1)
        self.pids[1] = self.c.node(1).pid
        self.c.wait_for_quorum(QUORUM_TIMEOUT, brokers=[1, 2, 3])
        self.wait_value("log.roll.ms", "3600000", DYNAMIC_DEFAULT)
        self.cli("set", "--default", "--delete", "log.roll.ms")

    def test_5_process_settings_change_live(self):
        nid = 2
        node = self.c.node(nid)

        class At:
            bootstrap = node.bootstrap
        first = connect_from(At, "127.0.0.7")
        try:
            self.assertTrue(served(first))
            self.cli("set", "--broker", str(nid), "max.connections.per.ip.overrides=127.0.0.7:1")
            self.wait_value("max.connections.per.ip.overrides", "127.0.0.7:1", DYNAMIC_BROKER,
                            nodes=(nid,))

            def second_refused():
                c = connect_from(At, "127.0.0.7")
                try:
                    return not served(c, timeout=2.0)
                finally:
                    c.close()
            wait_until(second_refused, APPLY_TIMEOUT, "a 2nd connection from 127.0.0.7 closed")
            other = connect_from(At, "127.0.0.8")
            self.assertTrue(served(other))
            other.close()
            self.cli("set", "--broker", str(nid), "--delete", "max.connections.per.ip.overrides")
            wait_until(lambda: not second_refused(), APPLY_TIMEOUT,
                       "a 2nd connection from 127.0.0.7 taken again")
        finally:
            first.close()
        self.cli("set", "--broker", str(nid), "log.level=debug")
        def debug_logged():
            c = connect_from(At, "127.0.0.9")  # a connection's close is logged at debug
            served(c)
            c.close()
            return " debug " in node.tail(400)
        wait_until(debug_logged, APPLY_TIMEOUT, "debug lines in broker %d's log" % nid)
        self.cli("set", "--broker", str(nid), "--delete", "log.level")
        self.wait_value("log.level", "info", DEFAULT, nodes=(nid,))
        self.assert_not_restarted()


if __name__ == "__main__":
    harness.main()
