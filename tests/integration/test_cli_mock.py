"""test_cli_mock.py — the `strata` tool against librdkafka's mock cluster
(`strata debug mock-cluster`), which implements the data path and the group protocol but not the
topic Admin APIs. The same and more against the real server: test_cli_server.py."""
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import unittest

CLI = os.environ.get("STRATA_CLI")


def start(*args):
    """Starts a long-running strata command; its stdout lines arrive on proc.lines."""
    proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, text=True)
    proc.lines = queue.Queue()

    def pump():
        for line in proc.stdout:
            proc.lines.put(line.rstrip("\n"))
    threading.Thread(target=pump, daemon=True).start()
    return proc


def read_line(proc, timeout=30.0):
    """The next line of proc's stdout, waiting at most timeout seconds for it."""
    try:
        return proc.lines.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError("no output from %r" % proc.args) from None


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    proc.stdout.close()
    return rc


def run(*args, stdin=None, env_brokers=None, timeout=60):
    env = dict(os.environ)
    env.pop("STRATA_BROKERS", None)
    if env_brokers:
        env["STRATA_BROKERS"] = env_brokers
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class NoBroker(unittest.TestCase):
    """What needs no broker: usage errors and the broker-down message."""

    def test_usage_errors_exit_2(self):
        for args in (["produce"], ["consume", "t", "--bogus"], ["topic"], ["nonsense"],
                     ["consume", "t", "--offset", "middle"], ["produce", "t", "--acks", "7"],
                     ["bench", "produce", "--size", "huge"],
                     ["bench", "produce", "--partitioner", "hash"],
                     ["bench", "produce", "--keys", "4"],
                     ["bench", "consume", "--partitioner", "keyed"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("strata:", r.stderr)

    def test_help_everywhere(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("topic create", "produce", "consume", "group seek", "bench e2e",
                    "debug dump-log", "proxy"):
            self.assertIn(cmd, r.stdout)
            h = run(*cmd.split(), "--help")
            self.assertEqual(h.returncode, 0, cmd)
            self.assertIn("usage: strata " + cmd, h.stdout)
        # The partitioners, in the group's overview and the command's options.
        r = run("bench", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("sticky, roundrobin or keyed", r.stdout)
        r = run("bench", "produce", "--help")
        self.assertIn("--partitioner HOW", r.stdout)
        self.assertIn("--keys N", r.stdout)

    def test_broker_down(self):
        r = run("topic", "list", "-b", "127.0.0.1:1", "--timeout", "2s")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no broker at 127.0.0.1:1", r.stderr)
        self.assertIn("is strata-server running?", r.stderr)
        r = run("produce", "t", "-m", "x", "--timeout", "2s", env_brokers="127.0.0.1:1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no broker at 127.0.0.1:1", r.stderr)


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class MockCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mock = start("debug", "mock-cluster", "--topic", "t:3", "--topic", "g:2",
                         "--topic", "bench:2")
        try:
            cls.addr = read_line(cls.mock)
            assert read_line(cls.mock) == "ready"
        except BaseException:
            stop(cls.mock)
            raise

    @classmethod
    def tearDownClass(cls):
        assert stop(cls.mock) == 0

    def cli(self, *args, stdin=None):
        return run(*args, "-b", self.addr, stdin=stdin)

    def test_cluster_and_topics(self):
        r = self.cli("cluster", "info")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cluster id:", r.stdout)
        self.assertIn(self.addr, r.stdout)
        r = self.cli("cluster", "health")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("healthy:               yes", r.stdout)
        r = self.cli("topic", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()[1:]}
        self.assertEqual(rows["t"], ["3", "1"])
        r = self.cli("topic", "describe", "nosuch")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no topic named 'nosuch'", r.stderr)

    def test_produce_consume_roundtrip(self):
        lines = "".join("k%d:v%d\n" % (i, i) for i in range(20))
        r = self.cli("produce", "t", "--key-delimiter", ":", "--header", "src=test",
                     "--json", stdin=lines)
        self.assertEqual(r.returncode, 0, r.stderr)
        acks = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(sorted(a["message"] for a in acks), list(range(1, 21)))
        r = self.cli("consume", "t", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(line) for line in r.stdout.splitlines()]
        mine = {m["key"]: m for m in got if m["key"] and m["key"].startswith("k")}
        for i in range(20):
            m = mine["k%d" % i]
            self.assertEqual(m["value"], "v%d" % i)
            self.assertEqual(m["headers"], [{"key": "src", "value": "test"}])
        # Where the producer said each message went is where the consumer found it.
        by_pos = {(m["partition"], m["offset"]): m["key"] for m in got}
        for a in acks:
            self.assertEqual(by_pos[(a["partition"], a["offset"])], "k%d" % (a["message"] - 1))

    def test_partition_offsets_and_format(self):
        r = self.cli("produce", "t", "-p", "2", stdin="a\nb\nc\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        offsets = [int(line.split()[3]) for line in r.stdout.splitlines()]
        self.assertEqual(r.stdout.splitlines()[0].split()[:2], ["partition", "2"])
        r = self.cli("consume", "t", "-p", "2", "-o", "-2", "-F", "%p:%o:%v")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["2:%d:b" % offsets[1], "2:%d:c" % offsets[2]])
        r = self.cli("consume", "t", "-p", "2", "-o", str(offsets[0]), "-n", "1", "-F", "%v")
        self.assertEqual(r.stdout, "a\n")
        r = self.cli("consume", "t", "-p", "9")
        self.assertEqual(r.returncode, 2)
        r = self.cli("produce", "t", "-p", "9", "-m", "x")
        self.assertEqual(r.returncode, 1)
        self.assertIn("there is no partition 9", r.stderr)

    def test_group_reads_everything(self):
        # One group run only: librdkafka 2.0's mock coordinator holds the next JoinGroup of a
        # group until the member that left has been silent for its whole session timeout
        # (45 s), LeaveGroup or not. Resuming from committed offsets, lag and seek are checked
        # against the real broker in test_cli_server.py.
        # Five messages to each partition (unkeyed messages may all go to one: librdkafka's
        # sticky partitioner fills one batch before it moves on).
        for part in (0, 1):
            r = self.cli("produce", "g", "-p", str(part),
                         stdin="".join("m%d\n" % i for i in range(part * 5, part * 5 + 5)))
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.cli("consume", "g", "-g", "grp1", "-F", "%p %v")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [line.split() for line in r.stdout.splitlines()]
        self.assertEqual(sorted(v for _, v in got), sorted("m%d" % i for i in range(10)))
        self.assertEqual({p for p, _ in got}, {"0", "1"})

    def test_unknown_topic(self):
        r = self.cli("produce", "nosuch", "-m", "x")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no topic named 'nosuch'", r.stderr)
        r = self.cli("consume", "nosuch")
        self.assertEqual(r.returncode, 1)

    def test_bench(self):
        r = self.cli("bench", "produce", "--topic", "bench", "-n", "2000", "--size", "64",
                     "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        s = json.loads(r.stdout)
        self.assertEqual(s["messages"], 2000)
        self.assertEqual(s["bytes"], 2000 * 64)
        self.assertEqual(s["latency_ms"]["count"], 2000)
        lat = s["latency_ms"]
        self.assertTrue(0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p99_9"] <= lat["max"])
        r = self.cli("bench", "e2e", "--topic", "bench", "-n", "500", "--rate", "1000", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        s = json.loads(r.stdout)
        self.assertEqual(s["messages"], 500)
        self.assertEqual(s["latency_ms"]["count"], 500)
        r = self.cli("bench", "consume", "--topic", "bench", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(json.loads(r.stdout)["messages"], 2500)

    def test_proxy_log(self):
        proxy = start("proxy", "--listen", "127.0.0.1:0", "--upstream", self.addr, "--log")
        try:
            first = read_line(proxy)
            self.assertTrue(first.startswith("listening on "), first)
            paddr = first.split()[2].rstrip(",")
            r = run("cluster", "info", "-b", paddr)
            self.assertEqual(r.returncode, 0, r.stderr)
            seen = []
            deadline = time.monotonic() + 30
            # (the tool's reachability check is a connection of its own that sends nothing, so
            # the client's is not necessarily the proxy's first)
            while not any(re.match(r"\[\d+\] <- Metadata", line) for line in seen):
                self.assertLess(time.monotonic(), deadline, seen)
                seen.append(read_line(proxy))
            text = "\n".join(seen)
            self.assertIn("-> ApiVersions", text)
            self.assertIn("<- ApiVersions", text)
            self.assertIn("client=strata-cli", text)
            self.assertRegex(text, r"<- Metadata v\d+ #\d+ \d+ bytes \d+\.\d+ ms \{\"brokers\"")
        finally:
            self.assertEqual(stop(proxy), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
