"""Tracing (issue 26): sampled Produce and Fetch requests as OpenTelemetry spans, exported as
OTLP/HTTP JSON to `tracing.endpoint`. A small OTLP receiver here (http.server on 127.0.0.1)
collects what the broker posts; the spans of each trace must link up (every parent in the same
trace, one root), nest in time, and carry their attributes. Ratio 0 exports nothing; a receiver
that is down costs the clients nothing and shows in the export error metric; bad settings stop
the start with one line naming the setting."""

import http.client
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Server, ServerTestCase, wait_until  # noqa: E402

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


class Receiver:
    """An OTLP/HTTP receiver: each POST body to /v1/traces parsed and kept."""

    def __init__(self):
        self.bodies = []
        self.bad = []           # bodies that were not JSON, or posted elsewhere
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                with rec.lock:
                    try:
                        if self.path != "/v1/traces":
                            raise ValueError("posted to %s" % self.path)
                        if self.headers.get("Content-Type") != "application/json":
                            raise ValueError("content type %s" % self.headers.get("Content-Type"))
                        rec.bodies.append(json.loads(raw.decode("utf-8")))
                    except ValueError as e:
                        rec.bad.append((str(e), raw[:200]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/v1/traces" % self.port

    def spans(self):
        """Every span received, each with its resource's attributes under '_resource'."""
        out = []
        with self.lock:
            bodies = list(self.bodies)
        for b in bodies:
            for rs in b["resourceSpans"]:
                res = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        out.append(dict(s, _resource=res))
        return out

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def attrs(span):
    """A span's attributes as a dict of Python values (intValue as int)."""
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        out[a["key"]] = int(v["intValue"]) if "intValue" in v else v["stringValue"]
    return out


def traces(spans):
    by = {}
    for s in spans:
        by.setdefault(s["traceId"], []).append(s)
    return by


def root_of(trace):
    roots = [s for s in trace if "parentSpanId" not in s]
    return roots[0] if len(roots) == 1 else None


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def produce(bootstrap, topic, client_id, n):
    """n Produce requests (acks=all), one message each, to partitions 0..n-1 in turn."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all",
                  "linger.ms": 0})
    acked = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % 4,
                  on_delivery=lambda e, m: acked.append(e))
        p.flush(20)
    return acked


def consume(bootstrap, topic, client_id, n):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(4)])
        got = []
        wait_until(lambda: got.extend(m for m in c.consume(n, 0.5) if not m.error()) or
                   len(got) >= n, 20, "the messages consumed")
        return got
    finally:
        c.close()


def need_kafka():
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise unittest.SkipTest("confluent-kafka is missing")


class TracingTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        need_kafka()
        cls.rx = Receiver()
        cls.SETS = {"tracing.endpoint": cls.rx.url, "tracing.sample.ratio": "1.0",
                    "tracing.service.name": "strata-test", "num.partitions": "4"}
        try:
            super().setUpClass()
        except BaseException:
            cls.rx.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.rx.close()

    def check_trace(self, trace):
        """One root; every parent in the trace; ids well formed; children nest in time."""
        root = root_of(trace)
        self.assertIsNotNone(root, "one root per trace: %s" % [s["name"] for s in trace])
        byid = {s["spanId"]: s for s in trace}
        self.assertEqual(len(byid), len(trace), "span ids unique")
        for s in trace:
            self.assertRegex(s["traceId"], HEX32)
            self.assertRegex(s["spanId"], HEX16)
            self.assertEqual(s["_resource"]["service.name"], {"stringValue": "strata-test"})
            start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
            self.assertLessEqual(start, end, s["name"])
            if s is root:
                self.assertEqual(s["kind"], 2)  # SERVER
                continue
            self.assertEqual(s["kind"], 1)  # INTERNAL
            self.assertRegex(s["parentSpanId"], HEX16)
            self.assertIn(s["parentSpanId"], byid, "%s's parent is in its trace" % s["name"])
            parent = byid[s["parentSpanId"]]
            self.assertGreaterEqual(start, int(parent["startTimeUnixNano"]),
                                    "%s starts within %s" % (s["name"], parent["name"]))
            self.assertLessEqual(end, int(parent["endTimeUnixNano"]),
                                 "%s ends within %s" % (s["name"], parent["name"]))
        return root

    def test_1_produce_and_fetch_traced(self):
        topic = self.unique("traced")
        n = 4
        self.assertEqual(produce(self.bootstrap, topic, "traced-app", n), [None] * n)
        want = {"kafka.produce", "kafka.produce.shard", "kafka.produce.append",
                "kafka.produce.sync", "kafka.response"}

        def produce_traces():
            out = []
            for t in traces(self.rx.spans()).values():
                r = root_of(t)
                if r and r["name"] == "kafka.produce" and \
                        attrs(r).get("kafka.client_id") == "traced-app" and \
                        attrs(r).get("messaging.destination.name") == topic:
                    out.append(t)
            return out

        # the first Produce may be refused while the auto-created topic opens (and retried):
        # at least one trace per acknowledged message, each complete
        wait_until(lambda: len([t for t in produce_traces()
                                if want <= {s["name"] for s in t}]) >= n, 20,
                   "a complete trace of each produce")
        self.assertEqual(self.rx.bad, [])
        parts_seen = set()
        shards_seen = set()
        for t in produce_traces():
            root = self.check_trace(t)
            ra = attrs(root)
            self.assertEqual(ra["kafka.api"], "Produce")
            self.assertEqual(ra["kafka.acks"], -1)
            self.assertEqual(ra["kafka.partitions"], 1)
            self.assertGreater(ra["kafka.request_bytes"], 0)
            self.assertIn("kafka.api_version", ra)
            if ra["kafka.error_code"] != 0:
                continue
            names = [s["name"] for s in t]
            self.assertTrue(want <= set(names), names)
            for s in t:
                a = attrs(s)
                if s["name"] == "kafka.produce.append":
                    self.assertEqual(a["messaging.destination.name"], topic)
                    self.assertEqual(a["kafka.error_code"], 0)
                    self.assertGreater(a["messaging.batch.message_bytes"], 0)
                    parts_seen.add(a["messaging.destination.partition.id"])
                if s["name"] == "kafka.produce.sync":
                    self.assertEqual(a["messaging.destination.name"], topic)
                    self.assertIn("messaging.destination.partition.id", a)
                if s["name"] == "kafka.produce.shard":
                    shards_seen.add(a["strata.shard"])
                    self.assertEqual(a["strata.partitions"], 1)
                # append and sync hang from their owner shard's span
                if s["name"] in ("kafka.produce.append", "kafka.produce.sync"):
                    parent = [x for x in t if x["spanId"] == s["parentSpanId"]][0]
                    self.assertEqual(parent["name"], "kafka.produce.shard")
        self.assertEqual(parts_seen, set(range(n)))
        self.assertEqual(shards_seen, {0, 1}, "partitions on both shards: the hop is traced")

        self.assertEqual(len(consume(self.bootstrap, topic, "traced-consumer", n)), n)

        def fetch_traces():
            out = []
            for t in traces(self.rx.spans()).values():
                r = root_of(t)
                if r and r["name"] == "kafka.fetch" and \
                        attrs(r).get("kafka.client_id") == "traced-consumer" and \
                        any(s["name"] == "kafka.fetch.read" and attrs(s)["strata.bytes"] > 0
                            for s in t):
                    out.append(t)
            return out
        wait_until(lambda: fetch_traces(), 20, "a traced fetch that returned records")
        for t in fetch_traces():
            root = self.check_trace(t)
            self.assertEqual(attrs(root)["kafka.api"], "Fetch")
            names = {s["name"] for s in t}
            self.assertIn("kafka.response", names)
            for s in t:
                if s["name"] == "kafka.fetch.read":
                    a = attrs(s)
                    self.assertEqual(a["messaging.destination.name"], topic)
                    self.assertIn(a["messaging.destination.partition.id"], range(4))
                    self.assertEqual(s["parentSpanId"], root["spanId"])
        # a long poll that found nothing at first waited: its wait is a span too
        wait_until(lambda: any(s["name"] == "kafka.fetch.wait" for s in self.rx.spans()), 10,
                   "a consumer's empty fetch waits (fetch.wait.max.ms) and says so")
        wait_until(lambda: (metric(self.server.admin_port,
                                   "strata_tracing_spans_exported_total") or 0) >=
                   len(self.rx.spans()) > 0, 10, "the exported counter to match")
        self.assertEqual(metric(self.server.admin_port, "strata_tracing_export_errors_total"), 0)


class TracingRatioZeroTest(unittest.TestCase):
    def test_ratio_zero_exports_nothing(self):
        need_kafka()
        rx = Receiver()
        s = Server(smp=2, sets={"tracing.endpoint": rx.url, "tracing.sample.ratio": "0",
                                "num.partitions": "4"}, name="tracing0")
        try:
            s.start()
            topic = "untraced"
            self.assertEqual(produce(s.bootstrap, topic, "untraced-app", 4), [None] * 4)
            self.assertEqual(len(consume(s.bootstrap, topic, "untraced-consumer", 4)), 4)
            # the exporter sends what is queued as the broker stops: nothing was
            s.stop()
            self.assertEqual(rx.bodies, [])
            self.assertIn("tracing: 0 of Produce and Fetch requests", s.stderr_text())
        finally:
            s.close()
            rx.close()


class TracingReceiverDownTest(unittest.TestCase):
    def test_receiver_down_broker_serves(self):
        need_kafka()
        dead = harness.free_port()  # nothing listens there
        s = Server(smp=2, sets={"tracing.endpoint": "http://127.0.0.1:%d/v1/traces" % dead,
                                "tracing.sample.ratio": "1", "num.partitions": "4"},
                   name="tracing-down")
        try:
            s.start()
            self.assertEqual(metric(s.admin_port, "strata_tracing_export_errors_total"), 0)
            self.assertEqual(produce(s.bootstrap, "down", "down-app", 4), [None] * 4)
            wait_until(lambda: metric(s.admin_port, "strata_tracing_export_errors_total") > 0,
                       15, "an export error counted")
            wait_until(lambda: metric(s.admin_port, "strata_tracing_spans_dropped_total") > 0,
                       15, "the failed batch's spans counted as dropped")
            self.assertEqual(metric(s.admin_port, "strata_tracing_spans_exported_total"), 0)
            # and it still serves
            self.assertEqual(produce(s.bootstrap, "down", "down-app", 2), [None] * 2)
            self.assertEqual(len(consume(s.bootstrap, "down", "down-consumer", 6)), 6)
            self.assertIn("tracing: ", s.stderr_text())
            s.stop()
        finally:
            s.close()


class TracingSettingsTest(unittest.TestCase):
    def refused(self, key, value):
        harness.need_server_binary()
        r = subprocess.run([harness.server_binary(), "--set", "%s=%s" % (key, value),
                            "--set", "tracing.endpoint=http://127.0.0.1:4318/v1/traces"
                            if key != "tracing.endpoint" else "log.level=info"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                           env=harness.sanitizer_env(dict(os.environ)))
        self.assertEqual(r.returncode, 1, r.stderr)
        return r.stderr.decode()

    def test_bad_settings_refused(self):
        for url in ("https://collector:4318/v1/traces", "http://collector/v1/traces",
                    "http://:4318/", "http://collector:0/v1/traces",
                    "http://collector:99999/x", "collector:4318", "http://collector:43x/"):
            self.assertIn("bad value for tracing.endpoint", self.refused("tracing.endpoint", url))
        for ratio in ("1.5", "-0.1", "half", ""):
            self.assertIn("bad value for tracing.sample.ratio: '%s' (0 to 1)" % ratio,
                          self.refused("tracing.sample.ratio", ratio))
        self.assertIn("bad value for tracing.service.name",
                      self.refused("tracing.service.name", ""))


if __name__ == "__main__":
    harness.main()
