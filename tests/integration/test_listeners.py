"""Listeners (issue 20, item 5): several Kafka listeners on one broker, each serving and each
named in Metadata and FindCoordinator by its own endpoint; listener.security.protocol.map,
advertised.listeners per listener, inter.broker.listener.name; a listener of a protocol not
served yet (SASL_SSL) or an SSL one without a certificate refused at start with one line naming
it."""

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import Server, free_port  # noqa: E402

EXIT_WITHIN = 20.0
LISTENER_RE = re.compile(r"listener (\w+) \((\w+)\) on ([\w.]*):(\d+), advertised ([\w.-]+):(\d+)")


class TwoListenerServer(Server):
    """A Server with a second Kafka listener, INTERNAL, on a port the kernel picks (0) and
    read back from the log, as a test that starts a broker on port 0 would."""

    def __init__(self, internal_advertised=None, **kw):
        super().__init__(**kw)
        self.internal_advertised = internal_advertised

    def command(self):
        self.sets["listeners"] = "PLAINTEXT://%s:%d,INTERNAL://%s:0" % (
            self.host, self.port, self.host)
        self.sets["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
        adv = "PLAINTEXT://%s:%d" % (self.host, self.port)
        if self.internal_advertised:
            adv += ",INTERNAL://%s" % self.internal_advertised
        self.sets["advertised.listeners"] = adv
        return super().command()

    def listeners(self):
        """{name: (protocol, host, bound port, advertised host, advertised port)} from the log."""
        out = {}
        for m in LISTENER_RE.finditer(self.stderr_text()):
            out[m.group(1)] = (m.group(2), m.group(3), int(m.group(4)), m.group(5),
                               int(m.group(6)))
        return out


def find_coordinator_v3(conn, group):
    """FindCoordinator v3 (flexible) for a group: (error, node, host, port)."""
    body = kwire.compact_string(group) + kwire.i8(0) + b"\x00"
    r = conn.request(10, 3, body, flexible=True)
    r.i32()                      # throttle
    err = r.i16()
    r.compact_string()           # message
    node = r.i32()
    host = r.compact_string()
    port = r.i32()
    return err, node, host, port


def coordinator(conn, group, timeout=20.0):
    """The group's coordinator (node, host, port), once there is one: the first request
    creates __consumer_offsets, and COORDINATOR_NOT_AVAILABLE (15) means ask again."""
    deadline = time.monotonic() + timeout
    while True:
        err, node, host, port = find_coordinator_v3(conn, group)
        if err != 15 or time.monotonic() > deadline:
            assert err == 0, "FindCoordinator error %d" % err
            return node, host, port
        time.sleep(0.05)


class TwoListenersTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()

    def test_both_listeners_serve_and_name_themselves(self):
        s = TwoListenerServer(smp=2, name="listeners")
        try:
            s.start()
            ls = s.listeners()
            self.assertEqual(set(ls), {"PLAINTEXT", "INTERNAL"}, s.stderr_tail())
            self.assertEqual(ls["PLAINTEXT"][2], s.port)
            internal = ls["INTERNAL"][2]
            self.assertNotEqual(internal, 0)
            self.assertNotEqual(internal, s.port)
            self.assertEqual(ls["INTERNAL"][0], "PLAINTEXT")
            self.assertEqual(ls["INTERNAL"][3:], ("127.0.0.1", internal))
            # Both serve, from every shard (several connections each); Metadata on each
            # names this broker by that listener's endpoint.
            for port in (s.port, internal):
                for _ in range(6):
                    with kwire.Conn(s.host, port) as c:
                        err, _ = kwire.api_versions(c, 3)
                        self.assertEqual(err, 0)
                        md = kwire.metadata(c, 12)
                        self.assertEqual([b[:3] for b in md["brokers"]],
                                         [(0, "127.0.0.1", port)])
                        md = kwire.metadata(c, 0)
                        self.assertEqual([b[:3] for b in md["brokers"]],
                                         [(0, "127.0.0.1", port)])
                        self.assertEqual(coordinator(c, "g-%d" % port), (0, "127.0.0.1", port))
            # A real client bootstrapped on the second listener stays on it: it produces
            # and reads back through INTERNAL alone.
            boot = "127.0.0.1:%d" % internal
            kc.create_topic(boot, "via-internal", 2)
            p = kc.producer(boot)
            msgs = [{"value": b"m%d" % i, "partition": i % 2} for i in range(40)]
            kc.produce_all(p, "via-internal", msgs)
            del p
            got = kc.consume_partitions(boot, "via-internal", [0, 1], 40)
            self.assertEqual(sorted(m.value() for m in got), sorted(m["value"] for m in msgs))
            s.stop()
        finally:
            s.close()

    def test_advertised_per_listener(self):
        s = TwoListenerServer(smp=1, internal_advertised="internal.example:19093",
                              name="listeners-adv")
        try:
            s.start()
            internal = s.listeners()["INTERNAL"][2]
            with kwire.Conn(s.host, internal) as c:
                md = kwire.metadata(c, 9)
                self.assertEqual([b[:3] for b in md["brokers"]],
                                 [(0, "internal.example", 19093)])
            with kwire.Conn(s.host, s.port) as c:
                md = kwire.metadata(c, 9)
                self.assertEqual([b[:3] for b in md["brokers"]], [(0, "127.0.0.1", s.port)])
            s.stop()
        finally:
            s.close()

    def test_inter_broker_listener_is_the_one_registered(self):
        # The ready line names the inter-broker listener; with inter.broker.listener.name it is
        # INTERNAL, whose port the kernel picked.
        s = TwoListenerServer(smp=1, sets={"inter.broker.listener.name": "INTERNAL"},
                              name="listeners-ib")
        try:
            s.start()
            internal = s.listeners()["INTERNAL"][2]
            m = re.search(r" ready: kafka on [\d.]+:(\d+) \(advertised [\w.]+:(\d+)\)",
                          s.stderr_text())
            self.assertIsNotNone(m, s.stderr_tail())
            self.assertEqual((int(m.group(1)), int(m.group(2))), (internal, internal))
            s.stop()
        finally:
            s.close()

    def test_empty_host_listens_everywhere(self):
        port = free_port()
        s = Server(smp=1, sets={"listeners": "PLAINTEXT://:%d" % port,
                                "advertised.listeners": ""}, name="listeners-any")
        s.port = port
        s.admin_port = free_port()
        try:
            s.start()
            with kwire.Conn("127.0.0.1", port) as c:
                md = kwire.metadata(c, 1)
                self.assertEqual([b[:3] for b in md["brokers"]], [(0, "127.0.0.1", port)])
            s.stop()
        finally:
            s.close()


class RefusedTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.tmp = tempfile.mkdtemp(prefix="strata-it-listeners-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, sets, *words):
        """The server refuses `sets` at once with exactly one line containing each word."""
        base = {"log.dirs": os.path.join(self.tmp, "data"), "admin.listen": ""}
        base.update(sets)
        cmd = [harness.server_binary(), "--smp", "1"]
        for k, v in base.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        t0 = time.monotonic()
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=EXIT_WITHIN, cwd=self.tmp,
                           env=harness.sanitizer_env(dict(os.environ)))
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
        self.assertNotEqual(r.returncode, 0, "started with %s: %s" % (sets, lines))
        self.assertLess(r.returncode, 128, lines)
        self.assertLess(time.monotonic() - t0, EXIT_WITHIN)
        self.assertEqual(len(lines), 1, "want one line, got:\n%s" % "\n".join(lines))
        for w in words:
            self.assertIn(w.lower(), lines[0].lower(), lines[0])
        self.assertIsNone(harness.SANITIZER_RE.search(lines[0]), lines[0])
        return lines[0]

    def test_sasl_ssl_listener_without_certificate_refused(self):
        """SASL_SSL is served (TLS underneath): like SSL, it needs a certificate."""
        p, q = free_port(), free_port()
        line = self.refused({"listeners": "PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d"
                             % (p, q)}, "SASL_SSL", "ssl.keystore.location")
        self.assertIn("listener", line)

    def test_ssl_listener_without_certificate_refused(self):
        p = free_port()
        self.refused({"listeners": "SECURE://127.0.0.1:%d" % p,
                      "listener.security.protocol.map": "SECURE:SSL"},
                     "SECURE", "SSL", "ssl.keystore.location")

    def test_listener_without_protocol_refused(self):
        p = free_port()
        self.refused({"listeners": "PLAINTEXT://127.0.0.1:%d,FOO://127.0.0.1:%d"
                      % (p, free_port())}, "FOO", "listener.security.protocol.map")

    def test_bad_protocol_map_refused(self):
        self.refused({"listener.security.protocol.map": "PLAINTEXT:TLS"},
                     "listener.security.protocol.map", "TLS")

    def test_two_listeners_on_one_port_refused(self):
        p = free_port()
        self.refused({"listeners": "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (p, p),
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
                     "share port", str(p))

    def test_advertised_unknown_listener_refused(self):
        p = free_port()
        self.refused({"listeners": "PLAINTEXT://127.0.0.1:%d" % p,
                      "advertised.listeners": "OTHER://example:1"},
                     "advertised.listeners", "OTHER")

    def test_unknown_inter_broker_listener_refused(self):
        p = free_port()
        self.refused({"listeners": "PLAINTEXT://127.0.0.1:%d" % p,
                      "inter.broker.listener.name": "REPLICATION"},
                     "inter.broker.listener.name", "REPLICATION")

    def test_only_a_controller_listener_refused(self):
        self.refused({"listeners": "CONTROLLER://127.0.0.1:%d" % free_port()},
                     "listeners", "no Kafka listener")


if __name__ == "__main__":
    harness.main()
