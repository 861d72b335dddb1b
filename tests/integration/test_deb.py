"""test_deb.py — the Debian package (issue 25): build it, inspect it, run what it installs.

Builds the .deb with scripts/mkdeb.sh from the release build `make test` already made
($STRATA_RELEASE_BUILD, else the folder of $STRATA_SERVER), then:
  - its files, control fields, conffiles and maintainer scripts (dpkg-deb -c / -f / -e);
  - the systemd unit: the settings issue 25 asks for, and `systemd-analyze verify` finds no
    unknown key or bad value in it;
  - extracted with dpkg -x into a temporary root, the unit's ExecStart line is run from that
    tree with the packaged strata.properties (log.dirs and ports pointed at the test's own),
    with NOTIFY_SOCKET set to a unix datagram socket the test listens on: READY=1 must arrive,
    records produced through the broker come back to a consumer, SIGTERM sends STOPPING=1 and
    the broker exits 0.
Installing into a fresh Debian root (mmdebstrap, apt-get install, remove, purge) is
scripts/deploy-test.sh (`make deploy-test`): too slow for `make test`.
"""

import configparser
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SRC = harness.SRC
UNIT = "lib/systemd/system/strata.service"
CONF = "etc/strata/strata.properties"


def release_build():
    """The folder holding the strata-server and strata binaries to package."""
    for d in (os.environ.get("STRATA_RELEASE_BUILD"),
              os.path.dirname(os.environ.get("STRATA_SERVER", "")),
              os.path.join(SRC, "build")):
        if d and all(os.access(os.path.join(d, b), os.X_OK) for b in ("strata-server", "strata")):
            return d
    raise unittest.SkipTest("no build with strata-server and strata to package")


def read_unit(path):
    """The unit file as {section: {key: [values]}} (systemd allows a key more than once)."""
    out, sec = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                sec = out.setdefault(line.strip("[]"), {})
                continue
            k, _, v = line.partition("=")
            sec.setdefault(k, []).append(v)
    return out


def read_properties(path):
    cp = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    cp.optionxform = str
    with open(path) as f:
        cp.read_string("[p]\n" + f.read())
    return dict(cp["p"])


class DebTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("dpkg-deb") or not shutil.which("dpkg-shlibdeps"):
            raise unittest.SkipTest("dpkg-deb or dpkg-shlibdeps (dpkg-dev) is missing")
        cls.tmp = tempfile.mkdtemp(prefix="strata-deb-")
        t0 = time.monotonic()
        r = harness.run_cmd([os.path.join(SRC, "scripts", "mkdeb.sh"), release_build(),
                             os.path.join(cls.tmp, "out")], timeout=120)
        if r.returncode != 0:
            raise AssertionError("mkdeb.sh failed: %s" % r.stderr)
        cls.build_s = time.monotonic() - t0
        cls.deb = r.stdout.strip().splitlines()[-1]
        cls.root = os.path.join(cls.tmp, "root")
        subprocess.run(["dpkg", "-x", cls.deb, cls.root], check=True)
        cls.ctl = os.path.join(cls.tmp, "control")
        subprocess.run(["dpkg-deb", "-e", cls.deb, cls.ctl], check=True)
        print("built %s (%d bytes) in %.1fs" % (os.path.basename(cls.deb),
                                              os.path.getsize(cls.deb), cls.build_s))

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("STRATA_IT_KEEP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_files(self):
        r = harness.run_cmd(["dpkg-deb", "-c", self.deb])
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = {}
        for line in r.stdout.splitlines():
            f = line.split()
            entries[f[-1].lstrip(".")] = (f[0], f[1])
        for path, mode in (("/usr/bin/strata-server", "-rwxr-xr-x"),
                           ("/usr/bin/strata", "-rwxr-xr-x"),
                           ("/" + UNIT, "-rw-r--r--"),
                           ("/" + CONF, "-rw-r--r--"),
                           ("/usr/share/doc/strata/README.md", "-rw-r--r--")):
            self.assertIn(path, entries)
            self.assertEqual(entries[path], (mode, "root/root"), path)
        # Data is made by postinst/systemd, never shipped.
        self.assertFalse([p for p in entries if p.startswith("/var/")])
        out = subprocess.run([os.path.join(self.root, "usr/bin/strata-server"), "--version"],
                             capture_output=True, text=True, timeout=10).stdout
        self.assertTrue(out.startswith("strata-server "), out)

    def test_control(self):
        def field(name):
            return harness.run_cmd(["dpkg-deb", "-f", self.deb, name]).stdout.strip()
        self.assertEqual(field("Package"), "strata")
        self.assertEqual(field("Architecture"),
                         harness.run_cmd(["dpkg", "--print-architecture"]).stdout.strip())
        deps = [d.strip().split()[0] for d in field("Depends").split(",")]
        for d in ("libc6", "libraft0", "liburing2", "librdkafka1", "adduser"):
            self.assertIn(d, deps)
        self.assertIn("libraft0 (>= 0.22.1)", field("Depends"))
        with open(os.path.join(self.ctl, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/" + CONF])
        for s in ("postinst", "prerm", "postrm"):
            p = os.path.join(self.ctl, s)
            self.assertTrue(os.access(p, os.X_OK), s)
            r = harness.run_cmd(["sh", "-n", p])
            self.assertEqual(r.returncode, 0, "%s: %s" % (s, r.stderr))
        with open(os.path.join(self.ctl, "postinst")) as f:
            post = f.read()
        self.assertIn("adduser --system", post)
        with open(os.path.join(self.ctl, "postrm")) as f:
            postrm = f.read()
        # purge deletes the data; remove keeps it.
        purge = postrm[postrm.index('"$1" = purge'):]
        self.assertIn("rm -rf /var/lib/strata", purge)
        self.assertEqual(postrm.count("rm -rf /var/lib/strata"), 1)

    def test_unit(self):
        u = read_unit(os.path.join(self.root, UNIT))
        s = u["Service"]
        want = {"Type": "notify", "User": "strata", "Group": "strata",
                "Restart": "on-failure", "ProtectSystem": "strict",
                "NoNewPrivileges": "true", "ReadWritePaths": "/var/lib/strata",
                "StateDirectory": "strata", "StandardOutput": "journal",
                "StandardError": "journal"}
        for k, v in want.items():
            self.assertEqual(s.get(k), [v], k)
        self.assertEqual(shlex.split(s["ExecStart"][0]),
                         ["/usr/bin/strata-server", "--config", "/" + CONF])
        self.assertEqual(u["Install"]["WantedBy"], ["multi-user.target"])
        props = read_properties(os.path.join(self.root, CONF))
        self.assertEqual(props["log.dirs"], "/var/lib/strata")
        # Every key of the packaged file is one the broker knows (it refuses unknown keys).
        out = harness.run_cmd([os.path.join(self.root, "usr/bin/strata-server"),
                               "--help"]).stdout
        known = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
        self.assertFalse(set(props) - known)
        if shutil.which("systemd-analyze"):
            r = harness.run_cmd(["systemd-analyze", "verify", os.path.join(self.root, UNIT)])
            bad = [ln for ln in (r.stdout + r.stderr).splitlines()
                   if "Unknown" in ln or "Failed to parse" in ln or "Invalid" in ln]
            self.assertFalse(bad, r.stderr)

    def test_execstart_serves_and_notifies(self):
        """The unit's ExecStart from the extracted tree, with the packaged config."""
        u = read_unit(os.path.join(self.root, UNIT))["Service"]
        argv = shlex.split(u["ExecStart"][0])
        data = os.path.join(self.tmp, "var-lib-strata")
        os.mkdir(data, 0o750)
        kport, aport = harness.free_port(), harness.free_port()
        props = read_properties(os.path.join(self.root, CONF))
        props["log.dirs"] = data
        props["listeners"] = "PLAINTEXT://127.0.0.1:%d" % kport
        props["admin.listen"] = "127.0.0.1:%d" % aport
        conf = os.path.join(self.tmp, "strata.properties")
        with open(conf, "w") as f:
            f.writelines("%s=%s\n" % kv for kv in props.items())
        # /usr/bin and /etc/strata of the unit are the extracted tree's.
        argv = [os.path.join(self.root, a.lstrip("/")) if a.startswith("/usr/") else
                conf if a == "/" + CONF else a for a in argv]
        self.assertTrue(os.access(argv[0], os.X_OK), argv[0])
        nsock_path = os.path.join(self.tmp, "notify.sock")
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(nsock_path)
        env = dict(os.environ, NOTIFY_SOCKET=nsock_path)
        log = open(os.path.join(self.tmp, "server.log"), "w+")
        t0 = time.monotonic()
        p = subprocess.Popen(argv + ["--smp", "1"], env=env, stdout=log, stderr=log,
                             cwd=data)
        try:
            msgs = self.recv_until(ns, "READY=1", 30.0, p, log)
            ready_s = time.monotonic() - t0
            self.assertIn("STATUS=serving", msgs)
            # Ready for systemd is ready for the admin API and the Kafka port too.
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/status/ready" % aport,
                                        timeout=5) as r:
                self.assertEqual(r.status, 200)
            self.produce_consume(kport)
            p.send_signal(signal.SIGTERM)
            self.recv_until(ns, "STOPPING=1", 20.0, None, log)
            self.assertEqual(p.wait(timeout=30), 0, self.tail(log))
            print("READY=1 %.2fs after exec" % ready_s)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            ns.close()
            log.close()
        self.assertTrue(os.path.isdir(os.path.join(data, "deb-test-0")), os.listdir(data))
        self.assertTrue(os.path.exists(os.path.join(data, "meta.properties")))

    def recv_until(self, ns, want, timeout, proc, log):
        """Datagrams from the notify socket until one holds `want`; all of them, joined."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("no %s on NOTIFY_SOCKET in %.0fs (got %r); log: %s"
                          % (want, timeout, got, self.tail(log)))
            if proc is not None and proc.poll() is not None:
                self.fail("strata-server exited %d before %s: %s"
                          % (proc.returncode, want, self.tail(log)))
            ns.settimeout(min(left, 0.5))
            try:
                m = ns.recv(4096).decode()
            except socket.timeout:
                continue
            got.append(m)
            if want in m.split("\n"):
                return "\n".join(got).split("\n")

    def tail(self, log):
        log.flush()
        log.seek(0)
        return log.read()[-3000:]

    def produce_consume(self, port):
        from confluent_kafka import Consumer, Producer
        bs = "127.0.0.1:%d" % port
        pr = Producer({"bootstrap.servers": bs, "acks": "all"})
        errs = []
        for i in range(100):
            pr.produce("deb-test", value=b"v%d" % i, key=b"k%d" % i,
                       on_delivery=lambda e, m: e and errs.append(e))
        self.assertEqual(pr.flush(20), 0)
        self.assertEqual(errs, [])
        c = Consumer({"bootstrap.servers": bs, "group.id": "deb-test",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["deb-test"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        self.assertEqual(got, [b"v%d" % i for i in range(100)])


if __name__ == "__main__":
    harness.main()
