"""TLS listeners (issue 22, "Listeners and TLS"): a broker with a PLAINTEXT listener and SSL
ones, certificates made with the openssl CLI at test time.

- confluent-kafka, kcat and kafka-python produce and consume over SSL (the CA given to them);
- a client trusting another CA fails cleanly, a client refuses an expired server certificate
  (a listener with a keystore of its own, listener.name.<name>.ssl.*);
- ssl.client.auth=required: a client without a certificate is refused, one with succeeds;
- garbage instead of a ClientHello, and a handshake that stops halfway (dropped after
  ssl.handshake.timeout.ms), leave the broker serving others;
- the keystore file replaced under a running broker: a new connection gets the new certificate;
  SIGHUP reloads every TLS listener.
"""

import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import Server, free_port, wait_until  # noqa: E402

HANDSHAKE_TIMEOUT_MS = 1500


def openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise AssertionError("openssl %s: %s" % (" ".join(args), r.stderr))


class Pki:
    """A CA, and certificates it signs, in a temporary directory."""

    def __init__(self, root, name="ca"):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.ca = self.path("ca.pem")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                "ca.pem", "-days", "30", "-subj", "/CN=Strata Test CA %s" % name, cwd=self.dir)
        with open(self.path("ext.cnf"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")

    def path(self, n):
        return os.path.join(self.dir, n)

    def issue(self, name, subject, days=30, serial=None):
        """Signs a certificate for `subject`: (cert, key, keystore = key + cert in one PEM)."""
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
                name + ".csr", "-subj", subject, cwd=self.dir)
        args = ["x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-out", name + ".pem", "-days", str(days), "-extfile", "ext.cnf"]
        args += ["-set_serial", str(serial)] if serial else ["-CAcreateserial"]
        openssl(*args, cwd=self.dir)
        ks = self.path(name + "-keystore.pem")
        with open(ks, "w") as f:
            for part in (name + ".key", name + ".pem"):
                with open(self.path(part)) as src:
                    f.write(src.read())
        return self.path(name + ".pem"), self.path(name + ".key"), ks


class TlsServer(Server):
    """PLAINTEXT on self.port plus SSL listeners: SSL (server cert), MTLS (client certificate
    required), EXPIRED (an expired certificate), RELOAD (a keystore the test replaces)."""

    NAMES = ("SSL", "MTLS", "EXPIRED", "RELOAD")

    def __init__(self, pki, files, **kw):
        super().__init__(**kw)
        self.pki = pki
        self.files = files
        self.tls_ports = {}

    def command(self):
        if not self.tls_ports or any(p == self.port for p in self.tls_ports.values()):
            self.tls_ports = {}
            for n in self.NAMES:
                p = free_port()
                while p == self.port or p == self.admin_port or p in self.tls_ports.values():
                    p = free_port()
                self.tls_ports[n] = p
        ls = ["PLAINTEXT://%s:%d" % (self.host, self.port)]
        ls += ["%s://%s:%d" % (n, self.host, p) for n, p in self.tls_ports.items()]
        self.sets["listeners"] = ",".join(ls)
        self.sets["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT," + ",".join(
            "%s:SSL" % n for n in self.NAMES)
        self.sets["inter.broker.listener.name"] = "PLAINTEXT"
        f = self.files
        self.sets["ssl.keystore.location"] = f["server"]
        self.sets["listener.name.mtls.ssl.client.auth"] = "required"
        self.sets["listener.name.mtls.ssl.truststore.location"] = self.pki.ca
        self.sets["listener.name.expired.ssl.keystore.location"] = f["expired"]
        self.sets["listener.name.reload.ssl.keystore.location"] = f["reload"]
        self.sets["ssl.handshake.timeout.ms"] = str(HANDSHAKE_TIMEOUT_MS)
        self.sets["ssl.reload.check.ms"] = "200"
        return super().command()

    def tls(self, name):
        return "%s:%d" % (self.host, self.tls_ports[name])


def ssl_conf(bootstrap, ca, **extra):
    c = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
    c.update(extra)
    return c


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        if not shutil.which("openssl"):
            raise unittest.SkipTest("the openssl CLI is missing (scripts/deps.sh installs it)")
        cls.tmp = tempfile.mkdtemp(prefix="strata-it-tls-")
        cls.pki = Pki(cls.tmp)
        cls.other = Pki(cls.tmp, "other")
        _, _, server_ks = cls.pki.issue("server", "/CN=localhost/O=Strata")
        _, _, expired_ks = cls.pki.issue("expired", "/CN=localhost/O=Expired", days=-1)
        _, _, reload_ks = cls.pki.issue("reload1", "/CN=localhost/O=Reload one", serial=1001)
        live = os.path.join(cls.tmp, "reload-keystore.pem")
        shutil.copy(reload_ks, live)
        cls.client_cert, cls.client_key, _ = cls.pki.issue("client", "/CN=alice/OU=eng/O=Acme")
        cls.srv = TlsServer(cls.pki, {"server": server_ks, "expired": expired_ks,
                                      "reload": live}, smp=2, name="tls")
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        srv = getattr(cls, "srv", None)
        if srv:
            srv.stop()
            srv.close()
        shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    def topic(self, prefix):
        t = "%s-%d" % (prefix, int(time.monotonic() * 1000) % 10**9)
        kc.create_topic(self.srv.bootstrap, t)
        return t

    def assert_plaintext_serves(self):
        md = kc.admin(self.srv.bootstrap).list_topics(timeout=10)
        self.assertIn(0, md.brokers)

    def produce_consume_confluent(self, bootstrap, extra, n=200):
        from confluent_kafka import Consumer, Producer
        t = self.topic("tls")
        p = Producer(ssl_conf(bootstrap, self.pki.ca, acks="all", **extra))
        for i in range(n):
            p.produce(t, value=b"v%d" % i + b"x" * 1024)
        self.assertEqual(p.flush(30), 0)
        c = Consumer(ssl_conf(bootstrap, self.pki.ca, **{"group.id": t,
                                                          "auto.offset.reset": "earliest"},
                              **extra))
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        self.assertEqual(len(got), n)
        self.assertEqual(got[0][:2], b"v0")
        self.assertEqual(got[-1][:len(b"v%d" % (n - 1))], b"v%d" % (n - 1))

    def fails_confluent(self, bootstrap, ca, **extra):
        """A client with this configuration cannot fetch metadata: the error it gives."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
        a = AdminClient(ssl_conf(bootstrap, ca, **extra))
        with self.assertRaises(KafkaException) as cm:
            a.list_topics(timeout=4)
        return str(cm.exception)

    # ---- clients ----

    def test_confluent_produce_consume(self):
        self.produce_consume_confluent(self.srv.tls("SSL"), {})

    def test_kcat(self):
        t = self.topic("kcat")
        base = ["kcat", "-b", self.srv.tls("SSL"), "-X", "security.protocol=SSL", "-X",
                "ssl.ca.location=" + self.pki.ca]
        r = subprocess.run(base + ["-P", "-t", t], input="one\ntwo\nthree\n", text=True,
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run(base + ["-C", "-t", t, "-o", "beginning", "-e", "-q"], text=True,
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["one", "two", "three"])

    def test_kafka_python(self):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        t = self.topic("kpy")
        common = dict(bootstrap_servers=self.srv.tls("SSL"), security_protocol="SSL",
                      ssl_cafile=self.pki.ca)
        p = KafkaProducer(acks="all", **common)
        for i in range(50):
            p.send(t, b"m%d" % i)
        p.flush(30)
        p.close()
        c = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=10000, **common)
        c.assign([TopicPartition(t, 0)])
        got = []
        for m in c:
            got.append(m.value)
            if len(got) == 50:
                break
        c.close()
        self.assertEqual(got, [b"m%d" % i for i in range(50)])

    # ---- refusals ----

    def test_wrong_ca_fails_cleanly(self):
        err = self.fails_confluent(self.srv.tls("SSL"), self.other.ca)
        self.assertRegex(err.lower(), r"timed out|transport|ssl|certificate|handshake")
        self.assert_plaintext_serves()

    def test_expired_certificate_refused_by_client(self):
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        with socket.create_connection(("127.0.0.1", self.srv.tls_ports["EXPIRED"]), 10) as s:
            with self.assertRaises(ssl.SSLCertVerificationError) as cm:
                ctx.wrap_socket(s, server_hostname="localhost")
        self.assertIn("expired", str(cm.exception))
        self.fails_confluent(self.srv.tls("EXPIRED"), self.pki.ca)
        self.assert_plaintext_serves()

    def test_mutual_tls_required(self):
        # Without a certificate the broker ends the handshake.
        self.fails_confluent(self.srv.tls("MTLS"), self.pki.ca)
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        with socket.create_connection(("127.0.0.1", self.srv.tls_ports["MTLS"]), 10) as s:
            try:
                with ctx.wrap_socket(s, server_hostname="localhost") as ss:
                    ss.settimeout(10)
                    # TLS 1.3: the refusal comes after the client's Finished; a read sees it.
                    ss.sendall(b"\0\0\0\0")
                    refused = ss.recv(1) == b""
            except (ssl.SSLError, ConnectionError) as e:
                refused = True
                self.assertNotIsInstance(e, ssl.SSLCertVerificationError)
            self.assertTrue(refused)
        # With one it works end to end.
        self.produce_consume_confluent(self.srv.tls("MTLS"), {
            "ssl.certificate.location": self.client_cert,
            "ssl.key.location": self.client_key}, n=20)
        # A client certificate from another CA is refused.
        ocert, okey, _ = self.other.issue("mallory", "/CN=mallory")
        self.fails_confluent(self.srv.tls("MTLS"), self.pki.ca,
                             **{"ssl.certificate.location": ocert, "ssl.key.location": okey})
        self.assert_plaintext_serves()

    # ---- hostile peers ----

    def test_garbage_instead_of_client_hello(self):
        for junk in (b"\x00" * 64, b"GET / HTTP/1.0\r\n\r\n", os.urandom(4096)):
            with socket.create_connection(("127.0.0.1", self.srv.tls_ports["SSL"]), 10) as s:
                s.settimeout(10)
                s.sendall(junk)
                data = b""
                try:
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except ConnectionResetError:
                    pass
                # At most an alert record (type 21) comes back before the close.
                self.assertTrue(data == b"" or data[0] == 21, data[:16])
        self.produce_consume_confluent(self.srv.tls("SSL"), {}, n=10)

    def test_handshake_stopping_halfway(self):
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
        with self.assertRaises(ssl.SSLWantReadError):
            obj.do_handshake()
        hello = out.read()
        stalled = []
        try:
            # One peer sends half a ClientHello, another a whole one and nothing after the
            # server's answer: both are dropped after the bound, the broker serves meanwhile.
            for part in (hello[: len(hello) // 2], hello):
                s = socket.create_connection(("127.0.0.1", self.srv.tls_ports["SSL"]), 10)
                s.sendall(part)
                stalled.append(s)
            t0 = time.monotonic()
            self.produce_consume_confluent(self.srv.tls("SSL"), {}, n=10)
            for s in stalled:
                s.settimeout(HANDSHAKE_TIMEOUT_MS / 1000 * 4 + 10)
                try:
                    while s.recv(65536):
                        pass
                except ConnectionResetError:
                    pass
            took = time.monotonic() - t0
            self.assertLess(took, HANDSHAKE_TIMEOUT_MS / 1000 * 4 + 5)
        finally:
            for s in stalled:
                s.close()
        self.assert_plaintext_serves()

    def test_reader_leaving_mid_fetch(self):
        """Peers that go away while a large Fetch answer is being encrypted and sent (the
        transport closed with ciphertext in flight) leave the broker serving; the clean stop
        at the end checks nothing leaked."""
        from confluent_kafka import Producer
        t = self.topic("leave")
        p = Producer({"bootstrap.servers": self.srv.bootstrap, "acks": "all",
                      "linger.ms": 5})
        for i in range(20000):
            p.produce(t, value=b"x" * 1024)
        self.assertEqual(p.flush(30), 0)
        for i in range(6):
            r = subprocess.Popen(["kcat", "-b", self.srv.tls("SSL"), "-X",
                                  "security.protocol=SSL", "-X",
                                  "ssl.ca.location=" + self.pki.ca, "-X",
                                  "fetch.max.bytes=52428800", "-C", "-t", t, "-o",
                                  "beginning", "-q"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            # Read a little, then vanish without a word.
            r.stdout.read(4096 * (i + 1))
            r.kill()
            r.wait(10)
            r.stdout.close()
        self.produce_consume_confluent(self.srv.tls("SSL"), {}, n=10)

    # ---- reload ----

    def peer_cert(self, name):
        ctx = ssl.create_default_context(cafile=self.pki.ca)
        with socket.create_connection(("127.0.0.1", self.srv.tls_ports[name]), 10) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as ss:
                return ss.getpeercert()

    def test_certificate_reload(self):
        first = self.peer_cert("RELOAD")
        self.assertEqual(int(first["serialNumber"], 16), 1001)
        held = socket.create_connection(("127.0.0.1", self.srv.tls_ports["RELOAD"]), 10)
        held_ssl = ssl.create_default_context(cafile=self.pki.ca).wrap_socket(
            held, server_hostname="localhost")
        _, _, ks2 = self.pki.issue("reload2", "/CN=localhost/O=Reload two", serial=2002)
        live = self.srv.files["reload"]
        tmp = live + ".new"
        shutil.copy(ks2, tmp)
        os.replace(tmp, live)
        seen = {}

        def renewed():
            seen["c"] = self.peer_cert("RELOAD")
            return int(seen["c"]["serialNumber"], 16) == 2002
        wait_until(renewed, timeout=15, what="a new connection to get the new certificate")
        subj = dict(x[0] for x in seen["c"]["subject"])
        self.assertEqual(subj["organizationName"], "Reload two")
        # The connection made before the reload still works (ApiVersions v0 over it).
        held_ssl.settimeout(10)
        held_ssl.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff")
        head = held_ssl.recv(4)
        self.assertEqual(len(head), 4)
        held_ssl.close()
        self.assertIn("certificates reloaded", self.srv.stderr_text())

    def test_sighup_reloads(self):
        import signal
        before = self.srv.stderr_text().count("certificates reloaded")
        self.srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.srv.stderr_text().count("certificates reloaded")
                   >= before + len(TlsServer.NAMES), timeout=10,
                   what="every TLS listener to reload on SIGHUP")
        subj = dict(x[0] for x in self.peer_cert("SSL")["subject"])
        self.assertEqual(subj["commonName"], "localhost")
        self.assert_plaintext_serves()


if __name__ == "__main__":
    harness.main()
