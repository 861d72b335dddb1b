"""The admin HTTP API over HTTPS with HTTP basic auth (issue 22): admin.tls.enabled with a PEM
keystore the openssl CLI makes at test time, admin.require.auth checking the basic credentials
against the SCRAM users of the metadata (sasl.bootstrap.users, one user per mechanism).

One broker: https with the CA works, plain http to the same port gets no HTTP answer, missing,
wrong or unknown credentials get 401 with WWW-Authenticate, right ones 200, /metrics and
/v1/status/ready answer without credentials (admin.metrics.open, the default); Debian's
Prometheus scrapes it over https with basic auth when /metrics is closed. A second broker
with ACLs on (authorizer.class.name) and admin.metrics.open=false: only super.users get in
(403 for another valid user), /metrics wants credentials too. And a broker started with
admin.tls.enabled but no keystore refuses to start, naming the setting.
"""

import base64
import http.client
import json
import os
import shutil
import ssl
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Server, ServerError, wait_until  # noqa: E402
from test_tls import Pki  # noqa: E402

ALICE, ALICE_PW = "alice", "alice-secret"   # SCRAM-SHA-512
BOB, BOB_PW = "bob", "bob-secret"           # SCRAM-SHA-256
USERS = "%s:SCRAM-SHA-512:%s,%s:SCRAM-SHA-256:%s" % (ALICE, ALICE_PW, BOB, BOB_PW)


class AdminTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if harness.external_bootstrap():
            raise unittest.SkipTest("starts its own brokers")
        harness.need_server_binary()
        if not shutil.which("openssl"):
            raise unittest.SkipTest("the openssl CLI is missing (scripts/deps.sh installs it)")
        cls.tmp = tempfile.mkdtemp(prefix="strata-admin-tls-")
        cls.pki = Pki(cls.tmp)
        cls.cert = cls.pki.issue("admin", "/CN=localhost")
        cls.ctx = ssl.create_default_context(cafile=cls.pki.ca)
        cls.servers = []

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, **extra):
        sets = {"admin.tls.enabled": "true",
                "admin.ssl.keystore.location": self.cert[2],
                "admin.require.auth": "true",
                "sasl.bootstrap.users": USERS}
        sets.update(extra)
        s = Server(smp=1, sets=sets, name="admin-tls")
        self.servers.append(s)
        s.start()
        return s

    def get(self, s, path, user=None, password=None, scheme="https", post=None):
        """(status, headers, body) of GET path (POST with a JSON body when post is not None);
        HTTP errors are answers too."""
        url = "%s://127.0.0.1:%d%s" % (scheme, s.admin_port, path)
        req = urllib.request.Request(url, data=None if post is None else json.dumps(post).encode(),
                                     headers={} if post is None else
                                     {"Content-Type": "application/json"})
        if user is not None:
            tok = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
            req.add_header("Authorization", "Basic " + tok)
        try:
            with urllib.request.urlopen(req, timeout=5, context=self.ctx) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def test_https_and_basic_auth(self):
        s = self.start()
        # The users are in the metadata once the broker applied its bootstrap records.
        wait_until(lambda: self.get(s, "/v1/cluster", ALICE, ALICE_PW)[0] == 200, 15,
                   "alice admitted over https")
        st, _, body = self.get(s, "/v1/cluster", BOB, BOB_PW)
        self.assertEqual(st, 200, body)
        self.assertIn('"cluster_id"', body)
        for user, pw in ((None, None), (ALICE, "wrong"), ("mallory", ALICE_PW), (BOB, ALICE_PW)):
            st, hd, body = self.get(s, "/v1/topics", user, pw)
            self.assertEqual(st, 401, "%s: %s" % (user, body))
            self.assertEqual(hd.get("WWW-Authenticate"), 'Basic realm="strata-admin"')
        # The console and its writes need the credentials too.
        self.assertEqual(self.get(s, "/ui")[0], 401)
        self.assertEqual(self.get(s, "/v1/topics", post={"name": "console-t"})[0], 401)
        st, _, body = self.get(s, "/v1/topics", ALICE, ALICE_PW, post={"name": "console-t"})
        self.assertEqual(st, 201, body)
        st, _, body = self.get(s, "/ui", ALICE, ALICE_PW)
        self.assertEqual(st, 200)
        self.assertIn("console.js", body)
        # Open without credentials: the readiness probe and, by default, Prometheus's scrape.
        st, _, body = self.get(s, "/metrics")
        self.assertEqual(st, 200)
        self.assertIn("strata_", body)
        self.assertEqual(self.get(s, "/v1/status/ready")[0], 200)
        # Plain HTTP to the HTTPS port gets no HTTP answer.
        c = http.client.HTTPConnection("127.0.0.1", s.admin_port, timeout=5)
        with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
            c.request("GET", "/v1/status/ready")
            c.getresponse()
        c.close()
        # A client that does not trust the broker's CA is refused by its own check.
        with self.assertRaises(urllib.error.URLError):
            urllib.request.urlopen("https://127.0.0.1:%d/metrics" % s.admin_port, timeout=5,
                                   context=ssl.create_default_context())
        self.assertIn("admin API on https://", s.stderr_text())
        s.stop()

    def test_super_users_only_with_acls(self):
        s = self.start(**{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:%s" % ALICE,
            "admin.metrics.open": "false"})
        wait_until(lambda: self.get(s, "/v1/cluster", ALICE, ALICE_PW)[0] == 200, 15,
                   "alice (a super user) admitted")
        st, _, body = self.get(s, "/v1/cluster", BOB, BOB_PW)
        self.assertEqual(st, 403, body)
        st, _, body = self.get(s, "/v1/topics", BOB, BOB_PW, post={"name": "console-t"})
        self.assertEqual(st, 403, body)
        self.assertEqual(self.get(s, "/metrics")[0], 401)
        st, _, body = self.get(s, "/metrics", ALICE, ALICE_PW)
        self.assertEqual(st, 200)
        self.assertIn("strata_", body)
        self.assertEqual(self.get(s, "/v1/status/ready")[0], 200)
        s.stop()

    def test_prometheus_scrapes_over_https(self):
        if not shutil.which("prometheus"):
            self.skipTest("prometheus not installed (scripts/deps.sh test)")
        from test_admin_prometheus import Prometheus
        s = self.start(**{"admin.metrics.open": "false"})
        job = ("    scheme: https\n    tls_config:\n      ca_file: %s\n"
               "    basic_auth:\n      username: %s\n      password: %s\n"
               % (self.pki.ca, ALICE, ALICE_PW))
        prom = Prometheus("localhost:%d" % s.admin_port, job)
        try:
            prom.wait_value('up{job="strata"}', 1.0, timeout=30)
            prom.wait_value("strata_ready", 1.0, timeout=30)
        finally:
            prom.close()
        s.stop()

    def test_no_keystore_refuses_to_start(self):
        s = Server(smp=1, sets={"admin.tls.enabled": "true"}, name="admin-tls-bad")
        self.servers.append(s)
        with self.assertRaises(ServerError):
            s.start(timeout=20)
        self.assertIn("admin.tls.enabled needs admin.ssl.keystore.location", s.stderr_text())


if __name__ == "__main__":
    unittest.main()
