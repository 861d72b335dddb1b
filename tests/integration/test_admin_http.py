"""The admin HTTP API of a running broker (issue 7): readiness, /v1/cluster, /v1/topics,
/v1/partitions and /metrics following real produce and fetch traffic from librdkafka, the
exposition checked by the parser here and by Prometheus's own `promtool check metrics`."""

import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import Server, ServerTestCase, port_open, wait_until  # noqa: E402


class AdminHttpTest(ServerTestCase):
    SMP = 2
    # Every append journaled (the journal metrics test writes to 4 partitions, below the
    # default fan-out of log.journal.min.partitions=16 at which a shard takes to its journal).
    SETS = {"log.journal.min.partitions": "1"}

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        super().setUpClass()
        cls.admin = cls.server.admin_port
        wait_until(lambda: ac.http_get(cls.admin, "/v1/status/ready")[0] == 200, 10,
                   "admin ready")

    def test_ready_cluster_and_errors(self):
        status, ctype, body = ac.http_get(self.admin, "/v1/status/ready")
        self.assertEqual((status, body), (200, '{"ready":true}'))
        c = ac.get_json(self.admin, "/v1/cluster")
        self.assertEqual(c["shards"], 2)
        self.assertEqual(c["node_id"], 0)
        self.assertTrue(c["ready"])
        self.assertEqual(c["brokers"], [{"node_id": 0, "host": "127.0.0.1",
                                         "port": self.server.port}])
        self.assertEqual(len(c["cluster_id"]), 22)
        self.assertEqual(ac.http_get(self.admin, "/nope")[0], 404)
        self.assertEqual(ac.http_get(self.admin, "/metrics", method="POST")[0], 405)

    def test_index_and_openapi_match_what_is_served(self):
        """`/` lists the endpoints and /v1/openapi.json describes them, both from one table:
        every path they name answers GET with the content type they give, and nothing the
        server answers is missing (the probed paths below)."""
        idx = ac.get_json(self.admin, "/")
        self.assertEqual(idx["openapi"], "/v1/openapi.json")
        listed = {e["path"]: e["type"] for e in idx["endpoints"] if e["method"] == "GET"}
        posts = {e["path"] for e in idx["endpoints"] if e["method"] == "POST"}
        self.assertEqual(posts, {"/v1/protocol-log", "/v1/topics", "/v1/topics/{topic}/configs"})
        api = ac.get_json(self.admin, "/v1/openapi.json")
        self.assertEqual(api["openapi"], "3.0.3")
        self.assertEqual(api["info"]["version"], idx["version"])
        self.assertEqual(set(api["paths"]), set(listed) | posts)
        for path in posts:
            want = ["get", "post"] if path in listed else ["post"]
            self.assertEqual(sorted(api["paths"][path]), want)
            if path not in listed and "{" not in path:
                self.assertEqual(ac.http_get(self.admin, path)[0], 405)
        for path, ctype in listed.items():
            if "{" in path:  # a template (test_console.py fills it in)
                continue
            status, got, body = ac.http_get(self.admin, path)
            self.assertEqual(status, 200, path)
            self.assertEqual(got.split(";")[0], ctype.split(";")[0], path)
            content = api["paths"][path]["get"]["responses"]["200"]["content"]
            self.assertEqual(list(content), [ctype.split(";")[0]], path)
        for path in ("/metrics", "/v1/cluster", "/v1/topics", "/v1/partitions",
                     "/v1/status/ready"):
            self.assertIn(path, listed)
        params = api["paths"]["/v1/partitions"]["get"]["parameters"]
        self.assertEqual([(p["name"], p["in"]) for p in params], [("topic", "query")])
        # A browser gets a page of links.
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=5)
        try:
            c.request("GET", "/", headers={"Accept": "text/html,application/xhtml+xml"})
            r = c.getresponse()
            page = r.read().decode()
            self.assertEqual(r.status, 200)
            self.assertTrue(r.getheader("Content-Type").startswith("text/html"))
        finally:
            c.close()
        for path in list(listed) + list(posts):
            self.assertIn('href="%s"' % path, page)

    def test_partitions_topics_and_metrics_follow_traffic(self):
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 3)
        p = kc.producer(self.bootstrap)
        msgs = [{"key": b"k%d" % i, "value": b"v" * 100, "partition": i % 3} for i in range(300)]
        kc.produce_all(p, topic, msgs)

        def parts_done():
            ps = ac.get_json(self.admin, "/v1/partitions?topic=" + topic)["partitions"]
            if len(ps) == 3 and all(x["high_watermark"] == 100 for x in ps):
                return ps
        ps = wait_until(parts_done, 10, "/v1/partitions to show 100 records per partition")
        for i, x in enumerate(ps):
            self.assertEqual((x["topic"], x["partition"], x["leader"]), (topic, i, 0))
            self.assertEqual((x["log_start_offset"], x["log_end_offset"]), (0, 100))
            self.assertIn(x["shard"], (0, 1))
            self.assertEqual(x["segments"], 1)
            self.assertEqual(x["records_produced"], 100)
            # The log holds the batches as produced, nothing else.
            self.assertEqual(x["size_bytes"], x["bytes_produced"])
            seg = os.path.join(self.server.data_dir, "%s-%d" % (topic, i),
                               "00000000000000000000.log")
            self.assertEqual(os.path.getsize(seg), x["size_bytes"])
        t = [t for t in ac.get_json(self.admin, "/v1/topics")["topics"] if t["name"] == topic]
        self.assertEqual(len(t), 1)
        self.assertEqual((t[0]["partitions"], t[0]["records"]), (3, 300))
        self.assertEqual(t[0]["size_bytes"], sum(x["size_bytes"] for x in ps))

        m = ac.scrape(self.admin)
        for i in range(3):
            self.assertEqual(m.value("strata_partition_produced_records_total",
                                     topic=topic, partition=i), 100)
            self.assertEqual(m.value("strata_partition_log_end_offset", topic=topic,
                                     partition=i), 100)
            self.assertEqual(m.value("strata_partition_size_bytes", topic=topic, partition=i),
                             ps[i]["size_bytes"])
        self.assertGreaterEqual(m.value("strata_kafka_requests_total", api="Produce"), 1)
        self.assertGreaterEqual(m.sum("strata_storage_appends_total"), 3)
        self.assertGreaterEqual(m.sum("strata_storage_written_bytes_total"),
                                sum(x["size_bytes"] for x in ps))
        # Strict flush (the default): every acknowledged append was fsynced.
        self.assertGreaterEqual(m.sum("strata_storage_fsyncs_total"), 1)
        for shard in ("0", "1"):
            self.assertEqual(
                m.value("strata_storage_fsync_duration_seconds_bucket", shard=shard, le="+Inf"),
                m.value("strata_storage_fsync_duration_seconds_count", shard=shard))
        produce_count = m.value("strata_kafka_request_duration_seconds_count", api="Produce")
        self.assertEqual(m.value("strata_kafka_request_duration_seconds_bucket", api="Produce",
                                 le="+Inf"), produce_count)
        self.assertGreaterEqual(produce_count, 1)
        self.assertGreater(m.value("strata_process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(m.value("strata_process_open_fds"), 3)
        self.assertGreaterEqual(m.value("strata_storage_recovery_seconds"), 0)
        self.assertEqual(m.value("strata_ready"), 1)
        self.assertEqual(m.value("strata_build_info", version=m.find("strata_build_info")[0][0]
                                 ["version"]), 1)
        p.flush(5)
        del p

        kc.consume_partitions(self.bootstrap, topic, [0, 1, 2], 300)

        def fetched():
            m = ac.scrape(self.admin)
            return all(m.value("strata_partition_fetched_records_total", topic=topic,
                               partition=i) >= 100 for i in range(3)) and m
        m = wait_until(fetched, 10, "fetched records in /metrics")
        self.assertGreater(m.sum("strata_kafka_sent_bytes_total"), 300 * 100)
        self.assertGreater(m.sum("strata_kafka_connections_accepted_total"), 0)

    def test_loop_iteration_histogram_counts(self):
        # strata_shard_loop_iteration_seconds: one histogram per shard, cumulative buckets,
        # +Inf = _count, and the counts grow as the shards work (snapshots are published once
        # a second, so wait for a later one rather than a fixed time).
        def series(m):
            out = {}
            for shard in ("0", "1"):
                b = sorted(((float(lab["le"]), v) for lab, v in
                            m.find("strata_shard_loop_iteration_seconds_bucket")
                            if lab.get("shard") == shard), key=lambda x: x[0])
                out[shard] = (b, m.value("strata_shard_loop_iteration_seconds_count",
                                         shard=shard),
                              m.value("strata_shard_loop_iteration_seconds_sum", shard=shard))
            return out
        before = series(ac.scrape(self.admin))
        for shard, (b, count, total) in before.items():
            self.assertEqual(len(b), 17, b)             # 16 bounds, 10 us .. 1 s, and +Inf
            self.assertEqual((b[0][0], b[-2][0], b[-1][0]), (1e-05, 1.0, float("inf")))
            self.assertEqual(b[-1][1], count)
            self.assertTrue(all(x[1] <= y[1] for x, y in zip(b, b[1:])), b)
            self.assertGreaterEqual(total, 0)   # the snapshot before serving may count none
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 2)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"v" * 100, "partition": i % 2} for i in range(200)])
        del p

        def grown():
            now = series(ac.scrape(self.admin))
            return all(now[s][1] > before[s][1] and now[s][2] > before[s][2]
                       for s in now) and now
        wait_until(grown, 10, "loop iteration counts to grow on both shards")

    def test_journal_metrics_count(self):
        # Each shard's journal (log.journal.bytes, 64 MiB by default): rounds, entries and the
        # logs the rounds covered grow with acknowledged produces; used stays within capacity.
        names = ("rounds_total", "round_logs_total", "entries_total", "fallbacks_total",
                 "used_bytes", "capacity_bytes")

        def journal(m):
            return {n: m.sum("strata_journal_" + n) for n in names}
        m = ac.scrape(self.admin)
        for n in names:
            self.assertEqual(sorted(lab["shard"] for lab, _ in m.find("strata_journal_" + n)),
                             ["0", "1"], n)
        before = journal(m)
        self.assertEqual(before["capacity_bytes"], 2 * (64 << 20))
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 4)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, topic, [{"value": b"v" * 100, "partition": i % 4} for i in range(400)])
        del p

        def grown():
            now = journal(ac.scrape(self.admin))
            return now["entries_total"] >= before["entries_total"] + 4 and now
        now = wait_until(grown, 10, "journal entries to count the produces")
        self.assertGreater(now["rounds_total"], before["rounds_total"])
        # Every round covers at least one log (a round with none only makes space reusable in
        # a journal over half full).
        rounds = now["rounds_total"] - before["rounds_total"]
        logs = now["round_logs_total"] - before["round_logs_total"]
        self.assertGreaterEqual(logs, rounds)
        self.assertEqual(now["fallbacks_total"], before["fallbacks_total"])
        self.assertGreater(now["used_bytes"], 0)
        self.assertLessEqual(now["used_bytes"], now["capacity_bytes"])

    def test_promtool_accepts_the_exposition(self):
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool not installed (scripts/deps.sh test installs prometheus)")
        kc.create_topic(self.bootstrap, self.unique(), 2)
        wait_until(lambda: ac.scrape(self.admin).find("strata_partition_segments"), 10,
                   "partitions in /metrics")
        body = ac.http_get(self.admin, "/metrics")[2]
        r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, "promtool check metrics:\n%s%s" % (r.stdout,
                                                                               r.stderr))


