"""`strata debug bundle` (issue 26): one .tar.gz for a bug report from a running broker's admin
API, and the broker's GET /v1/debug/{log,config,data-dir,process} behind it.

One broker with secrets configured — a SCRAM user (sasl.bootstrap.users) on a SASL_PLAINTEXT
listener, sasl.jaas.config, ssl.keystore.password on the command line and ssl.key.password in
a properties file (-c) — with admin.require.auth, and a topic with records. The bundle, taken
with --admin-user, holds every endpoint's file and a MANIFEST.json whose sizes and SHA-256s
match them; config.json gives every setting's source (default, file, --set) and hides the
secrets, whose values appear in no member, compressed or not (nor in hex: a PLAIN login is in
the protocol log, its SaslAuthenticate bodies hidden); log.txt has the broker's start line; data-dir.json lists the partition's segment files; process.json the process. The
debug routes want credentials like the rest. Failures: no credentials (exit 1, says what to
give), a port nobody listens on (exit 1 within a moment, names the address), a server that
accepts and never answers (--timeout holds, exit 1), Ctrl-C (ends at once). No half archive
is left by any of them."""

import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid
import base64

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import Server, free_port, wait_until  # noqa: E402

CLI = os.environ.get("STRATA_CLI")
TAG = uuid.uuid4().hex[:12]
USER = "alice"
USER_PW = "scram-pw-" + TAG
JAAS_PW = "jaas-pw-" + TAG
KEYSTORE_PW = "keystore-pw-" + TAG
KEY_PW = "filekey-pw-" + TAG
SECRETS = (USER_PW, JAAS_PW, KEYSTORE_PW, KEY_PW)
FILES = ("metrics.txt", "cluster.json", "topics.json", "partitions.json", "log.txt",
         "config.json", "data-dir.json", "process.json")


