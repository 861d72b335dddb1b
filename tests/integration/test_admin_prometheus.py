"""Debian's real Prometheus scraping a running broker (issue 7).

A Prometheus server (the `prometheus` package) is started on a free port with a temporary
config that scrapes the broker's admin port every second and a temporary TSDB directory; it
is killed at the end. The test produces and consumes a known number of records with
confluent-kafka and asks Prometheus's HTTP query API for the counters: records produced,
bytes produced (checked against the segment files on disk), log end offsets, records
fetched, request counts and latency quantiles, fsyncs. With consumer groups in the broker
(JoinGroup advertised), a group's lag must reach 0 after it commits everything."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

RECORDS = 1200
VALUE = 100


class Prometheus:
    """A prometheus server scraping one target every second, on a free port."""

    def __init__(self, target, job_extra=""):
        """job_extra: more YAML lines of the scrape job, indented 4 (scheme, tls_config,
        basic_auth: test_admin_tls.py)."""
        self.bin = shutil.which("prometheus")
        self.tmp = tempfile.mkdtemp(prefix="strata-it-prom-")
        self.port = harness.free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: strata\n    scrape_interval: 1s\n"
                    "    scrape_timeout: 900ms\n"
                    "    static_configs:\n      - targets: ['%s']\n" % target + job_extra)
        self.log = open(os.path.join(self.tmp, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [self.bin, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "db"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.tmp)
        wait_until(self._ready, 30, "prometheus ready on port %d" % self.port)

    def _ready(self):
        assert self.proc.poll() is None, "prometheus exited:\n" + self.output()
        return ac.http_get(self.port, "/-/ready", timeout=1)[0] == 200

    def output(self):
        with open(os.path.join(self.tmp, "prometheus.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def query(self, expr):
        """The instant vector of expr as [(labels, float)]."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.port, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=5) as r:
            d = json.load(r)
        assert d["status"] == "success", d
        return [(x["metric"], float(x["value"][1])) for x in d["data"]["result"]]

    def scalar(self, expr):
        """The single value of expr, or None while it has no result."""
        v = self.query(expr)
        assert len(v) <= 1, "%s: %d series" % (expr, len(v))
        return v[0][1] if v else None

    def wait_value(self, expr, want, timeout=20):
        """Waits until expr evaluates to want (scrape and snapshot lag a second or two)."""
        seen = []

        def ok():
            v = self.scalar(expr)
            seen[:] = [v]
            return v == want
        try:
            wait_until(ok, timeout, "%s == %r" % (expr, want))
        except AssertionError as e:
            raise AssertionError("%s (last value %r)" % (e, seen[0] if seen else None))

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class AdminPrometheusTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        if not shutil.which("prometheus"):
            raise unittest.SkipTest("prometheus not installed (scripts/deps.sh test)")
        super().setUpClass()
        try:
            cls.prom = Prometheus("127.0.0.1:%d" % cls.server.admin_port)
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.prom.close()
        finally:
            super().tearDownClass()

    def test_counters_match_what_was_produced_and_consumed(self):
        prom = self.prom
        prom.wait_value('up{job="strata"}', 1.0)
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 2)
        p = kc.producer(self.bootstrap)
        msgs = [{"key": b"%06d" % i, "value": bytes([65 + i % 26]) * VALUE, "partition": i % 2}
                for i in range(RECORDS)]
        kc.produce_all(p, topic, msgs)
        del p
        got = kc.consume_partitions(self.bootstrap, topic, [0, 1], RECORDS)
        self.assertEqual(len(got), RECORDS)

        sel = '{job="strata",topic="%s"}' % topic
        prom.wait_value("sum(strata_partition_produced_records_total%s)" % sel, float(RECORDS))
        prom.wait_value("sum(strata_partition_log_end_offset%s)" % sel, float(RECORDS))
        prom.wait_value("sum(strata_partition_high_watermark%s)" % sel, float(RECORDS))
        # Bytes: what the broker counts as produced is exactly what its segment files hold.
        on_disk = 0
        for i in range(2):
            d = os.path.join(self.server.data_dir, "%s-%d" % (topic, i))
            on_disk += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                           if f.endswith(".log"))
        self.assertGreater(on_disk, RECORDS * VALUE)
        prom.wait_value("sum(strata_partition_produced_bytes_total%s)" % sel, float(on_disk))
        prom.wait_value("sum(strata_partition_size_bytes%s)" % sel, float(on_disk))
        # Fetch answers whole batches, so at least every record was sent once.
        wait_until(lambda: (prom.scalar("sum(strata_partition_fetched_records_total%s)" % sel)
                            or 0) >= RECORDS, 20, "fetched records >= %d" % RECORDS)
        self.assertGreaterEqual(
            prom.scalar("sum(strata_partition_fetched_bytes_total%s)" % sel), on_disk)
        # Node-level figures agree with the per-partition ones.
        self.assertGreaterEqual(prom.scalar("sum(strata_storage_written_bytes_total)"), on_disk)
        self.assertGreaterEqual(prom.scalar('strata_kafka_requests_total{api="Produce"}'), 1)
        self.assertGreaterEqual(prom.scalar("sum(strata_storage_fsyncs_total)"), 1)
        q = prom.scalar('histogram_quantile(0.99, sum by (le) '
                        '(strata_kafka_request_duration_seconds_bucket{api="Produce"}))')
        self.assertTrue(q is not None and 0 < q <= 10, q)
        q = prom.scalar("histogram_quantile(0.5, sum by (le) "
                        "(strata_storage_fsync_duration_seconds_bucket))")
        self.assertTrue(q is not None and 0 < q <= 10, q)
        self.assertEqual(prom.scalar("strata_ready"), 1)
        self.assertEqual(len(prom.query("strata_shard_busy_ratio")), 2)

    def test_group_lag_reaches_zero(self):
        with kwire.Conn.to(self.bootstrap) as c:
            _, keys = kwire.api_versions(c)
        if 11 not in keys or 8 not in keys:
            self.skipTest("the broker does not speak JoinGroup/OffsetCommit yet (groups, "
                          "issue 5): no group metrics to check")
        from confluent_kafka import Consumer
        topic, group = self.unique(), self.unique("g")
        # One partition, so the first commit covers every partition the lag is summed over
        # (a partition without a commit has no lag series, as in kafka-consumer-groups).
        kc.create_topic(self.bootstrap, topic, 1)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"x" * 10, "partition": 0} for i in range(200)])
        del p
        sel = '{group="%s",topic="%s"}' % (group, topic)
        cons = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000})
        count = [0]

        def consumed(k):
            def f():
                for m in cons.consume(k - count[0], 0.5):
                    if m.error() is None:
                        count[0] += 1
                return count[0] >= k
            return f
        try:
            cons.subscribe([topic])
            wait_until(consumed(100), 30, "100 records consumed by the group")
            cons.commit(asynchronous=False)
            # Half read and committed: lag 100; then all of it: lag 0.
            self.prom.wait_value("sum(strata_group_lag%s)" % sel, 100.0)
            wait_until(consumed(200), 30, "all 200 records consumed by the group")
            cons.commit(asynchronous=False)
            self.prom.wait_value("sum(strata_group_lag%s)" % sel, 0.0)
            self.prom.wait_value("sum(strata_group_committed_offset%s)" % sel, 200.0)
            self.prom.wait_value('strata_group_members{group="%s"}' % group, 1.0)
            self.prom.wait_value('strata_group_state{group="%s",state="Stable"}' % group, 1.0)
        finally:
            cons.close()


if __name__ == "__main__":
    harness.main()
