"""Tracing in a cluster (issue 26): an acks=all Produce to a partition of replication factor 3
waits on its leader until every in-sync replica has the batch (the high watermark covers it);
its trace shows that wait as kafka.produce.replication_wait beside the local sync, both under
the owner shard's span, nested in time. Followers' fetches are not traced. Three brokers, all
exporting to one OTLP receiver here (test_tracing.Receiver)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import wait_until  # noqa: E402
from test_tracing import Receiver, attrs, root_of, traces  # noqa: E402

TOPIC = "traced-rf3"


class TracingClusterTest(unittest.TestCase):
    def test_replication_wait_span(self):
        try:
            from confluent_kafka import Producer
            from confluent_kafka.admin import AdminClient, NewTopic
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is missing")
        harness.need_server_binary()
        rx = Receiver()
        c = Cluster(3, sets={"tracing.endpoint": rx.url, "tracing.sample.ratio": "1",
                             "min.insync.replicas": "2", "broker.heartbeat.interval.ms": "250"},
                    name="tracing")
        try:
            c.start()
            c.wait_for_quorum(30)
            bootstrap = ",".join(n.bootstrap for n in c.nodes.values())
            a = AdminClient({"bootstrap.servers": bootstrap})
            for f in a.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=20).values():
                f.result(30)
            p = Producer({"bootstrap.servers": bootstrap, "client.id": "rf3-app", "acks": "all",
                          "linger.ms": 0, "message.timeout.ms": 30000})
            acked = []
            for i in range(3):
                p.produce(TOPIC, value=b"r%d" % i, on_delivery=lambda e, m: acked.append(e))
                p.flush(30)
            self.assertEqual(acked, [None] * 3)

            def ok_traces():
                out = []
                for t in traces(rx.spans()).values():
                    r = root_of(t)
                    if r and r["name"] == "kafka.produce" and \
                            attrs(r).get("kafka.client_id") == "rf3-app" and \
                            attrs(r).get("kafka.error_code") == 0 and \
                            {"kafka.produce.replication_wait", "kafka.response"} <= \
                            {s["name"] for s in t}:
                        out.append(t)
                return out
            wait_until(lambda: len(ok_traces()) >= 3, 20, "three produces with their ISR wait")
            self.assertEqual(rx.bad, [])
            for t in ok_traces():
                byid = {s["spanId"]: s for s in t}
                for s in t:
                    if "parentSpanId" in s:
                        self.assertIn(s["parentSpanId"], byid)
                        par = byid[s["parentSpanId"]]
                        self.assertGreaterEqual(int(s["startTimeUnixNano"]),
                                                int(par["startTimeUnixNano"]))
                        self.assertLessEqual(int(s["endTimeUnixNano"]),
                                             int(par["endTimeUnixNano"]))
                rw = [s for s in t if s["name"] == "kafka.produce.replication_wait"]
                self.assertEqual(len(rw), 1)
                ra = attrs(rw[0])
                self.assertEqual(ra["messaging.destination.name"], TOPIC)
                self.assertEqual(ra["messaging.destination.partition.id"], 0)
                self.assertEqual(ra["kafka.error_code"], 0)
                self.assertEqual(byid[rw[0]["parentSpanId"]]["name"], "kafka.produce.shard")
                # the wait starts as the append ends and the local sync runs within it
                app = [s for s in t if s["name"] == "kafka.produce.append"][0]
                self.assertGreaterEqual(int(rw[0]["startTimeUnixNano"]),
                                        int(app["endTimeUnixNano"]))
            # no consumer here: a Fetch trace would be a follower's, and they fetch all the time
            self.assertFalse([s for s in rx.spans() if s["name"].startswith("kafka.fetch")])
            del p, a  # the clients go before the brokers (no reconnect noise)
            c.stop_all()
        finally:
            c.close()
            rx.close()


if __name__ == "__main__":
    harness.main()
