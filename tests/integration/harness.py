"""harness.py — start, stop, kill and restart a real strata-server for integration tests.

Every test file imports this module. A test gets a `Server` on free ports (Kafka and admin)
with its own temporary log.dirs, waits until the Kafka port accepts connections, and at the
end stops it with SIGTERM and asserts a clean exit (status 0, no sanitizer report). A crash,
a hang on shutdown or an AddressSanitizer/UBSan/LeakSanitizer report fails the test, with
the tail of the server's stderr in the message.

Environment:
  STRATA_SERVER     path of the strata-server binary (set by CTest)
  STRATA_SRC        repository root (set by CTest)
  STRATA_CLI        path of the `strata` tool, when built
  STRATA_BOOTSTRAP  host:port of an already running broker: tests run against it instead of
                    starting a server (tests that need start/stop/restart skip). Useful to
                    check a test against another Kafka implementation.
  STRATA_IT_KEEP    keep temporary data directories (for post-mortem)

Helpers: `wait_until(cond, timeout, what)` polls a condition with a deadline (never a fixed
sleep standing in for a wait); `free_port()`; `main()` runs a file's unittest cases and
prints the closing line "N passed, N failed[, N skipped]".
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("STRATA_SRC") or os.path.dirname(os.path.dirname(HERE))

READY_TIMEOUT = 20.0     # seconds for the Kafka port to accept connections
STOP_TIMEOUT = 20.0      # seconds for a clean shutdown after SIGTERM

# Lines that mean a sanitizer found something, even if the exit status says otherwise.
SANITIZER_RE = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer|ThreadSanitizer|MemorySanitizer)"
    r"|runtime error: |WARNING: ThreadSanitizer|SUMMARY: UndefinedBehaviorSanitizer")


def server_binary():
    """Path of strata-server: $STRATA_SERVER, else the usual build folders."""
    p = os.environ.get("STRATA_SERVER")
    if p:
        return p
    for b in ("build-test", "build-it", "build"):
        c = os.path.join(SRC, b, "strata-server")
        if os.access(c, os.X_OK):
            return c
    raise unittest.SkipTest("STRATA_SERVER is not set and no built strata-server was found")


def external_bootstrap():
    """host:port of an external broker to test against, or None."""
    return os.environ.get("STRATA_BOOTSTRAP") or None


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def port_open(host, port, timeout=0.5):
    """True if a TCP connection to host:port succeeds now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class WaitTimeout(AssertionError):
    pass


