"""Topic administration with librdkafka (confluent-kafka) and kafka-python (issue 4):
create / describe / alter configs / add partitions / delete, the errors clients act on, and
topics (with their ids) surviving a restart."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402


def topic_ids(bootstrap):
    with kwire.Conn.to(bootstrap) as c:
        return {t["name"]: (t["topic_id"], len(t["partitions"]))
                for t in kwire.metadata(c, 12)["topics"]}


class TopicsConfluentTest(ServerTestCase):
    SMP = 2

    def test_create_describe_delete(self):
        from confluent_kafka.admin import ConfigResource
        name = self.unique()
        a = kc.create_topic(self.bootstrap, name, 4, config={"retention.ms": "123456",
                                                            "cleanup.policy": "delete"})
        t = a.list_topics(name, timeout=10).topics[name]
        self.assertEqual(sorted(t.partitions), [0, 1, 2, 3])
        for p in t.partitions.values():
            self.assertEqual((p.leader, p.replicas, p.isrs), (0, [0], [0]))
        tid, n = topic_ids(self.bootstrap)[name]
        self.assertNotEqual(tid.int, 0, "topic has a UUID")
        self.assertEqual(n, 4)

        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        cfg = a.describe_configs([res])[res].result(timeout=15)
        self.assertEqual(cfg["retention.ms"].value, "123456")
        self.assertEqual(cfg["retention.ms"].source,
                         __import__("confluent_kafka").admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        for key in ("segment.bytes", "max.message.bytes", "cleanup.policy",
                    "message.timestamp.type", "min.insync.replicas", "retention.bytes"):
            self.assertIn(key, cfg, "DescribeConfigs lacks %s" % key)
        self.assertTrue(cfg["segment.bytes"].is_default or cfg["segment.bytes"].source != 1)

        # AlterConfigs (full replace of the dynamic set).
        res = ConfigResource(ConfigResource.Type.TOPIC, name,
                             set_config={"retention.ms": "999", "segment.bytes": "1048576"})
        a.alter_configs([res])[res].result(timeout=15)
        cfg = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
        cfg = list(cfg.values())[0].result(timeout=15)
        self.assertEqual(cfg["retention.ms"].value, "999")
        self.assertEqual(cfg["segment.bytes"].value, "1048576")

        a.delete_topics([name], operation_timeout=15)[name].result(timeout=20)
        wait_until(lambda: name not in a.list_topics(timeout=5).topics, 15, "topic deleted")
        self.assertNotIn(name, topic_ids(self.bootstrap))

    def test_create_errors(self):
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic
        name = self.unique()
        a = kc.create_topic(self.bootstrap, name, 1)

        def err(topic, parts=1, rf=1, config=None):
            fs = a.create_topics([NewTopic(topic, parts, rf, config=config or {})],
                                 request_timeout=15)
            try:
                fs[topic].result(timeout=20)
            except Exception as e:
                return e.args[0].code()
            return None
        self.assertEqual(err(name), KafkaError.TOPIC_ALREADY_EXISTS)
        self.assertEqual(err(self.unique("rf"), rf=3), KafkaError.INVALID_REPLICATION_FACTOR)
        self.assertEqual(err(self.unique("np"), parts=0), KafkaError.INVALID_PARTITIONS)
        for bad in ("bad name", "..", ".", "a" * 250, "what?", "ünïcode"):
            self.assertEqual(err(bad), KafkaError.TOPIC_EXCEPTION, "name %r" % bad)
        self.assertEqual(err(self.unique("cfg"), config={"no.such.config": "1"}),
                         KafkaError.INVALID_CONFIG)
        # Explicit replica assignments: this broker (id 0) is the only one registered.
        def assigned(topic, assignment):
            fs = a.create_topics([NewTopic(topic, len(assignment),
                                           replica_assignment=assignment)], request_timeout=15)
            try:
                fs[topic].result(timeout=20)
            except Exception as e:
                return e.args[0].code(), e.args[0].str()
            return None
        good = self.unique("asg")
        self.assertIsNone(assigned(good, [[0], [0]]))
        kc.wait_topic(self.bootstrap, good, 2, a)
        refused = [self.unique("asg-unknown"), self.unique("asg-twice")]
        code, why = assigned(refused[0], [[0], [7]])
        self.assertEqual(code, KafkaError.INVALID_REPLICA_ASSIGNMENT)
        self.assertIn("broker 7, but no such broker is registered", why)
        code, why = assigned(refused[1], [[0, 0]])
        self.assertEqual(code, KafkaError.INVALID_REPLICA_ASSIGNMENT)
        self.assertIn("more than once", why)
        # None of the refused topics exists.
        names = set(a.list_topics(timeout=10).topics)
        self.assertFalse({"bad name", "..", "a" * 250} & names)
        self.assertFalse(set(refused) & names)

    def test_segment_bytes_floor(self):
        # Kafka 4's floor: segment.bytes below 1 MiB is refused (a 4 KiB segment refuses every
        # batch larger than itself); internal.segment.bytes is the tests' way past it.
        from confluent_kafka import KafkaError, Producer
        from confluent_kafka.admin import NewTopic
        a = kc.admin(self.bootstrap)
        name = self.unique("small")
        fs = a.create_topics([NewTopic(name, 1, 1, config={"segment.bytes": "4096"})],
                             request_timeout=15)
        with self.assertRaises(Exception) as cm:
            fs[name].result(timeout=20)
        self.assertEqual(cm.exception.args[0].code(), KafkaError.INVALID_CONFIG)
        self.assertIn("segment.bytes", cm.exception.args[0].str())
        a.create_topics([NewTopic(name, 1, 1, config={"internal.segment.bytes": "2048"})],
                        request_timeout=15)[name].result(timeout=20)
        kc.wait_topic(self.bootstrap, name, 1, a)
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "acks": "all"})
        for i in range(12):
            p.produce(name, value=b"v" * 600)
            p.flush(10)  # one batch each: 12 batches of ~700 bytes over 2 KiB segments
        d = os.path.join(self.server.data_dir, name + "-0")
        logs = [f for f in os.listdir(d) if f.endswith(".log")]
        self.assertGreaterEqual(len(logs), 3, sorted(os.listdir(d)))

    def test_add_partitions_keeps_data(self):
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewPartitions
        name = self.unique()
        a = kc.create_topic(self.bootstrap, name, 2)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, name, [{"value": b"p%d-%d" % (i % 2, i), "partition": i % 2}
                                 for i in range(40)])
        tid_before, _ = topic_ids(self.bootstrap)[name]
        a.create_partitions([NewPartitions(name, 5)])[name].result(timeout=20)
        kc.wait_topic(self.bootstrap, name, 5, a)
        self.assertEqual(topic_ids(self.bootstrap)[name][0], tid_before, "topic id kept")
        # A new producer: an existing one keeps its cached partition count until its next
        # metadata refresh (as with any Kafka broker).
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, name, [{"value": b"new%d" % i, "partition": i} for i in range(5)])
        got = kc.consume_partitions(self.bootstrap, name, range(5), 45)
        parts = kc.by_partition(got)
        self.assertEqual([m.offset() for m in parts[0]], list(range(21)))
        self.assertEqual([m.offset() for m in parts[1]], list(range(21)))
        for i in (2, 3, 4):
            self.assertEqual([(m.offset(), m.value()) for m in parts[i]], [(0, b"new%d" % i)])
        # Fewer partitions than now: INVALID_PARTITIONS.
        fs = a.create_partitions([NewPartitions(name, 3)])
        with self.assertRaises(Exception) as cm:
            fs[name].result(timeout=20)
        self.assertEqual(cm.exception.args[0].code(), KafkaError.INVALID_PARTITIONS)

    def test_delete_unknown_topic(self):
        from confluent_kafka import KafkaError
        a = kc.admin(self.bootstrap)
        fs = a.delete_topics(["never-existed-" + self.unique()], request_timeout=15)
        with self.assertRaises(Exception) as cm:
            list(fs.values())[0].result(timeout=20)
        self.assertEqual(cm.exception.args[0].code(), KafkaError.UNKNOWN_TOPIC_OR_PART)

    def test_topics_survive_restart(self):
        harness.need_server_binary()
        name = self.unique()
        kc.create_topic(self.bootstrap, name, 3, config={"retention.ms": "777777"})
        kc.produce_all(kc.producer(self.bootstrap), name,
                       [{"value": b"%d" % i, "partition": i % 3} for i in range(30)])
        before = topic_ids(self.bootstrap)[name]
        self.server.restart(clean=True)
        self.assertEqual(topic_ids(self.server.bootstrap)[name], before)
        from confluent_kafka.admin import ConfigResource
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        admin = kc.admin(self.server.bootstrap)  # held: a collected client cancels its futures
        cfg = admin.describe_configs([res])[res].result(timeout=15)
        self.assertEqual(cfg["retention.ms"].value, "777777")
        got = kc.consume_partitions(self.server.bootstrap, name, range(3), 30)
        kc.assert_contiguous_from(self, got)


class TopicsKafkaPythonTest(ServerTestCase):
    SMP = 2

    def test_kafka_python_admin(self):
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic, NewPartitions, ConfigResource, ConfigResourceType
        from kafka.errors import TopicAlreadyExistsError
        a = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)
        try:
            name = self.unique("kp")
            a.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "60000"})])
            wait_until(lambda: name in a.list_topics(), 15, "topic listed")
            with self.assertRaises(TopicAlreadyExistsError):
                a.create_topics([NewTopic(name, 2, 1)])
            d = a.describe_topics([name])[0]
            self.assertEqual((d["error_code"], len(d["partitions"])), (0, 2))
            r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            entries = {e[0]: e[1] for e in r[0].resources[0][4]}
            self.assertEqual(entries["retention.ms"], "60000")
            a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                            configs={"retention.ms": "120000"})])
            r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            self.assertEqual({e[0]: e[1] for e in r[0].resources[0][4]}["retention.ms"],
                             "120000")
            a.create_partitions({name: NewPartitions(4)})
            wait_until(lambda: len(a.describe_topics([name])[0]["partitions"]) == 4, 15,
                       "4 partitions")
            a.delete_topics([name])
            wait_until(lambda: name not in a.list_topics(), 15, "topic gone")
        finally:
            a.close()


if __name__ == "__main__":
    harness.main()
