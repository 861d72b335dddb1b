"""test_cli_cluster.py — `strata cluster start|stop|status` (issue 25): a cluster of real
strata-server processes on this machine, started by the real `strata` binary in a temporary
directory on free ports (--kafka-port, --admin-port: never the default 9092 and 9644).

- start -n 3 returns once all three are registered and unfenced, which the test checks itself
  on every broker's admin API (/v1/cluster); a record goes through the cluster with
  confluent_kafka; status exits 0 listing 3 running; scripts/cluster.sh status (the wrapper)
  agrees; a second start over the running cluster is refused; stop exits 0 with every broker's
  exit status 0 and every process gone, no sanitizer report in any server.log; status then
  exits 1, and a stop of nothing exits 0.
- a start whose broker 2 cannot listen (its Kafka port held by the test) exits 1 well within
  its --timeout, naming broker 2 and its log's "Address already in use", and leaves no process.
- a broker that never answers (a stand-in that sleeps, via --server) makes start time out,
  naming it; Ctrl-C ends a start at once, leaving the brokers; one killed -9 shows in status
  as stopped with how its server ended; stop reports a broker killed by a signal (exit 1).
- a pid file naming a live process that is not the broker is taken for stale: status says
  stopped, stop removes it and exits 0.
- --podman against a stand-in podman on PATH (it records its argv and keeps a pretend state;
  the test answers /v1/cluster on the admin ports): the exact podman commands of start, status
  and stop, the mode read back from cluster.conf, a second start refused, a start that times
  out removing what it made, and the errors (no podman on PATH, no image, podman refused, usage).
  The real containers are scripts/deploy-test-image.sh's (make deploy-test).

Run by hand with
    STRATA_CLI=build-test/strata STRATA_SERVER=build-test/strata-server \\
        /usr/bin/python3 tests/integration/test_cli_cluster.py
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from cluster import _bind  # noqa: E402  (a socket bound to 127.0.0.1:port, or None)

CLI = os.environ.get("STRATA_CLI")
# As tests/integration/cluster.py: below the kernel's ephemeral range, so no outgoing
# connection's local end takes a port the layout needs.
PORT_LOW, PORT_HIGH = 20000, 32000


def pick_layout(n):
    """(kafka base, admin base) whose every port is free now: Kafka base+100*(i-1), CONTROLLER
    the next (TCP and UDP: heartbeats), admin base+(i-1)."""
    for _ in range(500):
        k = random.randrange(PORT_LOW, PORT_HIGH - 100 * n - 2)
        a = random.randrange(PORT_LOW, PORT_HIGH - n)
        tcp = [k + 100 * j for j in range(n)] + [k + 100 * j + 1 for j in range(n)] + \
              [a + j for j in range(n)]
        if len(set(tcp)) != len(tcp):
            continue
        held = []
        try:
            ok = True
            for p in tcp:
                s = _bind(socket.SOCK_STREAM, p)
                ok = ok and s is not None
                held.append(s)
            for j in range(n):
                s = _bind(socket.SOCK_DGRAM, k + 100 * j + 1)
                ok = ok and s is not None
                held.append(s)
            if ok:
                return k, a
        finally:
            for s in held:
                if s is not None:
                    s.close()
    raise AssertionError("no free port layout found")


def pids_under(path, monitors=False):
    """Pids of the brokers whose log.dirs is under path (or, with monitors, of the monitors
    `strata cluster start -d path` left)."""
    want = b"log.dirs=" + path.encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if (monitors and b"cluster\0start\0" in cmd and b"\0" + path.encode() + b"\0" in cmd) \
                or (not monitors and want in cmd):
            out.append(int(d))
    return out


def admin_view(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/cluster" % port, timeout=3) as r:
        return json.loads(r.read())


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class ClusterCommands(unittest.TestCase):

    def setUp(self):
        harness.need_server_binary()
        self.server = harness.server_binary()
        self.tmp = tempfile.mkdtemp(prefix="strata-it-cli-cluster-")
        self.dir = os.path.join(os.path.realpath(self.tmp), "c")
        self.env = harness.sanitizer_env(dict(os.environ))
        for k in ("STRATA_ARGS", "STRATA_CLUSTER_DIR", "STRATA_BROKERS"):
            self.env.pop(k, None)

    def tearDown(self):
        # Whatever a failed assertion left: stop it, then make sure nothing of it runs.
        if os.path.isdir(self.dir):
            self.cli("cluster", "stop", "-d", self.dir, "--timeout", "10s", timeout=40)
        for pid in pids_under(self.dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args, timeout=60, env=None):
        return harness.run_cmd([CLI, *args], timeout=timeout, env=env or self.env)

    def start_args(self, n, kport, aport, *more):
        return ["cluster", "start", "-n", str(n), "-d", self.dir, "--server", self.server,
                "--kafka-port", str(kport), "--admin-port", str(aport), "--smp", "1", *more]

    def logs(self):
        text = ""
        for i in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            p = os.path.join(self.dir, i, "server.log")
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    text += "---- broker %s ----\n%s" % (i, f.read()[-3000:])
        return text

    def test_start_produce_status_stop(self):
        kport, aport = pick_layout(3)
        t0 = time.monotonic()
        r = self.cli(*self.start_args(3, kport, aport, "--timeout", "60s"), timeout=90)
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, "start failed\n%s%s\n%s" % (r.stdout, r.stderr,
                                                                    self.logs()))
        lines = {int(m.group(1)): (int(m.group(2)), m.group(3), m.group(4)) for m in re.finditer(
            r"^broker (\d+): pid (\d+), kafka (\S+), admin http://(\S+),", r.stdout, re.M)}
        self.assertEqual(sorted(lines), [1, 2, 3], r.stdout)
        for i in (1, 2, 3):
            self.assertEqual(lines[i][1], "127.0.0.1:%d" % (kport + 100 * (i - 1)))
            self.assertEqual(lines[i][2], "127.0.0.1:%d" % (aport + i - 1))
        m = re.search(r"^controller: broker (\d+)$", r.stdout, re.M)
        self.assertTrue(m, r.stdout)
        print("start -n 3 took %.1fs" % took)

        # Every broker, asked by the test: all three registered and unfenced, one controller.
        for i in (1, 2, 3):
            v = admin_view(aport + i - 1)
            self.assertEqual(v["node_id"], i)
            self.assertTrue(v["ready"], v)
            self.assertGreaterEqual(v["controller_id"], 1, v)
            self.assertEqual(sorted((b["node_id"], b["fenced"]) for b in v["brokers"]),
                             [(1, False), (2, False), (3, False)], v)
        self.assertEqual(int(m.group(1)), admin_view(aport)["controller_id"])
        for i, (pid, _, _) in lines.items():
            with open(os.path.join(self.dir, str(i), "server.pid")) as f:
                self.assertEqual(int(f.read()), pid)
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertIn(b"node.id=%d" % i, f.read())

        # A record through the cluster (replicated to all three).
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
        boot = ",".join(lines[i][1] for i in (1, 2, 3))
        admin = AdminClient({"bootstrap.servers": boot})
        fut = admin.create_topics([NewTopic("cli-cluster", 1, 3)], operation_timeout=20)
        fut["cli-cluster"].result(30)
        p = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 20000})
        acked = []
        harness.wait_until(lambda: admin.list_topics(timeout=5).topics["cli-cluster"]
                           .partitions[0].leader >= 1, 20, "a leader of cli-cluster/0")
        p.produce("cli-cluster", b"through the cluster",
                  on_delivery=lambda e, msg: acked.append((e, msg)))
        self.assertEqual(p.flush(30), 0)
        self.assertEqual(len(acked), 1)
        self.assertIsNone(acked[0][0], acked)
        c = Consumer({"bootstrap.servers": boot, "group.id": "cli-cluster",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("cli-cluster", 0, 0)])
        got = None
        deadline = time.monotonic() + 20
        while got is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                got = msg.value()
        c.close()
        self.assertEqual(got, b"through the cluster")
        p = admin = None        # no client left to log the brokers' going away

        # status: three running, unfenced; exit 0. The wrapper script says the same.
        r = self.cli("cluster", "status", "-d", self.dir, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = re.findall(r"^(\d+)\s+(running|stopped)\s+(\S+)\s+.*?(unfenced|fenced|not "
                          r"registered|-)", r.stdout, re.M)
        self.assertEqual([(int(a), b, c, d) for a, b, c, d in rows],
                         [(i, "running", str(lines[i][0]), "unfenced") for i in (1, 2, 3)],
                         r.stdout)
        self.assertIn("controller: broker %s" % m.group(1), r.stdout)
        env = dict(self.env, STRATA_CLUSTER_DIR=self.dir, STRATA_CLI=CLI)
        w = harness.run_cmd([os.path.join(harness.SRC, "scripts", "cluster.sh"), "status"],
                            timeout=30, env=env)
        self.assertEqual(w.returncode, 0, w.stdout + w.stderr)
        self.assertEqual(len(re.findall(r"^\d+\s+running", w.stdout, re.M)), 3, w.stdout)

        # A second start over the running cluster: refused, the cluster untouched.
        r = self.cli(*self.start_args(3, kport, aport), timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("already running", r.stderr)
        for i in (1, 2, 3):
            self.assertIn("broker %d: pid %d" % (i, lines[i][0]), r.stderr)
        self.assertEqual(self.cli("cluster", "status", "-d", self.dir).returncode, 0)

        # stop: every broker exits 0, every process gone, no sanitizer report.
        r = self.cli("cluster", "stop", "-d", self.dir, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.logs())
        for i in (1, 2, 3):
            self.assertIn("broker %d (pid %d): stopped, exit status 0" % (i, lines[i][0]),
                          r.stdout)
            self.assertFalse(os.path.exists(os.path.join(self.dir, str(i), "server.pid")))
            with open(os.path.join(self.dir, str(i), "server.log"), errors="replace") as f:
                log = f.read()
            self.assertIsNone(harness.SANITIZER_RE.search(log), log[-4000:])
        for pid, _, _ in lines.values():
            self.assertFalse(os.path.exists("/proc/%d" % pid), "pid %d still there" % pid)
        self.assertEqual(pids_under(self.dir), [])
        self.no_monitors()

        r = self.cli("cluster", "status", "-d", self.dir, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(re.findall(r"^\d+\s+stopped", r.stdout, re.M)), 3, r.stdout)
        r = self.cli("cluster", "stop", "-d", self.dir, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("no broker running", r.stdout)

    def test_start_fails_when_a_broker_cannot_listen(self):
        kport, aport = pick_layout(3)
        hold = socket.socket()
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind(("127.0.0.1", kport + 100))      # broker 2's Kafka port
        hold.listen()
        try:
            t0 = time.monotonic()
            r = self.cli(*self.start_args(3, kport, aport, "--timeout", "30s"), timeout=60)
            took = time.monotonic() - t0
        finally:
            hold.close()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLess(took, 30 + 15)
        self.assertRegex(r.stderr, r"broker 2 \(pid \d+\): exited \(exit status \d+\)")
        self.assertIn("Address already in use", r.stderr)
        self.assertNotRegex(r.stderr, r"broker [13] \(pid")
        self.assertIn("stopped the 2 broker(s)", r.stderr)
        self.assertEqual(pids_under(self.dir), [])
        self.no_monitors()
        print("failed start took %.1fs" % took)

    def no_monitors(self):
        """Each broker's monitor ends once it wrote how its server ended (a moment after)."""
        harness.wait_until(lambda: not pids_under(self.dir, monitors=True), 5,
                           "the monitors of %s to end" % self.dir)

    def fake_server(self, *fake_ids):
        """A --server that runs the real strata-server except for the brokers fake_ids, which
        only sleep (with the broker's arguments, so each passes for the broker)."""
        path = os.path.join(self.tmp, "fake-server")
        pattern = "|".join('*" node.id=%d "*' % i for i in fake_ids)
        with open(path, "w") as f:
            f.write('#!/bin/sh\ncase " $* " in\n  %s) exec /usr/bin/python3 -c '
                    '"import time; time.sleep(600)" "$@";;\nesac\nexec %s "$@"\n'
                    % (pattern, self.server))
        os.chmod(path, 0o755)
        return path

    def test_timeout_names_the_broker_and_ctrl_c(self):
        kport, aport = pick_layout(2)
        self.server = self.fake_server(2)
        t0 = time.monotonic()
        r = self.cli(*self.start_args(2, kport, aport, "--timeout", "3s"), timeout=60)
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLess(took, 3 + 15)
        self.assertIn("not every broker registered and unfenced within 3000 ms", r.stderr)
        self.assertRegex(r.stderr, r"broker 2 \(pid \d+\): running, but its admin API "
                                   r"127\.0\.0\.1:%d" % (aport + 1))
        self.assertIn("%s/2/server.log" % self.dir, r.stderr)     # its tail (empty here)
        self.assertEqual(pids_under(self.dir), [])

        # Ctrl-C while it waits: ends at once, the brokers left as they are.
        self.server = self.fake_server(1, 2)
        p = subprocess.Popen([CLI, *self.start_args(2, kport, aport, "--timeout", "60s")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env)
        line = p.stdout.readline()
        self.assertIn("starting 2 broker(s)", line)
        pidfile = {i: os.path.join(self.dir, str(i), "server.pid") for i in (1, 2)}
        harness.wait_until(lambda: all(os.path.exists(f) for f in pidfile.values()), 10,
                           "the brokers' pid files")
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        rc = p.wait(10)
        p.stdout.close()
        err = p.stderr.read()
        p.stderr.close()
        self.assertEqual(rc, 130, err)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("interrupted", err)
        self.assertEqual(len(pids_under(self.dir)), 2)      # left running

        # Broker 2 dies on its own (kill -9): status says how its server ended, exits 1.
        with open(pidfile[2]) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        harness.wait_until(lambda: os.path.exists(os.path.join(self.dir, "2", "server.exit")),
                           10, "broker 2's monitor to write server.exit")
        r = self.cli("cluster", "status", "-d", self.dir, "--timeout", "2s", timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, re.compile(r"^1\s+running\s+\d+\s.*its admin API does not "
                                              r"answer", re.M))
        self.assertRegex(r.stdout, re.compile(r"^2\s+stopped\s+-\s.*its server ended: killed "
                                              r"by signal 9", re.M))

        # stop: broker 1's stand-in dies of the SIGTERM (a signal: exit 1); broker 2's pid
        # file is stale.
        r = self.cli("cluster", "stop", "-d", self.dir, "--timeout", "10s", timeout=40)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"broker 1 \(pid \d+\): stopped, killed by signal 15")
        self.assertIn("broker 2: not running (removed the stale pid file", r.stdout)
        self.assertIn("did not exit cleanly", r.stderr)
        self.assertEqual(pids_under(self.dir), [])
        self.no_monitors()

    def test_stale_pid_file(self):
        kport, aport = pick_layout(1)
        os.makedirs(os.path.join(self.dir, "1", "data"))
        with open(os.path.join(self.dir, "1", "server.pid"), "w") as f:
            f.write("%d\n" % os.getpid())       # alive, but not a strata-server of broker 1
        r = self.cli("cluster", "status", "-d", self.dir, "-n", "1", "--kafka-port", str(kport),
                     "--admin-port", str(aport), timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, re.compile(r"^1\s+stopped\s+-\s", re.M))
        r = self.cli("cluster", "stop", "-d", self.dir, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("broker 1: not running (removed the stale pid file naming %d)"
                      % os.getpid(), r.stdout)
        self.assertIn("no broker running", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "1", "server.pid")))

    def test_usage_errors(self):
        for args, want in ((["cluster", "start", "-n", "0"], "-n wants 1..99"),
                           (["cluster", "start", "-n", "100"], "-n wants 1..99"),
                           (["cluster", "start", "--kafka-port", "65500"], "does not fit"),
                           (["cluster", "start", "--admin-port", "9192"], "collide"),
                           (["cluster", "start", "--set", "novalue"], "KEY=VALUE"),
                           (["cluster", "stop", "--timeout", "soon"], "--timeout"),
                           (["cluster", "status", "extra"], "unexpected argument")):
            r = self.cli(*args, "-d", self.dir, "--server", self.server,
                         timeout=30) if args[1] == "start" else self.cli(*args, "-d", self.dir)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(want, r.stderr, args)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "1")))
        r = self.cli("cluster", "start", "-d", self.dir, "--server",
                     os.path.join(self.tmp, "nothing"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot run", r.stderr)


# A stand-in for podman (start --podman): records each call's argv (one JSON list a line in
# argv.log) and keeps the containers and networks it was told of in state.json; conf.json
# steers it (version_rc: what `podman version` exits with; image: whether `image exists`
# finds it; exit_code: what a stopped container exited with).
FAKE_PODMAN = r"""#!/usr/bin/python3
import json, os, sys
d = os.environ["FAKE_PODMAN_DIR"]
a = sys.argv[1:]
with open(os.path.join(d, "argv.log"), "a") as f:
    f.write(json.dumps(a) + "\n")
conf = json.load(open(os.path.join(d, "conf.json")))
sp = os.path.join(d, "state.json")
st = json.load(open(sp)) if os.path.exists(sp) else {"ctrs": {}, "nets": []}
def save():
    json.dump(st, open(sp, "w"))
def names(args):
    return [x for x in args if not x.startswith("-") and not x.isdigit()]
if a[0] == "version":
    if conf["version_rc"]:
        sys.stderr.write("Error: cannot set up namespace: operation not permitted\n")
    else:
        print("4.3.1")
    sys.exit(conf["version_rc"])
if a[:2] == ["image", "exists"]:
    sys.exit(0 if conf["image"] else 1)
if a[:2] == ["network", "exists"]:
    sys.exit(0 if a[2] in st["nets"] else 1)
if a[:2] == ["network", "create"]:
    st["nets"].append(a[-1]); save(); print(a[-1]); sys.exit(0)
if a[:2] == ["network", "inspect"]:
    print("10.89.7.0/24 fd00::/64 ")
    sys.exit(0)
if a[:2] == ["network", "rm"]:
    if a[2] not in st["nets"]:
        sys.stderr.write("Error: unable to find network with name or ID %s: network not found\n"
                         % a[2])
        sys.exit(1)
    st["nets"].remove(a[2]); save(); sys.exit(0)
if a[0] == "ps":  # podman 4.3's JSON, the fields the CLI reads
    print(json.dumps([{"Names": [n], "State": c["state"], "ExitCode": c["code"],
                       "Labels": {"strata.cluster": a[3].split("=")[-1]}}
                      for n, c in sorted(st["ctrs"].items())]))
    sys.exit(0)
if a[0] == "run":
    name = a[a.index("--name") + 1]
    st["ctrs"][name] = {"state": "running", "code": 0}; save(); print("0123abcd"); sys.exit(0)
if a[0] == "stop":
    for n in names(a[1:]):
        st["ctrs"][n] = {"state": "exited", "code": conf["exit_code"]}
    save(); sys.exit(0)
if a[0] == "rm":
    for n in names(a[1:]):
        st["ctrs"].pop(n, None)
    save(); sys.exit(0)
if a[0] == "logs":
    print("fake log of", a[-1]); sys.exit(0)
sys.stderr.write("fake podman: what is %r?\n" % a); sys.exit(125)
"""


class FakeAdmin:
    """/v1/cluster of a complete cluster of n brokers on each admin port (what a real broker
    in a container would answer once all are registered and unfenced)."""

    def __init__(self, n, aport):
        import http.server
        import threading
        body = lambda i: json.dumps({"node_id": i, "controller_id": 1, "ready": True, "brokers": [
            {"node_id": j, "host": "127.0.0.1", "port": 9094, "fenced": False}
            for j in range(1, n + 1)]}).encode()

        def handler(i):
            class H(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    b = body(i) if self.path == "/v1/cluster" else b"{}"
                    self.send_response(200 if self.path == "/v1/cluster" else 404)
                    self.send_header("Content-Length", str(len(b)))
                    self.end_headers()
                    self.wfile.write(b)

                def log_message(self, *a):
                    pass
            return H
        self.servers = [http.server.ThreadingHTTPServer(("127.0.0.1", aport + i - 1), handler(i))
                        for i in range(1, n + 1)]
        for s in self.servers:
            threading.Thread(target=s.serve_forever, daemon=True).start()

    def close(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class PodmanMode(unittest.TestCase):
    """start|stop|status --podman against a stand-in podman on PATH: the exact commands the CLI
    runs, the same readiness wait on the admin ports (answered by the test), the mode read back
    from cluster.conf, and the clear errors when podman or the image is missing. The real
    podman run is scripts/deploy-test-image.sh (make deploy-test)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-it-cli-podman-")
        self.dir = os.path.join(os.path.realpath(self.tmp), "c")
        self.fake = os.path.join(self.tmp, "bin")
        os.mkdir(self.fake)
        with open(os.path.join(self.fake, "podman"), "w") as f:
            f.write(FAKE_PODMAN)
        os.chmod(os.path.join(self.fake, "podman"), 0o755)
        self.env = dict(os.environ)
        for k in ("STRATA_ARGS", "STRATA_CLUSTER_DIR", "STRATA_BROKERS", "STRATA_IMAGE",
                  "STRATA_PODMAN"):
            self.env.pop(k, None)
        self.env["PATH"] = self.fake + ":" + self.env.get("PATH", "/usr/bin:/bin")
        self.env["FAKE_PODMAN_DIR"] = self.tmp
        self.conf(version_rc=0, image=True, exit_code=0)
        self.admin = None

    def tearDown(self):
        if self.admin:
            self.admin.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def conf(self, **kw):
        with open(os.path.join(self.tmp, "conf.json"), "w") as f:
            json.dump(kw, f)

    def calls(self):
        """The podman calls so far (and forgets them)."""
        p = os.path.join(self.tmp, "argv.log")
        if not os.path.exists(p):
            return []
        with open(p) as f:
            out = [json.loads(line) for line in f]
        os.unlink(p)
        return out

    def cli(self, *args, timeout=30, env=None):
        return harness.run_cmd([CLI, *args], timeout=timeout, env=env or self.env)

    def test_start_status_stop(self):
        kport, aport = pick_layout(2)
        self.admin = FakeAdmin(2, aport)
        t0 = time.monotonic()
        r = self.cli("cluster", "start", "--podman", "-n", "2", "-d", self.dir, "--image",
                     "localhost/strata:test", "--project", "sp1", "--kafka-port", str(kport),
                     "--admin-port", str(aport), "--smp", "1", "--timeout", "10s")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertLess(time.monotonic() - t0, 8)
        label = "label=strata.cluster=sp1"
        ps = ["ps", "-a", "--filter", label, "--format", "json"]

        def run(i):
            k = kport + 100 * (i - 1)
            return ["run", "-d", "--name", "sp1-%d" % i, "--label", "strata.cluster=sp1",
                    "--hostname", "strata-%d" % i, "--network", "sp1", "--network-alias",
                    "strata-%d" % i, "--ip", "10.89.7.1%d" % i,
                    "--add-host", "strata-1:10.89.7.11", "--add-host", "strata-2:10.89.7.12",
                    "-p", "127.0.0.1:%d:9094" % k,
                    "-p", "127.0.0.1:%d:9644" % (aport + i - 1), "-v", "sp1-%d:/var/lib/strata" % i,
                    "localhost/strata:test",
                    "--set", "node.id=%d" % i, "--set", "process.roles=broker,controller",
                    "--set", "controller.quorum.voters=1@strata-1:9093,2@strata-2:9093",
                    "--set", "listeners=INTERNAL://:9092,EXTERNAL://:9094,CONTROLLER://:9093",
                    "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,"
                    "EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "--set", "advertised.listeners=INTERNAL://strata-%d:9092,"
                    "EXTERNAL://127.0.0.1:%d" % (i, k),
                    "--set", "inter.broker.listener.name=INTERNAL",
                    "--set", "controller.listener.names=CONTROLLER",
                    "--set", "admin.listen=0.0.0.0:9644", "--set", "log.dirs=/var/lib/strata",
                    "--smp", "1"]
        calls = self.calls()
        self.assertEqual(calls[:8], [
            ["version", "--format", "{{.Client.Version}}"],
            ["image", "exists", "localhost/strata:test"],
            ps,
            ["network", "exists", "sp1"],
            ["network", "create", "--label", "strata.cluster=sp1", "sp1"],
            ["network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}} {{end}}", "sp1"],
            run(1), run(2)])
        self.assertEqual(calls[8:], [ps] * (len(calls) - 8))  # the readiness wait's
        self.assertIn("broker 1: container sp1-1, kafka 127.0.0.1:%d, admin http://127.0.0.1:%d, "
                      "voter, controller" % (kport, aport), r.stdout)
        self.assertIn("bootstrap servers: 127.0.0.1:%d,127.0.0.1:%d" % (kport, kport + 100),
                      r.stdout)
        with open(os.path.join(self.dir, "cluster.conf")) as f:
            conf = f.read()
        self.assertIn("mode=podman\nimage=localhost/strata:test\nproject=sp1\n", conf)

        # A second start over it is refused, naming the containers; nothing is run.
        r = self.cli("cluster", "start", "--podman", "-n", "2", "-d", self.dir, "--project",
                     "sp1", "--kafka-port", str(kport), "--admin-port", str(aport))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("sp1-1: running", r.stderr)
        self.assertNotIn("run", [c[0] for c in self.calls()])

        # status and stop take the mode, project and ports from cluster.conf: no flags.
        r = self.cli("cluster", "status", "-d", self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, re.compile(r"^1\s+running\s+sp1-1\s+127\.0\.0\.1:%d\s+"
                                              r"127\.0\.0\.1:%d\s+unfenced, voter$"
                                              % (kport, aport), re.M))
        self.assertIn("2 of 2 container(s) running, 2 registered and unfenced", r.stdout)
        self.assertEqual(self.calls(), [ps])
        r = self.cli("cluster", "stop", "-d", self.dir, "--timeout", "7s")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # one at a time, the last broker first (stopped together, a broker may wait on its
        # resolver past -t once the network's DNS went with the others)
        self.assertEqual(self.calls(), [ps, ["stop", "-t", "7", "sp1-2"], ["stop", "-t", "7", "sp1-1"], ps,
                                        ["rm", "-f", "--ignore", "sp1-1", "sp1-2"],
                                        ["network", "rm", "sp1"]])
        self.assertIn("broker 2 (container sp1-2): stopped, exit status 0", r.stdout)
        # status of a stopped podman cluster exits 1; a second stop has nothing to stop
        r = self.cli("cluster", "status", "-d", self.dir)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, re.compile(r"^2\s+absent\s+sp1-2\s", re.M))
        r = self.cli("cluster", "stop", "-d", self.dir)
        self.assertIn("broker 1 (container sp1-1): no such container", r.stdout)

    def test_timeout_removes_what_it_started(self):
        kport, aport = pick_layout(1)  # no admin API answers: start times out
        self.conf(version_rc=0, image=True, exit_code=143)
        t0 = time.monotonic()
        r = self.cli("cluster", "start", "--podman", "-n", "1", "-d", self.dir, "--kafka-port",
                     str(kport), "--admin-port", str(aport), "--timeout", "1500ms")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIn("not every broker registered and unfenced within 1500 ms", r.stderr)
        self.assertIn("broker 1 (container strata-cluster-1): running, but its admin API "
                      "127.0.0.1:%d" % aport, r.stderr)
        self.assertIn("fake log of strata-cluster-1", r.stderr)
        calls = self.calls()
        self.assertEqual(calls[1], ["image", "exists", "localhost/strata:latest"])
        self.assertIn(["stop", "-t", "10", "strata-cluster-1"], calls)
        self.assertEqual(calls[-2:], [["rm", "-f", "--ignore", "strata-cluster-1"],
                                      ["network", "rm", "strata-cluster"]])
        self.assertIn("stopped and removed the containers", r.stderr)

    def test_errors(self):
        # no podman on PATH: a clear error, at once, before anything is written
        env = dict(self.env, PATH=os.path.join(self.tmp, "empty"))
        t0 = time.monotonic()
        r = self.cli("cluster", "start", "--podman", "-d", self.dir, env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIn("podman is not installed", r.stderr)
        self.assertIn("apt-get install podman", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "cluster.conf")))
        # no such image: the hint says how to build it; nothing runs
        self.conf(version_rc=0, image=False, exit_code=0)
        r = self.cli("cluster", "start", "--podman", "-d", self.dir, "--image", "nope:1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no image nope:1", r.stderr)
        self.assertIn("podman build -f deploy/Containerfile", r.stderr)
        self.assertEqual([c[0] for c in self.calls()], ["version", "image"])
        # podman there but refused (a sandbox without user namespaces): its own words
        self.conf(version_rc=125, image=True, exit_code=0)
        r = self.cli("cluster", "start", "--podman", "-d", self.dir)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("`podman version --format {{.Client.Version}} ...` failed (exit status "
                      "125): Error: cannot set up namespace", r.stderr)
        # usage
        for args, want in ((["--image", "x"], "go with --podman"),
                           (["--podman", "--project", "-bad"], "--project wants"),
                           (["--podman", "--server", "/bin/true"], "not --server")):
            r = self.cli("cluster", "start", "-d", self.dir, *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(want, r.stderr)
        # stop and status of a podman cluster.conf with podman gone: the same clear error
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "cluster.conf"), "w") as f:
            f.write("brokers=3\nhost=127.0.0.1\nkafka_port=9092\nadmin_port=9644\nmode=podman\n"
                    "image=localhost/strata:latest\nproject=strata-cluster\n")
        for cmd in ("stop", "status"):
            r = self.cli("cluster", cmd, "-d", self.dir, env=env)
            self.assertEqual(r.returncode, 1, (cmd, r.stdout, r.stderr))
            self.assertIn("podman is not installed", r.stderr)


if __name__ == "__main__":
    harness.main()