def wait_until(cond, timeout=10.0, what="condition", interval=0.02, max_interval=0.25):
    """Poll cond() until it returns a truthy value, which is returned; fail after timeout.

    The poll interval starts small and grows, so a fast condition is seen within
    milliseconds and a slow one does not burn a shared CPU."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = cond()
            if v:
                return v
            last_exc = None
        except Exception as e:  # a condition may raise while the system settles
            last_exc = e
        if time.monotonic() >= deadline:
            msg = "timed out after %.1fs waiting for %s" % (timeout, what)
            if last_exc is not None:
                msg += " (last error: %r)" % (last_exc,)
            raise WaitTimeout(msg)
        time.sleep(interval)
        interval = min(interval * 1.5, max_interval)


def sanitizer_env(env):
    """Environment for a sanitized server: reports abort with a non-zero status."""
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


class ServerError(AssertionError):
    pass


class Server:
    """One strata-server process with its own ports and data directory.

    s = Server(smp=2, sets={"num.partitions": "3"}); s.start()
    s.bootstrap            -> "127.0.0.1:<kafka port>"
    s.stop()               -> SIGTERM, wait, assert exit 0 and no sanitizer report
    s.kill9(); s.start()   -> crash and restart on the same data directory
    """

    def __init__(self, smp=2, sets=None, args=None, data_dir=None, name="strata"):
        self.smp = smp
        self.sets = dict(sets or {})
        self.extra_args = list(args or [])
        self.tmp = tempfile.mkdtemp(prefix="strata-it-%s-" % name)
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = None
        self.admin_port = None
        self.proc = None
        self.runs = 0               # how many times this server was started
        self.stderr_path = None
        self._stderr = None
        self.external = external_bootstrap()

    # ---- command line -------------------------------------------------------------------

    def command(self):
        cmd = [server_binary()]
        if self.smp:
            cmd += ["--smp", str(self.smp)]
        sets = {
            "listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
            "advertised.listeners": "PLAINTEXT://%s:%d" % (self.host, self.port),
            "log.dirs": self.data_dir,
            "admin.listen": "%s:%d" % (self.host, self.admin_port),
        }
        sets.update(self.sets)
        for k, v in sets.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        return cmd + self.extra_args

    @property
    def bootstrap(self):
        if self.external:
            return self.external
        return "%s:%d" % (self.host, self.port)

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self, timeout=READY_TIMEOUT, keep_ports=True):
        """Start the server and wait until its Kafka port accepts connections.

        On a restart the same ports are used (clients may hold the address); if another
        process took one in between, fresh ports are picked."""
        if self.external:
            return self
        assert self.proc is None, "server already running"
        for attempt in range(3):
            if self.port is None or not keep_ports or attempt > 0:
                self.port, self.admin_port = free_port(), free_port()
                while self.admin_port == self.port:
                    self.admin_port = free_port()
            self.runs += 1
            self.stderr_path = os.path.join(self.tmp, "stderr.%d.log" % self.runs)
            self._stderr = open(self.stderr_path, "wb")
            env = sanitizer_env(dict(os.environ))
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                         stdout=self._stderr, stderr=subprocess.STDOUT,
                                         env=env, cwd=self.tmp)
            try:
                self._wait_ready(timeout)
                return self
            except ServerError:
                text = self.stderr_text()
                if self.proc.poll() is not None and re.search(
                        r"in use|EADDRINUSE", text, re.I) and attempt < 2:
                    self._reap()
                    continue     # lost a port race with a parallel test: new ports
                self._terminate_quietly()
                raise

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        interval = 0.01
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerError("strata-server exited with status %d before it was ready\n%s"
                                  % (rc, self.stderr_tail()))
            # The port alone is not enough after a kill -9: the dead process's listening
            # socket can outlive it briefly (io_uring tears rings down asynchronously) and
            # accept connections. The server logs its ready line once it serves.
            if " ready: kafka on " in self.stderr_text() and port_open(self.host, self.port):
                return
            if time.monotonic() >= deadline:
                raise ServerError("strata-server not accepting on %s within %.0fs\n%s"
                                  % (self.bootstrap, timeout, self.stderr_tail()))
            time.sleep(interval)
            interval = min(interval * 1.5, 0.2)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=STOP_TIMEOUT, expect_clean=True):
        """SIGTERM, wait (bounded), and assert exit status 0 with no sanitizer report."""
        if self.external or self.proc is None:
            return 0
        rc = self.proc.poll()
        if rc is not None:
            self._reap()
            raise ServerError("strata-server had already exited with status %d\n%s"
                              % (rc, self.stderr_tail()))
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            self._reap()
            raise ServerError("strata-server did not exit within %.0fs of SIGTERM\n%s"
                              % (timeout, self.stderr_tail()))
        self._reap()
        if expect_clean:
            self.check_clean_exit(rc)
        return rc

    def check_clean_exit(self, rc):
        text = self.stderr_text()
        if rc != 0:
            raise ServerError("strata-server exited with status %d after SIGTERM (want 0)\n%s"
                              % (rc, self.stderr_tail()))
        if SANITIZER_RE.search(text):
            raise ServerError("sanitizer report in strata-server output\n%s"
                              % self.stderr_tail(200))

    def kill9(self):
        """SIGKILL the server (a crash): no clean shutdown, data dir left as it is."""
        if self.external:
            raise unittest.SkipTest("kill -9 needs a server started by the harness")
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self._reap()

    def restart(self, clean=True):
        """Stop (cleanly, or with kill -9) and start again on the same data directory."""
        if self.external:
            raise unittest.SkipTest("restart needs a server started by the harness")
        if clean:
            self.stop()
        else:
            self.kill9()
        return self.start()

    def _reap(self):
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self.proc = None

    def _terminate_quietly(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self._reap()

    def close(self):
        """Last resort in tearDown: kill whatever is left and remove the temp dir."""
        self._terminate_quietly()
        if not os.environ.get("STRATA_IT_KEEP"):
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- output -------------------------------------------------------------------------

    def stderr_text(self):
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return ""
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr_tail(self, lines=60):
        t = self.stderr_text().splitlines()
        return "---- strata-server output (%s, last %d lines) ----\n%s\n----" % (
            self.stderr_path, min(lines, len(t)), "\n".join(t[-lines:]))

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        try:
            if self.alive() and et is None:
                self.stop()
        finally:
            self.close()


class ServerTestCase(unittest.TestCase):
    """A TestCase with one server for the whole class (started in setUpClass).

    Subclasses may set SMP and SETS. tearDownClass stops the server and fails the class
    if it did not exit cleanly."""

    SMP = 2
    SETS = {}
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(smp=cls.SMP, sets=cls.SETS, name=cls.__name__)
        try:
            cls.server.start()
        except BaseException:
            cls.server.close()
            raise
        cls.bootstrap = cls.server.bootstrap

    @classmethod
    def tearDownClass(cls):
        s = cls.server
        try:
            if s.alive():
                s.stop()
        finally:
            s.close()

    def setUp(self):
        if self.server is not None and not self.server.external and not self.server.alive():
            self.fail("strata-server is not running\n%s" % self.server.stderr_tail())

    def unique(self, prefix="t"):
        """A topic or group name unique within this run."""
        return "%s-%s-%d-%d" % (prefix, self._testMethodName[5:25].replace("_", "-"),
                                os.getpid(), int(time.monotonic_ns() % 10**9))


def need_server_binary():
    """Skip unless the harness can start a server (no external broker)."""
    if external_bootstrap():
        raise unittest.SkipTest("needs a server started by the harness")
    server_binary()


def run_cmd(cmd, timeout=30, **kw):
    """Run a command, return CompletedProcess with text stdout/stderr."""
    if "input" not in kw:
        kw["stdin"] = subprocess.DEVNULL
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


class _CountingResult(unittest.TextTestResult):
    pass


def main():
    """Run the calling module's tests; print 'N passed, N failed[, N skipped]'; exit 1 on any
    failure or error, 0 otherwise."""
    import __main__
    t0 = time.monotonic()
    suite = unittest.defaultTestLoader.loadTestsFromModule(__main__)
    if len(sys.argv) > 1:     # run only the named tests: file.py test_a test_b
        wanted = set(sys.argv[1:])
        flat = []

        def walk(s):
            for x in s:
                if isinstance(x, unittest.TestSuite):
                    walk(x)
                else:
                    flat.append(x)
        walk(suite)
        suite = unittest.TestSuite(
            [t for t in flat if t._testMethodName in wanted
             or type(t).__name__ in wanted
             or "%s.%s" % (type(t).__name__, t._testMethodName) in wanted])
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_CountingResult, stream=sys.stdout)
    res = runner.run(suite)
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses)
    skipped = len(res.skipped)
    passed = res.testsRun - failed - skipped
    name = os.path.basename(sys.argv[0])
    print("%s: %.1fs" % (name, time.monotonic() - t0))
    line = "%d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line, flush=True)
    sys.exit(1 if failed or res.testsRun == 0 else 0)