class AdminReadinessTest(unittest.TestCase):
    """Readiness over a restart with 400 partitions to reopen: the admin port answers while
    the shards open their logs, /v1/status/ready says 503 until the Kafka port serves, then
    200; admin.listen= (empty) turns the API off."""

    def test_ready_only_once_kafka_serves(self):
        harness.need_server_binary()
        s = Server(smp=2, sets={"num.partitions": "1"}, name="AdminReady")
        try:
            s.start()
            for i in range(4):
                kc.create_topic(s.bootstrap, "r%d" % i, 100)
            s.stop()
            # Start by hand to watch the very first answers.
            s.port, s.admin_port = harness.free_port(), harness.free_port()
            env = harness.sanitizer_env(dict(os.environ))
            s.stderr_path = os.path.join(s.tmp, "stderr.ready.log")
            s._stderr = open(s.stderr_path, "wb")
            s.proc = subprocess.Popen(s.command(), stdout=s._stderr, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env, cwd=s.tmp)
            seen = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                self.assertIsNone(s.proc.poll(), s.stderr_tail())
                try:
                    st = ac.http_get(s.admin_port, "/v1/status/ready", timeout=2)[0]
                except OSError:
                    time.sleep(0.005)   # poll interval: not listening yet
                    continue
                if st == 200:
                    # Ready implies the Kafka port accepts.
                    self.assertTrue(port_open(s.host, s.port))
                    break
                self.assertEqual(st, 503)
                seen.append(st)
                time.sleep(0.005)       # poll interval
            else:
                self.fail("never ready\n" + s.stderr_tail())
            print("readiness: %d answer(s) of 503 before 200" % len(seen))
            ps = ac.get_json(s.admin_port, "/v1/partitions")["partitions"]
            self.assertEqual(len(ps), 400)
            self.assertTrue(all(p["log_end_offset"] == 0 for p in ps))
            s.stop()
            s.sets["admin.listen"] = ""
            s.start()
            self.assertFalse(port_open(s.host, s.admin_port))
            s.stop()
        finally:
            s.close()


if __name__ == "__main__":
    harness.main()
