"""Several Kafka listeners per broker in a cluster (issue 22's listener rule): each broker
registers every listener it advertises, and Metadata, FindCoordinator and DescribeCluster
name every broker by its endpoint on the listener the request came in on — not only the
answering broker, and not the others' inter-broker listener. Kafka's rule; without it a client
of an EXTERNAL (or SASL_SSL) listener is sent to the other brokers' internal ports.

Three real brokers, each with INTERNAL (inter-broker, PLAINTEXT) and EXTERNAL (PLAINTEXT)
listeners on their own ports; a librdkafka client bootstrapped from one broker's EXTERNAL
listener only produces to and consumes from partitions the others lead."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from cluster import Cluster, describe_cluster_wire, free_ports  # noqa: E402
from harness import wait_until  # noqa: E402

TOPIC = "listeners"
FIND_COORDINATOR = 10


class ClusterListenersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if harness.external_bootstrap():
            raise unittest.SkipTest("starts its own cluster")
        cls.c = Cluster(3, sets={"listener.security.protocol.map":
                                 "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                                 "inter.broker.listener.name": "INTERNAL",
                                 "offsets.topic.replication.factor": "3",
                                 "offsets.topic.num.partitions": "1"}, name="listeners")
        ext = free_ports(3)
        cls.ext = {}
        for (nid, n), port in zip(sorted(cls.c.nodes.items()), ext):
            cls.ext[nid] = port
            n.server.sets["listeners"] = (
                "INTERNAL://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d"
                % (n.kafka_port, port, n.controller_port))
            n.server.sets["advertised.listeners"] = (
                "INTERNAL://127.0.0.1:%d,EXTERNAL://127.0.0.1:%d" % (n.kafka_port, port))
        cls.c.start()
        cls.c.wait_for_quorum()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def brokers_via(self, nid, port):
        with kwire.Conn.to("127.0.0.1:%d" % port, 5) as conn:
            md = kwire.metadata(conn, 12)
        return {b[0]: b[2] for b in md["brokers"]}

    def test_every_broker_named_on_the_listener_asked(self):
        internal = {nid: n.kafka_port for nid, n in self.c.nodes.items()}
        for nid in self.c.nodes:
            wait_until(lambda: self.brokers_via(nid, self.ext[nid]) == self.ext, 30,
                       "node %d names every broker by its EXTERNAL port" % nid)
            self.assertEqual(self.brokers_via(nid, self.c.nodes[nid].kafka_port), internal)
        # DescribeCluster likewise.
        with kwire.Conn.to("127.0.0.1:%d" % self.ext[1], 5) as conn:
            dc = describe_cluster_wire(conn)
        self.assertEqual({bid: b["port"] for bid, b in dc["brokers"].items()}, self.ext)

    def test_find_coordinator_on_the_listener_asked(self):
        for nid in self.c.nodes:
            with kwire.Conn.to("127.0.0.1:%d" % self.ext[nid], 5) as conn:
                def coordinator():
                    body = kwire.string("listener-group") + b"\x00"   # key, key type 0
                    r = conn.request(FIND_COORDINATOR, 2, body)
                    r.i32()  # throttle
                    err = r.i16()
                    r.string()  # error message
                    node, host, port = r.i32(), r.string(), r.i32()
                    return (node, port) if err == 0 else None
                wait_until(lambda: coordinator() is not None, 30, "a coordinator")
                node, port = coordinator()
                self.assertEqual(port, self.ext[node], "node %d answered %s" % (nid, (node, port)))

    def test_external_client_reaches_every_leader(self):
        try:
            from confluent_kafka import Consumer, Producer, TopicPartition
            from confluent_kafka.admin import AdminClient, NewTopic
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is missing")
        boot = "127.0.0.1:%d" % self.ext[1]
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic(TOPIC, 3, 1)], request_timeout=10)[TOPIC].result(20)

        def led():
            md = admin.list_topics(TOPIC, timeout=10)
            ps = md.topics[TOPIC].partitions
            return md if len(ps) == 3 and all(p.leader > 0 for p in ps.values()) else None
        # the answer that showed it (asked again, a broker whose metadata is behind may answer)
        md = wait_until(led, 30, "every partition of the new topic led")
        leaders = {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}
        self.assertGreater(len(set(leaders.values()) - {1}), 0, leaders)
        for b in md.brokers.values():
            self.assertEqual(b.port, self.ext[b.id])
        p = Producer({"bootstrap.servers": boot, "acks": "all"})
        acked = []
        for part in range(3):
            for i in range(5):
                p.produce(TOPIC, value=b"%d-%d" % (part, i), partition=part,
                          on_delivery=lambda e, m: acked.append(e))
        p.flush(30)
        self.assertEqual(acked, [None] * 15)
        c = Consumer({"bootstrap.servers": boot, "group.id": "listeners-g",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(TOPIC, part, 0) for part in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 15 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        self.assertEqual(sorted(got), sorted(b"%d-%d" % (a, i) for a in range(3)
                                             for i in range(5)))


if __name__ == "__main__":
    harness.main()
