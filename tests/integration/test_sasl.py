"""SASL (issue 22): a broker with a SASL_PLAINTEXT listener (and a PLAINTEXT one for the
wire-level checks), users from sasl.bootstrap.users. confluent-kafka produces and consumes
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; a wrong password is reported by the client as an
authentication error, answered after connection.failed.authentication.delay.ms, and the
broker keeps serving others; a request other than the handshake's before authentication
closes the connection; kafka-python with SCRAM; AlterUserScramCredentials and
DescribeUserScramCredentials on the wire (Debian's confluent-kafka 1.7 has no
alter_user_scram_credentials); SaslHandshake v0 with bare tokens; credentials survive a
restart."""

import hashlib
import hmac
import os
import socket
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import Server, free_port, wait_until  # noqa: E402

DELAY_MS = 300
BOOT = "alice:SCRAM-SHA-256:alice-pw,alice:SCRAM-SHA-512:alice-pw,bob:SCRAM-SHA-512:bob:pw"

SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_SCRAM, ALTER_SCRAM = 17, 36, 50, 51
PRODUCE = 0
SASL_AUTHENTICATION_FAILED, RESOURCE_NOT_FOUND, UNSUPPORTED_SASL_MECHANISM = 58, 91, 33


class SaslServer(Server):
    """A Server with PLAINTEXT on its usual port and SASL_PLAINTEXT on a second one."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sasl_port = free_port()

    def command(self):
        self.sets["listeners"] = "PLAINTEXT://%s:%d,SASL_PLAINTEXT://%s:%d" % (
            self.host, self.port, self.host, self.sasl_port)
        self.sets["advertised.listeners"] = self.sets["listeners"]
        return super().command()

    @property
    def sasl_bootstrap(self):
        return "%s:%d" % (self.host, self.sasl_port)


def sasl_conf(mech, user, pw):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
            "sasl.username": user, "sasl.password": pw}


# ---- wire helpers --------------------------------------------------------------------------

def handshake(conn, mech, version=1):
    r = conn.request(SASL_HANDSHAKE, version, kwire.string(mech))
    err = r.i16()
    mechs = r.array(lambda x: x.string())
    return err, mechs


def authenticate(conn, token, version=1, timeout=5.0):
    """SaslAuthenticate v1: (error, message, bytes)."""
    r = conn.request(SASL_AUTHENTICATE, version, kwire.i32(len(token)) + token, timeout=timeout)
    err = r.i16()
    msg = r.string()
    (n,) = (r.i32(),)
    data = bytes(r.take(n)) if n > 0 else b""
    return err, msg, data


def scram_salted(mech, pw, salt, iters):
    h = "sha256" if mech == 1 else "sha512"
    return hashlib.pbkdf2_hmac(h, pw.encode(), salt, iters)


def alter_scram(conn, deletions=(), upsertions=()):
    """AlterUserScramCredentials v0 (flexible): {user: error}."""
    def dele(d):
        return kwire.compact_string(d[0]) + kwire.i8(d[1]) + kwire.TAGS_NONE

    def ups(u):
        name, mech, iters, pw = u
        salt = os.urandom(16)
        sp = scram_salted(mech, pw, salt, iters)
        return (kwire.compact_string(name) + kwire.i8(mech) + kwire.i32(iters) +
                kwire.uvarint(len(salt) + 1) + salt + kwire.uvarint(len(sp) + 1) + sp +
                kwire.TAGS_NONE)
    body = (kwire.compact_array(list(deletions), dele) +
            kwire.compact_array(list(upsertions), ups) + kwire.TAGS_NONE)
    r = conn.request(ALTER_SCRAM, 0, body, flexible=True)
    r.i32()

    def result(x):
        u = x.compact_string()
        e = x.i16()
        x.compact_string()
        x.tags()
        return (u, e)
    return dict(r.compact_array(result))


def describe_scram(conn, users=None):
    """DescribeUserScramCredentials v0: (error, {user: (error, {mechanism: iterations})})."""
    if users is None:
        body = kwire.uvarint(0)
    else:
        body = kwire.compact_array(users, lambda u: kwire.compact_string(u) + kwire.TAGS_NONE)
    r = conn.request(DESCRIBE_SCRAM, 0, body + kwire.TAGS_NONE, flexible=True)
    r.i32()
    err = r.i16()
    r.compact_string()

    def info(x):
        m, i = x.i8(), x.i32()
        x.tags()
        return (m, i)

    def result(x):
        u = x.compact_string()
        e = x.i16()
        x.compact_string()
        infos = dict(x.compact_array(info))
        x.tags()
        return (u, (e, infos))
    return err, dict(r.compact_array(result))


class SaslTest(unittest.TestCase):
    srv = None

    @classmethod
    def setUpClass(cls):
        cls.srv = SaslServer(sets={"sasl.bootstrap.users": BOOT,
                                   "connection.failed.authentication.delay.ms": str(DELAY_MS)})
        cls.srv.start()
        cls.wait_users({"alice": {1: 4096, 2: 4096}, "bob": {2: 4096}})

    @classmethod
    def tearDownClass(cls):
        if cls.srv:
            cls.srv.stop()

    @classmethod
    def wait_users(cls, want):
        def ok():
            with kwire.Conn.to(cls.srv.bootstrap) as c:
                err, got = describe_scram(c)
                return err == 0 and all(got.get(u, (1, {}))[1] == m for u, m in want.items())
        wait_until(ok, 20, "SCRAM users %s" % want)

    def round_trip(self, mech, user, pw, n=20):
        topic = "sasl-%s-%s" % (mech.lower(), uuid.uuid4().hex[:8])
        conf = sasl_conf(mech, user, pw)
        kc.create_topic(self.srv.bootstrap, topic, 1)
        p = kc.producer(self.srv.sasl_bootstrap, **conf)
        msgs = [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(n)]
        kc.produce_all(p, topic, msgs)
        got = kc.consume_partitions(self.srv.sasl_bootstrap, topic, [0], n, **conf)
        self.assertEqual([m.value() for m in got], [m["value"] for m in msgs])

    # ---- clients ------------------------------------------------------------------------

    def test_plain_confluent(self):
        self.round_trip("PLAIN", "alice", "alice-pw")

    def test_scram_sha_256_confluent(self):
        self.round_trip("SCRAM-SHA-256", "alice", "alice-pw")

    def test_scram_sha_512_confluent(self):
        self.round_trip("SCRAM-SHA-512", "bob", "bob:pw")   # a password with ':' in it

    def test_admin_over_sasl(self):
        """A cluster needs no plaintext port: topics are created through the SASL listener."""
        from confluent_kafka.admin import AdminClient, NewTopic
        a = AdminClient(dict({"bootstrap.servers": self.srv.sasl_bootstrap},
                             **sasl_conf("SCRAM-SHA-512", "alice", "alice-pw")))
        t = "sasl-admin-%s" % uuid.uuid4().hex[:8]
        a.create_topics([NewTopic(t, 2, 1)])[t].result(timeout=30)
        md = a.list_topics(t, timeout=10)
        self.assertEqual(len(md.topics[t].partitions), 2)
        self.assertEqual(md.brokers[0].port, self.srv.sasl_port)

    def test_wrong_password_confluent(self):
        from confluent_kafka import KafkaError, Producer
        errors = []
        p = Producer(dict({"bootstrap.servers": self.srv.sasl_bootstrap,
                           "error_cb": lambda e: errors.append(e)},
                          **sasl_conf("SCRAM-SHA-256", "alice", "wrong")))
        wait_until(lambda: p.poll(0.1) is not None and any(
            e.code() == KafkaError._AUTHENTICATION for e in errors), 20,
            "an authentication error from librdkafka (got %s)" % errors)
        self.assertIn("Authentication failed", str([e.str() for e in errors]))
        # PLAIN against the same credential, and an unknown user
        for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-512", "nobody")):
            errors.clear()
            p = Producer(dict({"bootstrap.servers": self.srv.sasl_bootstrap,
                               "error_cb": lambda e: errors.append(e)},
                              **sasl_conf(mech, user, "wrong")))
            wait_until(lambda: p.poll(0.1) is not None and any(
                e.code() == KafkaError._AUTHENTICATION for e in errors), 20,
                "an authentication error for %s %s" % (mech, user))
        # the broker stays up and serves others
        self.assertTrue(self.srv.alive())
        self.round_trip("SCRAM-SHA-256", "alice", "alice-pw", n=3)

    def test_kafka_python_scram(self):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        topic = "sasl-kp-%s" % uuid.uuid4().hex[:8]
        kc.create_topic(self.srv.bootstrap, topic, 1)
        for mech, user, pw in (("SCRAM-SHA-256", "alice", "alice-pw"),
                               ("SCRAM-SHA-512", "bob", "bob:pw"), ("PLAIN", "bob", "bob:pw")):
            conf = dict(bootstrap_servers=self.srv.sasl_bootstrap,
                        security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
                        sasl_plain_username=user, sasl_plain_password=pw,
                        api_version_auto_timeout_ms=10000)
            p = KafkaProducer(**conf)
            p.send(topic, b"from-" + mech.encode()).get(timeout=20)
            p.close()
        c = KafkaConsumer(**dict(conf, consumer_timeout_ms=10000, auto_offset_reset="earliest"))
        c.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
        c.close()
        self.assertEqual(got, [b"from-SCRAM-SHA-256", b"from-SCRAM-SHA-512", b"from-PLAIN"])

    # ---- wire level ---------------------------------------------------------------------

    def test_request_before_authentication_closes(self):
        for api in (PRODUCE, 3):   # Produce, Metadata
            with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
                body = (kwire.string(None) + kwire.i16(1) + kwire.i32(1000) + kwire.i32(0)
                        if api == PRODUCE else kwire.i32(0))
                c.send_raw(kwire.frame(kwire.request_header(api, 3 if api == PRODUCE else 1, 1)
                                       + body))
                self.assertTrue(c.closed_by_peer(5), "api %d before authentication" % api)
        # after a handshake but before SaslAuthenticate: still closed
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            c.send_raw(kwire.frame(kwire.request_header(3, 1, 2) + kwire.i32(0)))
            self.assertTrue(c.closed_by_peer(5))
        # ApiVersions is allowed, and the PLAINTEXT listener needs nothing
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            err, apis = kwire.api_versions(c)[:2]
            self.assertEqual(err, 0)
            self.assertEqual(apis[SASL_HANDSHAKE], (0, 1))
            self.assertEqual(apis[SASL_AUTHENTICATE], (0, 2))
            self.assertEqual(apis[ALTER_SCRAM], (0, 0))

    def test_oversized_token_closes(self):
        """A frame above 512 KiB before authentication (Kafka's sasl.server.max.receive.size)
        closes the connection; the broker serves others."""
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            tok = b"\0alice\0" + b"x" * (600 << 10)
            try:
                c.send_raw(kwire.frame(kwire.request_header(SASL_AUTHENTICATE, 1, 9) +
                                       kwire.i32(len(tok)) + tok))
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.assertTrue(c.closed_by_peer(5))
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            self.assertEqual(authenticate(c, b"\0alice\0alice-pw")[0], 0)

    def test_handshake_mechanisms(self):
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            err, mechs = handshake(c, "GSSAPI")
            self.assertEqual(err, UNSUPPORTED_SASL_MECHANISM)
            self.assertEqual(mechs, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
            err, _ = handshake(c, "PLAIN")     # may ask again
            self.assertEqual(err, 0)
            err, msg, _ = authenticate(c, b"\0alice\0alice-pw")
            self.assertEqual((err, msg), (0, None))
            r = c.request(3, 1, kwire.i32(0))   # Metadata now served
            self.assertGreaterEqual(r.left(), 4)

    def test_failure_delayed_then_closed(self):
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            t0 = time.monotonic()
            err, msg, _ = authenticate(c, b"\0alice\0nope")
            took = time.monotonic() - t0
            self.assertEqual(err, SASL_AUTHENTICATION_FAILED)
            self.assertIn("Invalid username or password", msg)
            self.assertGreaterEqual(took, DELAY_MS / 1000.0 * 0.9)
            self.assertTrue(c.closed_by_peer(5))

    def test_client_gone_during_delay(self):
        """Clients that hang up while their failure answer waits: the broker answers nobody
        and stays up (a use-after-free once)."""
        for v0 in (False, True):
            for _ in range(5):
                c = kwire.Conn.to(self.srv.sasl_bootstrap)
                self.assertEqual(handshake(c, "PLAIN", version=0 if v0 else 1)[0], 0)
                tok = b"\0alice\0bad"
                if v0:
                    c.send_raw(kwire.frame(tok))
                else:
                    c.send_raw(kwire.frame(kwire.request_header(SASL_AUTHENTICATE, 1, 7) +
                                           kwire.i32(len(tok)) + tok))
                c.close()
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            err, _, _ = authenticate(c, b"\0alice\0wrong")   # answered after the others' delay
            self.assertEqual(err, SASL_AUTHENTICATION_FAILED)
        self.assertTrue(self.srv.alive())

    def test_wrong_password_flood(self):
        """FLOOD wrong PLAIN passwords from 16 connections at once (each a PBKDF2 on the
        broker, each answered after the failure delay): every one is refused, and a SCRAM
        client that authenticates meanwhile is served; the broker stays up."""
        import threading
        FLOOD, THREADS = 400, 16
        refused, other = [0], []
        lock = threading.Lock()

        def attack(n):
            for _ in range(n):
                with kwire.Conn.to(self.srv.sasl_bootstrap, timeout=10) as c:
                    err, _ = handshake(c, "PLAIN")
                    assert err == 0, err
                    err, _, _ = authenticate(c, b"\0alice\0wrong-password", timeout=10)
                    with lock:
                        if err == SASL_AUTHENTICATION_FAILED:
                            refused[0] += 1
                        else:
                            other.append(err)

        t0 = time.monotonic()
        threads = [threading.Thread(target=attack, args=(FLOOD // THREADS,), daemon=True)
                   for _ in range(THREADS)]
        for t in threads:
            t.start()
        good = time.monotonic()
        self.round_trip("SCRAM-SHA-512", "alice", "alice-pw", n=5)
        good = time.monotonic() - good
        for t in threads:
            t.join(120)
        took = time.monotonic() - t0
        self.assertEqual(other, [])
        self.assertEqual(refused[0], FLOOD // THREADS * THREADS)
        self.assertTrue(self.srv.alive())
        print("%d wrong passwords refused in %.1f s (%d connections); a good client's "
              "round trip meanwhile %.2f s" % (refused[0], took, THREADS, good))

    def test_handshake_v0_raw_tokens(self):
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            err, _ = handshake(c, "PLAIN", version=0)
            self.assertEqual(err, 0)
            c.send_raw(kwire.frame(b"\0alice\0alice-pw"))
            self.assertEqual(c.recv_frame(), b"")        # an empty token: success
            r = c.request(3, 1, kwire.i32(0))
            self.assertGreaterEqual(r.left(), 4)
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN", version=0)[0], 0)
            c.send_raw(kwire.frame(b"\0alice\0wrong-pw"))
            self.assertTrue(c.closed_by_peer(5))

    def test_alter_describe_scram(self):
        from confluent_kafka import KafkaError, Producer
        with kwire.Conn.to(self.srv.bootstrap) as c:
            res = alter_scram(c, upsertions=[("carol", 1, 8192, "carol-pw"),
                                             ("carol", 2, 4096, "carol-pw"),
                                             ("dave", 1, 100, "x")])
            self.assertEqual(res, {"carol": 0, "dave": 93})   # too few iterations
            err, got = describe_scram(c, ["carol", "dave"])
            self.assertEqual(got["carol"], (0, {1: 8192, 2: 4096}))
            self.assertEqual(got["dave"][0], RESOURCE_NOT_FOUND)
            self.assertEqual(alter_scram(c, deletions=[("dave", 1)]), {"dave": RESOURCE_NOT_FOUND})
            self.assertEqual(alter_scram(c, upsertions=[("erin", 3, 4096, "x")]),
                             {"erin": UNSUPPORTED_SASL_MECHANISM})
        self.round_trip("SCRAM-SHA-256", "carol", "carol-pw", n=3)
        self.round_trip("PLAIN", "carol", "carol-pw", n=3)
        # over the SASL listener too, once authenticated
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            handshake(c, "PLAIN")
            self.assertEqual(authenticate(c, b"\0carol\0carol-pw")[0], 0)
            self.assertEqual(alter_scram(c, deletions=[("carol", 1)]), {"carol": 0})
            self.assertEqual(describe_scram(c, ["carol"])[1]["carol"], (0, {2: 4096}))
        errors = []
        p = Producer(dict({"bootstrap.servers": self.srv.sasl_bootstrap,
                           "error_cb": lambda e: errors.append(e)},
                          **sasl_conf("SCRAM-SHA-256", "carol", "carol-pw")))
        wait_until(lambda: p.poll(0.1) is not None and any(
            e.code() == KafkaError._AUTHENTICATION for e in errors), 20,
            "the deleted SCRAM-SHA-256 credential refused")
        self.round_trip("SCRAM-SHA-512", "carol", "carol-pw", n=3)

    def test_z_restart_keeps_credentials(self):
        with kwire.Conn.to(self.srv.bootstrap) as c:
            self.assertEqual(alter_scram(c, upsertions=[("frank", 2, 4096, "frank-pw")]),
                             {"frank": 0})
        self.srv.stop()
        self.srv.start()
        self.wait_users({"frank": {2: 4096}, "alice": {1: 4096, 2: 4096}})
        self.round_trip("SCRAM-SHA-512", "frank", "frank-pw", n=3)
        # the bootstrap users are there already: not made again
        self.assertNotIn("sasl.bootstrap.users: creating", self.srv.stderr_text())


if __name__ == "__main__":
    harness.main()
