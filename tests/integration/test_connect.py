"""First real clients connect (issue 2): kcat -L, confluent-kafka AdminClient.list_topics(),
kafka-python KafkaAdminClient.describe_cluster(), and ApiVersions / Metadata checked byte by
byte at every version the broker advertises."""

import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import Server, ServerTestCase, run_cmd  # noqa: E402


class ConnectTest(ServerTestCase):
    SMP = 2

    def port(self):
        return int(self.bootstrap.rsplit(":", 1)[1])

    def test_kcat_lists_broker(self):
        r = run_cmd(["kcat", "-L", "-J", "-b", self.bootstrap, "-m", "10"], timeout=30)
        self.assertEqual(r.returncode, 0, "kcat -L failed:\n%s\n%s" % (r.stdout, r.stderr))
        md = json.loads(r.stdout)
        names = [b["name"] for b in md["brokers"]]
        self.assertEqual(names, [self.bootstrap], md)
        self.assertEqual(md["brokers"][0]["id"], 0, md)
        # The plain text form too, as a person would run it.
        r = run_cmd(["kcat", "-L", "-b", self.bootstrap, "-m", "10"], timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 brokers:", r.stdout)
        self.assertIn("broker 0 at %s" % self.bootstrap, r.stdout)

    def test_confluent_list_topics(self):
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000})
        md = a.list_topics(timeout=15)
        self.assertEqual(sorted(md.brokers), [0])
        b = md.brokers[0]
        self.assertEqual((b.host, b.port), ("127.0.0.1", self.port()))
        self.assertEqual(md.controller_id, 0)
        self.assertTrue(md.cluster_id, "cluster id should be set")
        self.assertEqual({t for t in md.topics if not t.startswith("__")}, set())

    def test_kafka_python_describe_cluster(self):
        from kafka import KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000,
                             client_id="strata-it")
        try:
            c = a.describe_cluster()
        finally:
            a.close()
        brokers = c["brokers"]
        self.assertEqual(len(brokers), 1, c)
        self.assertEqual(brokers[0]["node_id"], 0, c)
        self.assertEqual((brokers[0]["host"], brokers[0]["port"]), ("127.0.0.1", self.port()), c)
        self.assertEqual(c["controller_id"], 0, c)
        self.assertTrue(c.get("cluster_id"), c)

    def test_api_versions_every_version(self):
        with kwire.Conn.to(self.bootstrap) as c:
            for v in range(4):
                err, keys = kwire.api_versions(c, v)
                self.assertEqual(err, 0, "ApiVersions v%d error %d" % (v, err))
                self.assertIn(kwire.API_VERSIONS, keys)
                lo, hi = keys[kwire.API_VERSIONS]
                self.assertEqual(lo, 0)
                self.assertGreaterEqual(hi, 3)
                lo, hi = keys[kwire.METADATA]
                self.assertEqual(lo, 0, "Metadata v0 must be served")
                self.assertGreaterEqual(hi, 12)
                for k, (lo, hi) in keys.items():
                    self.assertLessEqual(lo, hi, "api %d: min %d > max %d" % (k, lo, hi))

    def test_api_versions_unsupported_version(self):
        """An ApiVersions version above the supported one gets UNSUPPORTED_VERSION in the v0
        layout with ApiVersions' own range, and the connection stays usable (librdkafka
        retries on the same connection with the version it learnt)."""
        with kwire.Conn.to(self.bootstrap) as c:
            _, keys = kwire.api_versions(c, 3)
            for bad in (keys[kwire.API_VERSIONS][1] + 1, 127):
                err, keys = kwire.api_versions(c, bad)
                self.assertEqual(err, kwire.UNSUPPORTED_VERSION)
                self.assertIn(kwire.API_VERSIONS, keys, "the answer names ApiVersions' range")
                lo, hi = keys[kwire.API_VERSIONS]
                self.assertEqual(lo, 0)
                self.assertGreaterEqual(hi, 3)
                self.assertLess(hi, bad)
                err, _ = kwire.api_versions(c, hi)
                self.assertEqual(err, 0, "a retry at the advertised version must succeed")

    def test_metadata_every_version(self):
        with kwire.Conn.to(self.bootstrap) as c:
            _, keys = kwire.api_versions(c, 3)
            lo, hi = keys[kwire.METADATA]
            for v in range(lo, hi + 1):
                with self.subTest(version=v):
                    md = kwire.metadata(c, v)
                    self.assertEqual(len(md["brokers"]), 1, md)
                    node, host, port, _rack = md["brokers"][0]
                    self.assertEqual((node, host, port), (0, "127.0.0.1", self.port()))
                    if v >= 1:
                        self.assertEqual(md["controller_id"], 0)
                    if v >= 2:
                        self.assertTrue(md["cluster_id"])
                    for t in md["topics"]:
                        self.assertTrue(t["name"].startswith("__"), md)

    def test_metadata_unknown_topic_without_autocreate(self):
        """Metadata v4+ with allow_auto_topic_creation=false for a topic that does not exist:
        UNKNOWN_TOPIC_OR_PARTITION (3) for that topic, nothing created."""
        with kwire.Conn.to(self.bootstrap) as c:
            md = kwire.metadata(c, 9, topics=["no-such-topic"], auto_create=False)
            self.assertEqual([(t["name"], t["error"]) for t in md["topics"]],
                             [("no-such-topic", 3)])
            md = kwire.metadata(c, 1)
            self.assertNotIn("no-such-topic", [t["name"] for t in md["topics"]])

    def test_pipelined_requests_answered_in_order(self):
        """Many requests written at once on one connection (kafka-python pipelines its first
        ApiVersions and Metadata): every answer comes back, in request order."""
        with kwire.Conn.to(self.bootstrap) as c:
            n = 50
            out = b""
            for i in range(n):
                if i % 2:
                    out += kwire.frame(kwire.request_header(18, i % 4, 1000 + i, "pipe",
                                                            flexible=(i % 4) >= 3)
                                       + (kwire.compact_string("x") + kwire.compact_string("1")
                                          + b"\x00" if (i % 4) >= 3 else b""))
                else:
                    v = i % 13
                    out += kwire.frame(kwire.request_header(3, v, 1000 + i, "pipe",
                                                            flexible=v >= 9)
                                       + kwire.metadata_request(v))
            c.send_raw(out)
            for i in range(n):
                r = kwire.Reader(c.recv_frame(10))
                self.assertEqual(r.i32(), 1000 + i, "answer %d out of order" % i)

    def test_pipelining_past_the_per_connection_cap(self):
        """10,000 long-poll fetches written at once, more than the 4,096 a connection may have
        unanswered: the server pauses reading instead of refusing or parking them all, and
        answers every one, in order, as their waits end."""
        import kclients as kc
        topic = "pipe-%d" % os.getpid()
        kc.create_topic(self.bootstrap, topic, 1)
        fetch = (kwire.i32(-1) + kwire.i32(200) + kwire.i32(1) + kwire.i32(1 << 20) + b"\x00"
                 + kwire.i32(1) + kwire.string(topic) + kwire.i32(1) + kwire.i32(0)
                 + kwire.i64(0) + kwire.i32(1 << 20))
        n = 10000
        with kwire.Conn.to(self.bootstrap, timeout=60) as c:
            req = [kwire.frame(kwire.request_header(1, 4, i, "pipe") + fetch) for i in range(n)]
            sender = threading.Thread(target=c.send_raw, args=(b"".join(req),))
            sender.start()
            for i in range(n):
                r = kwire.Reader(c.recv_frame(60))
                self.assertEqual(r.i32(), i, "answer %d out of order" % i)
            sender.join(60)

    def test_many_connections_across_shards(self):
        """Connections spread over shards by SO_REUSEPORT all get served."""
        conns = [kwire.Conn.to(self.bootstrap) for _ in range(24)]
        try:
            for c in conns:
                err, _ = kwire.api_versions(c, 2)
                self.assertEqual(err, 0)
                md = kwire.metadata(c, 12)
                self.assertEqual(md["brokers"][0][2], self.port())
        finally:
            for c in conns:
                c.close()


class NodeIdTest(unittest.TestCase):
    def test_node_id_and_advertised_listener(self):
        harness.need_server_binary()
        s = Server(smp=1, sets={"node.id": "7"}, name="nodeid")
        try:
            s.start()
            # advertised.listeners differs from listeners: clients are told the advertised one.
            with kwire.Conn.to(s.bootstrap) as c:
                md = kwire.metadata(c, 12)
                self.assertEqual(md["brokers"][0][0], 7)
                self.assertEqual(md["controller_id"], 7)
            s.stop()
            s.sets["advertised.listeners"] = "PLAINTEXT://strata.example:19092"
            s.start()
            with kwire.Conn.to(s.bootstrap) as c:
                md = kwire.metadata(c, 1)
                self.assertEqual(md["brokers"][0][1:3], ("strata.example", 19092))
            s.stop()
        finally:
            s.close()


if __name__ == "__main__":
    harness.main()