class SecretServer(Server):
    """PLAINTEXT on the usual port, SASL_PLAINTEXT on a second one."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sasl_port = free_port()

    def command(self):
        self.sets["listeners"] = "PLAINTEXT://%s:%d,SASL_PLAINTEXT://%s:%d" % (
            self.host, self.port, self.host, self.sasl_port)
        self.sets["advertised.listeners"] = self.sets["listeners"]
        return super().command()


class HangingServer:
    """Accepts connections on 127.0.0.1 and never answers (until closed)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class DebugBundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        cls.tmp = tempfile.mkdtemp(prefix="strata-it-bundle-")
        cls.conf = os.path.join(cls.tmp, "strata.properties")
        with open(cls.conf, "w") as f:
            f.write("# from the file\nnum.partitions=2\nssl.key.password=%s\n" % KEY_PW)
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                'username="%s" password="%s";' % (USER, JAAS_PW))
        cls.srv = SecretServer(smp=2, name="bundle", args=["-c", cls.conf], sets={
            "sasl.bootstrap.users": "%s:SCRAM-SHA-512:%s" % (USER, USER_PW),
            "sasl.jaas.config": jaas,
            "ssl.keystore.password": KEYSTORE_PW,
            "admin.require.auth": "true",
            "log.protocol": "client.id=bundle-sasl",
        })
        cls.srv.start()
        cls.admin = "127.0.0.1:%d" % cls.srv.admin_port
        wait_until(lambda: cls.get("/v1/cluster", auth=True)[0] == 200, 15,
                   "the SCRAM user admitted by the admin API")
        cls.topic = "bundle-%s" % TAG
        kc.create_topic(cls.srv.bootstrap, cls.topic, partitions=1)
        p = kc.producer(cls.srv.bootstrap)
        kc.produce_all(p, cls.topic, [{"value": b"record-%d" % i} for i in range(50)])
        # A client logging in with PLAIN, its requests in the protocol log.
        sp = kc.producer("127.0.0.1:%d" % cls.srv.sasl_port, **{
            "client.id": "bundle-sasl", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": USER_PW})
        kc.produce_all(sp, cls.topic, [{"value": b"sasl-record"}])
        # the shards publish what the admin API shows about once a second
        wait_until(lambda: cls.topic.encode() in cls.get("/v1/topics", auth=True)[1], 10,
                   "the topic in /v1/topics")

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.srv.alive():
                cls.srv.stop()
        finally:
            cls.srv.close()

    @classmethod
    def get(cls, path, auth=False):
        req = urllib.request.Request("http://%s%s" % (cls.admin, path))
        if auth:
            tok = base64.b64encode(("%s:%s" % (USER, USER_PW)).encode()).decode()
            req.add_header("Authorization", "Basic " + tok)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def bundle(self, *args, password=USER_PW, timeout=30):
        env = dict(os.environ)
        env.pop("STRATA_ADMIN_PASSWORD", None)
        if password is not None:
            env["STRATA_ADMIN_PASSWORD"] = password
        t0 = time.monotonic()
        r = subprocess.run([CLI, "debug", "bundle"] + list(args), capture_output=True,
                           text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        return r, time.monotonic() - t0

    def out_path(self, name):
        return os.path.join(self.tmp, name)

    def assert_no_archive(self, out):
        self.assertFalse(os.path.exists(out), out)
        self.assertFalse(os.path.exists(out + ".part"), out + ".part")

    def test_bundle(self):
        out = self.out_path("bundle-ok.tar.gz")
        r, took = self.bundle("--admin", self.admin, "--admin-user", USER, "--output", out,
                              "--timeout", "20s")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(out, r.stdout)
        for s in SECRETS:
            self.assertNotIn(s, r.stdout + r.stderr)
        raw = open(out, "rb").read()
        members = {}
        with tarfile.open(out, "r:gz") as tf:
            for m in tf.getmembers():
                self.assertTrue(m.name == "bundle-ok" or m.name.startswith("bundle-ok/"), m.name)
                if m.isfile():
                    members[m.name.split("/", 1)[1]] = tf.extractfile(m).read()
        self.assertIn("MANIFEST.json", members)
        for f in FILES:
            self.assertIn(f, members)
            self.assertGreater(len(members[f]), 0, f)

        # The manifest: every endpoint, its status; files, sizes and digests match.
        man = json.loads(members["MANIFEST.json"])
        self.assertEqual(man["admin"], self.admin)
        self.assertEqual(man["admin_user"], USER)
        eps = {e["path"]: e for e in man["endpoints"]}
        self.assertEqual(set(eps), {"/metrics", "/v1/cluster", "/v1/topics", "/v1/partitions",
                                    "/v1/groups", "/v1/debug/log", "/v1/debug/config",
                                    "/v1/debug/data-dir", "/v1/debug/process"})
        for path, e in eps.items():
            if not e["ok"]:     # only /v1/groups may be missing (an older broker's 404)
                self.assertEqual(path, "/v1/groups", e)
                self.assertEqual(e["status"], 404, e)
                self.assertNotIn("groups.json", members)
                continue
            self.assertEqual(e["status"], 200, e)
            body = members[e["file"]]
            self.assertEqual(e["bytes"], len(body), path)
            self.assertEqual(e["sha256"], hashlib.sha256(body).hexdigest(), path)
        self.assertEqual(set(members) - {"MANIFEST.json"},
                         {e["file"] for e in eps.values() if e["ok"]})

        # No secret anywhere: in no member, nor in the compressed bytes; nor in hex (the
        # protocol log's byte previews).
        plain = (b"\0" + USER.encode() + b"\0" + USER_PW.encode())[:16].hex()
        for s in SECRETS:
            for name, body in members.items():
                for form in (s.encode(), s.encode()[:8].hex().encode(), plain.encode()):
                    self.assertNotIn(form, body, "%s holds a secret" % name)
            self.assertNotIn(s.encode(), raw)

        # config.json: every setting with its source; the secrets hidden.
        cfg = json.loads(members["config.json"])
        self.assertEqual(cfg["config_file"], self.conf)
        st = {s["name"]: s for s in cfg["settings"]}
        self.assertEqual(st["num.partitions"]["source"], "file")
        self.assertEqual(st["num.partitions"]["value"], "2")
        self.assertEqual(st["log.dirs"]["source"], "--set")
        self.assertEqual(st["log.dirs"]["value"], self.srv.data_dir)
        self.assertEqual(st["log.roll.ms"]["source"], "default")
        self.assertEqual(st["admin.require.auth"]["value"], "true")
        for k, src in (("ssl.key.password", "file"), ("ssl.keystore.password", "--set"),
                       ("sasl.jaas.config", "--set"), ("sasl.bootstrap.users", "--set")):
            self.assertEqual(st[k]["value"], "[hidden]", k)
            self.assertEqual(st[k]["source"], src, k)
            self.assertTrue(st[k]["secret"], k)
        self.assertEqual(st["ssl.truststore.password"]["value"], "")   # unset: shown empty
        self.assertEqual(cfg["hidden"], 4)
        self.assertGreater(len(st), 100)

        # log.txt: the broker's own lines, its start line among them.
        log = members["log.txt"].decode()
        self.assertIn("strata-server", log)
        self.assertRegex(log, r"info  \[main\] strata-server \S+ ready: kafka on")
        self.assertTrue(log.endswith("\n"))
        sasl = [ln for ln in log.splitlines() if '"api":"SaslAuthenticate"' in ln]
        self.assertTrue(sasl, "the PLAIN login in the protocol log")
        for ln in sasl:
            self.assertIn('"body":"[hidden]"', ln)

        # data-dir.json: the partition's segment files, with sizes.
        dd = json.loads(members["data-dir.json"])
        self.assertEqual(dd["path"], os.path.realpath(self.srv.data_dir))
        self.assertFalse(dd["truncated"])
        ents = {e["path"]: e for e in dd["entries"]}
        seg = "%s-0/00000000000000000000" % self.topic
        self.assertEqual(ents["%s-0" % self.topic]["type"], "dir")
        for ext in (".log", ".index", ".timeindex"):
            self.assertEqual(ents[seg + ext]["type"], "file", seg + ext)
        self.assertGreater(ents[seg + ".log"]["size"], 50 * len(b"record-0"))
        self.assertGreater(ents[seg + ".log"]["mtime_ms"], 0)
        self.assertEqual(dd["files"], sum(1 for e in dd["entries"] if e["type"] == "file"))

        # process.json
        pr = json.loads(members["process.json"])
        self.assertEqual(pr["pid"], self.srv.proc.pid)
        self.assertEqual(pr["shards"], 2)
        self.assertGreater(pr["uptime_seconds"], 0)
        self.assertGreater(pr["rss_bytes"], 0)
        self.assertGreater(pr["threads"], 2)
        self.assertGreater(pr["open_fds"], 3)
        self.assertEqual(pr["uname"]["sysname"], "Linux")
        self.assertIn("soft", pr["limits"]["open_files"])
        self.assertIn("strata_", members["metrics.txt"].decode())
        self.assertIn(self.topic, members["topics.json"].decode())

    def test_debug_routes_want_credentials(self):
        for path in ("/v1/debug/log", "/v1/debug/config", "/v1/debug/data-dir",
                     "/v1/debug/process"):
            self.assertEqual(self.get(path)[0], 401, path)
            st, body = self.get(path, auth=True)
            self.assertEqual(st, 200, path)
        # listed in the index, as every route
        st, body = self.get("/", auth=True)
        listed = {e["path"] for e in json.loads(body)["endpoints"]}
        self.assertTrue({"/v1/debug/log", "/v1/debug/config", "/v1/debug/data-dir",
                         "/v1/debug/process"} <= listed)

    def test_without_credentials(self):
        out = self.out_path("noauth.tar.gz")
        r, took = self.bundle("--admin", self.admin, "-o", out, "--timeout", "10s",
                              password=None)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("401", r.stderr)
        self.assertIn("--admin-user", r.stderr)
        self.assert_no_archive(out)
        r, took = self.bundle("--admin", self.admin, "--admin-user", USER, "-o", out,
                              password="wrong-" + TAG)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("right password", r.stderr)
        self.assert_no_archive(out)
        r, _ = self.bundle("--admin", self.admin, "--admin-user", USER, "-o", out,
                           password=None)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("STRATA_ADMIN_PASSWORD", r.stderr)

    def test_nobody_listening(self):
        port = free_port()
        out = self.out_path("refused.tar.gz")
        r, took = self.bundle("--admin", "127.0.0.1:%d" % port, "-o", out, "--timeout", "20s")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(took, 5.0)
        self.assertIn("127.0.0.1:%d" % port, r.stderr)
        self.assertIn("refused", r.stderr)
        self.assert_no_archive(out)

    def test_timeout_holds_against_a_silent_server(self):
        h = HangingServer()
        try:
            out = self.out_path("silent.tar.gz")
            r, took = self.bundle("--admin", "127.0.0.1:%d" % h.port, "-o", out,
                                  "--timeout", "1500ms")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertGreaterEqual(took, 1.4)
            self.assertLess(took, 6.0)
            self.assertIn("did not answer", r.stderr)
            self.assert_no_archive(out)
        finally:
            h.close()

    def test_ctrl_c_ends_it(self):
        h = HangingServer()
        try:
            out = self.out_path("interrupted.tar.gz")
            p = subprocess.Popen([CLI, "debug", "bundle", "--admin", "127.0.0.1:%d" % h.port,
                                  "-o", out, "--timeout", "60s"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                wait_until(lambda: h.conns, 10, "the bundle connected")
                t0 = time.monotonic()
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=10)
                self.assertLess(time.monotonic() - t0, 3.0)
                self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
                self.assertIn("interrupted", err)
                self.assert_no_archive(out)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait(5)
        finally:
            h.close()


if __name__ == "__main__":
    harness.main()
