"""Cluster misconfiguration (issue 12): each mistake in the KRaft settings stops the server at
start with a non-zero status and one line naming the problem, instead of a broker that waits
for a quorum it can never have."""

import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from cluster import free_ports  # noqa: E402

EXIT_WITHIN = 10.0     # seconds: a refused configuration exits well before this


class ClusterConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        # kafka and CONTROLLER ports of three voters (the CONTROLLER ones free for UDP too).
        p = free_ports(6, udp_too={1, 3, 5})
        cls.kafka = p[0::2]
        cls.ctrl = p[1::2]
        cls.voters = ",".join("%d@127.0.0.1:%d" % (i + 1, cls.ctrl[i]) for i in range(3))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-it-cfg-")

    def tearDown(self):
        if not os.environ.get("STRATA_IT_KEEP"):
            import shutil
            shutil.rmtree(self.tmp, ignore_errors=True)

    def listeners(self, node=0, controller=True, ctrl_port=None):
        s = "PLAINTEXT://127.0.0.1:%d" % self.kafka[node]
        if controller:
            s += ",CONTROLLER://127.0.0.1:%d" % (ctrl_port or self.ctrl[node])
        return s

    def run_server(self, sets):
        """Run strata-server with these settings; return (status, output lines, seconds)."""
        base = {"log.dirs": os.path.join(self.tmp, "data"), "admin.listen": "",
                "controller.listener.names": "CONTROLLER"}
        base.update(sets)
        cmd = [harness.server_binary(), "--smp", "1"]
        for k, v in base.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=EXIT_WITHIN, cwd=self.tmp,
                               env=harness.sanitizer_env(dict(os.environ)))
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"") + (e.stderr or b"")
            if isinstance(out, bytes):
                out = out.decode("utf-8", "replace")
            self.fail("strata-server still running %.0fs after start with %s; it should refuse "
                      "the configuration at once\n%s" % (EXIT_WITHIN, sets, out[-3000:]))
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
        return r.returncode, lines, time.monotonic() - t0

    def refused(self, sets, *words):
        """Assert the server refuses `sets`: non-zero exit, quickly, with exactly one line of
        output, which names the problem (contains each of `words`, case-insensitively)."""
        rc, lines, took = self.run_server(sets)
        self.assertNotEqual(rc, 0, "exit status 0 for %s: %s" % (sets, lines))
        self.assertLess(rc, 128, "killed by a signal (status %d), not a refusal: %s" % (rc, lines))
        self.assertLess(took, EXIT_WITHIN)
        self.assertEqual(len(lines), 1, "want one line naming the problem, got:\n%s"
                         % "\n".join(lines))
        line = lines[0]
        for w in words:
            self.assertIn(w.lower(), line.lower(), "the line does not name %r: %s" % (w, line))
        self.assertFalse(harness.SANITIZER_RE.search(line), line)
        return line

    # ---- the mistakes ---------------------------------------------------------------------

    def test_node_id_not_among_voters(self):
        line = self.refused({"node.id": "4", "controller.quorum.voters": self.voters,
                             "listeners": self.listeners(0)},
                            "node.id=4", "controller.quorum.voters")
        self.assertIn("not among", line)

    def test_controller_port_in_use(self):
        # Refused before the data directory is touched: no meta.properties, no cluster id.
        import socket
        busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        busy.bind(("127.0.0.1", self.ctrl[0]))
        busy.listen(1)
        try:
            self.refused({"node.id": "1", "controller.quorum.voters": self.voters,
                          "listeners": self.listeners(0)},
                         "127.0.0.1:%d" % self.ctrl[0], "CONTROLLER", "in use")
        finally:
            busy.close()
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "data", "meta.properties")))

    def test_voter_id_twice(self):
        voters = "1@127.0.0.1:%d,1@127.0.0.1:%d" % (self.ctrl[0], self.ctrl[1])
        self.refused({"node.id": "1", "controller.quorum.voters": voters,
                      "listeners": self.listeners(0)},
                     "controller.quorum.voters", "node 1 twice")

    def test_no_controller_listener(self):
        self.refused({"node.id": "1", "controller.quorum.voters": self.voters,
                      "listeners": self.listeners(0, controller=False)},
                     "listeners", "CONTROLLER")

    def test_dedicated_controller_role(self):
        self.refused({"node.id": "1", "process.roles": "controller",
                      "controller.quorum.voters": self.voters, "listeners": self.listeners(0)},
                     "process.roles=controller")

    def test_voter_port_differs_from_controller_listener(self):
        other = free_ports(1, udp_too={0})[0]
        line = self.refused({"node.id": "1", "controller.quorum.voters": self.voters,
                             "listeners": self.listeners(0, ctrl_port=other)},
                            "node.id=1", "controller.quorum.voters", "port")
        self.assertIn(str(self.ctrl[0]), line)
        self.assertIn(str(other), line)

    def test_voter_without_controller_role(self):
        self.refused({"node.id": "1", "process.roles": "broker",
                      "controller.quorum.voters": self.voters, "listeners": self.listeners(0)},
                     "node.id=1", "controller role")

    def test_unknown_role(self):
        self.refused({"node.id": "1", "process.roles": "broker,leader",
                      "controller.quorum.voters": self.voters, "listeners": self.listeners(0)},
                     "process.roles")

    def test_bad_voters_syntax(self):
        self.refused({"node.id": "1", "controller.quorum.voters": "1-127.0.0.1:%d" % self.ctrl[0],
                      "listeners": self.listeners(0)},
                     "controller.quorum.voters")


if __name__ == "__main__":
    harness.main()
