"""strata-server's command line: --help, refusing bad input with one clear line, an unusable
port, a properties file, and a clean exit on SIGTERM and SIGINT (issue 2)."""

import os
import signal
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Server, free_port, run_cmd, server_binary, wait_until, port_open  # noqa: E402


def nonempty_lines(text):
    return [l for l in text.splitlines() if l.strip()]


class CliTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.tmp = tempfile.mkdtemp(prefix="strata-it-cli-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def base_args(self, port=None):
        """Arguments that keep a run off the default ports and data dir."""
        port = port or free_port()
        return ["--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                "--set", "admin.listen=127.0.0.1:%d" % free_port(),
                "--set", "log.dirs=%s" % os.path.join(self.tmp, "data")]

    def run_server(self, args, timeout=15):
        env = harness.sanitizer_env(dict(os.environ))
        return run_cmd([server_binary()] + args, timeout=timeout, env=env, cwd=self.tmp)

    def assert_refused(self, args, must_mention, why):
        """The server must exit non-zero quickly with exactly one non-empty line on stderr
        that names the offending input, nothing on stdout, and no sanitizer report."""
        r = self.run_server(args)
        out = "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr)
        self.assertNotEqual(r.returncode, 0, "%s: exit status 0\n%s" % (why, out))
        self.assertGreater(r.returncode, 0, "%s: killed by a signal\n%s" % (why, out))
        self.assertIsNone(harness.SANITIZER_RE.search(r.stderr), "%s: sanitizer\n%s" % (why, out))
        lines = nonempty_lines(r.stderr)
        self.assertEqual(len(lines), 1, "%s: want one clear line on stderr\n%s" % (why, out))
        self.assertEqual(r.stdout.strip(), "", "%s: nothing on stdout\n%s" % (why, out))
        self.assertIn(must_mention.lower(), lines[0].lower(),
                      "%s: the line should name %r\n%s" % (why, must_mention, out))

    def test_help_lists_options(self):
        r = self.run_server(["--help"])
        text = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, text)
        for word in ("-c", "--set", "--smp", "--help", "listeners", "advertised.listeners",
                     "log.dirs", "node.id", "admin.listen"):
            self.assertIn(word, text, "--help does not mention %s:\n%s" % (word, text))
        self.assertIsNone(harness.SANITIZER_RE.search(text), text)

    def test_unknown_option(self):
        self.assert_refused(self.base_args() + ["--no-such-option"], "--no-such-option",
                            "unknown option")

    def test_unknown_key(self):
        self.assert_refused(self.base_args() + ["--set", "no.such.key=1"], "no.such.key",
                            "unknown config key")

    def test_bad_values(self):
        cases = [
            (["--set", "node.id=abc"], "node.id"),
            (["--set", "num.partitions=-3"], "num.partitions"),
            (["--set", "auto.create.topics.enable=maybe"], "auto.create.topics.enable"),
            (["--set", "log.level=loud"], "log.level"),
            (["--set", "listeners=nonsense"], "listeners"),
            (["--set", "listeners=PLAINTEXT://127.0.0.1:99999"], "listeners"),
            (["--set", "admin.listen=127.0.0.1:notaport"], "admin.listen"),
            (["--set", "novalue"], "novalue"),
            (["--smp", "0"], "smp"),
            (["--smp", "lots"], "smp"),
            (["-c", os.path.join("/nonexistent", "strata.properties")], "strata.properties"),
            # a list of directories (JBOD) is refused, not made into one directory named "a,b"
            (["--set", "log.dirs=%s,%s" % (os.path.join(self.tmp, "a"),
                                           os.path.join(self.tmp, "b"))], "log.dirs"),
            (["--set", "log.dirs= , "], "log.dirs"),
        ]
        for extra, word in cases:
            with self.subTest(args=extra):
                self.assert_refused(self.base_args() + extra, word, "bad value %r" % extra)
        self.assertEqual([n for n in os.listdir(self.tmp) if "," in n], [])

    def test_unknown_key_in_properties_file(self):
        path = os.path.join(self.tmp, "strata.properties")
        with open(path, "w") as f:
            f.write("# a comment\nnum.partitions=2\nbogus.setting=7\n")
        self.assert_refused(["-c", path] + self.base_args(), "bogus.setting",
                            "unknown key in properties file")

    def port_in_use(self, which):
        busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)   # no SO_REUSEPORT
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        try:
            args = self.base_args()
            if which == "kafka":
                args += ["--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port]
            else:
                args += ["--set", "admin.listen=127.0.0.1:%d" % port]
            r = self.run_server(args)
        finally:
            busy.close()
        out = "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr)
        self.assertGreater(r.returncode, 0, "%s port in use: want a non-zero exit\n%s"
                           % (which, out))
        self.assertIsNone(harness.SANITIZER_RE.search(r.stderr), out)
        lines = nonempty_lines(r.stderr)
        self.assertTrue(lines, out)
        # Start-up log lines may come first; the line that ends the run must say why.
        self.assertIn(str(port), lines[-1], "the last line should name port %d\n%s"
                      % (port, out))
        # Refused before the data directory was touched: no cluster id made for nothing.
        data = os.path.join(self.tmp, "data")
        self.assertFalse(os.path.exists(os.path.join(data, "meta.properties")),
                         "meta.properties written by a broker that could not listen\n%s" % out)
        self.assertNotIn("new cluster id", r.stderr, out)

    def test_kafka_port_in_use(self):
        self.port_in_use("kafka")

    def test_admin_port_in_use(self):
        self.port_in_use("admin")

    def test_sigterm_and_sigint_exit_zero(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                s = Server(smp=2, name="cli")
                try:
                    s.start()
                    s.proc.send_signal(sig)
                    rc = s.proc.wait(20)
                    s._reap()
                    s.check_clean_exit(rc)
                    self.assertFalse(port_open("127.0.0.1", s.port),
                                     "port still open after exit")
                finally:
                    s.close()

    def test_smp_values(self):
        for smp in (1, 3):
            with self.subTest(smp=smp):
                with Server(smp=smp, name="smp%d" % smp) as s:
                    self.assertTrue(port_open("127.0.0.1", s.port))

    def test_properties_file_and_set_override(self):
        file_port, set_port = free_port(), free_port()
        path = os.path.join(self.tmp, "strata.properties")
        with open(path, "w") as f:
            f.write("# Strata test config\n\nlisteners=PLAINTEXT://127.0.0.1:%d\n"
                    "log.dirs=%s\nadmin.listen=127.0.0.1:%d\nnum.partitions=2\n"
                    % (file_port, os.path.join(self.tmp, "fdata"), free_port()))
        # The file alone: the server listens where the file says.
        s = Server(smp=1, name="props", args=["-c", path])
        s.command = lambda: [server_binary(), "--smp", "1", "-c", path]
        s.port = file_port
        try:
            s.start()
            s.stop()
        finally:
            s.close()
        # --set wins over the file.
        s = Server(smp=1, name="props2")
        s.port = set_port
        s.command = lambda: [server_binary(), "--smp", "1", "-c", path, "--set",
                             "listeners=PLAINTEXT://127.0.0.1:%d" % set_port]
        try:
            s.start()
            self.assertFalse(port_open("127.0.0.1", file_port),
                             "--set listeners did not override the file")
            s.stop()
        finally:
            s.close()


if __name__ == "__main__":
    harness.main()
