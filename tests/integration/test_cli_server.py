"""test_cli_server.py — every `strata` command against a real strata-server (issue 6's "done
means"): cluster, topic admin, produce/consume with their options, groups (describe with lag,
seek, refusal of a live group, delete), bench produce/consume/e2e, dump-log/verify-index of a
segment the server wrote, and the proxy (Metadata/FindCoordinator rewritten so a client's
Produce and group traffic pass through it). Errors: unknown topic, bad arguments, broker down.
Run by hand with
    STRATA_CLI=build/strata STRATA_SERVER=build/strata-server python3 tests/integration/test_cli_server.py
"""
import glob
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import cli_segment  # noqa: E402

CLI = os.environ.get("STRATA_CLI")


class Lines:
    """A long-running strata command whose stdout lines arrive on a queue, read with a deadline."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def read(self, timeout=30.0):
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no output from %r within %.0fs; so far: %r"
                                 % (self.proc.args, timeout, self.seen)) from None
        if line is None:
            raise AssertionError("%r ended; output: %r" % (self.proc.args, self.seen))
        self.seen.append(line)
        return line

    def wait_for(self, pred, timeout=30.0):
        """Reads lines until pred(line) holds; returns that line."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.read(max(0.1, deadline - time.monotonic()))
            if pred(line):
                return line

    def stop(self):
        """SIGTERM; returns (exit status, the rest of stdout, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        while True:
            line = self.q.get(timeout=10)
            if line is None:
                break
            self.seen.append(line)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, self.seen, err


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class CliAgainstServer(harness.ServerTestCase):
    SMP = 2
    # Kafka's default 3 s wait for more members before the first rebalance only slows tests.
    SETS = {"group.initial.rebalance.delay.ms": "0"}

    def cli(self, *args, stdin=None, timeout=60):
        return harness.run_cmd([CLI, *args, "-b", self.bootstrap], input=stdin, timeout=timeout)

    def ok(self, *args, stdin=None):
        r = self.cli(*args, stdin=stdin)
        self.assertEqual(r.returncode, 0, "%s\n%s%s" % (args, r.stdout, r.stderr))
        return r.stdout

    def fails(self, status, *args, stdin=None):
        r = self.cli(*args, stdin=stdin)
        self.assertEqual(r.returncode, status, "%s\n%s%s" % (args, r.stdout, r.stderr))
        return r.stderr

    @staticmethod
    def lag_rows(describe_out):
        """{(topic, partition): (committed, end, lag)} from `group describe`."""
        rows = {}
        for line in describe_out.splitlines():
            f = line.split()
            if len(f) == 5 and f[1].isdigit():
                rows[(f[0], int(f[1]))] = tuple(f[2:])
        return rows

    def test_cluster(self):
        info = self.ok("cluster", "info")
        self.assertIn("cluster id:", info)
        self.assertIn(self.bootstrap, info)
        self.assertIn("healthy:               yes", self.ok("cluster", "health"))

    def test_topic_lifecycle(self):
        t = self.unique()
        self.assertIn("created topic " + t, self.ok("topic", "create", t, "-p", "3",
                                                     "-c", "retention.ms=60000"))
        self.assertIn("already exists", self.fails(1, "topic", "create", t))
        rows = {ln.split()[0]: ln.split()[1:] for ln in self.ok("topic", "list").splitlines()[1:]}
        self.assertEqual(rows[t], ["3", "1"])
        self.assertNotIn("__consumer_offsets", rows)
        d = self.ok("topic", "describe", t)
        self.assertIn("partitions:  3", d)
        self.assertRegex(d, r"retention\.ms\s+60000")
        self.assertIn("now has 5 partitions", self.ok("topic", "add-partitions", t, "-n", "5"))
        self.assertIn("partitions:  5", self.ok("topic", "describe", t))
        self.fails(1, "topic", "add-partitions", t, "-n", "2")    # never shrinks
        self.ok("topic", "alter-config", t, "--set", "cleanup.policy=compact")
        d = self.ok("topic", "describe", t)
        self.assertRegex(d, r"cleanup\.policy\s+compact")
        self.assertRegex(d, r"retention\.ms\s+60000")  # untouched configs stay
        self.ok("topic", "alter-config", t, "--delete", "retention.ms")
        d = self.ok("topic", "describe", t)
        self.assertNotRegex(d, r"retention\.ms\s+60000")
        self.assertRegex(d, r"cleanup\.policy\s+compact")
        self.fails(1, "topic", "alter-config", t, "--set", "no.such.config=1")
        self.assertIn("deleted topic " + t, self.ok("topic", "delete", t))
        self.assertIn("no topic named", self.fails(1, "topic", "describe", t))
        self.fails(1, "topic", "delete", t)
        self.fails(2, "topic", "create", t, "-p", "0")

    def test_produce_options_and_consume_positions(self):
        t = self.unique()
        self.ok("topic", "create", t, "-p", "2")
        # Every codec, acks 1 and all; the producer's reported positions are where a reader
        # finds each message.
        acks = []
        for codec, ack in (("none", "all"), ("gzip", "1"), ("snappy", "all"), ("lz4", "1"),
                           ("zstd", "all")):
            out = self.ok("produce", t, "-p", "1", "--compression", codec, "--acks", ack,
                          "--header", "codec=" + codec, "--key", codec, "--json",
                          stdin="%s-a\n%s-b\n" % (codec, codec))
            acks += [json.loads(x) for x in out.splitlines()]
        self.assertEqual([(a["partition"], a["offset"]) for a in acks],
                         [(1, i) for i in range(10)])
        got = [json.loads(x) for x in self.ok("consume", t, "-p", "1", "--json").splitlines()]
        self.assertEqual([(m["offset"], m["key"], m["value"]) for m in got],
                         [(i, c, "%s-%s" % (c, ab)) for i, (c, ab) in enumerate(
                             (c, ab) for c in ("none", "gzip", "snappy", "lz4", "zstd")
                             for ab in "ab")])
        self.assertEqual(got[4]["headers"], [{"key": "codec", "value": "snappy"}])
        # acks=0: delivered, but the broker gives no offset.
        self.assertEqual(self.ok("produce", t, "-p", "0", "--acks", "0", "-m", "fire"),
                         "partition 0 offset unknown (acks=0)\n")
        harness.wait_until(lambda: self.ok("consume", t, "-p", "0", "-F", "%v") == "fire\n",
                           timeout=10, what="the acks=0 message to be readable")
        # Offsets: from the tail, absolute, by timestamp.
        self.assertEqual(self.ok("consume", t, "-p", "1", "-o", "-2", "-F", "%p:%o:%k:%v:%h")
                         .splitlines(), ["1:8:zstd:zstd-a:codec=zstd", "1:9:zstd:zstd-b:codec=zstd"])
        self.assertEqual(self.ok("consume", t, "-p", "1", "-o", "3", "-n", "1", "-F", "%o %v"),
                         "3 gzip-b\n")
        self.assertEqual(self.ok("consume", t, "-p", "1", "-o", "end"), "")
        ts = got[6]["timestamp"]
        first = self.ok("consume", t, "-p", "1", "-o", "@%d" % ts, "-n", "1", "-F", "%o")
        self.assertLessEqual(int(first), 6)
        self.assertGreaterEqual(int(first), min(i for i, m in enumerate(got)
                                                if m["timestamp"] >= ts))
        self.assertIn("there is no partition 9", self.fails(1, "produce", t, "-p", "9", "-m", "x"))
        self.fails(2, "consume", t, "-p", "9")
        self.fails(2, "consume", t, "--offset", "middle")
        self.fails(2, "produce", t, "--acks", "7", "-m", "x")
        # A tombstone: a key and no value (null, not empty), as compaction deletes keys by.
        self.assertEqual(self.ok("produce", t, "-p", "0", "--key", "gone", "--null-value"),
                         "partition 0 offset 1\n")
        last = json.loads(self.ok("consume", t, "-p", "0", "-o", "1", "--json"))
        self.assertEqual((last["key"], last["value"]), ("gone", None))
        self.assertEqual(self.ok("consume", t, "-p", "0", "-o", "1", "-F", "%k:%S"), "gone:-1\n")
        self.fails(2, "produce", t, "--null-value", "-m", "x")
        # delete-records: partition 1 (offsets 0-9) below 4, then everything of partition 0.
        self.assertEqual(self.ok("topic", "delete-records", t, "-p", "1", "--before", "4"),
                         "%s/1: log start now 4\n" % t)
        self.assertEqual(self.ok("consume", t, "-p", "1", "-n", "1", "-F", "%o"), "4\n")
        out = self.ok("topic", "delete-records", t, "--before", "-1")
        self.assertIn("%s/0: log start now 2" % t, out)
        self.assertIn("%s/1: log start now 10" % t, out)
        self.assertEqual(self.ok("consume", t, "-p", "0"), "")
        self.assertIn("OFFSET_OUT_OF_RANGE".lower().replace("_", " "),
                      self.fails(1, "topic", "delete-records", t, "-p", "1", "--before", "99")
                      .lower().replace("_", " "))
        self.fails(2, "topic", "delete-records", t)

    def test_consume_follow(self):
        t = self.unique()
        self.ok("topic", "create", t)
        self.ok("produce", t, "-m", "before")
        follow = Lines("consume", t, "--follow", "-F", "%o:%v", "-b", self.bootstrap)
        try:
            self.assertEqual(follow.read(), "0:before")
            self.ok("produce", t, "-m", "after")
            self.assertEqual(follow.read(), "1:after")
        finally:
            rc, _, err = follow.stop()
        self.assertEqual(rc, 0, err)

    def test_produce_consume_and_group_lag(self):
        t, g = self.unique(), self.unique("g")
        self.ok("topic", "create", t, "-p", "2")
        out = self.ok("produce", t, "--key-delimiter", "=", "--json",
                      stdin="".join("k%d=v%d\n" % (i, i) for i in range(10)))
        acks = [json.loads(x) for x in out.splitlines()]
        self.assertEqual(sorted(a["message"] for a in acks), list(range(1, 11)))
        ends = {p: sum(1 for a in acks if a["partition"] == p) for p in (0, 1)}
        got = [json.loads(x) for x in self.ok("consume", t, "--json").splitlines()]
        self.assertEqual(sorted(m["value"] for m in got), sorted("v%d" % i for i in range(10)))
        by_pos = {(m["partition"], m["offset"]): m["key"] for m in got}
        for a in acks:
            self.assertEqual(by_pos[(a["partition"], a["offset"])], "k%d" % (a["message"] - 1))
        first = self.ok("consume", t, "-g", g, "-n", "4").splitlines()
        self.assertEqual(len(first), 4)
        d = self.ok("group", "describe", g)
        self.assertIn("state:       Empty", d)
        self.assertIn("total lag:   6", d)
        rows = self.lag_rows(d)
        # Both partitions show, even one the group has not read (its backlog counts).
        self.assertEqual(sorted(rows), [(t, 0), (t, 1)])
        for p in (0, 1):
            committed, end, lag = rows[(t, p)]
            self.assertEqual(int(end), ends[p])
            self.assertEqual(int(lag), ends[p] - (0 if committed == "-" else int(committed)))
        self.assertRegex(self.ok("group", "list"), r"(?m)^%s\s+Empty$" % re.escape(g))
        self.assertEqual(sorted(self.ok("consume", t, "-g", g).splitlines() + first),
                         sorted("v%d" % i for i in range(10)))
        d = self.ok("group", "describe", g)
        self.assertIn("total lag:   0", d)
        self.assertEqual({k: v[0] for k, v in self.lag_rows(d).items()},
                         {(t, p): str(ends[p]) for p in (0, 1)})
        self.assertEqual(self.ok("consume", t, "-g", g), "")
        self.assertIn("(dry run) %s/0 -> 0" % t,
                      self.ok("group", "seek", g, "--to", "start", "--dry-run"))
        self.assertIn("total lag:   0", self.ok("group", "describe", g))
        self.assertEqual(sorted(self.ok("group", "seek", g, "--to", "start").splitlines()),
                         ["%s/0 -> 0" % t, "%s/1 -> 0" % t])
        self.assertIn("total lag:   10", self.ok("group", "describe", g))
        self.ok("group", "seek", g, "--to", "end")
        self.assertIn("total lag:   0", self.ok("group", "describe", g))
        self.ok("group", "seek", g, "--to", "1", "--topic", t)
        self.assertIn("total lag:   %d" % (10 - 2), self.ok("group", "describe", g))
        self.assertIn("deleted group " + g, self.ok("group", "delete", g))
        self.assertIn("does not exist", self.ok("group", "describe", g))
        self.assertNotIn(g, self.ok("group", "list"))
        self.assertIn("does not exist", self.fails(1, "group", "delete", g))
        self.fails(2, "group", "seek", g, "--to", "middle")

    def test_seek_refuses_live_group(self):
        t, g = self.unique(), self.unique("g")
        self.ok("topic", "create", t)
        live = Lines("consume", t, "-g", g, "--follow", "-b", self.bootstrap)
        try:
            harness.wait_until(lambda: "Stable" in self.cli("group", "describe", g).stdout,
                               timeout=30, what="the consumer to join")
            d = self.ok("group", "describe", g)
            self.assertIn("members:     1", d)
            self.assertRegex(d, r"strata-cli\s+\S+\s+%s/0" % re.escape(t))
            self.assertIn("is active", self.fails(1, "group", "seek", g, "--to", "start"))
            self.assertIn("stop the group's consumers first",
                          self.fails(1, "group", "delete", g))
        finally:
            rc, _, err = live.stop()
        self.assertEqual(rc, 0, err)
        harness.wait_until(lambda: "state:       Empty" in self.ok("group", "describe", g),
                           timeout=30, what="the group to empty once its consumer left")
        # It read nothing, so committed nothing: seek needs to be told the topic.
        self.assertIn("no committed offsets", self.fails(1, "group", "seek", g, "--to", "start"))
        self.assertEqual(self.ok("group", "seek", g, "--to", "end", "--topic", t), "%s/0 -> 0\n" % t)

    def test_consume_in_group_without_partitions_gives_up(self):
        """Without --follow a group consumer that is handed no partition (another member
        holds the only one) must end with an error after --timeout, not wait forever."""
        t, g = self.unique(), self.unique("g")
        self.ok("topic", "create", t)
        # The sticky assignor leaves the only partition with the member that has it.
        sticky = ["-X", "partition.assignment.strategy=cooperative-sticky"]
        live = Lines("consume", t, "-g", g, "--follow", *sticky, "-b", self.bootstrap)
        try:
            harness.wait_until(lambda: "Stable" in self.cli("group", "describe", g).stdout,
                               timeout=30, what="the first consumer to join")
            err = self.fails(1, "consume", t, "-g", g, "--timeout", "3s", *sticky)
            self.assertIn("gave this consumer no partition", err)
        finally:
            rc, _, err = live.stop()
        self.assertEqual(rc, 0, err)

    def test_unknown_topic_errors(self):
        for args in (["produce", "nosuch", "-m", "x"], ["consume", "nosuch"],
                     ["topic", "describe", "nosuch"]):
            self.assertIn("no topic named 'nosuch'", self.fails(1, *args), args)

    def test_broker_down(self):
        dead = "127.0.0.1:%d" % harness.free_port()
        for args in (["topic", "list"], ["produce", "t", "-m", "x"], ["consume", "t"],
                     ["group", "list"]):
            r = harness.run_cmd([CLI, *args, "-b", dead, "--timeout", "2s"])
            self.assertEqual(r.returncode, 1, (args, r.stdout, r.stderr))
            self.assertIn("no broker at " + dead, r.stderr)
            self.assertIn("is strata-server running?", r.stderr)

    def test_bench_matches(self):
        t = self.unique()
        s = json.loads(self.ok("bench", "produce", "--topic", t, "--partitions", "2", "-n",
                               "20000", "--size", "100", "--json"))
        self.assertEqual(s["messages"], 20000)
        self.assertEqual(s["bytes"], 20000 * 100)
        lat = s["latency_ms"]
        self.assertEqual(lat["count"], 20000)
        self.assertTrue(0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p99_9"] <= lat["max"])
        self.assertIn("partitions:  2", self.ok("topic", "describe", t))
        c = json.loads(self.ok("bench", "consume", "--topic", t, "--json"))
        self.assertEqual(c["messages"], 20000)
        self.assertEqual(c["bytes"], 20000 * 100)
        e = json.loads(self.ok("bench", "e2e", "--topic", t, "-n", "500", "--rate", "1000",
                               "--json"))
        self.assertEqual(e["messages"], 500)
        self.assertEqual(e["latency_ms"]["count"], 500)
        self.assertIn("MESSAGES", self.ok("topic", "describe", t))
        total = sum(int(ln.split()[-1]) for ln in self.ok("topic", "describe", t).splitlines()
                    if re.match(r"^\d+\s", ln))
        self.assertEqual(total, 20500)

    @staticmethod
    def partition_counts(describe_out):
        """{partition: messages} from `topic describe`."""
        return {int(ln.split()[0]): int(ln.split()[-1]) for ln in describe_out.splitlines()
                if re.match(r"^\d+\s", ln)}

    def test_bench_consume_reports_real_size(self):
        # The summary gives what the messages read held (average bytes), not --size's default.
        t = self.unique()
        self.ok("bench", "produce", "--topic", t, "-n", "300", "--size", "1k")
        c = json.loads(self.ok("bench", "consume", "--topic", t, "--json"))
        self.assertEqual((c["messages"], c["bytes"], c["size"]), (300, 300 * 1024, 1024))
        self.assertIn("consume: 300 messages of 1024 bytes in ", self.ok("bench", "consume",
                                                                          "--topic", t))
        self.ok("produce", t, stdin="ab\n")          # 2 bytes: 301 messages, 307,202 bytes
        c = json.loads(self.ok("bench", "consume", "--topic", t, "--json"))
        self.assertEqual((c["messages"], c["bytes"]), (301, 300 * 1024 + 2))
        self.assertAlmostEqual(c["size"], (300 * 1024 + 2) / 301, places=1)
        self.assertIn("consume: 301 messages of 1020.6 bytes on average in ",
                      self.ok("bench", "consume", "--topic", t))

    def test_bench_partitioners(self):
        # roundrobin: record i to partition i % 4, set explicitly, so exactly 100 each.
        t = self.unique()
        s = json.loads(self.ok("bench", "produce", "--topic", t, "--partitions", "4", "-n", "400",
                               "--size", "64", "--partitioner", "roundrobin", "--json"))
        self.assertEqual((s["messages"], s["partitions"], s["partitioner"]),
                         (400, 4, "roundrobin"))
        self.assertEqual(self.partition_counts(self.ok("topic", "describe", t)),
                         {0: 100, 1: 100, 2: 100, 3: 100})
        got = self.ok("consume", t, "-F", "%K").split()
        self.assertEqual(got, ["-1"] * 400)         # no keys
        # Two producers share the sequence: record i * 2 + worker, still 100 per partition.
        t2 = self.unique()
        self.ok("bench", "produce", "--topic", t2, "--partitions", "4", "-n", "400", "--size",
                "64", "--partitioner", "roundrobin", "--producers", "2")
        self.assertEqual(self.partition_counts(self.ok("topic", "describe", t2)),
                         {0: 100, 1: 100, 2: 100, 3: 100})
        # keyed: key k<i % 6>, 400 records -> k0..k3 67 times, k4, k5 66; every key on one
        # partition (the client's hash), the partition counts adding up.
        t3 = self.unique()
        s = json.loads(self.ok("bench", "produce", "--topic", t3, "--partitions", "4", "-n",
                               "400", "--size", "64", "--partitioner", "keyed", "--keys", "6",
                               "--json"))
        self.assertEqual((s["messages"], s["partitioner"], s["keys"]), (400, "keyed", 6))
        rows = [ln.split() for ln in self.ok("consume", t3, "-F", "%k %p").splitlines()]
        per_key = {}
        for k, p in rows:
            per_key.setdefault(k, []).append(int(p))
        self.assertEqual({k: len(v) for k, v in per_key.items()},
                         {"k0": 67, "k1": 67, "k2": 67, "k3": 67, "k4": 66, "k5": 66})
        for k, ps in per_key.items():
            self.assertEqual(len(set(ps)), 1, (k, sorted(set(ps))))
        counts = self.partition_counts(self.ok("topic", "describe", t3))
        self.assertEqual(sum(counts.values()), 400)
        for p, n in counts.items():
            self.assertEqual(n, sum(len(v) for v in per_key.values() if v[0] == p), p)
        # sticky (the default): no keys, partitions chosen by the client.
        t4 = self.unique()
        s = json.loads(self.ok("bench", "produce", "--topic", t4, "--partitions", "4", "-n",
                               "400", "--size", "64", "--json"))
        self.assertEqual((s["messages"], s["partitioner"]), (400, "sticky"))
        self.assertEqual(sum(self.partition_counts(self.ok("topic", "describe", t4)).values()),
                         400)
        self.fails(2, "bench", "produce", "--topic", t4, "--partitioner", "hash")
        self.fails(2, "bench", "produce", "--topic", t4, "--keys", "3")

    def test_bench_against_separate_client(self):
        # bench/cli_compare.py runs the same workload through `strata bench produce` and a
        # plain confluent-kafka loop; here only that both complete with the same counts (the
        # figures are compared by the script itself, not by a test).
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            self.skipTest("python3-confluent-kafka is not installed")
        script = os.path.join(harness.SRC, "bench", "cli_compare.py")
        r = harness.run_cmd([sys.executable, script, "-b", self.bootstrap, "-n", "3000", "-s",
                             "200", "-p", "2", "-r", "1", "--tolerance", "1000", "--json"],
                            timeout=240, env=dict(os.environ, STRATA_CLI=CLI))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = json.loads(r.stdout)
        self.assertTrue(res["counts_ok"], res)
        for side in ("strata", "confluent"):
            run = res["runs"][side][0]
            self.assertEqual((run["messages"], run["failed"], run["bytes"]), (3000, 0, 600000))
            self.assertGreater(run["msgs_per_sec"], 0)
            d = self.ok("topic", "describe", run["topic"])
            self.assertEqual(sum(int(ln.split()[-1]) for ln in d.splitlines()
                                 if re.match(r"^\d+\s", ln)), 3000)

    def test_dump_log_of_server_segment(self):
        t = self.unique()
        self.ok("topic", "create", t)
        self.ok("produce", t, stdin="one\ntwo\nthree\n")
        self.server.stop()
        try:
            logs = glob.glob(os.path.join(self.server.data_dir, t + "-0", "*.log"))
            self.assertEqual(len(logs), 1)
            r = harness.run_cmd([CLI, "debug", "dump-log", logs[0], "--records"])
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertIn('value: "two"', r.stdout)
            self.assertIn("crcValid: true", r.stdout)
            r = harness.run_cmd([CLI, "debug", "verify-index", logs[0]])
            self.assertEqual(r.returncode, 0, r.stdout)
            data = bytearray(open(logs[0], "rb").read())
            cli_segment.corrupt_crc(data, 0)
            open(logs[0], "wb").write(data)
            r = harness.run_cmd([CLI, "debug", "dump-log", logs[0]])
            self.assertEqual(r.returncode, 1)
            self.assertIn("crcValid: false", r.stdout)
        finally:
            self.server.start()

    def test_proxy_shows_produce(self):
        # The proxy rewrites the broker addresses in Metadata and FindCoordinator answers, so
        # the client's Produce (and its group traffic) come through it too.
        t, g = self.unique(), self.unique("g")
        self.ok("topic", "create", t)
        proxy = Lines("proxy", "--listen", "127.0.0.1:0", "--upstream", self.bootstrap, "--log")
        try:
            first = proxy.read()
            self.assertTrue(first.startswith("listening on 127.0.0.1:"), first)
            paddr = first.split()[2].rstrip(",")
            r = harness.run_cmd([CLI, "produce", t, "-m", "through-the-proxy", "-b", paddr])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, "partition 0 offset 0\n")
            proxy.wait_for(lambda ln: re.search(r"\] <- Produce v\d+ ", ln))
            r = harness.run_cmd([CLI, "consume", t, "-g", g, "-F", "%v", "-b", paddr])
            self.assertEqual((r.returncode, r.stdout), (0, "through-the-proxy\n"), r.stderr)
            proxy.wait_for(lambda ln: re.search(r"\] <- OffsetCommit v\d+ ", ln))
        finally:
            rc, lines, err = proxy.stop()
        self.assertEqual(rc, 0, err)
        out = "\n".join(lines)
        for api in ("ApiVersions", "Metadata", "Produce", "FindCoordinator", "JoinGroup",
                    "SyncGroup", "Fetch", "OffsetCommit"):
            self.assertRegex(out, r"\] -> %s v\d+ #\d+ \d+ bytes client=strata-cli \{" % api)
            self.assertRegex(out, r"\] <- %s v\d+ #\d+ \d+ bytes \d+\.\d+ ms \{" % api)
        port = paddr.split(":")[1]
        self.assertIn("(broker addresses rewritten to %s)" % paddr, out)
        # The Produce request decoded: acks=all, the topic, partition 0, the record bytes.
        produce = [ln for ln in lines if re.search(r"\] -> Produce v", ln)]
        self.assertEqual(len(produce), 1, produce)
        self.assertIn('"acks":-1', produce[0])
        self.assertRegex(produce[0], r'"topic_data":\[\{"name":"%s","partition_data":\[\{"index":0,'
                                     r'"records":"<\d+ bytes' % re.escape(t))
        self.assertRegex(out, r'<- Produce v\d+ .*"name":"%s".*"index":0,"error_code":0,'
                              r'"base_offset":0' % re.escape(t))
        # The log shows what the broker said; what the client got named the proxy.
        self.assertRegex(out, r'<- Metadata v\d+ .*"host":"127\.0\.0\.1","port":%s'
                              % self.bootstrap.split(":")[1])
        self.assertNotIn('"port":%s' % port, out)



@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class ProduceLatencyScript(unittest.TestCase):
    """bench/produce_latency.py end to end, shrunk: its own server and mock, one repetition of
    one latency case (keyed, so the mock's topics and both partitioners are exercised) and one
    throughput run; the figures are not judged, only that every run completed and was
    reported."""

    def test_quick_probe(self):
        try:
            import confluent_kafka  # noqa: F401  (harness helpers the script uses need it)
        except ImportError:
            self.skipTest("python3-confluent-kafka is not installed")
        fd, out = tempfile.mkstemp(prefix="probe-", suffix=".json")
        os.close(fd)
        script = os.path.join(harness.SRC, "bench", "produce_latency.py")
        try:
            r = harness.run_cmd([sys.executable, script, "--reps", "1", "--secs", "1",
                                 "--cases", "2@3k,2@2", "--tp-count", "2000", "--tp-parts", "2",
                                 "--codecs", "lz4", "--budget", "120", "--server",
                                 harness.server_binary(), "--cli", CLI, "--json", out],
                                timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                res = json.load(f)
        finally:
            if os.path.exists(out):
                os.unlink(out)
        self.assertIsNone(res["failed"])
        got = sorted((x["kind"], x["system"], x["partitions"]) for x in res["runs"])
        self.assertEqual(got, [("latency", "mock", 2), ("latency", "mock", 3),
                               ("latency", "strata", 2), ("latency", "strata", 3),
                               ("throughput", "mock", 2), ("throughput", "strata", 2)])
        for x in res["runs"]:
            if x["kind"] == "latency":
                self.assertTrue(0 < x["p50"] <= x["p99"] <= x["p99_9"], x)
                self.assertGreater(x["messages"], 0)
        self.assertGreater(res["meta"]["loop_iterations"]["count"], 0)
        self.assertIn("| 2 MB/s, 3 partitions, keyed | p99 |", r.stdout)
        self.assertIn("| 2 | lz4 |", r.stdout)


if __name__ == "__main__":
    harness.main()
