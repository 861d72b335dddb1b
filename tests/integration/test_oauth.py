"""OAUTHBEARER and re-authentication (issue 22).

One broker with a PLAINTEXT listener, a SASL_PLAINTEXT one and a second SASL listener REAUTH
whose sessions last 2 s (listener.name.reauth.<mechanism>.connections.max.reauth.ms=2000);
tokens are JWTs signed here with an RSA and an EC key (python3-cryptography) and checked by the
broker against a JWKS file (sasl.oauthbearer.jwks.endpoint.url=file:...), with an expected
audience and issuer.

- confluent-kafka (librdkafka) produces and consumes with RS256 and ES256 tokens (oauth_cb);
- wrong audience, wrong issuer, expired, not yet valid, no iat, a bad signature, an unknown
  kid, alg none, malformed base64, a 100 KB token: each answered with RFC 7628's
  {"status":"invalid_token"} and then SASL_AUTHENTICATION_FAILED carrying it, as Kafka does;
  a malformed client message and a foreign authzid fail at once; the broker keeps serving;
- the JWKS file replaced: a token of the new key is accepted without a restart;
- KIP-368 on the wire: session_lifetime_ms is the listener's 2000 ms (and an OAUTHBEARER
  token's remaining life where that is shorter, also with no setting); PLAIN, SCRAM-SHA-256
  and OAUTHBEARER connections re-authenticate over more than three lifetimes with a long-poll
  Fetch in flight across each re-authentication; a connection that does not re-authenticate
  is closed at its first request past the deadline; another principal or another mechanism on
  re-authentication is refused and the connection closed; the counters in /metrics;
- librdkafka's own re-authentication (2.2+, the suite's build under .cache when present):
  a producer on the REAUTH listener for over three lifetimes, with no session expiring;
- unsecured mode (sasl.oauthbearer.unsecured.validator.enable): librdkafka's and kcat's
  sasl.oauthbearer.config tokens; a broker with OAUTHBEARER but no validator refuses to start.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
import oauthlib as oa  # noqa: E402
from harness import Server, free_port, wait_until  # noqa: E402

SASL_HANDSHAKE, SASL_AUTHENTICATE, FETCH = 17, 36, 1
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 58, 34, 33
INVALID = b'{"status":"invalid_token"}'
LIFETIME_MS = 2000
BOOT = "alice:SCRAM-SHA-256:alice-pw,alice:SCRAM-SHA-512:alice-pw,bob:SCRAM-SHA-512:bob-pw"
MECHS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


class OAuthServer(Server):
    """PLAINTEXT on the usual port, SASL_PLAINTEXT and REAUTH (SASL_PLAINTEXT, 2 s sessions)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sasl_port, self.reauth_port = free_port(), free_port()

    def command(self):
        self.sets["listeners"] = "PLAINTEXT://%s:%d,SASL_PLAINTEXT://%s:%d,REAUTH://%s:%d" % (
            self.host, self.port, self.host, self.sasl_port, self.host, self.reauth_port)
        self.sets["advertised.listeners"] = self.sets["listeners"]
        self.sets["listener.security.protocol.map"] = (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT")
        return super().command()

    @property
    def sasl_bootstrap(self):
        return "%s:%d" % (self.host, self.sasl_port)

    @property
    def reauth_bootstrap(self):
        return "%s:%d" % (self.host, self.reauth_port)


# ---- wire helpers --------------------------------------------------------------------------

def handshake(conn, mech, version=1):
    r = conn.request(SASL_HANDSHAKE, version, kwire.string(mech))
    return r.i16(), r.array(lambda x: x.string())


def authenticate(conn, token, version=1, timeout=5.0):
    """SaslAuthenticate v1: (error, message, bytes, session_lifetime_ms)."""
    r = conn.request(SASL_AUTHENTICATE, version, kwire.i32(len(token)) + token, timeout=timeout)
    err, msg = r.i16(), r.string()
    n = r.i32()
    data = bytes(r.take(n)) if n > 0 else b""
    life = r.i64() if version >= 1 else None
    return err, msg, data, life


def scram_rounds(conn, mech, user, pw):
    """A SCRAM exchange (client side, RFC 5802): the last authenticate() result."""
    import base64
    import hashlib
    import hmac
    h = hashlib.sha256 if mech == "SCRAM-SHA-256" else hashlib.sha512
    cnonce = uuid.uuid4().hex
    first_bare = "n=%s,r=%s" % (user, cnonce)
    err, msg, sf, _ = authenticate(conn, ("n,," + first_bare).encode())
    assert err == 0, (err, msg)
    attrs = dict(kv.split("=", 1) for kv in sf.decode().split(","))
    salted = hashlib.pbkdf2_hmac(h().name, pw.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    ck = hmac.new(salted, b"Client Key", h).digest()
    final_bare = "c=biws,r=%s" % attrs["r"]
    auth_msg = ",".join([first_bare, sf.decode(), final_bare]).encode()
    sig = hmac.new(h(ck).digest(), auth_msg, h).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(ck, sig))).decode()
    return authenticate(conn, ("%s,p=%s" % (final_bare, proof)).encode())


