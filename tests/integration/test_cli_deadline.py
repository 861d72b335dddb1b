"""The `strata` tool never hangs (issue 26): a request-style command (cluster, topic, group,
txn) keeps to --timeout whatever librdkafka does, Ctrl-C ends it at once, and an address that
refuses connections fails within a moment, naming it.

Three real brokers; a topic of three partitions, one replica each, so killing one broker
leaves one partition without a leader — where librdkafka 2.0's query_watermark_offsets waits
forever whatever its timeout (the bug behind the hang the issue reports)."""

import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import free_port, wait_until  # noqa: E402

CLI = os.environ.get("STRATA_CLI")
TOPIC = "deadline"


def threads(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return 0


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class CliDeadlineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if harness.external_bootstrap():
            raise unittest.SkipTest("starts its own cluster")
        cls.c = Cluster(3, sets={"offsets.topic.replication.factor": "3",
                                 "offsets.topic.num.partitions": "1"}, name="cli-deadline")
        cls.c.start()
        cls.c.wait_for_quorum()
        cls.boot = ",".join(n.bootstrap for n in cls.c.nodes.values())

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def cli(self, *args, timeout=60):
        t0 = time.monotonic()
        r = subprocess.run([CLI] + list(args), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return r, time.monotonic() - t0

    def test_refused_port_fails_fast(self):
        port = free_port()
        for cmd in (["topic", "list"], ["cluster", "info"], ["group", "list"]):
            r, took = self.cli(*cmd, "-b", "127.0.0.1:%d" % port, "--timeout", "60s")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertLess(took, 5, "%s waited %.1f s on a refusing port" % (cmd, took))
            self.assertIn("127.0.0.1:%d" % port, r.stderr)
            self.assertIn("Connection refused", r.stderr)
            self.assertIn("no broker at", r.stderr)
        r, took = self.cli("topic", "list", "-b", "no-such-host.invalid:9092")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no-such-host.invalid:9092", r.stderr)

    def test_leader_down_and_interrupt(self):
        r, _ = self.cli("topic", "create", TOPIC, "-p", "3", "-r", "1", "-b", self.boot)
        self.assertEqual(r.returncode, 0, r.stderr)

        def everywhere():
            """Every broker's metadata has the topic, each partition led (a creation reaches
            the brokers' views one after another)."""
            for n in self.c.nodes:
                parts = self.c.metadata(n, [TOPIC])["topics"].get(TOPIC, {}).get("partitions")
                if not parts or len(parts) != 3 or any(p["leader"] < 1 for p in parts.values()):
                    return False
            return True
        wait_until(everywhere, 30, "the new topic in every broker's metadata")
        r, _ = self.cli("produce", TOPIC, "--message", "one", "-b", self.boot)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The broker leading partition 0 (not the controller, so the others stay a quorum).
        ctrl = self.c.controller_id()

        def leaders():
            md = self.c.metadata(ctrl, [TOPIC])
            return {i: p["leader"] for i, p in md["topics"][TOPIC]["partitions"].items()}
        wait_until(lambda: all(l > 0 for l in leaders().values()), 30, "every partition led")
        victims = [l for l in leaders().values() if l != ctrl]
        self.assertTrue(victims, "some partition led by a broker other than the controller")
        victim = victims[0]
        alive = ",".join(self.c.nodes[n].bootstrap for n in self.c.nodes if n != victim)
        dead = [i for i, l in leaders().items() if l == victim]
        self.c.kill9(victim)

        def describe(marker):
            """topic describe answers within --timeout: the dead leader's partitions marked,
            the others with their offsets."""
            r, took = self.cli("topic", "describe", TOPIC, "-b", alive, "--timeout", "4s")
            self.assertLess(took, 4 + 2 + 5, r.stdout + r.stderr)  # --timeout, grace, slack
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            rows = {int(ln.split()[0]): ln for ln in r.stdout.splitlines()
                    if ln.split() and ln.split()[0].isdigit()}
            self.assertEqual(sorted(rows), [0, 1, 2], r.stdout)
            for i in rows:
                if i in dead:
                    self.assertIn("?", rows[i], r.stdout)
                    self.assertRegex(rows[i], marker, r.stdout)
                else:
                    self.assertNotIn("?", rows[i], r.stdout)
            self.assertIn("CONFIG", r.stdout)
        # At once, while the metadata still names the dead broker as leader: librdkafka 2.0's
        # query_watermark_offsets then ignores its timeout (the hang of the issue).
        describe("no answer from broker %d within --timeout|Leader not available" % victim)
        # Every broker the tool may ask (any of `alive`) must show it: one whose metadata is
        # still behind the controller's names the dead broker as leader.
        def leaderless_everywhere():
            for n in self.c.nodes:
                if n == victim:
                    continue
                parts = self.c.metadata(n, [TOPIC])["topics"][TOPIC]["partitions"]
                if not all(parts[i]["leader"] < 0 for i in dead):
                    return False
            return True
        wait_until(leaderless_everywhere, 60,
                   "the killed broker's partitions without a leader on every live broker")
        describe("Leader not available")

        # cluster info and cluster health name the broker that is gone (fenced by now: its
        # partition has no leader), not just a shorter list.
        r, _ = self.cli("cluster", "health", "-b", alive, "--timeout", "5s")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("broker %d: down or fenced" % victim, r.stdout)
        self.assertIn("brokers down/fenced:   1", r.stdout)
        r, _ = self.cli("cluster", "info", "-b", alive, "--timeout", "5s")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"(?m)^%d +- +\(not in the broker list: down or fenced" % victim)

        # A frozen broker as the only bootstrap: it takes the connection and answers nothing.
        # The command ends within --timeout (its own timeout or the watchdog's), exit 1.
        frozen = [n for n in self.c.nodes if n not in (victim, ctrl)][0]
        self.c.sigstop(frozen)
        try:
            for cmd in (["topic", "describe", TOPIC], ["group", "list"], ["cluster", "info"]):
                r, took = self.cli(*cmd, "-b", self.c.nodes[frozen].bootstrap, "--timeout", "3s")
                self.assertEqual(r.returncode, 1, "%s: %s" % (cmd, r.stdout + r.stderr))
                self.assertLess(took, 3 + 2 + 5, "%s took %.1f s" % (cmd, took))
                self.assertTrue(r.stderr.strip(), cmd)
            # A command left waiting (on the frozen broker): Ctrl-C ends it at once.
            p = subprocess.Popen([CLI, "topic", "describe", TOPIC, "-b",
                                  self.c.nodes[frozen].bootstrap, "--timeout", "5m"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 stdin=subprocess.DEVNULL)
            try:
                # librdkafka threads exist: main() installed the handlers before
                wait_until(lambda: threads(p.pid) > 1, 10, "the tool's client started")
                t0 = time.monotonic()
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=10)
                self.assertLess(time.monotonic() - t0, 5)
                self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
                self.assertIn("interrupted", err)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        finally:
            self.c.sigcont(frozen)


if __name__ == "__main__":
    harness.main()
