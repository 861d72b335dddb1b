"""A secure cluster (issue 22, inter-broker security): three real strata-server processes whose
only Kafka listener is SASL_SSL, so the brokers' own connections (followers' fetchers, the
inter-broker client) go over TLS with SCRAM-SHA-512 too. Certificates are made with the openssl
CLI at test time; ssl.client.auth=required, so every broker presents its keystore as a client
certificate to the others; the host name is checked (ssl.endpoint.identification.algorithm
https, the default). The SCRAM users come from sasl.bootstrap.users; the brokers' credentials
from listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config, Kafka's JAAS form.

One scenario, bounded: a topic with replication factor 3 and min.insync.replicas=2; an
idempotent acks=all confluent-kafka producer over SASL_SSL; kill -9 the partition's leader;
another broker takes over and acks resume; nothing acknowledged is lost, nothing is written
twice; the killed broker restarts and rejoins the ISR (its fetcher authenticates again).
And the refusals: a broker given a wrong inter-broker password is refused by the others
(SaslAuthenticate), and a broker whose certificate does not name its address is refused by the
others' host-name check, each logged with its reason.
The metadata quorum's CONTROLLER listener is SSL too (CONTROLLER:SSL in the map): raft's
traffic runs over cluster/tls_transport.c, each controller presenting the keystore and checking
the other's certificate against the truststore and its host name. So the failover scenario also
runs over a TLS quorum; a fourth process whose certificate another CA signed has its signed
heartbeats refused by the controller, so it is never registered nor added to the quorum, and
the cluster carries on without it — until its keystore and truststore files are replaced by
the cluster CA's, when it reloads them and joins without a restart; forged heartbeats (bare, of another CA, tampered, stale, a
voter claimed from another address) change nothing; and a plain TCP
connection speaking raft_uv_tcp's handshake to a controller port gets no raft answer.
"""

import os
import shutil
import socket
import struct
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import wait_until  # noqa: E402
from test_tls import Pki  # noqa: E402

TOPIC = "secure"
BROKER_USER, BROKER_PW = "broker", "broker-secret"
USER, PW = "alice", "alice-secret"
LAG_MS = 4000       # replica.lag.time.max.ms: the killed leader leaves the ISR quickly


class SecureClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if harness.external_bootstrap():
            raise unittest.SkipTest("starts its own cluster")
        if not shutil.which("openssl"):
            raise unittest.SkipTest("the openssl CLI is missing (scripts/deps.sh installs it)")
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is missing")
        cls.tmp = tempfile.mkdtemp(prefix="strata-secure-")
        cls.pki = Pki(cls.tmp)
        cls.broker_cert = cls.pki.issue("broker", "/CN=broker")
        cls.client_cert = cls.pki.issue("client", "/CN=client")
        # A certificate the same CA signed for another host only.
        with open(cls.pki.path("ext.cnf"), "w") as f:
            f.write("subjectAltName=DNS:elsewhere.invalid\n")
        cls.other_cert = cls.pki.issue("other", "/CN=other")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def jaas(password):
        return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                'username="%s" password="%s";' % (BROKER_USER, password))

    def setUp(self):
        jaas = self.jaas(BROKER_PW)
        sets = {
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "ssl.keystore.location": self.broker_cert[2],
            "ssl.truststore.location": self.pki.ca,
            "ssl.client.auth": "required",
            # a SASL_SSL listener asks for certificates only by its own setting (KIP-684)
            "listener.name.sasl_ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
            "sasl.bootstrap.users": "%s:SCRAM-SHA-512:%s,%s:SCRAM-SHA-512:%s" % (
                BROKER_USER, BROKER_PW, USER, PW),
            "replica.lag.time.max.ms": str(LAG_MS),
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "1",
        }
        self.c = Cluster(3, sets=sets, name="secure")
        for n in self.c.nodes.values():
            # Every Kafka listener SASL_SSL: the harness's PLAINTEXT one replaced.
            n.server.sets["listeners"] = "SASL_SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (
                n.kafka_port, n.controller_port)
            n.server.sets["advertised.listeners"] = "SASL_SSL://127.0.0.1:%d" % n.kafka_port
        self.bootstrap = ",".join(n.bootstrap for n in self.c.nodes.values())

    def tearDown(self):
        self.c.close()

    def conf(self, **extra):
        c = {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
             "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PW,
             "ssl.ca.location": self.pki.ca, "ssl.certificate.location": self.client_cert[0],
             "ssl.key.location": self.client_cert[1]}
        c.update(extra)
        return c

    def partition(self, admin):
        """(leader, replicas, isr) of partition 0 as the cluster reports it, or None."""
        md = admin.list_topics(topic=TOPIC, timeout=5)
        t = md.topics.get(TOPIC)
        if t is None or t.error is not None or 0 not in t.partitions:
            return None
        p = t.partitions[0]
        return p.leader, sorted(p.replicas), sorted(p.isrs)

    def produce(self, p, first, n, acked, errors):
        for i in range(first, first + n):
            def cb(err, msg, i=i):
                if err is None:
                    acked.append(i)
                else:
                    errors.append((i, str(err)))
            while True:
                try:
                    p.produce(TOPIC, value=b"m%06d" % i, partition=0, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)

    def flush(self, p, acked, want, timeout):
        deadline = time.monotonic() + timeout
        while len(acked) < want and time.monotonic() < deadline:
            p.flush(0.5)
        return len(acked)

    def test_sasl_ssl_cluster_failover(self):
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
        t0 = time.monotonic()
        self.c.start()
        admin = AdminClient(self.conf())
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30,
                   "three brokers registered (metadata over SASL_SSL)")
        for nid, n in self.c.nodes.items():
            self.assertIn("inter-broker client: SASL_SSL to listener SASL_SSL, SASL "
                          "SCRAM-SHA-512 as broker", n.server.stderr_text(), "node %d" % nid)

        def created():
            fs = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})],
                                     request_timeout=10)
            try:
                fs[TOPIC].result(15)
            except Exception as e:
                return "already exists" in str(e) or "ALREADY_EXISTS" in str(e)
            return True
        wait_until(created, 30, "topic %s created" % TOPIC)

        def in_sync():
            s = self.partition(admin)
            return s if s and s[0] >= 0 and len(s[2]) == 3 else None
        first = wait_until(in_sync, 30, "topic %s led, its three replicas in sync" % TOPIC)
        leader = first[0]

        p = Producer(self.conf(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 60000}))
        acked, errors = [], []
        self.produce(p, 0, 300, acked, errors)
        self.assertEqual(self.flush(p, acked, 300, 30), 300, "acks before the kill: %s" % errors)
        # The followers fetched those over SASL_SSL (acks=all waited for the ISR).

        self.c.kill9(leader)
        t_kill = time.monotonic()
        self.produce(p, 300, 300, acked, errors)

        def new_leader():
            s = self.partition(admin)
            return s if s and s[0] >= 0 and s[0] != leader else None
        after = wait_until(new_leader, 30, "a new leader after node %d's kill -9" % leader)
        self.assertEqual(self.flush(p, acked, 600, 45), 600,
                         "acks after the kill (new leader %d): %s" % (after[0], errors[:5]))
        failover_s = time.monotonic() - t_kill
        self.assertEqual(errors, [])
        self.assertEqual(sorted(acked), list(range(600)))

        # The killed broker restarts and rejoins the ISR: its fetcher authenticates again.
        self.c.start_node(leader)
        def rejoined():
            s = self.partition(admin)
            return s if s and leader in s[2] else None
        wait_until(rejoined, 30, "node %d back in the ISR" % leader)
        self.produce(p, 600, 50, acked, errors)
        self.assertEqual(self.flush(p, acked, 650, 30), 650, "acks after the rejoin: %s" % errors)

        cons = Consumer(self.conf(**{"group.id": "secure-reader", "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest"}))
        cons.assign([TopicPartition(TOPIC, 0, 0)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 650 and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error():
                continue
            seen.append(int(m.value()[1:]))
        cons.close()
        self.assertEqual(seen, list(range(650)), "every acknowledged record, once, in order")
        sys.stderr.write("secure cluster: failover %.1fs after kill -9, whole test %.1fs\n"
                         % (failover_s, time.monotonic() - t0))
        admin = None
        p = None
        self.c.stop_all()

    def test_wrong_password_and_certificate_refused(self):
        from confluent_kafka.admin import AdminClient, NewTopic
        # Node 3 authenticates with a wrong password; node 2 presents a certificate for
        # another host. Everything else as in the test above.
        self.c.nodes[3].server.sets["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
            self.jaas("not-the-password"))
        self.c.nodes[2].server.sets["ssl.keystore.location"] = self.other_cert[2]
        # ... on its Kafka listener only: its CONTROLLER listener keeps the right one, so it is
        # in the quorum (listener.name.controller.ssl.* over ssl.*).
        self.c.nodes[2].server.sets["listener.name.controller.ssl.keystore.location"] = (
            self.broker_cert[2])
        self.c.start()
        admin = AdminClient(self.conf(**{"ssl.endpoint.identification.algorithm": "none"}))
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30,
                   "three brokers registered")
        # Every broker leads one of three partitions: each follows the other two.
        fs = admin.create_topics([NewTopic(TOPIC, 3, 3)], request_timeout=10)
        fs[TOPIC].result(20)
        logs = lambda nid: self.c.nodes[nid].server.stderr_text()  # noqa: E731
        wait_until(lambda: "SASL SCRAM-SHA-512 as broker refused" in logs(3), 30,
                   "node 3's wrong password refused")
        wait_until(lambda: "TLS handshake failed: the broker's certificate: IP address mismatch"
                   in logs(1), 30, "node 2's certificate refused by node 1's host check")
        self.assertNotIn("as broker refused", logs(1))
        admin = None
        self.c.stop_all()

    def metrics(self, nid):
        """Node nid's unlabelled samples from /metrics, by name."""
        n = self.c.nodes[nid]
        url = "http://127.0.0.1:%d/metrics" % n.admin_port
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for ln in text.splitlines():
            parts = ln.split()
            if len(parts) == 2 and not ln.startswith("#") and "{" not in parts[0]:
                out[parts[0]] = float(parts[1])
        return out

    def probe_plaintext(self, port):
        """Speaks raft_uv_tcp's handshake (protocol 1, server id, address) in plain TCP to a
        controller port: the bytes a plaintext raft peer sends first. Returns what came back
        before the server closed (a TLS server answers a non-TLS client with at most an
        alert, never raft)."""
        addr = b"127.0.0.1:1\0\0\0\0\0"   # padded to 8 bytes, as raft_uv_tcp does
        msg = struct.pack("<QQQ", 1, 9, len(addr)) + addr
        got = b""
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sk:
            sk.sendall(msg)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    b = sk.recv(4096)
                except (ConnectionResetError, socket.timeout):
                    break
                if not b:
                    break
                got += b
        return got

    def test_controller_tls_refuses_foreign_ca(self):
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
        # Node 4 (broker only) has a certificate and truststore of another CA.
        rogue = Pki(self.tmp, "rogue")
        rcert = rogue.issue("rogue", "/CN=rogue")
        self.c.close()
        sets = dict(self.c.nodes[1].server.sets)
        self.c = Cluster(3, broker_only=1, sets={}, name="secure-rogue")
        for nid, n in self.c.nodes.items():
            for k, v in sets.items():
                if k not in ("node.id", "process.roles", "controller.quorum.voters"):
                    n.server.sets[k] = v
            n.server.sets["listeners"] = "SASL_SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (
                n.kafka_port, n.controller_port)
            n.server.sets["advertised.listeners"] = "SASL_SSL://127.0.0.1:%d" % n.kafka_port
        self.c.nodes[4].server.sets["ssl.keystore.location"] = rcert[2]
        self.c.nodes[4].server.sets["ssl.truststore.location"] = rogue.ca
        self.bootstrap = ",".join(self.c.nodes[i].bootstrap for i in (1, 2, 3))
        self.c.start(order=[1, 2, 3])
        admin = AdminClient(self.conf())
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30,
                   "three brokers registered over the TLS quorum")
        logs = lambda nid: self.c.nodes[nid].server.stderr_text()  # noqa: E731
        for nid in (1, 2, 3):
            self.assertIn("controller listener CONTROLLER: SSL, mutual TLS", logs(nid))

        # Nothing on a controller port answers plaintext raft.
        for nid in (1, 2, 3):
            got = self.probe_plaintext(self.c.nodes[nid].controller_port)
            self.assertTrue(got == b"" or got[:1] == b"\x15",
                            "node %d answered plaintext raft with %r" % (nid, got[:32]))
        wait_until(lambda: any("refused: TLS handshake failed" in logs(n) for n in (1, 2, 3)),
                   15, "the plaintext probe refused in a controller's log")

        h = self.c.spawn(4)
        # Node 4 announces itself by heartbeat (UDP, not the raft transport), signed with its
        # certificate of another CA: the active controller refuses the heartbeat (reason
        # "certificate", cluster/hb_sec.h), so it never registers node 4 nor adds it to the
        # quorum; node 4 never learns the quorum's leader.
        ctrl = admin.list_topics(timeout=5).controller_id
        self.assertIn(ctrl, (1, 2, 3))
        refused = lambda: self.refusals(ctrl).get("certificate", 0) >= 1  # noqa: E731
        try:
            wait_until(refused, 30, "node 4's heartbeats refused by the controller")
        except Exception:
            for n in (1, 2, 3, 4):
                sys.stderr.write("node %d:\n%s\n" % (n, "\n".join(
                    ln for ln in logs(n).splitlines() if "controller" in ln or "raft" in ln
                    or "heartbeat" in ln)))
            raise
        self.assertIn("refused a heartbeat (certificate)", logs(ctrl))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and h["thread"].is_alive():
            h["thread"].join(0.5)
        # Node 4 never learnt the quorum's leader nor any of its log; the voters counted the
        # plaintext probes refused by their TLS.
        m4 = self.metrics(4)
        self.assertEqual(m4["strata_metadata_leader_id"], -1)
        self.assertEqual(m4["strata_metadata_applied_index"], 0)
        self.assertGreaterEqual(sum(self.metrics(n)["strata_controller_tls_refused_total"]
                                    for n in (1, 2, 3)), 3)
        self.assertGreaterEqual(self.metrics(1)["strata_controller_tls_handshakes_total"], 2)
        self.assertNotIn(4, admin.list_topics(timeout=5).brokers)

        # The cluster is unaffected: three brokers, a topic created and written.
        self.assertEqual(len(admin.list_topics(timeout=5).brokers), 3)
        fs = admin.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=10)
        fs[TOPIC].result(20)
        p = Producer(self.conf(**{"acks": "all"}))
        acked = []
        for i in range(20):
            p.produce(TOPIC, value=b"%d" % i, on_delivery=lambda e, m: acked.append(e))
        p.flush(30)
        self.assertEqual(acked, [None] * 20)

        # Certificates reload without a restart: node 4's keystore and truststore are replaced
        # (renamed into place, as a deployment tool does) by the cluster CA's. Within
        # ssl.reload.check.ms its heartbeats are signed with the new key and taken, the
        # controller adds it to the quorum, and their TLS sessions verify both ways.
        for src, dst in ((self.broker_cert[2], rcert[2]), (self.pki.ca, rogue.ca)):
            shutil.copyfile(src, dst + ".new")
            os.replace(dst + ".new", dst)
        wait_until(lambda: "controller listener CONTROLLER: certificates reloaded" in logs(4),
                   15, "node 4's controller listener reloaded its certificates")
        wait_until(lambda: self.metrics(4)["strata_metadata_applied_index"] > 0, 45,
                   "node 4 follows the metadata log over TLS after the reload")
        wait_until(lambda: 4 in admin.list_topics(timeout=5).brokers, 45,
                   "node 4 registered after its certificates were replaced")
        admin = None
        p = None
        self.c.stop_all()

    def envelope(self, json_text, key_path, cert_path, sent_ms, counter=1):
        """A heartbeat envelope as cluster/hb_sec.h lays it out, signed here with key_path
        (RSA, PKCS#1 v1.5 SHA-256) for certificate cert_path."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        with open(cert_path, "rb") as f:
            der = x509.load_pem_x509_certificate(f.read()).public_bytes(
                serialization.Encoding.DER)
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        body = json_text.encode()
        msg = (b"STHB" + bytes([1, 0]) + struct.pack(">HqQI", 1, sent_ms, counter, len(body)) +
               body + struct.pack(">H", len(der)) + der)
        sig = key.sign(msg, padding.PKCS1v15(), hashes.SHA256())
        return msg + struct.pack(">H", len(sig)) + sig

    def refusals(self, nid):
        """Node nid's strata_controller_heartbeat_refused_total samples, by reason."""
        url = "http://127.0.0.1:%d/metrics" % self.c.nodes[nid].admin_port
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for ln in text.splitlines():
            if ln.startswith('strata_controller_heartbeat_refused_total{reason="'):
                reason = ln.split('"')[1]
                out[reason] = float(ln.split()[-1])
        return out

    def test_heartbeats_signed(self):
        """Over an SSL controller listener the UDP heartbeats are signed (cluster/hb_sec.h):
        a datagram that is bare JSON, signed by another CA's certificate, tampered with, sent
        too long ago or claiming a voter from another address registers no broker and changes
        nothing; the cluster's own
        signed heartbeats keep it registered and working."""
        from confluent_kafka.admin import AdminClient
        self.c.start()
        admin = AdminClient(self.conf())
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 30,
                   "three brokers registered by signed heartbeats")
        ctrl = admin.list_topics(timeout=5).controller_id
        self.assertIn(ctrl, (1, 2, 3))
        for nid in (1, 2, 3):
            if nid != ctrl:   # the controller takes its own heartbeat without a datagram
                self.assertGreater(
                    self.metrics(nid)["strata_controller_heartbeats_signed_total"], 0,
                    "node %d signs its heartbeats" % nid)
        before = self.refusals(ctrl)
        now = int(time.time() * 1000)
        # A forged registration of broker 9 at an address of the forger's choosing.
        forged = ('{"id":9,"inc":"00000000000000aa","host":"127.0.0.1","port":1,'
                  '"raft":"127.0.0.1:1","voter":false,"applied":0}')
        rogue = Pki(self.tmp, "hb-rogue")
        rcert = rogue.issue("rogue", "/CN=rogue")
        good = self.envelope(forged, self.broker_cert[1], self.broker_cert[0], now - 120000)
        tampered = bytearray(self.envelope(forged, self.broker_cert[1], self.broker_cert[0],
                                           now, counter=5))
        tampered[28 + forged.index('"port":1') + 7] = ord("2")
        sends = {
            "unsigned": forged.encode(),
            "certificate": self.envelope(forged, rcert[1], rcert[0], now),
            "stale": good,
            "signature": bytes(tampered),
        }
        addr = ("127.0.0.1", self.c.nodes[ctrl].controller_port)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            for reason, datagram in sends.items():
                u.sendto(datagram, addr)

        def counted():
            got = self.refusals(ctrl)
            return all(got.get(r, 0) >= before.get(r, 0) + 1 for r in sends)
        wait_until(counted, 15, "each forged heartbeat refused, with its reason")
        # Signed with the cluster's own certificate but claiming voter 1 from an address
        # that is not voter 1's: refused too (replays are the unit test's, test_hb_sec.c).
        voter = self.envelope(forged.replace('"id":9', '"id":1'), self.broker_cert[1],
                              self.broker_cert[0], now, counter=3)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.sendto(voter, addr)
        wait_until(lambda: self.refusals(ctrl).get("host", 0) >= before.get("host", 0) + 1,
                   15, "a voter impersonated from another address refused")
        ids = sorted(b.id for b in admin.list_topics(timeout=5).brokers.values())
        self.assertEqual(ids, [1, 2, 3], "no forged broker registered")
        self.assertIn("refused a heartbeat (unsigned)", self.c.nodes[ctrl].server.stderr_text())
        admin = None
        self.c.stop_all()


if __name__ == "__main__":
    unittest.main()