def login(conn, mech, user=None, pw=None, token=None):
    """Handshake and the whole exchange: the last authenticate() result."""
    err, mechs = handshake(conn, mech)
    assert err == 0, (err, mechs)
    if mech == "PLAIN":
        return authenticate(conn, b"\0" + user.encode() + b"\0" + pw.encode())
    if mech == "OAUTHBEARER":
        return authenticate(conn, oa.client_message(token))
    return scram_rounds(conn, mech, user, pw)


def metadata_ok(conn):
    r = conn.request(3, 1, kwire.i32(0))
    return len(r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))) == 1


def send_fetch(conn, topic, max_wait_ms):
    """Sends a long-poll Fetch v4 without waiting: its correlation id."""
    conn.corr += 1
    conn.send_raw(kwire.frame(kwire.request_header(FETCH, 4, conn.corr)
                              + kwire.fetch_v4(topic, 0, 0, 1, max_wait_ms)))
    return conn.corr


def recv_fetch(conn, corr, timeout=10):
    r = kwire.Reader(conn.recv_frame(timeout))
    assert r.i32() == corr
    return kwire.parse_fetch_v4(r)


def metrics(srv):
    m = admin_client.scrape(srv.admin_port)
    return {n: m.sum(n) for n in ("strata_sasl_reauthentications_total",
                                  "strata_sasl_sessions_expired_total")}


def rdkafka_reauth_lib():
    """A librdkafka 2.2+ (KIP-368 on the client) to load under confluent-kafka: the suite's
    build under .cache (tests/CMakeLists.txt's librdkafka checkout), or None."""
    root = os.path.join(os.environ.get("STRATA_SRC", "."), ".cache")
    for p in sorted(glob.glob(os.path.join(root, "**", "src", "librdkafka.so.1"),
                              recursive=True)):
        return os.path.dirname(p)
    return None


