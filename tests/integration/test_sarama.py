"""Go's sarama 1.22 (Debian golang-github-shopify-sarama-dev, Go 1.19, built offline in GOPATH
mode) against Strata (issue 27): a client from before Kafka 4.0 that sends the versions KIP-896
removed (JoinGroup v1, DescribeConfigs v0 from ClusterAdmin.ListTopics, Metadata v0,
OffsetCommit v1/v2, FindCoordinator v0, Heartbeat/SyncGroup/LeaveGroup v0).

Topic admin through ClusterAdmin; an idempotent acks=all producer; a two-member consumer group
reading every record exactly once, in partition order; the offsets it committed, read back with
raw OffsetFetch v0 and v1; a restarted member resuming from them. The Go program is
tests/integration/go/sarama_it; its build cache lives in the build directory."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOPATH = "/usr/share/gocode"
SARAMA = os.path.join(GOPATH, "src/github.com/Shopify/sarama")
PARTITIONS = 4


def build_dir():
    """The build directory: the server binary's (STRATA_SERVER), else a scratch one."""
    server = os.environ.get("STRATA_SERVER")
    if server:
        return os.path.dirname(os.path.abspath(server))
    return os.path.join(HERE, "..", "..", "build")


def build_program():
    """Builds sarama_it into <build>/go (cached there in <build>/gocache); returns its path."""
    if not shutil.which("go") or not os.path.isdir(SARAMA):
        raise unittest.SkipTest("needs golang-go and golang-github-shopify-sarama-dev")
    b = build_dir()
    exe = os.path.join(b, "go", "sarama_it")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=os.path.join(b, "gocache"),
               GOFLAGS="")
    t0 = time.monotonic()
    r = subprocess.run(["go", "build", "-o", exe, "."], cwd=os.path.join(HERE, "go", "sarama_it"),
                       env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError("go build failed:\n%s%s" % (r.stdout, r.stderr))
    print("sarama_it built in %.1fs" % (time.monotonic() - t0), flush=True)
    return exe


class Proc:
    """One sarama_it run: its JSON lines gathered by a reader thread."""

    def __init__(self, exe, *args):
        self.p = subprocess.Popen([exe] + list(args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.lock = threading.Lock()
        self.err = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.te = threading.Thread(target=self._read_err, daemon=True)
        self.te.start()

    def _read(self):
        for line in self.p.stdout:
            ev = json.loads(line)
            with self.lock:
                self.lines.append(ev)

    def _read_err(self):
        for line in self.p.stderr:
            self.err.append(line)

    def events(self, kind):
        with self.lock:
            return [e for e in self.lines if e["event"] == kind]

    def stop(self, timeout=60):
        """Closes stdin (a consumer then commits, leaves and exits); waits for the exit."""
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        return self.wait(timeout)

    def wait(self, timeout=60):
        rc = self.p.wait(timeout)
        self.t.join(10)
        self.te.join(10)
        return rc

    def stderr(self):
        return "".join(self.err[-40:])

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)


class SaramaTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        cls.exe = build_program()
        super().setUpClass()

    def run_prog(self, *args, timeout=120):
        p = Proc(self.exe, "-bootstrap", self.bootstrap, *args)
        try:
            rc = p.wait(timeout)
        finally:
            p.kill()
        self.assertEqual(rc, 0, "sarama_it %s failed:\n%s" % (" ".join(args), p.stderr()))
        return p

    def produce(self, topic, n, first):
        sent = self.run_prog("-mode", "produce", "-topic", topic, "-n", str(n),
                             "-first", str(first)).events("sent")
        self.assertEqual(len(sent), n)
        return sent

    def committed(self, group, topic, version):
        with kwire.Conn.to(self.bootstrap) as c:
            got = kwire.offset_fetch_classic(c, version, group, topic, list(range(PARTITIONS)))
        for p, (_, md, err) in got.items():
            self.assertEqual(err, 0, "partition %d" % p)
        return {p: off for p, (off, _, _) in got.items()}

    def check_partition_order(self, msgs, sent):
        """Every sent record read once; each partition's in offset order, as produced."""
        keys = [(m["p"], m["o"]) for m in msgs]
        self.assertEqual(len(keys), len(set(keys)), "a record was read twice")
        self.assertEqual(sorted(keys), sorted((s["p"], s["o"]) for s in sent))
        by_offset = {(s["p"], s["o"]): s["v"] for s in sent}
        for m in msgs:
            self.assertEqual(m["v"], by_offset[(m["p"], m["o"])])
        for p in range(PARTITIONS):
            offs = [m["o"] for m in msgs if m["p"] == p]   # in the order read
            self.assertEqual(offs, sorted(offs), "partition %d out of order" % p)

    def test_admin_producer_group_resume(self):
        topic, group = self.unique("sarama"), self.unique("sg")
        adm = self.run_prog("-mode", "admin", "-topic", topic,
                            "-partitions", str(PARTITIONS)).events("admin")[0]
        self.assertEqual(adm["partitions"], PARTITIONS)
        self.assertEqual(adm["replication_factor"], 1)
        # ListTopics keeps only configs DescribeConfigs v0 marks is_default=false
        self.assertEqual(adm["non_default_configs"], {"retention.ms": "123456789"})
        self.assertTrue(adm["scratch_listed"])
        self.assertEqual(adm["described"]["retention.ms"], "123456789")
        self.assertEqual(adm["described"]["cleanup.policy"], "delete")

        # two members; records are produced once both hold their share, so none is read twice
        a = Proc(self.exe, "-bootstrap", self.bootstrap, "-mode", "consume", "-topic", topic,
                 "-group", group, "-name", "a")
        b = Proc(self.exe, "-bootstrap", self.bootstrap, "-mode", "consume", "-topic", topic,
                 "-group", group, "-name", "b")
        procs = [a, b]
        try:
            def settled():
                sa, sb = a.events("setup"), b.events("setup")
                if not sa or not sb or sa[-1]["generation"] != sb[-1]["generation"]:
                    return False
                pa = sa[-1]["claims"].get(topic, [])
                pb = sb[-1]["claims"].get(topic, [])
                return pa and pb and sorted(pa + pb) == list(range(PARTITIONS))
            wait_until(settled, 60, "both sarama members in one generation covering every "
                       "partition:\n%s%s" % (a.stderr(), b.stderr()))
            gen = a.events("setup")[-1]["generation"]
            sent = self.produce(topic, 200, 0)
            self.assertEqual(sorted({s["p"] for s in sent}), list(range(PARTITIONS)))
            wait_until(lambda: len(a.events("msg")) + len(b.events("msg")) >= 200, 60,
                       "the group to read 200 records")
            msgs = a.events("msg") + b.events("msg")
            self.check_partition_order(msgs, sent)
            self.assertTrue(all(m["generation"] == gen for m in msgs), "a rebalance meanwhile")
            for m, mine in ((a, a.events("setup")[-1]["claims"][topic]),
                            (b, b.events("setup")[-1]["claims"][topic])):
                self.assertTrue({x["p"] for x in m.events("msg")} <= set(mine))
            for m in procs:
                self.assertEqual(m.stop(), 0, m.stderr())
        finally:
            for m in procs:
                m.kill()
        ends = {p: 0 for p in range(PARTITIONS)}
        for s in sent:
            ends[s["p"]] = max(ends[s["p"]], s["o"] + 1)
        self.assertEqual(self.committed(group, topic, 1), ends)   # committed with v1
        self.assertEqual(self.committed(group, topic, 0), ends)   # the same store at v0

        # a restarted member resumes from the committed offsets (and commits with v2)
        more = self.produce(topic, 40, 200)
        a2 = Proc(self.exe, "-bootstrap", self.bootstrap, "-mode", "consume", "-topic", topic,
                  "-group", group, "-name", "a2", "-retention", "1h")
        try:
            wait_until(lambda: len(a2.events("msg")) >= 40, 60,
                       "the restarted member to read 40 records:\n" + a2.stderr())
            self.check_partition_order(a2.events("msg"), more)
            self.assertTrue(all(m["o"] >= ends[m["p"]] for m in a2.events("msg")))
            self.assertEqual(a2.stop(), 0, a2.stderr())
        finally:
            a2.kill()
        for s in more:
            ends[s["p"]] = max(ends[s["p"]], s["o"] + 1)
        self.assertEqual(self.committed(group, topic, 0), ends)


if __name__ == "__main__":
    harness.main()