class OAuthTest(unittest.TestCase):
    srv = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="strata-it-oauth-")
        cls.rsa, cls.ec = oa.Key.rsa("rsa1"), oa.Key.ec("ec1")
        cls.jwks_path = os.path.join(cls.tmp, "jwks.json")
        with open(cls.jwks_path, "w") as f:
            f.write(oa.jwks(cls.rsa, cls.ec))
        sets = {
            "sasl.enabled.mechanisms": MECHS,
            "sasl.bootstrap.users": BOOT,
            "sasl.oauthbearer.jwks.endpoint.url": "file:" + cls.jwks_path,
            "sasl.oauthbearer.expected.audience": "other,strata",
            "sasl.oauthbearer.expected.issuer": "https://issuer.test",
            "connection.failed.authentication.delay.ms": "50",
        }
        for m in MECHS.split(","):
            sets["listener.name.reauth.%s.connections.max.reauth.ms" % m.lower()] = str(LIFETIME_MS)
        cls.srv = OAuthServer(sets=sets)
        cls.srv.start()
        wait_until(lambda: cls._users_ready(), 20, "the bootstrap users")

    @classmethod
    def _users_ready(cls):
        try:
            with kwire.Conn.to(cls.srv.sasl_bootstrap) as c:
                return login(c, "SCRAM-SHA-512", "bob", "bob-pw")[0] == 0
        except (AssertionError, EOFError, OSError):
            return False

    @classmethod
    def tearDownClass(cls):
        if cls.srv:
            cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def token(self, key=None, **kw):
        return (key or self.rsa).sign(oa.claims(**kw))

    # ---- clients ------------------------------------------------------------------------

    def round_trip(self, key, n=20):
        from confluent_kafka import Consumer, Producer, TopicPartition
        topic = "oauth-%s-%s" % (key.alg.lower(), uuid.uuid4().hex[:8])
        kc.create_topic(self.srv.bootstrap, topic, 1)
        calls = []

        def cb(config):
            calls.append(config)
            return self.token(key), time.time() + 3600
        conf = {"bootstrap.servers": self.srv.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": cb}
        p = Producer(dict(conf, **{"linger.ms": 5, "acks": "all"}))
        msgs = [{"key": b"k%d" % i, "value": b"%s-%d" % (key.alg.encode(), i)} for i in range(n)]
        kc.produce_all(p, topic, msgs)
        c = Consumer(dict(conf, **{"group.id": "oauth-" + topic, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"}))
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        self.assertEqual(got, [m["value"] for m in msgs])
        self.assertTrue(calls)

    def test_rs256_confluent(self):
        self.round_trip(self.rsa)

    def test_es256_confluent(self):
        self.round_trip(self.ec)

    def test_refused_token_confluent(self):
        """librdkafka reports a refused token as an authentication error."""
        from confluent_kafka import KafkaError, Producer
        errors = []
        p = Producer({"bootstrap.servers": self.srv.sasl_bootstrap,
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                      "oauth_cb": lambda c: (self.token(aud="elsewhere"), time.time() + 3600),
                      "error_cb": lambda e: errors.append(e)})
        wait_until(lambda: p.poll(0.1) is not None and any(
            e.code() == KafkaError._AUTHENTICATION for e in errors), 20,
            "an authentication error from librdkafka (got %s)" % errors)
        self.assertIn("invalid_token", str([e.str() for e in errors]))

    # ---- refusals on the wire ------------------------------------------------------------

    def refused(self, token_bytes, want_json=True):
        """The broker's answer to one OAUTHBEARER client message: asserts Kafka's two-step
        refusal (or an immediate one), the connection closed after."""
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(handshake(c, "OAUTHBEARER")[0], 0)
            err, msg, data, _ = authenticate(c, token_bytes)
            if want_json:
                self.assertEqual((err, data), (0, INVALID))
                err, msg, data, _ = authenticate(c, b"\x01")
                self.assertEqual((err, msg), (SASL_AUTHENTICATION_FAILED, INVALID.decode()))
            else:
                self.assertEqual(err, SASL_AUTHENTICATION_FAILED)
            self.assertTrue(c.closed_by_peer(5))
            return msg

    def test_refusals(self):
        rsa2 = oa.Key.rsa("rsa1")   # same kid, another key: the signature fails
        now = int(time.time())
        bad = {
            "wrong audience": self.token(aud="elsewhere"),
            "audience list without ours": self.token(aud=["a", "b"]),
            "wrong issuer": self.token(iss="https://evil.test"),
            "no issuer": self.token(iss=None),
            "expired": self.token(life=-120),
            "not yet valid": self.token(nbf=now + 600),
            "issued in the future": self.token(iat=now + 600),
            "no iat": self.token(iat=None),
            "no exp": self.rsa.sign({k: v for k, v in oa.claims().items() if k != "exp"}),
            "no sub": self.token(sub=None),
            "bad signature": rsa2.sign(oa.claims()),
            "unknown kid": oa.Key.rsa("nope").sign(oa.claims()),
            "kid of the other key type": self.ec.sign(oa.claims(), kid="rsa1"),
            "alg none": oa.unsecured(oa.claims()),
            "alg HS256": self.rsa.sign(oa.claims(), alg="HS256"),
            "bad base64": "A." + self.token().split(".", 1)[1],
            "bad base64 bits": "eyJ." + self.token().split(".", 1)[1],
            "not JSON": oa.b64url(b"{nope") + "." + self.token().split(".", 1)[1],
            "two parts": ".".join(self.token().split(".")[:2]),
            "huge": self.token(pad="x" * 100000),
        }
        for what, tok in bad.items():
            with self.subTest(what):
                self.refused(oa.client_message(tok))
        # accepted within the clock skew (30 s): expired 10 s ago; its session has no time
        # left (Kafka's zeroIfNegative), so the next request closes the connection
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(login(c, "OAUTHBEARER", token=self.token(life=-10))[::3], (0, 0))
            c.send_raw(kwire.frame(kwire.request_header(3, 1, 99) + kwire.i32(0)))
            self.assertTrue(c.closed_by_peer(5))
        # a list of audiences naming ours, and the EC key by kid
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            self.assertEqual(login(c, "OAUTHBEARER", token=self.token(self.ec, aud=["x", "strata"]))[0], 0)
        # malformed client messages fail at once (Kafka's SaslException)
        tok = self.token()
        for what, m in {
                "no gs2 header": ("\x01auth=Bearer %s\x01\x01" % tok).encode(),
                "no auth pair": b"n,,\x01host=x\x01\x01",
                "not Bearer": ("n,,\x01auth=Basic %s\x01\x01" % tok).encode(),
                "unterminated": ("n,,\x01auth=Bearer %s\x01" % tok).encode(),
                "binary": b"n,,\x01auth=Bearer \xff\xfe\x01\x01",
                "not a token character": ("n,,\x01auth=Bearer !%s\x01\x01" % tok).encode(),
                "empty": b""}.items():
            with self.subTest(what):
                msg = self.refused(m, want_json=False)
                self.assertIn("OAUTHBEARER", msg)
        # an authzid other than the token's subject
        msg = self.refused(oa.client_message(tok, authzid="mallory"), want_json=False)
        self.assertIn("authorization id", msg)
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:   # authzid = sub is fine
            handshake(c, "OAUTHBEARER")
            self.assertEqual(authenticate(c, oa.client_message(tok, authzid="alice"))[0], 0)
        self.assertTrue(self.srv.alive())

    def test_jwks_reload(self):
        new = oa.Key.rsa("rsa-rotated")
        tok = new.sign(oa.claims(sub="carol"))
        self.refused(oa.client_message(tok))
        tmp = self.jwks_path + ".new"
        with open(tmp, "w") as f:
            f.write(oa.jwks(self.rsa, self.ec, new))
        os.replace(tmp, self.jwks_path)

        def accepted():
            with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
                handshake(c, "OAUTHBEARER")
                return authenticate(c, oa.client_message(tok))[:3] == (0, None, b"")
        # every shard keeps its own copy: accepted on 12 connections in a row (the kernel
        # spreads them over the shards)
        wait_until(lambda: all(accepted() for _ in range(12)), 15, "the rotated key accepted")
        # a broken file keeps the keys read before
        with open(tmp, "w") as f:
            f.write("{not json")
        os.replace(tmp, self.jwks_path)
        # (each shard checks the file at its own authentications: keep authenticating)
        wait_until(lambda: accepted() and "the keys read before stay in use" in
                   self.srv.stderr_text(), 15, "the broken key set logged")
        self.assertTrue(all(accepted() for _ in range(6)))
        with open(tmp, "w") as f:
            f.write(oa.jwks(self.rsa, self.ec))
        os.replace(tmp, self.jwks_path)

    # ---- KIP-368 ------------------------------------------------------------------------

    def test_session_lifetime(self):
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[3], LIFETIME_MS)
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:   # no setting there: no limit
            self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[3], 0)
        # OAUTHBEARER: the token's remaining life when shorter, also without the setting
        # (Kafka's SaslServerAuthenticator)
        for port in (self.srv.reauth_bootstrap, self.srv.sasl_bootstrap):
            with kwire.Conn.to(port) as c:
                life = login(c, "OAUTHBEARER", token=self.token(life=1))[3]
                self.assertTrue(0 <= life <= 1000, life)
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "OAUTHBEARER", token=self.token())[3], LIFETIME_MS)
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            life = login(c, "OAUTHBEARER", token=self.token(life=3600))[3]
            self.assertTrue(3590000 < life <= 3600000, life)

    def test_reauthenticate_keeps_connection(self):
        """PLAIN, SCRAM and OAUTHBEARER re-authenticate on one connection for more than three
        lifetimes, each time with a long-poll Fetch in flight, and are never cut off."""
        topic = "oauth-reauth-" + uuid.uuid4().hex[:8]
        kc.create_topic(self.srv.bootstrap, topic, 1)
        before = metrics(self.srv)
        creds = [("PLAIN", "alice", "alice-pw"), ("SCRAM-SHA-256", "alice", "alice-pw"),
                 ("OAUTHBEARER", None, None)]
        total = 0
        for mech, user, pw in creds:
            with self.subTest(mech), kwire.Conn.to(self.srv.reauth_bootstrap, 10) as c:
                tok = self.token() if mech == "OAUTHBEARER" else None
                self.assertEqual(login(c, mech, user, pw, tok)[::3], (0, LIFETIME_MS))
                start = time.monotonic()
                n = 0
                while time.monotonic() - start < 3.5 * LIFETIME_MS / 1000:
                    # a Fetch waiting 1.1 s for data is in flight when the re-authentication
                    # starts: its answer comes first (answers keep request order), then the
                    # SaslHandshake's (1.1 s: Kafka allows one re-authentication a second)
                    corr = send_fetch(c, topic, 1100)
                    c.corr += 1
                    c.send_raw(kwire.frame(kwire.request_header(SASL_HANDSHAKE, 1, c.corr)
                                           + kwire.string(mech)))
                    self.assertEqual(recv_fetch(c, corr)[0], 0)
                    r = kwire.Reader(c.recv_frame())
                    self.assertEqual((r.i32(), r.i16()), (c.corr, 0))
                    tok = self.token() if mech == "OAUTHBEARER" else None
                    if mech == "PLAIN":
                        res = authenticate(c, b"\0alice\0alice-pw")
                    elif mech == "OAUTHBEARER":
                        res = authenticate(c, oa.client_message(tok))
                    else:
                        res = scram_rounds(c, mech, user, pw)
                    self.assertEqual((res[0], res[1], res[3]), (0, None, LIFETIME_MS))
                    self.assertTrue(metadata_ok(c))
                    n += 1
                self.assertGreaterEqual(n, 3)
                total += n
        after = metrics(self.srv)
        self.assertGreaterEqual(after["strata_sasl_reauthentications_total"]
                                - before["strata_sasl_reauthentications_total"], total)
        self.assertEqual(after["strata_sasl_sessions_expired_total"],
                         before["strata_sasl_sessions_expired_total"])

    def test_expired_session_closed(self):
        before = metrics(self.srv)["strata_sasl_sessions_expired_total"]
        for mech, user, pw in (("SCRAM-SHA-512", "bob", "bob-pw"), ("OAUTHBEARER", None, None)):
            with self.subTest(mech), kwire.Conn.to(self.srv.reauth_bootstrap) as c:
                login(c, mech, user, pw, self.token() if user is None else None)
                t0 = time.monotonic()
                self.assertTrue(metadata_ok(c))
                # the session runs out: time has to pass, there is no condition to wait on
                time.sleep(max(0.0, LIFETIME_MS / 1000 + 0.3 - (time.monotonic() - t0)))
                c.send_raw(kwire.frame(kwire.request_header(3, 1, 99) + kwire.i32(0)))
                self.assertTrue(c.closed_by_peer(5), "an expired session served")
        # an OAUTHBEARER session without the setting ends with its token
        with kwire.Conn.to(self.srv.sasl_bootstrap) as c:
            life = login(c, "OAUTHBEARER", token=self.token(life=1))[3]
            time.sleep(life / 1000 + 0.3)
            c.send_raw(kwire.frame(kwire.request_header(3, 1, 99) + kwire.i32(0)))
            self.assertTrue(c.closed_by_peer(5))
        wait_until(lambda: metrics(self.srv)["strata_sasl_sessions_expired_total"] >= before + 3,
                   10, "the expired sessions counted")
        self.assertIn("SASL session expired", self.srv.stderr_text())

    def test_reauth_principal_change_refused(self):
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "SCRAM-SHA-512", "alice", "alice-pw")[0], 0)
            err, msg, _, _ = login(c, "SCRAM-SHA-512", "bob", "bob-pw")
            self.assertEqual(err, SASL_AUTHENTICATION_FAILED)
            self.assertIn("Cannot change principals during re-authentication from User.alice: "
                          "User.bob", msg)
            self.assertTrue(c.closed_by_peer(5))
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "OAUTHBEARER", token=self.token(sub="alice"))[0], 0)
            err, msg, _, _ = login(c, "OAUTHBEARER", token=self.token(sub="mallory"))
            self.assertEqual(err, SASL_AUTHENTICATION_FAILED)
            self.assertTrue(c.closed_by_peer(5))
        # another mechanism, or SaslHandshake v0, on re-authentication: refused and closed
        for mech, version, want in (("SCRAM-SHA-256", 1, UNSUPPORTED_SASL_MECHANISM),
                                    ("PLAIN", 0, ILLEGAL_SASL_STATE)):
            with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
                self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[0], 0)
                self.assertEqual(handshake(c, mech, version)[0], want)
                self.assertTrue(c.closed_by_peer(5))
        # Kafka's KafkaChannel: a second re-authentication within a second, or one from a
        # client that only ever sent SaslAuthenticate v0, is refused and the connection stays
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[0], 0)
            self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[0], 0)
            self.assertEqual(handshake(c, "PLAIN")[0], ILLEGAL_SASL_STATE)
            self.assertTrue(metadata_ok(c))
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(handshake(c, "PLAIN")[0], 0)
            self.assertEqual(authenticate(c, b"\0alice\0alice-pw", version=0)[0], 0)
            self.assertEqual(handshake(c, "PLAIN")[0], ILLEGAL_SASL_STATE)
            self.assertTrue(metadata_ok(c))
        # a failed re-authentication closes the connection too
        with kwire.Conn.to(self.srv.reauth_bootstrap) as c:
            self.assertEqual(login(c, "PLAIN", "alice", "alice-pw")[0], 0)
            self.assertEqual(login(c, "PLAIN", "alice", "wrong")[0], SASL_AUTHENTICATION_FAILED)
            self.assertTrue(c.closed_by_peer(5))

    def test_librdkafka_reauthentication(self):
        """librdkafka 2.2+ re-authenticates by itself (KIP-368): a SCRAM producer on the REAUTH
        listener for over three lifetimes, every message delivered, no session expiring."""
        lib = rdkafka_reauth_lib()
        if not lib:
            self.skipTest("no librdkafka 2.2+ build under .cache (Debian's 2.0.2 has no KIP-368)")
        topic = "oauth-rdk-" + uuid.uuid4().hex[:8]
        kc.create_topic(self.srv.bootstrap, topic, 1)
        before = metrics(self.srv)
        script = textwrap.dedent("""
            import sys, time, confluent_kafka as ck
            v = ck.libversion()[1]
            if v < 0x020200ff:
                print("OLD", ck.libversion()[0]); sys.exit(3)
            bad = []
            p = ck.Producer({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
                             "sasl.password": "bob-pw", "linger.ms": 5, "acks": "all"})
            n = ok = 0
            end = time.monotonic() + float(sys.argv[3])
            def dr(err, m):
                global ok
                if err: bad.append(str(err))
                else: ok += 1
            while time.monotonic() < end:
                p.produce(sys.argv[2], b"m%d" % n, on_delivery=dr); n += 1
                p.poll(0.05)
            p.flush(30)
            print("SENT", n, "OK", ok, "BAD", bad[:3], ck.libversion()[0])
            sys.exit(0 if ok == n and not bad else 1)
        """)
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        r = subprocess.run([sys.executable, "-c", script, self.srv.reauth_bootstrap, topic,
                            str(3.5 * LIFETIME_MS / 1000)], env=env, capture_output=True,
                           text=True, timeout=120)
        if r.returncode == 3:
            self.skipTest("librdkafka under .cache is %s" % r.stdout.strip())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        after = metrics(self.srv)
        self.assertGreaterEqual(after["strata_sasl_reauthentications_total"]
                                - before["strata_sasl_reauthentications_total"], 3, r.stdout)
        self.assertEqual(after["strata_sasl_sessions_expired_total"],
                         before["strata_sasl_sessions_expired_total"])
        print("librdkafka re-authentication:", r.stdout.strip(), file=sys.stderr)


class UnsecuredTest(unittest.TestCase):
    """sasl.oauthbearer.unsecured.validator.enable: Kafka's unsecured tokens, from
    librdkafka's sasl.oauthbearer.config and from kcat."""

    def test_unsecured(self):
        srv = OAuthServer(sets={"sasl.enabled.mechanisms": "OAUTHBEARER",
                                "sasl.oauthbearer.unsecured.validator.enable": "true"})
        srv.start()
        try:
            topic = "oauth-unsec-" + uuid.uuid4().hex[:8]
            kc.create_topic(srv.bootstrap, topic, 1)
            conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                    "sasl.oauthbearer.config": "principal=alice lifeSeconds=600",
                    "enable.sasl.oauthbearer.unsecure.jwt": True}
            p = kc.producer(srv.sasl_bootstrap, **conf)
            kc.produce_all(p, topic, [{"value": b"one"}, {"value": b"two"}])
            kcat = shutil.which("kcat") or shutil.which("kafkacat")
            if kcat:
                x = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
                     "-X", "sasl.oauthbearer.config=principal=bob",
                     "-X", "enable.sasl.oauthbearer.unsecure.jwt=true"]
                r = subprocess.run([kcat, "-b", srv.sasl_bootstrap, "-P", "-t", topic] + x,
                                   input=b"three\n", capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = subprocess.run([kcat, "-b", srv.sasl_bootstrap, "-C", "-t", topic, "-o",
                                    "beginning", "-c", "3", "-e"] + x, capture_output=True,
                                   timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.split(), [b"one", b"two", b"three"])
            # a signed token is refused here, and a token with a signature part
            rsa = oa.Key.rsa("k")
            with kwire.Conn.to(srv.sasl_bootstrap) as c:
                handshake(c, "OAUTHBEARER")
                self.assertEqual(authenticate(c, oa.client_message(rsa.sign(oa.claims())))[2],
                                 INVALID)
            with kwire.Conn.to(srv.sasl_bootstrap) as c:
                handshake(c, "OAUTHBEARER")
                err, _, _, life = authenticate(c, oa.client_message(oa.unsecured(oa.claims(life=60))))
                self.assertEqual(err, 0)
                self.assertTrue(50000 < life <= 60000, life)
        finally:
            srv.stop()

    def test_no_validator_refuses_start(self):
        for sets, want in (({"sasl.enabled.mechanisms": "OAUTHBEARER"},
                            "sasl.oauthbearer.unsecured.validator.enable"),
                           ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp.test/jwks"},
                            "only file: URLs"),
                           ({"sasl.oauthbearer.jwks.endpoint.url": "file:/nonexistent/jwks.json"},
                            "cannot open")):
            srv = OAuthServer(sets=sets)
            srv.port, srv.admin_port = free_port(), free_port()
            r = subprocess.run(srv.command(), capture_output=True, text=True, timeout=30,
                               env=harness.sanitizer_env(dict(os.environ)))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(want, r.stdout + r.stderr)
            shutil.rmtree(srv.tmp, ignore_errors=True)


if __name__ == "__main__":
    harness.main()
